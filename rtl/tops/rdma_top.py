"""Co-simulation top of design 2: a requester node and a responder node, each behind a
host interface, linked both ways."""

from amaranth import Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import LatencyMemory
from rtl.fabric.faulty_link import FaultyLink
from rtl.fabric.reliable_link import ReliableLink
from rtl.host.host_interface import HostInterface
from rtl.rdma.context_cache import CACHE_LOG2_BITS, QPC_LOG2_BITS
from rtl.rdma.eth_ip_udp import framing_param as check_header_of
from rtl.rdma.req.requester import Requester
from rtl.rdma.resp.responder import Responder
from rtl.sim.harness_top import HarnessTop
from spec.checks import check_int, reject
from spec.formats.packet import packet_layout
from spec.host import HOST_COUNTERS, PROFILES, TAG_BITS, mmio_layout
from spec.ports import CountersSignature, PortView
from spec.rdma import LINK_FIFO_BEATS, LINK_FRAME_BEATS
from spec.rdma_engine import (
    REQUESTER_COUNTERS,
    REQUESTER_SIZES,
    RESPONDER_COUNTERS,
    RESPONDER_DEFAULTS,
    RETRY_LIMIT_RANGE,
    TIMEOUT_BITS,
    TIMEOUT_RANGE,
    TOP_DEFAULTS,
    ContextCacheShape,
)
from spec.rdma_read_req import REQUESTER_READ_COUNTERS, SLOTS_RANGE
from spec.rdma_responder import MrTableShape, build_counters, mr_table_base

__all__ = ["RdmaTop"]


