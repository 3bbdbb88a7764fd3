"""Co-simulation top of design 2: a requester node and a responder node, linked."""

from amaranth import Mux, ResetSignal, Signal
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import LatencyMemory
from rtl.fabric.faulty_link import FaultyLink
from rtl.rdma.requester import Requester
from rtl.rdma.responder import Responder
from rtl.sim.harness_top import HarnessTop
from spec.checks import check_int, reject
from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.fabric import SETTINGS as LINK_SETTINGS
from spec.formats.packet import packet_layout
from spec.rdma import (
    DEFAULTS,
    LINK_FIFO_BEATS,
    LINK_FRAME_BEATS,
    LINKS,
    REQUESTER_COUNTERS,
    RESPONDER_COUNTERS,
    RETRY_LIMIT_RANGE,
    TIMEOUT_RANGE,
    doorbell_layout,
)

__all__ = ["RdmaTop"]


class RdmaTop(HarnessTop):
    """Node A (requester + host memory A) -> link -> node B (responder + host memory B),
    and the reverse link for ACKs.

    Players: ``db_writes`` (MMIO doorbell writes into node A), ``inject`` (raw beats
    sent on the A->B link instead of node A's frames while ``inject_select`` is high:
    used to play bad frames). Recorders: ``wire_ab`` and ``wire_ba`` (every beat put on
    each link, stamped with its cycle), ``written`` (QPN, in the cycle node B writes the
    last payload word of a message), ``completed`` (QPN, in the cycle node A writes a
    CQE). Host memories ``mem_a`` and ``mem_b`` (their ``mem`` arrays are loaded and
    dumped by the testbench), node B's MR table ``responder.mr_table``.

    Both links are :class:`rtl.fabric.faulty_link.FaultyLink` (``link_ab``, ``link_ba``;
    frame buffer :data:`spec.rdma.LINK_FRAME_BEATS`, FIFO
    :data:`spec.rdma.LINK_FIFO_BEATS`). Their setting ports are exported as
    ``ab_<setting>`` and ``ba_<setting>`` (``ab_seed``, ``ab_drop_rate``,
    ``ab_drop_burst``, ..., see ``docs/faults.md``), their counters and flags as
    ``ab_<counter>``/``ba_<counter>`` (``ab_dropped``, ``ba_overflow``, ...). Parameters
    and their defaults: :data:`spec.rdma.DEFAULTS`; counters ``req_<name>`` and
    ``resp_<name>``: :data:`spec.rdma.REQUESTER_COUNTERS`,
    :data:`spec.rdma.RESPONDER_COUNTERS`.
    With every rate 0 (the reset value of the ports if the testbench leaves them) each
    link is a plain ``Link`` of ``link_latency`` cycles.

    Run-time ports: ``inject_select``, ``qpc_base_a``, ``qpc_base_b``, ``cq_base``,
    ``cq_log2``, ``ack_timeout`` (the requester's transport timeout in cycles; 0, the
    default of the testbench, selects the ``timeout`` parameter), the link settings;
    counters ``req_*`` and ``resp_*``. Recorders must run without
    backpressure (links cannot stall). The links take the engines' frames every cycle
    out of reset; ``ready`` is driven as ``~rst`` rather than a constant 1 because Icarus
    never evaluates an ``always @*`` block whose inputs never change, and the FCS
    inserters' ``i.ready`` would stay X.
    """

    def __init__(self, **params):
        unknown = set(params) - set(DEFAULTS)
        if unknown:
            reject(self, f"unknown RdmaTop parameter(s): {sorted(unknown)}")
        p = dict(DEFAULTS, **params)
        for name in ("doorbells", "inject", "wire_beats", "events"):
            check_int(self, f"{name} (player/recorder depth)", p[name], 1, 1 << 16)
        check_int(self, "host-memory read latency (cycles)", p["mem_latency"], 1, 64)
        check_int(self, "link latency (cycles)", p["link_latency"], 1, 1024)
        check_int(self, "transport timeout (cycles)", p["timeout"], *TIMEOUT_RANGE)
        check_int(self, "retry limit", p["retry_limit"], *RETRY_LIMIT_RANGE)
        self.p = p
        depth = p["depth"]
        ports = {
            "inject_select": In(1),
            "qpc_base_a": In(range(depth)), "qpc_base_b": In(range(depth)),
            "cq_base": In(range(depth)), "cq_log2": In(5),
            "ack_timeout": In(24),
        }
        for link in LINKS:
            ports.update({f"{link}_{n}": In(bits) for n, bits in LINK_SETTINGS.items()})
            ports.update({f"{link}_{n}": Out(32) for n in LINK_COUNTERS})
            ports.update({f"{link}_{n}": Out(1) for n in LINK_FLAGS})
        ports.update({f"req_{n}": Out(32) for n in REQUESTER_COUNTERS})
        ports.update({f"resp_{n}": Out(32) for n in RESPONDER_COUNTERS})
        beat = packet_layout(64)
        super().__init__(
            players={"db_writes": (doorbell_layout(), p["doorbells"]),
                     "inject": (beat, p["inject"])},
            recorders={"wire_ab": (beat, p["wire_beats"]), "wire_ba": (beat, p["wire_beats"]),
                       "written": (24, p["events"]), "completed": (24, p["events"])},
            ports=ports)

    def elaborate_design(self, m, players, recorders):
        p, depth = self.p, self.p["depth"]
        self.mem_a = LatencyMemory(64, depth, p["mem_latency"])
        self.mem_b = LatencyMemory(64, depth, p["mem_latency"])
        self.requester = req = Requester(p["cache_entries"], depth, p["timeout"],
                                         p["retry_limit"])
        self.responder = resp = Responder(p["cache_entries"], depth, p["mr_entries"])
        self.link_ab = FaultyLink(64, p["link_latency"], LINK_FRAME_BEATS, LINK_FIFO_BEATS)
        self.link_ba = FaultyLink(64, p["link_latency"], LINK_FRAME_BEATS, LINK_FIFO_BEATS)
        m.submodules.mem_a = mem_a = self.mem_a
        m.submodules.mem_b = mem_b = self.mem_b
        m.submodules.requester = req
        m.submodules.responder = resp
        m.submodules.link_ab = link_ab = self.link_ab
        m.submodules.link_ba = link_ba = self.link_ba
        db, inj = players["db_writes"].o, players["inject"].o
        sel = self.inject_select
        # Link inputs, X-clean for Icarus: an engine's ``o.valid`` stays X until its first
        # frame (a combinational block whose inputs never change is never evaluated), and
        # a FaultyLink decides on ``valid & first``. Written as an ``if`` that also reads
        # the reset, so that it runs when reset falls and reads X as false.
        ab_valid, ba_valid = Signal(), Signal()
        with m.If(Mux(sel, inj.valid, req.o.valid) & ~ResetSignal()):
            m.d.comb += ab_valid.eq(1)
        with m.If(resp.o.valid & ~ResetSignal()):
            m.d.comb += ba_valid.eq(1)
        m.d.comb += [
            req.doorbell.valid.eq(db.valid), req.doorbell.payload.eq(db.payload),
            db.ready.eq(req.doorbell.ready),
            req.qpc_base.eq(self.qpc_base_a), resp.qpc_base.eq(self.qpc_base_b),
            req.cq_base.eq(self.cq_base), req.cq_log2.eq(self.cq_log2),
            req.ack_timeout.eq(self.ack_timeout),
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
        for node, mem in ((req, mem_a), (resp, mem_b)):
            m.d.comb += [
                mem.rd_addr.valid.eq(node.rd_addr.valid),
                mem.rd_addr.payload.eq(node.rd_addr.payload),
                node.rd_data.valid.eq(mem.rd_data.valid),
                node.rd_data.payload.eq(mem.rd_data.payload),
                mem.wr.valid.eq(node.wr.valid), mem.wr.payload.eq(node.wr.payload),
            ]
        for name, link in (("wire_ab", link_ab), ("wire_ba", link_ba)):
            m.d.comb += [recorders[name].i.valid.eq(link.i.valid),
                         recorders[name].i.payload.eq(link.i.payload)]
        for name, src in (("written", resp.written), ("completed", req.completed)):
            m.d.comb += [recorders[name].i.valid.eq(src.valid),
                         recorders[name].i.payload.eq(src.payload)]
        for prefix, link in (("ab", link_ab), ("ba", link_ba)):
            for n in LINK_SETTINGS:
                m.d.comb += getattr(link, n).eq(getattr(self, f"{prefix}_{n}"))
            for n in LINK_COUNTERS + LINK_FLAGS:
                m.d.comb += getattr(self, f"{prefix}_{n}").eq(getattr(link, n))
        for n in REQUESTER_COUNTERS:
            m.d.comb += getattr(self, f"req_{n}").eq(getattr(req, n))
        for n in RESPONDER_COUNTERS:
            m.d.comb += getattr(self, f"resp_{n}").eq(getattr(resp, n))
