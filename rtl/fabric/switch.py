"""An N-port switch routed by destination node id (MAC byte 5 or compact byte 0), with a
source check per ingress port (MAC byte 11 or compact byte 1)."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.fabric.elastic_delay import ElasticDelay
from rtl.fabric.link import MAX_DELAY, DelayLine
from spec.checks import check_int, reject
from spec.fabric import check_table_entries, switch_counters
from spec.formats.nic import Framing, id_bytes
from spec.formats.packet import check_width, packet_layout, packet_signature
from spec.ports import CountersSignature

__all__ = ["Switch", "table_write_layout", "source_write_layout"]


def table_write_layout(ports, id_bits=8):
    return data.StructLayout({"node": id_bits, "port": range(ports)})


def source_write_layout(ports, id_bits=8):
    """One source-table write: ``owner[node] = port``; ``port == ports`` means any port."""
    return data.StructLayout({"node": id_bits, "port": range(ports + 1)})


def _id(value, at, width, bits):
    """The id in the beat ``value`` whose bytes are ``at`` (most significant first,
    :func:`spec.formats.nic.id_bytes`), its low ``bits``."""
    if len(at) == 1:
        off = 8 * (at[0] % width)
        return value[off:off + 8]
    return Cat(*[value[8 * (b % width):8 * (b % width) + 8] for b in reversed(at)])[:bits]


class Switch(wiring.Component):
    """Forward each frame to the output port that ``table[dst node]`` names.

    Parameters
    ----------
    width : int
        Datapath bytes.
    ports : int
        Number of ports ``N`` (2 to 16).
    framing : str or Framing
        Where the destination node id sits in the first beat.
    fifo_depth : int
        Beats of ingress buffer per port (the credits each sender starts with).
    backpressure : bool
        Honour ``ready`` on the egress ports (default False: they are ignored). Set it
        when an egress feeds something that can hold a beat (a link-level retry's
        replay buffer).
    hop_latency : int
        Extra cycles of switch traversal, 0 (default) to 4096, after the registered
        crossbar output of each egress port, so arbitration, the ingress buffers and
        their credits are timed as with 0. Without ``backpressure`` a delay line
        (:class:`rtl.fabric.link.DelayLine`; registers when short, a memory when long);
        with it an :class:`rtl.fabric.elastic_delay.ElasticDelay` (a FIFO of
        ``hop_latency`` + :data:`spec.fabric.ELASTIC_MARGIN` beats) that holds its
        beats while the egress is not ready. Simulation fabric, not switch state.
    faults : bool
        Add the ports ``faults`` and the counter ``drop_fault`` (default False: neither
        exists, and the switch is built exactly as without the parameter): frames lost
        inside the switch, for tests of end-to-end recovery (see Dropped frames).

    Ports
    -----
    i : In(packet_signature(width)).array(N)
        Ingress links ``i[0]`` .. ``i[N-1]``; always ready. The sender must not overrun
        the buffer (credits).
    o : Out(packet_signature(width)).array(N)
        Egress links. Without ``backpressure`` ``ready`` is ignored (links can not push
        back). With it, a beat stays on the port until ``ready``; the port's register
        takes a new beat only in a cycle where it is empty or its beat leaves (with
        ``hop_latency``: where it is empty or the hop's elastic delay has room), and an
        output that can not take one grants nothing.
    credit : Out(1).array(N)
        ``credit[p]``: one beat left ingress buffer ``p`` this cycle (one credit for its sender).
    table_wr : In(stream.Signature(table_write_layout(N), always_ready=True))
        Writes ``table[node] = port``, effective from the next cycle. At power-up
        ``table[n] = n mod N``; the table is a memory, so a reset keeps the routes
        written since (the model starts every run from power-up).
    src_wr : In(stream.Signature(source_write_layout(N), always_ready=True))
        Writes ``owner[node] = port`` (``port`` = N: any port), effective from the next
        cycle; like ``table_wr``, configuration written at setup and kept by a reset.
        At power-up every entry is N: every node id is allowed on every port, so a
        switch whose source table is never written forwards exactly as before.
    counters : Out(CountersSignature(SWITCH_COUNTERS))
        ``counters.drop_spoofed``: frames dropped by the source check (all ports; wraps
        at 2**32). With ``faults`` also ``counters.drop_fault`` (:data:`spec.fabric.
        SWITCH_FAULT_COUNTERS`): frames dropped at an egress (all ports; wraps at 2**32).
    faults : In(stream.Signature(32)).array(N)
        Only with ``faults``: ``faults[o]`` offers increasing frame numbers of egress
        ``o`` to drop; one is consumed per dropped frame.

    Dropped frames
    --------------
    The frames granted to output ``o`` are numbered from 0 since reset, in grant order.
    A frame whose number ``faults[o]`` offers in the cycle of its grant is dropped: it
    is timed exactly as a forwarded frame (grant, round robin, one beat per cycle, its
    beats leaving the ingress buffer and returning their credits in the same cycles,
    and with ``backpressure`` waiting for room on the egress as a forwarded beat does),
    but none of its beats reaches the egress port, so the egress is idle in the cycles
    it would have carried them. ``drop_fault`` counts it in the cycle of its grant.
    Every other frame is forwarded as without ``faults``. A number must be offered by
    the cycle of its frame's grant (a player loaded before reset does so); a number
    whose frame has passed is never consumed, and no later frame of ``o`` is dropped.

    Source check
    ------------
    The source id is the frame's byte :func:`spec.formats.nic.src_byte` (compact
    ``src``, or byte 5 of the L2 source MAC; the MAC prefix is the receiver's business).
    A frame from ingress port ``p`` is *allowed* when ``owner[src]`` is ``p`` or N. A
    frame that is not is dropped whole at the head of its ingress buffer: its beats
    leave the buffer one per cycle from the cycle it would have been granted (each
    returns its credit, as a forwarded beat does), it requests no output and holds
    none, and ``drop_spoofed`` counts it in the cycle of its first beat. A frame is
    judged with the table as written before the cycle of its *source beat* (the beat
    that holds byte ``src_byte``): beat 0 (read together with the route when the head
    is considered; a frame waiting for an output is judged again each cycle) except
    for L2 at W = 8, where it is beat 1, judged as it enters the buffer. There a frame
    can start only once its beat 1 has arrived (in the same cycle at the latest), so a
    frame whose beat 1 comes later than the cycle after beat 0 waits for it; a frame
    that ends before its source byte carries no source and is allowed (it holds no
    store: the receiver drops it as malformed). Allowed frames are otherwise timed
    exactly as without the check.

    Timing and arbitration
    ----------------------
    A beat that arrives in cycle ``t`` can leave its ingress buffer in ``t + 1`` and is on
    the egress port in ``t + 2 + hop_latency`` (one buffer cycle, one forwarding cycle:
    the table is read combinationally from the head beat, and the crossbar output is
    registered; then the hop's delay). The credit of a beat is returned in the
    cycle it leaves its ingress buffer, whatever ``hop_latency``.
    With ``backpressure`` these are the times while the egress ports are ready; a
    beat not taken waits on its port (``hop_latency`` 0) or in the hop's elastic delay,
    whose input stops taking beats when ``hop_latency + ELASTIC_MARGIN`` are held: the
    crossbar register then keeps its beat, and its output grants nothing more. While
    every egress is ready, the timing with ``backpressure`` equals the timing without.
    An ingress port whose head is the first beat of a frame requests the output
    ``table[dst]``. A free output grants, in the same cycle, the requesting ingress port
    that comes first in round-robin order starting at its pointer (initially 0); the
    pointer then moves to the granted port + 1 (mod N). The grant holds until the frame's
    last beat leaves; the output is free again in the next cycle, so frames on an egress
    port follow each other without idle cycles. Within a frame one beat moves per cycle
    while its ingress buffer is not empty.
    """

    def __init__(self, width, ports, framing, fifo_depth, backpressure=False, hop_latency=0,
                 table_entries=256, faults=False):
        self.width = check_width(width, self)
        self.ports = check_int(self, "ports", ports, 2, 16)
        try:
            self.framing = Framing(framing)
        except ValueError:
            reject(self, f"framing must be 'l2' or 'compact', not {framing!r}")
        self.fifo_depth = check_int(self, "fifo_depth", fifo_depth, 2, 65535)
        self.backpressure = bool(backpressure)
        self.hop_latency = check_int(self, "hop_latency (cycles)", hop_latency, 0, MAX_DELAY)
        self.entries, self.id_bits = check_table_entries(table_entries, self.framing)
        if not isinstance(faults, bool):
            reject(self, f"faults must be True or False, not {faults!r}")
        self.drops = faults
        for at in (id_bytes(self.framing, self.id_bits, "dst"),
                   id_bytes(self.framing, self.id_bits, "src")):
            if at[0] // width != at[-1] // width:
                reject(self, f"width {width}: an id's bytes {at} span two beats")
        ib = self.id_bits
        sig = {"table_wr": In(stream.Signature(table_write_layout(ports, ib),
                                               always_ready=True)),
               "src_wr": In(stream.Signature(source_write_layout(ports, ib),
                                             always_ready=True))}
        sig.update({"i": In(packet_signature(width)).array(ports),
                    "o": Out(packet_signature(width)).array(ports),
                    "credit": Out(1).array(ports),
                    "counters": Out(CountersSignature(switch_counters(faults)))})
        if faults:
            sig["faults"] = In(stream.Signature(32)).array(ports)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        n, w = self.ports, self.width
        layout = packet_layout(w)
        e = self.entries
        ab = (e - 1).bit_length()
        dst_at = id_bytes(self.framing, self.id_bits, "dst")
        src_at = id_bytes(self.framing, self.id_bits, "src")
        m.submodules.table = table = memory.Memory(
            shape=range(n), depth=e, init=[k % n for k in range(e)])
        tw = table.write_port()
        m.d.comb += [tw.addr.eq(self.table_wr.payload.node),
                     tw.data.eq(self.table_wr.payload.port),
                     tw.en.eq(self.table_wr.valid)]
        m.submodules.owner = owner = memory.Memory(
            shape=range(n + 1), depth=e, init=[n] * e)
        ow = owner.write_port()
        m.d.comb += [ow.addr.eq(self.src_wr.payload.node),
                     ow.data.eq(self.src_wr.payload.port),
                     ow.en.eq(self.src_wr.valid)]
        src_beat = src_at[-1] // w

        heads, ready, route, busy, dest = [], [], [], [], []
        known, allowed, drop, dstart, starts_ = [], [], [], [], []
        for p in range(n):
            q = fifo.SyncFIFO(width=layout.size, depth=self.fifo_depth)
            m.submodules[f"in{p}"] = q
            link = self.i[p]
            m.d.comb += [link.ready.eq(1), q.w_en.eq(link.valid), q.w_data.eq(link.payload)]
            head = Signal(layout, name=f"head{p}")
            m.d.comb += head.eq(q.r_data)
            rp = table.read_port(domain="comb")
            m.d.comb += rp.addr.eq(_id(head.data, dst_at, w, ab))
            b = Signal(name=f"busy{p}")                  # holds an output
            d = Signal(range(n), name=f"dest{p}")        # ... this one
            heads.append(head)
            ready.append(q)
            route.append(rp.data)
            busy.append(b)
            dest.append(d)
            # The source check: `known` (the head frame's verdict is there) and `allowed`.
            sp = owner.read_port(domain="comb")
            kn = Signal(name=f"src_known{p}")
            al = Signal(name=f"src_ok{p}")
            owner_ok = (sp.data == n) | (sp.data == p)
            start = Signal(name=f"start{p}")             # the head frame starts now
            if src_beat == 0:
                m.d.comb += [sp.addr.eq(_id(head.data, src_at, w, ab)), kn.eq(1),
                             al.eq(owner_ok)]
            else:
                # L2 at W = 8: the verdict is taken as the source beat enters the buffer
                # and queued (one per frame, in order); the head frame uses the queue's
                # head, or the verdict entering in this cycle when the queue is empty.
                vq = fifo.SyncFIFO(width=1, depth=self.fifo_depth)
                m.submodules[f"src{p}"] = vq
                idx = Signal(range(src_beat + 2), name=f"src_idx{p}")   # beat being written
                at = Mux(link.payload.first, 0, idx)
                event = link.valid & ((at == src_beat) | (link.payload.last
                                                          & (at < src_beat)))
                verdict = Mux(at == src_beat, owner_ok, 1)
                with m.If(link.valid):
                    m.d.sync += idx.eq(Mux(at > src_beat, at, at + 1))
                m.d.comb += [
                    sp.addr.eq(_id(link.payload.data, src_at, w, ab)),
                    kn.eq(vq.r_rdy | event), al.eq(Mux(vq.r_rdy, vq.r_data, verdict)),
                    vq.w_en.eq(event & ~(start & ~vq.r_rdy)), vq.w_data.eq(verdict),
                    vq.r_en.eq(start & vq.r_rdy),
                ]
            dr = Signal(name=f"dropping{p}")             # draining a spoofed frame
            ds = Signal(name=f"drop_start{p}")
            m.d.comb += ds.eq(q.r_rdy & head.first & ~b & ~dr & kn & ~al)
            with m.If(ds & ~head.last):
                m.d.sync += dr.eq(1)
            with m.If(dr & q.r_rdy & head.last):
                m.d.sync += dr.eq(0)
            known.append(kn)
            allowed.append(al)
            drop.append(dr)
            dstart.append(ds)
            starts_.append(start)

        pops = [Signal(name=f"pop{p}") for p in range(n)]
        moves = [[] for _ in range(n)]
        grants_all = []
        self._hits = []                 # with faults: each output's drop this cycle
        for o in range(n):
            owned = Signal(name=f"owned{o}")
            rr = Signal(range(n), name=f"rr{o}")
            req = [Signal(name=f"req{o}_{p}") for p in range(n)]
            grant = [Signal(name=f"grant{o}_{p}") for p in range(n)]
            grants_all.append(grant)
            for p in range(n):
                m.d.comb += req[p].eq(ready[p].r_rdy & heads[p].first & ~busy[p]
                                      & ~drop[p] & known[p] & allowed[p] & (route[p] == o))
            # Round robin as plain expressions: port p wins when it requests and no port
            # before it in the order that starts at rr requests.
            first_in_order = []
            for p in range(n):
                wins = []
                for start in range(n):
                    order = [(start + j) % n for j in range(n)]
                    before = order[:order.index(p)]
                    blocked = Cat(*[req[b] for b in before]).any() if before else 0
                    wins.append((rr == start) & ~blocked)
                first_in_order.append(Cat(*wins).any())
            egress = self.o[o]
            valid = Signal(name=f"eg_valid{o}")
            beat = Signal(layout, name=f"eg_beat{o}")
            space = Signal(name=f"space{o}")
            if self.hop_latency and self.backpressure:
                hop = ElasticDelay(layout, self.hop_latency)
                m.submodules[f"hop{o}"] = hop
                m.d.comb += [hop.i.valid.eq(valid), hop.i.payload.eq(beat)]
                wiring.connect(m, hop.o, wiring.flipped(egress))
                taken = hop.i.ready
            elif self.hop_latency:
                hop = DelayLine(data.StructLayout({"valid": 1, "payload": layout}),
                                self.hop_latency)
                m.submodules[f"hop{o}"] = hop
                m.d.comb += [hop.i.valid.eq(valid), hop.i.payload.eq(beat),
                             egress.valid.eq(hop.o.valid), egress.payload.eq(hop.o.payload)]
            else:
                m.d.comb += [egress.valid.eq(valid), egress.payload.eq(beat)]
                taken = egress.ready
            if self.backpressure:
                m.d.comb += space.eq(~valid | taken)
                with m.If(taken):
                    m.d.sync += valid.eq(0)
            else:
                m.d.comb += space.eq(1)
                m.d.sync += valid.eq(0)
            for p in range(n):
                m.d.comb += grant[p].eq(~owned & req[p] & first_in_order[p] & space)
            if self.drops:
                now, held = self._fault(m, o, grant, heads)
            for p in range(n):
                moving = Signal(name=f"mv{o}_{p}")
                m.d.comb += moving.eq(grant[p] | (busy[p] & (dest[p] == o) & ready[p].r_rdy
                                                  & space))
                moves[p].append(moving)
                with m.If(moving):
                    m.d.sync += [valid.eq(~now if self.drops else 1), beat.eq(heads[p])]
                    with m.If(heads[p].last):
                        m.d.sync += [busy[p].eq(0), owned.eq(0)]
                with m.If(grant[p]):
                    m.d.sync += rr.eq((p + 1) % n)
                    with m.If(~heads[p].last):
                        m.d.sync += [busy[p].eq(1), dest[p].eq(o), owned.eq(1)]
            if self.drops:             # the dropped frame's last beat moved: drop no more
                with m.If(held & Cat(*[moves[p][-1] & heads[p].last for p in range(n)]).any()):
                    m.d.sync += held.eq(0)
        grants_of = [[] for _ in range(n)]
        for o in range(n):
            for p in range(n):
                grants_of[p].append(grants_all[o][p])
        for p in range(n):
            drained = dstart[p] | (drop[p] & ready[p].r_rdy)
            m.d.comb += [starts_[p].eq(dstart[p] | Cat(*grants_of[p]).any()),
                         pops[p].eq(Cat(*moves[p], drained).any()), ready[p].r_en.eq(pops[p]),
                         self.credit[p].eq(pops[p])]
        spoofed = Signal(32)
        m.d.sync += spoofed.eq(spoofed + sum(dstart[p] for p in range(n)))
        m.d.comb += self.counters.drop_spoofed.eq(spoofed)
        if self.drops:
            dropped = Signal(32)
            m.d.sync += dropped.eq(dropped + sum(self._hits))
            m.d.comb += self.counters.drop_fault.eq(dropped)
        return m

    def _fault(self, m, o, grant, heads):
        """Output ``o``'s frame drop (see Dropped frames): returns ``(now, held)``, ``now``
        high while a beat moving to ``o`` belongs to a dropped frame, ``held`` the register
        that keeps a dropped frame's drop after its grant (set here, cleared by the caller
        when the frame's last beat moves)."""
        n = self.ports
        number = Signal(32, name=f"frame_no{o}")        # frames granted to o since reset
        held = Signal(name=f"dropping_out{o}")          # a dropped frame still moving
        flt = self.faults[o]
        granted = Cat(*grant).any()
        hit = Signal(name=f"fault_hit{o}")
        m.d.comb += [hit.eq(granted & flt.valid & (flt.payload == number)),
                     flt.ready.eq(hit)]
        self._hits.append(hit)
        with m.If(granted):
            m.d.sync += number.eq(number + 1)
        ends = Cat(*[grant[p] & heads[p].last for p in range(n)]).any()   # a 1-beat frame
        with m.If(hit & ~ends):
            m.d.sync += held.eq(1)
        now = Signal(name=f"drop_now{o}")
        m.d.comb += now.eq(hit | held)
        return now, held
