"""Co-simulation top of design 2 on the fabric: ``nodes`` RDMA nodes on one MAC-routed
switch, the switch and links of the NIC's top."""

from amaranth import ResetSignal, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import LatencyMemory
from rtl.fabric.link import MAX_DELAY, Link
from rtl.fabric.reliable_link import ReliableLink
from rtl.fabric.switch import Switch
from rtl.host.host_interface import HostInterface
from rtl.nic.credit_return import CreditReturn
from rtl.rdma.context_cache import CACHE_LOG2_BITS, QPC_LOG2_BITS
from rtl.rdma.frame_demux import FrameDemux
from rtl.rdma.frame_merge import FrameMerge
from rtl.rdma.pause import PauseGen
from rtl.rdma.req.requester import Requester
from rtl.rdma.resp.responder import Responder
from rtl.sim.harness_top import HarnessTop
from spec.checks import check_int, reject
from spec.fabric import SWITCH_COUNTERS
from spec.formats.packet import packet_layout
from spec.host import HOST_COUNTERS, PROFILES, TAG_BITS, mmio_layout
from spec.ports import CountersSignature, PortView
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_engine import (
    REQUESTER_COUNTERS,
    REQUESTER_DEFAULTS,
    REQUESTER_SIZES,
    RESPONDER_COUNTERS,
    RESPONDER_DEFAULTS,
    TIMEOUT_BITS,
    TOP_DEFAULTS,
    ContextCacheShape,
)
from spec.rdma_fabric import (
    FABRIC_DEFAULTS,
    MERGE_COUNTERS,
    MERGE_FLAGS,
    MERGE_ROOM,
    NODES_RANGE,
    PAUSE_COUNTERS,
)
from spec.rdma_read_req import REQUESTER_READ_COUNTERS, SLOTS_RANGE
from spec.rdma_responder import READ_COUNTERS, MrTableShape, check_read_words, mr_table_base

__all__ = ["RdmaFabricTop", "READ_PARAMS"]

#: The READ and atomic parameters of the top, as :class:`rtl.tops.rdma_top.RdmaTop`'s
#: (:data:`spec.rdma_engine.TOP_DEFAULTS`: 0, the writes-only engines).
READ_PARAMS = {k: TOP_DEFAULTS[k] for k in ("reads", "read_words")}


