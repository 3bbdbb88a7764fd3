"""Cycle-exact golden model of :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`.

Per node: the host's MMIO writes (a timed player), the requester with its host interface
and host memory, the responder with its own, the uplink merge
(:class:`pymodel.rdma.frame_merge.FrameMergeModel`), links of ``link_latency``, the
credit return, the downlink demux (:func:`pymodel.rdma.frame_merge.is_ack_frame`); one
:class:`pymodel.fabric.switch.SwitchModel` (L2). Its parameters: :class:`FabricConfig`
(:mod:`pymodel.rdma.fabric_config`). Every part is the twin of its RTL block;
this module only connects them as the top does and records what its recorders record.

In each cycle ``c``, per node: the requester's side (as in :mod:`pymodel.rdma.system`,
with the ACK frame whose last beat the demux delivers in ``c`` and the merge's ``room``
of ``c`` on its ``go``), the responder's side (``o.ready`` from the merge), the merge
(the requester's beat of ``c``, the credit the return path delivers in ``c``); then the
switch with the beats the uplinks deliver in ``c``. A beat on an uplink in ``c`` reaches
the switch in ``c + L``; the switch puts it on an egress port in ``c' + 1`` (``c'`` the
cycle it leaves the ingress buffer), the downlink delivers it ``L`` cycles later; a
credit pulse of cycle ``c`` reaches the merge in ``c + L``.

With ``pause`` (:class:`pymodel.rdma.pause.PauseGenModel` per node): in cycle ``c`` the
responder's FIFO levels at the start of ``c`` set ``xoff`` of ``c + 1``, which the
switch's egress gate sees from ``c + 1 + L``; the switch is built with backpressure and
its egress ``o`` is not ready in a cycle whose beat on the port is a first beat while
node ``o``'s pause is on; a beat that leaves the port in ``c`` reaches the demux in
``c + L``. Without ``pause`` the switch has no backpressure, as before.

With ``link_retry`` every link is a :class:`pymodel.fabric.reliable_link.ReliableLinkModel`
(no faults): the merge's beat of ``c`` enters the uplink in ``c`` and the beat the uplink
delivers in ``c`` reaches the switch in ``c``; the switch is built with backpressure, its
egress ``o`` ready while downlink ``o`` can take a beat, and a beat that leaves it in
``c`` enters the downlink in ``c``; the demux takes in ``c`` what the downlink delivers
in ``c`` (its delivery queue's head before the cycle: a reliable link's output does not
depend on its input of the same cycle). The switch adds ``hop_latency`` cycles after its
crossbar (:class:`pymodel.fabric.switch.SwitchModel`).

With ``reads`` (the requesters post RDMA READ and atomics) the demux sends READ
responses and ATOMIC ACKNOWLEDGEs to the requester too
(:func:`pymodel.rdma.frame_merge.is_ack_frame` with ``reads``), beat by beat: the
requester takes each beat in the cycle the demux delivers it and the frame at its last
beat. With ``read_words`` every responder executes READ and atomics; their responses
leave through the merge's ``b`` input, as the ACKs.
"""

from collections import defaultdict

from pymodel.cycle import take_activity
from pymodel.fabric.reliable_link import ReliableLinkModel
from pymodel.fabric.switch import SwitchModel
from pymodel.host.host_interface import HostInterfaceModel
from pymodel.packet import pack_beat, unpack_beat
from pymodel.rdma.fabric_config import FabricConfig
from pymodel.rdma.frame_merge import FrameMergeModel, is_ack_frame
from pymodel.rdma.pause import PauseGenModel
from pymodel.rdma.req.requester import RequesterModel
from pymodel.rdma.resp.responder import ResponderModel
from pymodel.rdma.verbs import mr_table_in_host
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_engine import RESPONDER_DEFAULTS
from spec.rdma_responder import mr_table_base

__all__ = ["FabricConfig", "simulate_fabric"]


def _beat(t):
    return dict(data=t[0], nbytes=t[1], first=t[2], last=t[3])


