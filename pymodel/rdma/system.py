"""Cycle-exact golden model of :class:`rtl.tops.rdma_top.RdmaTop`, stepped per cycle.

Node A: the host's MMIO writes (a timed player), host interface A with host memory A,
the requester. Node B: the responder, host interface B with host memory B. Two links
(A->B carries the WRITEs, B->A the ACKs), each a fault-injecting link, or with
``link_retry`` a reliable link (link-level retry over the faulty wire). Every part is
the twin of its RTL block (``pymodel.host``, ``pymodel.rdma.req``, ``pymodel.rdma.resp``,
``pymodel.rdma.links``); this module only connects them, as the top does, and records
what the top's recorders record.
"""

from pymodel.cycle import take_activity
from pymodel.host.host_interface import HostInterfaceModel
from pymodel.rdma.config import Config
from pymodel.rdma.links import LinkBeats, LinkStream, ReliableSteps, ReliableStream, faulty
from pymodel.rdma.req.requester import RequesterModel
from pymodel.rdma.resp.responder import ResponderModel
from pymodel.rdma.verbs import mr_table_in_host
from pymodel.stall import stall_pattern
from spec.formats.roce import HOST_WORD_BYTES
from spec.rdma import LINK_FIFO_BEATS, LINK_FRAME_BEATS
from spec.rdma_responder import mr_table_base

__all__ = ["Config", "simulate", "beats_of", "NoProgress", "stuck_patience"]