class RdmaFabricTop(HarnessTop):
    """``nodes`` RDMA nodes, each on its own port of one :class:`Switch` (L2 framing).

    A node ``p`` is modelled as two host functions: a requester behind its own host
    interface ``hi_rq<p>`` and host memory ``mem_rq<p>`` (QP contexts, send queues, CQ,
    payload buffers), and a responder behind ``hi_rs<p>`` and ``mem_rs<p>`` (QP
    contexts, MRs; its MR table ``responder<p>.mr_table``, or behind an MR cache the last
    ``mr_entries`` words of ``mem_rs<p>``, as in :class:`rtl.tops.rdma_top.RdmaTop`; the
    MR caches' counters are not exported), each pair wired exactly as
    in :class:`rtl.tops.rdma_top.RdmaTop`. (A real RNIC has one host interface for both;
    the contention between the requester's reads and the responder's writes on it is not
    modelled.) Node ``p``'s MAC is :func:`spec.rdma_fabric.node_mac` (``...:p``): the QP
    contexts carry ``dmac``/``smac``, the switch routes by byte 5 of the destination MAC
    (power-up table: node ``p`` on port ``p``).

    ::

      mmio<p> -> hi_rq<p> -> requester<p> --a--> FrameMerge<p> -> up<p> (Link) -> switch i<p>
                                 ^                 ^  ^ give                        | credit<p>
                       ack       |   responder<p> -b  +-- CreditReturn<p> <---------+
      switch o<p> -> down<p> (Link) -> FrameDemux<p> -data-> responder<p> <-> hi_rs<p>

    Uplink: :class:`rtl.rdma.frame_merge.FrameMerge` (whole frames, round robin, a frame
    starts only when the credits cover all its beats; the requester's frames buffered,
    the requester held between frames by the merge's ``room`` on its ``go``, so that no
    beat is ever lost; the responder's ACKs held in the responder),
    then a :class:`Link` of ``link_latency``. The switch's ingress buffer is ``credits``
    beats; its credit pulses come back through a :class:`CreditReturn` of
    ``link_latency``. Without ``pause`` the switch never holds an egress
    (``backpressure`` off): each
    downlink is a :class:`Link` into a :class:`rtl.rdma.frame_demux.FrameDemux` that
    sends ACK/NAK frames to the requester's ACK input and the others to the responder,
    both always ready.

    Fabric (the NIC top's, :class:`rtl.tops.nic_top.NicTop`): the switch adds
    ``hop_latency`` cycles after its crossbar; with ``link_retry`` every uplink and
    downlink is a :class:`rtl.fabric.reliable_link.ReliableLink` of ``link_latency``
    (sized by :func:`spec.fabric.retry_sizes` for :data:`spec.rdma.MAX_FRAME_BEATS`, its
    wire without faults), the switch is built with ``backpressure`` and holds its
    egress beats while a downlink's replay buffer is full (the elastic hop). The merge
    does not wait on the reliable uplink's ``ready``: without faults it never falls (the
    replay buffer holds the round trip and a longest frame more); the golden model
    raises if a beat would find it low. :func:`spec.fabric_profiles.rdma_fabric_top`
    sets ``link_latency``, ``hop_latency``, ``credits`` and ``link_retry`` from a
    fabric profile. ``pause`` with ``link_retry`` or ``hop_latency`` is refused.

    Pause (``pause`` = 1; IEEE 802.1Qbb PFC, one priority class): node ``p``'s
    :class:`rtl.rdma.pause.PauseGen` raises XOFF from its responder's receive FIFO levels
    (``rx_beats_level``, ``rx_frames_level``) above the thresholds of
    :func:`spec.rdma_fabric.pause_thresholds` (``pause_headroom``, ``pause_hysteresis``)
    and lowers it (XON) below the lower ones; a :class:`CreditReturn` of
    ``link_latency`` carries it back (the uplink's sideband) to the switch, whose egress
    ``p`` (``backpressure`` on) then holds its next first beat: the frame in progress
    ends, the next waits on the port, and behind it the frames toward ``p`` wait in the
    switch's ingress buffers, whose credits stop the senders' merges, whose ``room``
    holds their requesters. XOFF in cycle ``s`` (levels at its start) holds a first beat
    at the egress from ``s + 1 + L``; a first beat let through in ``e`` reaches the
    responder in ``e + L``: ``2L + 1`` cycles in all, the least headroom. Counters
    ``pause`` (:data:`spec.rdma_fabric.PAUSE_COUNTERS`) per node. With ``pause`` 0
    nothing of this is built and every figure is as before.

    Players: ``mmio<p>`` (the host CPU's MMIO writes into node ``p``'s requester through
    ``hi_rq<p>``: doorbells and WQEs by MMIO; timed, so each write can wait for its
    release cycle; its stamps are the cycles the host interface took each word).
    Recorders: ``wire<p>`` (every beat node ``p`` puts on its uplink, with its cycle),
    ``written<p>`` (the responder's QPN, in the cycle the last payload word of a message
    reaches ``mem_rs<p>``), ``completed<p>`` (the requester's QPN, in the cycle a CQE
    reaches ``mem_rq<p>``). Recorders must run without backpressure.

    Run-time ports, shared by every node: ``qpc_base`` (both context tables), ``cq_base``,
    ``cq_log2``, ``ack_timeout`` (0: the ``timeout`` parameter), ``ack_every``,
    ``ack_frames``, ``serial``, ``cache_log2``, ``qpc_log2`` (a QP context is
    ``2**qpc_log2`` host words, :class:`rtl.rdma.context_cache.ContextCache`). Counters, arrays of
    :class:`spec.ports.CountersSignature` ports indexed by node (in Verilog
    ``<port>__<p>__<name>``): ``req`` (:data:`spec.rdma_engine.REQUESTER_COUNTERS`),
    ``resp`` (:data:`~spec.rdma_engine.RESPONDER_COUNTERS`), the host interfaces'
    ``hrq`` and ``hrs`` (:data:`spec.host.HOST_COUNTERS`), the merges' ``merge``
    (:data:`spec.rdma_fabric.MERGE_FLAGS`, :data:`~spec.rdma_fabric.MERGE_COUNTERS`, as
    wide as the merge's own); and ``switch_counters``
    (:data:`spec.fabric.SWITCH_COUNTERS`).

    READs and atomics (as :class:`rtl.tops.rdma_top.RdmaTop`): with ``read_words`` > 0
    every node's responder executes RDMA READ and atomics
    (:class:`~rtl.rdma.resp.responder.Responder`; its READ counters are the array port
    ``resp_read``, :data:`spec.rdma_responder.READ_COUNTERS`); with ``reads`` > 0 every
    node's requester posts them (:class:`~rtl.rdma.req.requester.Requester`, RoCEv2
    framing only; its response intake's and frame sender's READ counters are the array
    port ``req_read``, :data:`spec.rdma_read_req.REQUESTER_READ_COUNTERS`) and its
    demux sends the READ responses and ATOMIC ACKNOWLEDGEs to the requester's input
    with the ACKs
    (:class:`~rtl.rdma.frame_demux.FrameDemux` ``reads``). The responses leave the
    responder through the merge's ``b`` input, as its ACKs. Both 0 build the
    writes-only nodes. ``reads`` or ``read_words`` with ``pause`` or ``link_retry`` is
    refused (not co-simulated).

    Parameters: :data:`spec.rdma_fabric.FABRIC_DEFAULTS` (``nodes`` 2 to 8), the
    engines' :data:`~spec.rdma_engine.REQUESTER_DEFAULTS` and
    :data:`~spec.rdma_engine.RESPONDER_DEFAULTS`, and :data:`READ_PARAMS`.
    """

    def __init__(self, **params):
        known = {**FABRIC_DEFAULTS, **REQUESTER_DEFAULTS, **RESPONDER_DEFAULTS,
                 **READ_PARAMS}
        unknown = set(params) - set(known)
        if unknown:
            reject(self, f"unknown RdmaFabricTop parameter(s): {sorted(unknown)}")
        p = dict(known, **params)
        self.nodes = check_int(self, "nodes", p["nodes"], *NODES_RANGE)
        for name in ("mmio", "wire_beats", "events"):
            check_int(self, f"{name} (player/recorder depth)", p[name], 1, 1 << 17)
        check_int(self, "link latency (cycles)", p["link_latency"], 1, 1024)
        check_int(self, "credits (switch ingress beats)", p["credits"], MAX_FRAME_BEATS,
                  65535)
        check_int(self, "merge_depth (beats)", p["merge_depth"], MERGE_ROOM, 65535)
        check_int(self, "pause (0 or 1)", p["pause"], 0, 1)
        check_int(self, "link_retry (0 or 1)", p["link_retry"], 0, 1)
        check_int(self, "hop_latency (cycles)", p["hop_latency"], 0, MAX_DELAY)
        if p["pause"] and p["link_retry"]:
            reject(self, "link_retry 1 with pause 1: the pause gate and the reliable "
                         "downlinks' backpressure are not combined; choose one")
        if p["pause"] and p["hop_latency"]:
            reject(self, "hop_latency with pause 1: the pause gate holds the switch's "
                         "egress register, not a hop's delay; choose hop_latency 0")
        check_int(self, "host-memory depth (words)", p["depth"], 1 << 6, 1 << 20)
        if p["depth"] & (p["depth"] - 1):
            reject(self, f"host-memory depth (words) must be a power of two, not "
                         f"{p['depth']!r}")
        check_int(self, "QP-context cache entries", p["cache_entries"], 16, 256)
        if p["host"] not in PROFILES:
            reject(self, f"host profile must be one of {sorted(PROFILES)}, "
                         f"not {p['host']!r}")
        if p["reads"]:
            check_int(self, "READ/atomic slots of the requester (reads)", p["reads"],
                      *SLOTS_RANGE)
        try:
            check_read_words(p["read_words"])
        except ValueError as error:
            reject(self, str(error))
        if (p["reads"] or p["read_words"]) and (p["pause"] or p["link_retry"]):
            reject(self, "reads/read_words with pause or link_retry: READs on the fabric are "
                         "built and co-simulated without them; choose pause 0, link_retry 0")
        self.p = p
        depth = p["depth"]
        # Every part is built here, so that a bad engine parameter is rejected now, by
        # the part that owns it (naming it), and not when the top is elaborated.
        self.parts = []
        try:
            self.cache_shape = ContextCacheShape.of(p)
            self.mr_shape = MrTableShape.of(p)
            self.switch = Switch(64, self.nodes, "l2", p["credits"],
                                 backpressure=bool(p["pause"] or p["link_retry"]),
                                 hop_latency=p["hop_latency"])
            for _ in range(self.nodes):
                self.parts.append({})
                self._node_parts(p, self.cache_shape, self.mr_shape, self.parts[-1])
        except ValueError as exc:
            reject(self, str(exc))
        ports = {
            "qpc_base": In(range(depth)), "cq_base": In(range(depth)), "cq_log2": In(5),
            "ack_timeout": In(TIMEOUT_BITS), "ack_every": In(8), "ack_frames": In(16),
            "serial": In(1), "cache_log2": In(CACHE_LOG2_BITS), "qpc_log2": In(QPC_LOG2_BITS),
        }
        level_bits = Shape.cast(range(max(p["merge_depth"], p["credits"]) + 1)).width
        nodes = self.nodes
        ports.update({
            "switch_counters": Out(CountersSignature(SWITCH_COUNTERS)),
            "req": Out(CountersSignature(REQUESTER_COUNTERS)).array(nodes),
            "resp": Out(CountersSignature(RESPONDER_COUNTERS)).array(nodes),
            "hrq": Out(CountersSignature(HOST_COUNTERS)).array(nodes),
            "hrs": Out(CountersSignature(HOST_COUNTERS)).array(nodes),
            "merge": Out(CountersSignature(MERGE_COUNTERS, width=level_bits,
                                           flags=MERGE_FLAGS)).array(nodes),
        })
        if p["pause"]:
            ports["pause"] = Out(CountersSignature(PAUSE_COUNTERS)).array(nodes)
        if p["reads"]:
            ports["req_read"] = Out(CountersSignature(REQUESTER_READ_COUNTERS)).array(nodes)
        if p["read_words"]:
            ports["resp_read"] = Out(CountersSignature(READ_COUNTERS)).array(nodes)
        players, recorders = {}, {}
        beat = packet_layout(64)
        for n in range(self.nodes):
            players[f"mmio{n}"] = (mmio_layout(), p["mmio"], True)
            recorders[f"wire{n}"] = (beat, p["wire_beats"])
            recorders[f"written{n}"] = (TAG_BITS, p["events"])
            recorders[f"completed{n}"] = (TAG_BITS, p["events"])
        super().__init__(players=players, recorders=recorders, ports=ports)

    @staticmethod
    def _node_parts(p, cache, mr, parts):
        """Build one node's parts (its engines' context caches of shape ``cache``, its
        responder's MR table of shape ``mr``) into ``parts`` one by one (a part that rejects its
        parameter leaves the ones before it in ``parts``, where :func:`reject` finds
        them)."""
        depth, lat, profile = p["depth"], p["link_latency"], PROFILES[p["host"]]

        def link():
            return (ReliableLink(64, lat, MAX_FRAME_BEATS) if p["link_retry"]
                    else Link(64, lat))
        build = {
            "mem_rq": lambda: LatencyMemory(64, depth, 1),
            "mem_rs": lambda: LatencyMemory(64, depth, 1),
            "hi_rq": lambda: HostInterface(profile, depth),
            "hi_rs": lambda: HostInterface(profile, depth),
            "requester": lambda: Requester(cache, depth, reads=p["reads"],
                                           **{k: p[k] for k in REQUESTER_SIZES}),
            "responder": lambda: Responder(cache, depth, mr, read_words=p["read_words"],
                                           **{k: p[k] for k in RESPONDER_DEFAULTS}),
            "merge": lambda: FrameMerge(p["credits"], p["merge_depth"]),
            "up": lambda: link(), "down": lambda: link(),
            "cret": lambda: CreditReturn(lat),
            "demux": lambda: FrameDemux(reads=bool(p["reads"])),
        }
        if p["pause"]:
            build["pausegen"] = lambda: PauseGen(p["rx_beats"], p["rx_frames"], lat,
                                                 p["pause_headroom"], p["pause_hysteresis"])
            build["pret"] = lambda: CreditReturn(lat)
        for name, make in build.items():
            parts[name] = make()

    def elaborate_design(self, m, players, recorders):
        rst = ResetSignal()
        m.submodules.switch = sw = self.switch
        m.d.comb += [sw.table_wr.valid.eq(0), sw.src_wr.valid.eq(0)]
        wiring.connect(m, sw.counters, wiring.flipped(self.switch_counters))
        for n in range(self.nodes):
            parts = self.parts[n]
            for name, part in parts.items():
                m.submodules[f"{name}{n}"] = part
            req, resp, merge = parts["requester"], parts["responder"], parts["merge"]
            hi_rq, hi_rs = parts["hi_rq"], parts["hi_rs"]
            up, down, demux = parts["up"], parts["down"], parts["demux"]
            mmio = players[f"mmio{n}"].o
            up_valid = Signal(name=f"up_valid{n}")
            # The uplink's valid, X-clean for Icarus (see RdmaTop).
            with m.If(merge.o.valid & ~rst):
                m.d.comb += up_valid.eq(1)
            m.d.comb += [
                hi_rq.mmio_in.valid.eq(mmio.valid), hi_rq.mmio_in.payload.eq(mmio.payload),
                mmio.ready.eq(hi_rq.mmio_in.ready),
                req.mmio.valid.eq(hi_rq.mmio.valid), req.mmio.payload.eq(hi_rq.mmio.payload),
                hi_rq.mmio.ready.eq(req.mmio.ready),
                req.qpc_base.eq(self.qpc_base), resp.qpc_base.eq(self.qpc_base),
                *([resp.mr_base.eq(mr_table_base(self.p["depth"], self.p["mr_entries"]))]
                  if "mr_base" in resp.signature.members else []),
                req.cq_base.eq(self.cq_base), req.cq_log2.eq(self.cq_log2),
                req.ack_timeout.eq(self.ack_timeout), req.ack_every.eq(self.ack_every),
                req.ack_frames.eq(self.ack_frames), req.serial.eq(self.serial),
                req.cache_log2.eq(self.cache_log2), resp.cache_log2.eq(self.cache_log2),
                req.qpc_log2.eq(self.qpc_log2), resp.qpc_log2.eq(self.qpc_log2),
                # Uplink: requester (a) and responder (b) -> merge -> link -> switch.
                merge.a.valid.eq(req.o.valid), merge.a.payload.eq(req.o.payload),
                req.o.ready.eq(merge.a.ready), req.go.eq(merge.room),
                merge.b.valid.eq(resp.o.valid), merge.b.payload.eq(resp.o.payload),
                resp.o.ready.eq(merge.b.ready),
                up.i.valid.eq(up_valid), up.i.payload.eq(merge.o.payload),
                merge.o.ready.eq(~rst),
                sw.i[n].valid.eq(up.o.valid),
                sw.i[n].payload.eq(up.o.payload),
                up.o.ready.eq(~rst),
                parts["cret"].i.eq(sw.credit[n]),
                merge.give.eq(parts["cret"].o),
                # Downlink: switch -> link -> demux -> requester (ACKs) / responder.
                down.i.payload.eq(sw.o[n].payload),
                demux.i.valid.eq(down.o.valid), demux.i.payload.eq(down.o.payload),
                down.o.ready.eq(~rst),
                req.i.valid.eq(demux.ack.valid), req.i.payload.eq(demux.ack.payload),
                demux.ack.ready.eq(~rst),
                resp.i.valid.eq(demux.data.valid), resp.i.payload.eq(demux.data.payload),
                demux.data.ready.eq(~rst),
                # Recorders.
                recorders[f"wire{n}"].i.valid.eq(up_valid),
                recorders[f"wire{n}"].i.payload.eq(merge.o.payload),
                recorders[f"written{n}"].i.valid.eq(hi_rs.marked.valid),
                recorders[f"written{n}"].i.payload.eq(hi_rs.marked.payload),
                recorders[f"completed{n}"].i.valid.eq(hi_rq.marked.valid),
                recorders[f"completed{n}"].i.payload.eq(hi_rq.marked.payload),
            ]
            if self.p["pause"]:
                # The pause: the responder's FIFO levels -> PauseGen (XOFF/XON, a
                # register) -> the uplink's sideband (link_latency) -> the switch's
                # egress toward the node, which holds its next first beat.
                gen, pret = parts["pausegen"], parts["pret"]
                m.d.comb += [gen.pay_level.eq(resp.rx_beats_level),
                             gen.hdr_level.eq(resp.rx_frames_level),
                             pret.i.eq(gen.xoff),
                             sw.o[n].ready.eq(~rst & ~(pret.o & sw.o[n].payload.first)),
                             down.i.valid.eq(sw.o[n].valid & sw.o[n].ready),
                             self.pause[n].xoffs.eq(gen.xoffs)]
            elif self.p["link_retry"]:
                # The elastic hop: an egress beat waits while the downlink's replay
                # buffer can not take it.
                m.d.comb += [down.i.valid.eq(sw.o[n].valid),
                             sw.o[n].ready.eq(down.i.ready & ~rst)]
            else:
                m.d.comb += [down.i.valid.eq(sw.o[n].valid), sw.o[n].ready.eq(~rst)]
            for node, hi, mem in ((req, hi_rq, parts["mem_rq"]), (resp, hi_rs, parts["mem_rs"])):
                wiring.connect(m, node.host, hi.dma)
                wiring.connect(m, hi.mem_rd_addr, mem.rd_addr)
                wiring.connect(m, mem.rd_data, hi.mem_rd_data)
                wiring.connect(m, hi.mem_wr, mem.wr)
            if self.p["reads"]:
                wiring.connect(m, req.read, wiring.flipped(self.req_read[n]))
            if self.p["read_words"]:
                wiring.connect(m, PortView(CountersSignature(READ_COUNTERS), resp),
                               wiring.flipped(self.resp_read[n]))
            for port, block in ((self.req[n], req), (self.resp[n], resp),
                                (self.hrq[n], hi_rq), (self.hrs[n], hi_rs),
                                (self.merge[n], merge)):
                wiring.connect(m, PortView(port.signature, block), wiring.flipped(port))