class RdmaTop(HarnessTop):
    """Node A (host interface A, host memory A, requester) -> link -> node B (responder,
    host interface B, host memory B), and the reverse link for ACKs.

    Players: ``mmio`` (the host CPU's MMIO writes into node A, through host interface A:
    doorbells and WQEs by MMIO; a timed player, so each write can wait for its release
    cycle), ``inject`` (raw beats sent on the A->B link instead of node A's frames while
    ``inject_select`` is high: bad frames). Recorders: ``wire_ab``/``wire_ba`` (every
    beat put on each link, with its cycle), ``written`` (the responder's QPN, in the
    cycle the last payload word of a message reaches host memory B), ``completed`` (the
    requester's QPN, in the cycle a CQE reaches host memory A). Host memories ``mem_a``
    and ``mem_b`` (their ``mem`` arrays are loaded and dumped by the testbench), node B's
    MR table ``responder.mr_table`` (with an MR cache, a build parameter of the responder,
    there is none: the table is in host memory B's last ``mr_entries`` words,
    :func:`spec.rdma_responder.mr_table_base`, behind the responder's MR cache, whose
    counters are port ``resp_mr``, :func:`spec.rdma_responder.build_counters`). With
    ``read_words`` > 0 node B's responder executes RDMA READ
    (:class:`~rtl.rdma.resp.responder.Responder`; its READ counters are port
    ``resp_read``); with ``reads`` > 0 node A's requester posts RDMA READ and atomics
    (:class:`~rtl.rdma.req.requester.Requester`; its response intake's and frame
    sender's READ counters are port ``req_read``,
    :data:`spec.rdma_read_req.REQUESTER_READ_COUNTERS`). The MMIO player's stamps are
    the cycles the host interface took each word (a doorbell's accept cycle).

    Both links are :class:`rtl.fabric.faulty_link.FaultyLink`; ports ``ab_settings``,
    ``ab_counters``, ``ba_settings`` and ``ba_counters`` are their ``settings`` and
    ``counters`` ports (all rates 0 is a plain link of ``link_latency`` cycles). With
    ``link_retry`` both are :class:`rtl.fabric.reliable_link.ReliableLink` of the same
    latency, sized by :func:`spec.fabric.retry_sizes` for ``LINK_FRAME_BEATS``
    (link-level retry under the engine's go-back-N), and those four ports are the
    reliable links' ``settings`` (the wire's and :data:`spec.fabric.RETRY_SETTINGS`) and
    ``counters`` (members ``tx``, ``rx`` and ``link``:
    :meth:`~rtl.fabric.reliable_link.ReliableLink.port_signatures`). The engines have no
    backpressure towards the links: without faults a reliable link's ``i.ready`` never
    falls (its replay buffer holds the round trip and a longest frame more); with
    faults it falls once more than ``tx_depth - LINK_FRAME_BEATS`` beats wait for their
    link ACK, and a beat offered then is lost: the sticky flag ``ab_full`` (``ba_full``)
    reports it, and such a run is invalid (the golden model refuses it). Without faults
    a frame of ``n`` beats arrives ``n + 1`` cycles later than on the plain link (the
    reliable link's timing: one cycle in the replay buffer, store and forward, one to
    judge it). Frames injected with ``link_retry`` must carry a good FCS: the link's
    receiver NAKs a bad one and its sender repeats it forever. Host interfaces: ``host``
    names the profile of both (:data:`spec.host.PROFILES`); their counters are ports
    ``hia`` and ``hib``. ``header``: the framing of both engines, ``"roce"`` or
    ``"scaleup"`` (:mod:`spec.formats.scaleup`).
    Counters are :class:`spec.ports.CountersSignature` ports, members named as the
    block's counters (in Verilog ``<port>__<name>``, ``ab_counters__tx__frames``).

    Run-time ports: ``inject_select``, ``qpc_base_a``, ``qpc_base_b``, ``cq_base``,
    ``cq_log2``, ``ack_timeout`` (0: the ``timeout`` parameter), ``ack_every``,
    ``ack_frames``, ``serial``, ``selective`` (both engines: 0 go-back-N, 1 selective
    repeat, docs/recovery.md), ``cache_log2`` (``2**cache_log2`` of the
    ``cache_entries`` context-cache entries in use at both nodes; see
    :class:`rtl.rdma.req.requester.Requester`), ``qpc_log2`` (a QP context is
    ``2**qpc_log2`` host words at both nodes, 64 to 1024 bytes; held from reset;
    see :class:`rtl.rdma.context_cache.ContextCache`); counters ``req``
    (:data:`spec.rdma_engine.REQUESTER_COUNTERS`) and ``resp``
    (:data:`~spec.rdma_engine.RESPONDER_COUNTERS`). Recorders must run without
    backpressure. The links take the engines' frames every cycle out of reset;
    ``ready`` is driven as ``~rst`` (Icarus never evaluates an ``always @*`` whose
    inputs never change).
    """

    def __init__(self, link_retry=False, **params):
        if not isinstance(link_retry, bool):
            reject(self, f"link_retry must be True or False, not {link_retry!r}")
        self.link_retry = link_retry
        unknown = set(params) - set(TOP_DEFAULTS)
        if unknown:
            reject(self, f"unknown RdmaTop parameter(s): {sorted(unknown)}")
        p = dict(TOP_DEFAULTS, **params)
        for name in ("mmio", "inject", "wire_beats", "events"):
            check_int(self, f"{name} (player/recorder depth)", p[name], 1, 1 << 17)
        check_int(self, "link latency (cycles)", p["link_latency"], 1, 1024)
        check_int(self, "transport timeout (cycles)", p["timeout"], *TIMEOUT_RANGE)
        check_int(self, "retry limit", p["retry_limit"], *RETRY_LIMIT_RANGE)
        check_header_of(self, p["header"])
        if p["host"] not in PROFILES:
            reject(self, f"host profile must be one of {sorted(PROFILES)}, "
                         f"not {p['host']!r}")
        self.p = p
        depth = p["depth"]
        ports = {
            "inject_select": In(1),
            "qpc_base_a": In(range(depth)), "qpc_base_b": In(range(depth)),
            "cq_base": In(range(depth)), "cq_log2": In(5),
            "ack_timeout": In(TIMEOUT_BITS), "ack_every": In(8), "ack_frames": In(16),
            "serial": In(1), "cache_log2": In(CACHE_LOG2_BITS), "selective": In(1),
            "qpc_log2": In(QPC_LOG2_BITS),
        }
        link = ReliableLink if link_retry else FaultyLink
        settings, counters = link.port_signatures()
        ports.update({"ab_settings": In(settings), "ab_counters": Out(counters),
                      "ba_settings": In(settings), "ba_counters": Out(counters)})
        if link_retry:
            ports.update({"ab_full": Out(1), "ba_full": Out(1)})
        try:
            self.cache_shape = ContextCacheShape.of(p)
            self.mr_shape = MrTableShape.of(p)
            self.resp_counters = build_counters(self.mr_shape, p["read_words"])
        except ValueError as error:
            reject(self, str(error))
        counters = self.resp_counters
        if "mr" in counters:
            ports["resp_mr"] = Out(CountersSignature(counters["mr"]))
        if "read" in counters:
            ports["resp_read"] = Out(CountersSignature(counters["read"]))
        if p["reads"]:
            check_int(self, "READ/atomic slots of the requester (reads)", p["reads"],
                      *SLOTS_RANGE)
            if p["header"] != "roce":
                reject(self, f"reads needs the RoCEv2 framing (header 'roce'), not "
                             f"{p['header']!r}")
            ports["req_read"] = Out(CountersSignature(REQUESTER_READ_COUNTERS))
        ports.update({"req": Out(CountersSignature(REQUESTER_COUNTERS)),
                      "resp": Out(CountersSignature(RESPONDER_COUNTERS)),
                      "hia": Out(CountersSignature(HOST_COUNTERS)),
                      "hib": Out(CountersSignature(HOST_COUNTERS))})
        beat = packet_layout(64)
        super().__init__(
            players={"mmio": (mmio_layout(), p["mmio"], True),
                     "inject": (beat, p["inject"])},
            recorders={"wire_ab": (beat, p["wire_beats"]), "wire_ba": (beat, p["wire_beats"]),
                       "written": (TAG_BITS, p["events"]),
                       "completed": (TAG_BITS, p["events"])},
            ports=ports)

    def elaborate_design(self, m, players, recorders):
        p, depth = self.p, self.p["depth"]
        profile = PROFILES[p["host"]]
        self.mem_a = LatencyMemory(64, depth, 1)
        self.mem_b = LatencyMemory(64, depth, 1)
        self.hi_a = HostInterface(profile, depth)
        self.hi_b = HostInterface(profile, depth)
        self.requester = req = Requester(self.cache_shape, depth, p["header"], p["reads"],
                                         **{k: p[k] for k in REQUESTER_SIZES})
        self.responder = resp = Responder(self.cache_shape, depth, self.mr_shape,
                                          p["header"], p["read_words"],
                                          **{k: p[k] for k in RESPONDER_DEFAULTS})
        counters = self.resp_counters
        if "read" in counters:
            wiring.connect(m, PortView(CountersSignature(counters["read"]), resp),
                           wiring.flipped(self.resp_read))
        if p["reads"]:
            wiring.connect(m, req.read, wiring.flipped(self.req_read))
        if "mr" in counters:                 # the MR table in host memory B
            m.d.comb += resp.mr_base.eq(mr_table_base(depth, p["mr_entries"]))
            wiring.connect(m, PortView(CountersSignature(counters["mr"]), resp),
                           wiring.flipped(self.resp_mr))
        if self.link_retry:
            self.link_ab = ReliableLink(64, p["link_latency"], LINK_FRAME_BEATS)
            self.link_ba = ReliableLink(64, p["link_latency"], LINK_FRAME_BEATS)
        else:
            self.link_ab = FaultyLink(64, p["link_latency"], LINK_FRAME_BEATS,
                                      LINK_FIFO_BEATS)
            self.link_ba = FaultyLink(64, p["link_latency"], LINK_FRAME_BEATS,
                                      LINK_FIFO_BEATS)
        m.submodules.mem_a, m.submodules.mem_b = self.mem_a, self.mem_b
        m.submodules.hi_a, m.submodules.hi_b = self.hi_a, self.hi_b
        m.submodules.requester, m.submodules.responder = req, resp
        m.submodules.link_ab, m.submodules.link_ba = self.link_ab, self.link_ba
        hi_a, hi_b, link_ab, link_ba = self.hi_a, self.hi_b, self.link_ab, self.link_ba
        mmio, inj = players["mmio"].o, players["inject"].o
        sel = self.inject_select
        # Link inputs, X-clean for Icarus (see the class docstring).
        ab_valid, ba_valid = Signal(), Signal()
        with m.If(Mux(sel, inj.valid, req.o.valid) & ~ResetSignal()):
            m.d.comb += ab_valid.eq(1)
        with m.If(resp.o.valid & ~ResetSignal()):
            m.d.comb += ba_valid.eq(1)
        m.d.comb += [
            hi_a.mmio_in.valid.eq(mmio.valid), hi_a.mmio_in.payload.eq(mmio.payload),
            mmio.ready.eq(hi_a.mmio_in.ready),
            req.mmio.valid.eq(hi_a.mmio.valid), req.mmio.payload.eq(hi_a.mmio.payload),
            hi_a.mmio.ready.eq(req.mmio.ready),
            req.qpc_base.eq(self.qpc_base_a), resp.qpc_base.eq(self.qpc_base_b),
            req.cq_base.eq(self.cq_base), req.cq_log2.eq(self.cq_log2),
            req.ack_timeout.eq(self.ack_timeout), req.ack_every.eq(self.ack_every),
            req.ack_frames.eq(self.ack_frames), req.serial.eq(self.serial),
            req.cache_log2.eq(self.cache_log2), resp.cache_log2.eq(self.cache_log2),
            req.qpc_log2.eq(self.qpc_log2), resp.qpc_log2.eq(self.qpc_log2),
            req.selective.eq(self.selective), resp.selective.eq(self.selective),
            # A -> B
            req.o.ready.eq(~ResetSignal()), inj.ready.eq(sel),
            link_ab.i.valid.eq(ab_valid),
            link_ab.i.payload.eq(Mux(sel, inj.payload, req.o.payload)),
            resp.i.valid.eq(link_ab.o.valid), resp.i.payload.eq(link_ab.o.payload),
            link_ab.o.ready.eq(1),
            # B -> A
            resp.o.ready.eq(~ResetSignal()),
            link_ba.i.valid.eq(ba_valid), link_ba.i.payload.eq(resp.o.payload),
            req.i.valid.eq(link_ba.o.valid), req.i.payload.eq(link_ba.o.payload),
            link_ba.o.ready.eq(1),
        ]
        for node, hi, mem in ((req, hi_a, self.mem_a), (resp, hi_b, self.mem_b)):
            wiring.connect(m, node.host, hi.dma)
            wiring.connect(m, hi.mem_rd_addr, mem.rd_addr)
            wiring.connect(m, mem.rd_data, hi.mem_rd_data)
            wiring.connect(m, hi.mem_wr, mem.wr)
        for name, link in (("wire_ab", link_ab), ("wire_ba", link_ba)):
            m.d.comb += [recorders[name].i.valid.eq(link.i.valid),
                         recorders[name].i.payload.eq(link.i.payload)]
        for name, hi in (("written", hi_b), ("completed", hi_a)):
            m.d.comb += [recorders[name].i.valid.eq(hi.marked.valid),
                         recorders[name].i.payload.eq(hi.marked.payload)]
        for link, settings, counters in ((link_ab, self.ab_settings, self.ab_counters),
                                         (link_ba, self.ba_settings, self.ba_counters)):
            wiring.connect(m, wiring.flipped(settings), link.settings)
            wiring.connect(m, link.counters, wiring.flipped(counters))
        if self.link_retry:
            # Sticky: a beat offered while the replay buffer could not take it.
            for link, full in ((link_ab, self.ab_full), (link_ba, self.ba_full)):
                with m.If(link.i.valid & ~link.i.ready):
                    m.d.sync += full.eq(1)
        for port, block in ((self.req, req), (self.resp, resp), (self.hia, hi_a),
                            (self.hib, hi_b)):
            wiring.connect(m, PortView(port.signature, block), wiring.flipped(port))