def beats_of(nbytes):
    return -(-nbytes // HOST_WORD_BYTES)


class _Beats:
    """Beats scheduled to arrive at a receiver, by cycle, and the frames they end.

    A receiver that takes beat by beat gets each beat's fields in its arrival cycle; one
    that takes whole frames (``whole``) gets the frame in the arrival cycle of its last
    beat and nothing in the cycles of the others. A frame may be scheduled when its
    last beat leaves the sender (the ACK frames: node B's ACK sender is only known to
    have ended a frame then), so with a one-cycle link the first beats of a whole frame
    arrive in cycles the receiver has already run: only the last beat is kept. Any other
    beat scheduled for a cycle the receiver has run is a model error (``AssertionError``)."""

    def __init__(self, whole=False):
        self.beats, self.frames = {}, {}
        self.whole = whole
        self.done = -1              # the last cycle the receiver has run (:meth:`pop`)

    def add(self, cycles, frame):
        beats, n = self.beats, len(frame)
        if self.whole:
            cycles = cycles[-1:]
        for k, c in enumerate(cycles):
            if c <= self.done:
                raise AssertionError(f"a beat arrives in cycle {c}, which its receiver "
                                     f"has already run (up to cycle {self.done})")
            if c in beats:
                raise AssertionError(f"two beats arrive in cycle {c}")
            if self.whole:
                beats[c] = True
                continue
            start = 64 * k
            chunk = frame[start:start + 64]
            beats[c] = {"data": int.from_bytes(chunk, "little"), "nbytes": len(chunk),
                        "first": int(k == 0), "last": int(start + 64 >= n)}
        self.frames[cycles[-1]] = frame

    def add_beat(self, c, beat):
        """One beat (a dict) arriving in cycle ``c`` (the frame it ends goes into
        :attr:`frames` at its last beat's cycle)."""
        if c <= self.done:
            raise AssertionError(f"a beat arrives in cycle {c}, which its receiver "
                                 f"has already run (up to cycle {self.done})")
        if c in self.beats:
            raise AssertionError(f"two beats arrive in cycle {c}")
        self.beats[c] = beat

    def pop(self, c):
        """The beat (or True) and the frame it ends arriving in cycle ``c``, the cycle
        the receiver runs now."""
        self.done = c
        beat = self.beats.pop(c, None)
        if beat is None:            # (a frame ends only with a beat)
            return None, None
        return beat, self.frames.pop(c, None)

    def pending(self):
        return bool(self.beats)

    def next(self):
        return min(self.beats) if self.beats else None


class NoProgress(RuntimeError):
    """The model can no longer make progress while work is still held: raised in the
    cycle it is known, with what holds the work (queued beats, FIFO levels, outstanding
    records, MMIO words not yet taken)."""

    def __init__(self, cycle, held, idle=None):
        self.cycle, self.held = cycle, list(held)
        why = ("nothing changed and nothing is due" if idle is None else
               f"nothing changed for {idle} cycles in a row")
        super().__init__(f"the RDMA model cannot progress at cycle {cycle} ({why}); "
                         f"still held: {'; '.join(self.held)}")


def stuck_patience(profile):
    """Inactive cycles in a row, each with only the next cycle due, after which the
    model is stuck. Only a host interface's conservative events (a presented MMIO word
    not taken) come due every cycle; behind them the longest wait without a visible
    change is a DMA read: its latency plus the transfer of the largest read request
    with both overheads (:class:`spec.host.HostProfile`), counted twice for margin."""
    p = profile
    transfer = -(-(p.max_read_request + p.req_overhead + p.cpl_overhead)
                 // p.bytes_per_cycle)
    return 2 * (p.read_latency + transfer)


def _held(c, req, resp, hi_a, hi_b, to_a, to_b, mmio_left):
    """What still holds work in cycle ``c``, one phrase each (empty: nothing)."""
    held = []
    if mmio_left:
        held.append(f"{mmio_left} MMIO word(s) of the host's player not yet taken")
    for name, beats in (("ACK frame(s) to node A", to_a), ("beat(s) to node B", to_b)):
        if beats.pending():
            due = sorted(beats.beats)
            late = [x for x in due if x <= c]
            held.append(f"{len(due)} {name} queued for cycles {due[:4]}"
                        + (f" ({len(late)} for cycles already run)" if late else ""))
    levels = {n: len(f) for n, f in req.fifos.items() if not f.idle()}
    if levels:
        held.append(f"requester FIFO levels {levels}")
    if req.comp.win_total.value:
        held.append(f"{req.comp.win_total.value} outstanding record(s) in the requester's "
                    f"windows")
    if req.sender.busy():
        held.append(f"{len(req.sender.pops)} payload word(s) due to the framer")
    if req.comp.busy() or req.comp.err_out is not None:
        held.append(f"requester completion unit in state {req.comp.state.value}, "
                    f"{len(req.comp.rwq.q)} rewind(s) queued")
    if req.cache.order:
        held.append(f"{len(req.cache.order)} requester context-cache fill(s) awaited")
    levels = {n: len(f) for n, f in resp.fifos.items() if not f.idle()}
    if levels or resp.next_event(c) is not None:
        held.append(f"responder FIFO levels {levels}")
    for name, hi in (("A", hi_a), ("B", hi_b)):
        word = hi.mmio_head(c)
        if word is not None:
            held.append(f"host interface {name} presents an MMIO word (address "
                        f"{word['addr']:#x}) that is not taken")
        elif hi.next_event(c) is not None:
            held.append(f"host interface {name} busy (next event in cycle "
                        f"{hi.next_event(c)})")
    return held


def simulate(cfg, mem_a, mem_b, mr_table, mmio, release, inject=(), inject_stall=(1, 0),
             limit=1 << 26, progress=None, skip=True):
    """Run the model until everything is quiet.

    ``mem_a``/``mem_b``: initial host memories (``{word: int}``); ``mr_table``: node B's
    MR entries; ``mmio``/``release``: the MMIO player's words and release cycles;
    ``inject``: frames played on the A->B link instead of node A's (then ``mmio`` should
    be empty). ``skip`` (default): after a cycle in which nothing changed, jump to the
    next external event (tests/test_rdma_system_model.py shows it changes nothing).
    Returns what the top's recorders and counters hold: ``wire_ab``/``wire_ba``
    (``(beat cycles, frame)``), ``mmio_stamps`` (the cycle each MMIO word was taken),
    ``written`` and ``completed`` (``(cycle, tag)``), the counters of both engines, both
    host interfaces and both links, and both host memories; with ``cfg.mr_in_host``,
    ``resp`` has the MR cache's counters too, and node B's MR table is put in host
    memory B (:func:`pymodel.rdma.verbs.mr_table_in_host`).

    Raises :class:`NoProgress` in the first cycle in which the run is known to be stuck
    with work still held: nothing changed and nothing is due any more, or nothing changed
    for :func:`stuck_patience` cycles in a row; ``RuntimeError`` past ``limit`` cycles.
    """
    p = cfg.profile
    if cfg.mr_in_host:              # node B's MRs live in its host memory
        mem_b = mr_table_in_host(mem_b, list(mr_table) + [0] * (cfg.mr_entries
                                                                 - len(mr_table)), cfg.depth)
    hi_a = HostInterfaceModel(p, cfg.depth, mem_a)
    hi_b = HostInterfaceModel(p, cfg.depth, mem_b)
    # Reliable links with faults are stepped each cycle (``steps``); the others decide
    # each frame's fate when it is sent.
    steps = cfg.link_retry and (faulty(cfg.faults_ab) or faulty(cfg.faults_ba))
    # (Node A's requester takes ACK frames; with READs its receive stage takes beats, and
    # the B->A link carries them one by one: a READ RESPONSE may be longer than the
    # link's latency. A reliable link judges a frame at its last beat, so it delivers
    # none of its beats before that; a plain one is carried beat by beat, ``LinkBeats``.)
    by_beat = bool(cfg.reads)
    plain_ba = LinkBeats if by_beat else LinkStream
    if steps:
        links = {"ab": ReliableSteps(cfg.link_latency, LINK_FRAME_BEATS, cfg.faults_ab),
                 "ba": ReliableSteps(cfg.link_latency, LINK_FRAME_BEATS, cfg.faults_ba)}
    elif cfg.link_retry:
        links = {"ab": ReliableStream(cfg.link_latency), "ba": ReliableStream(cfg.link_latency)}
    else:
        links = {"ab": LinkStream(cfg.link_latency, cfg.faults_ab, LINK_FRAME_BEATS,
                                  LINK_FIFO_BEATS),
                 "ba": plain_ba(cfg.link_latency, cfg.faults_ba, LINK_FRAME_BEATS,
                                LINK_FIFO_BEATS)}
    beats_ba = by_beat and not cfg.link_retry
    to_b, to_a = _Beats(), _Beats(whole=not by_beat)
    wire_ab, wire_ba = [], []

    def carry_ab(cycles, frame):
        if steps:
            links["ab"].feed(cycles, frame)
            return
        for arrived, fr in links["ab"].send(cycles, frame):
            to_b.add(arrived, fr)

    def send_ab(first_cycle, frame):
        cycles = list(range(first_cycle, first_cycle + beats_of(len(frame))))
        wire_ab.append((cycles, frame))
        carry_ab(cycles, frame)

    def send_ba(cycles, frame):
        wire_ba.append((cycles, frame))
        if steps:                       # (its beats entered the link one by one)
            return
        for arrived, fr in links["ba"].send(cycles, frame):
            to_a.add(arrived, fr)

    req = RequesterModel(cfg, send_ab)
    resp = ResponderModel(cfg.cache_shape, cfg.depth, cfg.mr_shape,
                          qpc_base=cfg.qpc_base_b, qpc_words=cfg.qpc_words,
                          mr_table=mr_table,
                          cache_used=cfg.cache_entries, header=cfg.header,
                          selective=cfg.selective,
                          read_words=cfg.read_words,
                          mr_base=mr_table_base(cfg.depth, cfg.mr_entries),
                          **cfg.responder_sizes)
    ack_beats = []                  # the ACK frame leaving node B, beat by beat

    # Injected frames: one beat per cycle the player is not stalled, from cycle 0.
    if inject:
        total = sum(beats_of(len(f)) for f in inject)
        stalls = stall_pattern(inject_stall[0], inject_stall[1], 8 * total + 64)
        go = [c for c in range(len(stalls)) if not stalls[c]]
        k = 0
        for fr in inject:
            n = beats_of(len(fr))
            cycles = go[k:k + n]
            wire_ab.append((cycles, fr))
            carry_ab(cycles, fr)
            k += n

    stamps, written, completed = [], [], []
    k = 0
    c = 0
    quiet = idle = 0
    patience = stuck_patience(p)
    n_mmio, reads = len(mmio), cfg.reads
    link_ab, link_ba = links["ab"], links["ba"]
    req_offers, req_step, hi_a_step = req.offers, req.step, hi_a.step
    resp_present, resp_step, hi_b_step = resp.present, resp.step, hi_b.step
    sender, read_intake = req.sender, req.read_intake
    while True:
        if c > limit:
            raise RuntimeError(f"the model ran past {limit} cycles")
        if steps:                       # the links' outputs depend on earlier cycles
            beat_ab, _ = link_ab.deliver(c)
            if beat_ab is not None:             # (node B takes beat by beat)
                to_b.beats[c] = beat_ab
            beat_ba, frame_ba = link_ba.deliver(c)
            if by_beat and beat_ba is not None:
                to_a.add_beat(c, beat_ba)
                if frame_ba is not None:
                    to_a.frames[c] = frame_ba
            elif frame_ba is not None:
                to_a.add([c], frame_ba)
        # The host's MMIO player.
        word = mmio[k] if k < n_mmio and c >= release[k] else None
        # Node A.
        rd_a, wr_a = req_offers()
        head = hi_a.mmio_head(c)
        mmio_ready = req.mmio_ready(head) if head is not None else False
        ra = hi_a_step(c, rd_req=rd_a, wr=wr_a, mmio_in=word, mmio_ready=mmio_ready)
        if ra.mmio_in_taken:
            stamps.append(c)
            k += 1
        if ra.marked is not None:
            completed.append((c, ra.marked))
        beat_a, ack = to_a.pop(c)
        req_step(c, mmio=ra.mmio, rd_data=ra.rd_data, rd_ready=ra.rd_req_taken,
                 wr_ready=ra.wr_taken, ack=ack, beat=beat_a if reads else None)
        # Node B.
        out = resp_present()
        rb = hi_b_step(c, rd_req=out.rd_req, wr=out.wr)
        if rb.marked is not None:
            written.append((c, rb.marked))
        beat, _ = to_b.pop(c)
        resp_step(c, beat, rb.rd_data, o_ready=True, rd_req_taken=rb.rd_req_taken,
                  wr_taken=rb.wr_taken)
        if steps:
            link_ab.take(c)
            link_ba.take(c, out.o)
        if out.o is not None:
            ack_beats.append((c, out.o))
            if beats_ba:            # node A's receive stage takes each beat as it comes
                for leave, b, fr in link_ba.push(c, out.o):
                    to_a.add_beat(leave, b)
                    if fr is not None:
                        to_a.frames[leave] = fr
            if out.o["last"]:
                frame = b"".join(b["data"].to_bytes(64, "little")[:b["nbytes"]]
                                 for _, b in ack_beats)
                cycles = [cyc for cyc, _ in ack_beats]
                if beats_ba:
                    wire_ba.append((cycles, frame))
                else:
                    send_ba(cycles, frame)
                ack_beats.clear()
        req.commit()
        resp.commit()
        if progress is not None and c % 65536 == 0:
            progress(c)
        # Idle skipping: after a cycle in which nothing changed, nothing changes until
        # an external event (host-interface output, a beat arriving, the MMIO player's
        # next release, a transport timer), so the model jumps there.
        # (A word presented on ``mmio`` changes something only when the requester takes
        # it; one not taken is due again in the next cycle of host interface A.)
        if (take_activity() or ra.mmio_in_taken or ra.rd_data is not None
                or (ra.mmio is not None and mmio_ready)
                or ra.marked is not None or rb.rd_data is not None
                or rb.marked is not None or beat is not None or ack is not None
                or beat_a is not None or ack_beats or out.o is not None or sender.pops
                or (by_beat and not read_intake.idle())
                or (steps and (link_ab.busy() or link_ba.busy()))):
            quiet = idle = 0
            c += 1
            continue
        events = [hi_a.next_event(c), hi_b.next_event(c), to_a.next(), to_b.next(),
                  req.comp.next_timer(c), sender.next_event(c, req.timeout),
                  release[k] if k < n_mmio else None]
        if steps:
            events += [link.next_event(c) for link in links.values()]
        # An event already due (the player's word released in a past cycle and not yet
        # taken) is due again in the next cycle.
        future = [max(e, c + 1) for e in events if e is not None]
        if not future:
            # Nothing changed and nothing is due: the state is final. Work still held is
            # a run that can no longer progress.
            held = _held(c, req, resp, hi_a, hi_b, to_a, to_b, n_mmio - k)
            if held:
                raise NoProgress(c, held)
            quiet += 1
            if quiet > 2:
                break
            c += 1
            continue
        quiet = 0
        nxt = min(future)
        # Inactive cycles stepped one by one (only a host interface's presented word
        # is due): past ``patience`` of them in a row, nothing can be under way.
        idle = idle + 1 if max(future) == c + 1 else 0
        if idle > patience:
            raise NoProgress(c, _held(c, req, resp, hi_a, hi_b, to_a, to_b, n_mmio - k)
                             or ["nothing"], idle)
        if not skip:
            nxt = c + 1
        if req.front.stalled:
            req.front.count["ctx_stalls"] += nxt - c - 1
        c = nxt
    out = dict(wire_ab=wire_ab, wire_ba=wire_ba, mmio_stamps=stamps, written=written,
               completed=completed, req=req.counters(), resp=dict(resp.counters),
               host_a=dict(hi_a.counters), host_b=dict(hi_b.counters),
               links={n: dict(link.counters) for n, link in links.items()},
               cycles=c, mem_a=hi_a.mem, mem_b=hi_b.mem, trace=req.comp.trace)
    if cfg.mr_in_host:              # the MR cache's counters (the top's port resp_mr)
        out["resp"].update(resp.mrc.count)
    # (With ``read_words`` the responder's counters include READ_COUNTERS: port resp_read.)
    return out