def _frame(beats):
    return b"".join(b["data"].to_bytes(64, "little")[:b["nbytes"]] for b in beats)


def simulate_fabric(cfg, images, limit=1 << 26, skip=True):
    """Run the model until everything is quiet.

    ``images``: one dict per node with ``mem_rq``, ``mem_rs`` (``{word: int}``),
    ``mr_table`` (the node's responder MR entries), ``mmio`` and ``release`` (the MMIO
    player's words and release cycles). ``skip``: after a cycle in which nothing
    changed, jump to the next external event.

    Returns per node (lists indexed by node): ``wire`` (``[(beat cycles, frame)]`` on the
    uplink), ``mmio_stamps``, ``written`` and ``completed`` (``(cycle, tag)``), ``req``,
    ``resp``, ``host_rq``, ``host_rs``, ``merge`` counters, ``mem_rq``, ``mem_rs``; and
    ``switch`` counters, ``cycles``.
    """
    n, lat = cfg.nodes, cfg.link_latency
    prof = cfg.profile
    nodes = range(n)
    hi_rq = [HostInterfaceModel(prof, cfg.depth, images[p]["mem_rq"]) for p in nodes]
    mem_rs = [mr_table_in_host(images[p]["mem_rs"], list(images[p]["mr_table"]) + [0] * (
        cfg.mr_entries - len(images[p]["mr_table"])), cfg.depth) if cfg.mr_in_host
        else images[p]["mem_rs"] for p in nodes]
    hi_rs = [HostInterfaceModel(prof, cfg.depth, mem_rs[p]) for p in nodes]
    pending_a = [dict() for _ in nodes]          # requester beats into the merge, by cycle

    def sender(p):
        def send(first, frame):
            beats = [dict(data=int.from_bytes(frame[k:k + 64], "little"),
                          nbytes=len(frame[k:k + 64]), first=int(k == 0),
                          last=int(k + 64 >= len(frame))) for k in range(0, len(frame), 64)]
            for j, b in enumerate(beats):
                if first + j in pending_a[p]:
                    raise AssertionError(f"node {p}: two requester beats in cycle {first + j}")
                pending_a[p][first + j] = b
        return send

    reqs = [RequesterModel(cfg, sender(p)) for p in nodes]
    resps = [ResponderModel(cfg.cache_shape, cfg.depth, cfg.mr_shape,
                            qpc_base=cfg.qpc_base, qpc_words=cfg.qpc_words,
                            mr_table=images[p]["mr_table"],
                            cache_used=cfg.cache_entries,
                            read_words=cfg.read_words,
                            mr_base=mr_table_base(cfg.depth, cfg.mr_entries),
                            **cfg.responder_sizes)
             for p in nodes]
    merges = [FrameMergeModel(cfg.credits, cfg.merge_depth, p) for p in nodes]
    retry = bool(cfg.link_retry)
    switch = SwitchModel(n, "l2", cfg.credits, backpressure=bool(cfg.pause or retry),
                         width=64, hop_latency=cfg.hop_latency)
    # With link retry: each node's reliable uplink and downlink (no faults).
    links = {(side, p): ReliableLinkModel(64, lat, MAX_FRAME_BEATS)
             for p in nodes for side in ("up", "down")} if retry else {}
    sizes = dict(RESPONDER_DEFAULTS, **cfg.responder_sizes)
    pausers = ([PauseGenModel(sizes["rx_beats"], sizes["rx_frames"], lat, cfg.pause_headroom,
                              cfg.pause_hysteresis) for _ in nodes] if cfg.pause else [])
    paused = [False] * n            # the pause as the switch's egress gate sees it
    pause_changes = defaultdict(dict)   # cycle -> {node: pause at the switch from then}
    up = defaultdict(dict)          # cycle -> {node: beat tuple} reaching the switch
    down = defaultdict(dict)        # cycle -> {node: beat dict} leaving the downlink
    gives = defaultdict(set)        # cycle -> nodes whose merge gets a credit
    ack_beats = [[] for _ in nodes]
    demux_ack = [False] * n
    mmio = [images[p]["mmio"] for p in nodes]
    release = [images[p]["release"] for p in nodes]
    k = [0] * n
    wire = [[] for _ in nodes]
    wire_beats = [[] for _ in nodes]
    stamps, written, completed = ([[] for _ in nodes] for _ in range(3))
    c = quiet = 0
    while True:
        if c > limit:
            raise RuntimeError(f"the fabric model ran past {limit} cycles")
        active = False
        for p in nodes:
            req, resp, merge = reqs[p], resps[p], merges[p]
            # The downlink's demux: ACK frames to the requester (whole, at their last
            # beat), the rest to the responder beat by beat.
            if retry:            # what the downlink delivers in c (its step comes later)
                held = links["down", p].delivered
                beat_in = _beat(unpack_beat(64, held[0])) if held else None
            else:
                beat_in = down.get(c, {}).pop(p, None)
            ack, data_beat, req_beat = None, None, None
            if beat_in is not None:
                active = True
                if beat_in["first"]:
                    demux_ack[p] = is_ack_frame(beat_in["data"].to_bytes(64, "little"),
                                                reads=bool(cfg.reads))
                if demux_ack[p]:
                    req_beat = beat_in
                    ack_beats[p].append(beat_in)
                    if beat_in["last"]:
                        ack = _frame(ack_beats[p])
                        ack_beats[p] = []
                else:
                    data_beat = beat_in
            # The pause: the levels at the start of the cycle set XOFF of c + 1, at the
            # switch's egress gate from c + 1 + L.
            if pausers:
                was = pausers[p].xoff
                fifos = resp.fifos
                if pausers[p].step(len(fifos["pay"].q), len(fifos["hdr"].q)) != was:
                    pause_changes[c + 1 + lat][p] = pausers[p].xoff
                    active = True
            # The requester's side.
            word = mmio[p][k[p]] if k[p] < len(mmio[p]) and c >= release[p][k[p]] else None
            rd, wr = req.offers()
            ra = hi_rq[p].step(c, rd_req=rd, wr=wr, mmio_in=word,
                               mmio_ready=req.mmio_ready(hi_rq[p].mmio_head(c)))
            if ra.mmio_in_taken:
                stamps[p].append(c)
                k[p] += 1
            if ra.marked is not None:
                completed[p].append((c, ra.marked))
            req.step(c, mmio=ra.mmio, rd_data=ra.rd_data, rd_ready=ra.rd_req_taken,
                     wr_ready=ra.wr_taken, ack=ack, go=merge.room(),
                     beat=req_beat if cfg.reads else None)
            # The responder's side; its ACK beat goes out when the merge takes it.
            out = resp.present()
            rb = hi_rs[p].step(c, rd_req=out.rd_req, wr=out.wr)
            if rb.marked is not None:
                written[p].append((c, rb.marked))
            b_ready = merge.b_ready(out.o)
            resp.step(c, data_beat, rb.rd_data, o_ready=b_ready,
                      rd_req_taken=rb.rd_req_taken, wr_taken=rb.wr_taken)
            # The merge onto the uplink.
            a_beat = pending_a[p].pop(c, None)
            if retry:
                up_ready = links["up", p].ready()
            o = merge.step(c, a_beat, out.o, int(p in gives.get(c, ())))
            if o is not None:
                wire_beats[p].append((c, o))
                if o["last"]:
                    wire[p].append(([cy for cy, _ in wire_beats[p]],
                                    _frame([b for _, b in wire_beats[p]])))
                    wire_beats[p] = []
                if not retry:
                    up[c + lat][p] = (o["data"], o["nbytes"], o["first"], o["last"])
                elif not up_ready:
                    raise AssertionError(f"node {p}: cycle {c}: an uplink beat finds the "
                                         f"reliable link's replay buffer full")
            if retry:
                flat = links["up", p].cycle(c, None if o is None else pack_beat(
                    64, o["data"], o["nbytes"], o["first"], o["last"]))
                if flat is not None:
                    up[c][p] = unpack_beat(64, flat)
            active = active or (ra.mmio_in_taken or ra.rd_data is not None
                                or ra.marked is not None or ra.mmio is not None
                                or rb.rd_data is not None or rb.marked is not None
                                or out.o is not None or a_beat is not None
                                or req.sender.busy() or not merge.idle()
                                or (cfg.reads and not req.read_intake.idle()))
        gives.pop(c, None)
        # The switch: beats the uplinks deliver now; egress beats in c + 1.
        arrivals = up.pop(c, {})
        if pausers:
            # Egress o holds a first beat while its node's pause is on; the beats that
            # leave in c are on the downlink until c + L.
            for q, v in pause_changes.pop(c, {}).items():
                paused[q] = v
            ready = [not (paused[o] and switch.reg[o] is not None and switch.reg[o][2])
                     for o in nodes]
            left, pops = switch.cycle(c, arrivals, ready=ready)
            for q, beat in left.items():
                down[c + lat][q] = _beat(beat)
            egress = left
        elif retry:
            # The elastic hop: an egress beat leaves while its downlink can take it.
            ready = [links["down", o].ready() for o in nodes]
            egress, pops = switch.cycle(c, arrivals, ready=ready)
            for q in nodes:
                beat = egress.get(q)
                links["down", q].cycle(c, None if beat is None else pack_beat(64, *beat[:4]))
        else:
            egress, pops = switch.cycle(c, arrivals)
            for q, beat in egress.items():
                down[c + 1 + lat][q] = _beat(beat)
        for p in pops:
            gives[c + lat].add(p)
        if switch.overflow:
            raise AssertionError(f"cycle {c}: a switch ingress buffer overflowed "
                                 f"(credits broken)")
        for p in nodes:
            reqs[p].commit()
            resps[p].commit()
        down.pop(c, None)
        active = (take_activity() or active or bool(arrivals) or bool(egress) or bool(pops)
                  or not switch.idle() or any(x.busy() for x in links.values()))
        if active or not skip:
            if not active:
                busy = (any(r.busy() for r in reqs) or any(down.values())
                        or any(up.values()) or any(pending_a) or gives
                        or pause_changes
                        or any(k[p] < len(mmio[p]) for p in nodes)
                        or any(r.next_event(c) is not None for r in resps)
                        or any(h.next_event(c) is not None for h in hi_rq + hi_rs))
                quiet = 0 if busy else quiet + 1
                if quiet > 2:
                    break
            else:
                quiet = 0
            c += 1
            continue
        events = [h.next_event(c) for h in hi_rq + hi_rs]
        events += [r.next_event(c) for r in resps]
        events += [r.comp.next_timer(c) for r in reqs]
        events += [r.sender.next_event(c, r.timeout) for r in reqs]
        events += [min(d) for d in pending_a if d]
        events += [min(up) if up else None, min(down) if down else None,
                   min(gives) if gives else None,
                   min(pause_changes) if pause_changes else None]
        events += [release[p][k[p]] for p in nodes if k[p] < len(mmio[p])]
        events = [e for e in events if e is not None]
        if not events:
            quiet += 1
            if quiet > 2:
                break
            c += 1
            continue
        quiet = 0
        nxt = max(c + 1, min(events))
        for r in reqs:
            if r.front.stalled:
                r.front.count["ctx_stalls"] += nxt - c - 1
        c = nxt
    return dict(wire=wire, mmio_stamps=stamps, written=written, completed=completed,
                req=[r.counters() for r in reqs], resp=[dict(r.counters) for r in resps],
                host_rq=[dict(h.counters) for h in hi_rq],
                host_rs=[dict(h.counters) for h in hi_rs],
                merge=[dict(overflow=0, credit_errors=int(m.counter.underflow
                                                          or m.counter.overflow),
                            level_max=m.level_max, credits_max=m.credits_max)
                       for m in merges],
                switch=dict(drop_spoofed=switch.drop_spoofed), cycles=c,
                pause=[dict(xoffs=g.xoffs) for g in pausers],
                mem_rq=[h.mem for h in hi_rq], mem_rs=[h.mem for h in hi_rs])
