"""Co-simulation top of the requester's READ and atomic blocks: the response path
(receive stage, FIFOs, response intake) and the request framer."""

from amaranth import Shape
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from rtl.rdma.req.request_framer import RequestFramer, request_layout
from rtl.rdma.req.response_intake import ResponseIntake
from rtl.rdma.resp.rx import Receive
from rtl.sim.harness_top import HarnessTop
from spec.checks import check_int
from spec.formats.packet import packet_layout
from spec.formats.roce import HOST_WORD_BITS, PSN_BITS
from spec.host import wr_layout
from spec.ports import CountersSignature, PortView
from spec.rdma_read_req import (
    INTAKE_COUNTERS,
    done_layout,
    issue_layout,
    rewind_layout,
)
from spec.rdma_responder import RX_BEATS, RX_FRAMES
from spec.rdma_stages import header_entry_layout

__all__ = ["ReadRequesterTop", "FIFO_DEPTHS"]

#: FIFOs of the top: the receive stage's header and payload FIFOs (the responder's
#: defaults, :data:`spec.rdma_responder.RX_FRAMES` and ``RX_BEATS``), and one in front of
#: the intake's ``issue`` and behind each of its outputs (their players and recorders
#: never stall in the tests, so only the receive FIFOs' depths matter).
FIFO_DEPTHS = dict(hdr=RX_FRAMES, pay=RX_BEATS, issue=4, o=8, done=8, rewind=4)


class ReadRequesterTop(HarnessTop):
    """``frames`` (player, beats) -> :class:`~rtl.rdma.resp.rx.Receive` -> header and
    payload FIFOs -> :class:`~rtl.rdma.req.response_intake.ResponseIntake`, whose
    ``issue`` comes from player ``issue`` and whose ``o``, ``done`` and ``rewind`` go to
    the recorders ``wr``, ``ops_done`` and ``rewind`` (each through a FIFO of
    :data:`FIFO_DEPTHS`); ``req``
    (player) -> :class:`~rtl.rdma.req.request_framer.RequestFramer` -> ``req_frames``
    (recorder). Ports: ``timeout`` (the intake's), ``intake`` (its counters,
    :data:`spec.rdma_read_req.INTAKE_COUNTERS`; in Verilog ``intake__<name>``),
    ``rx_overflow`` (the receive stage's ``overflow``: frames dropped whole because its
    FIFOs were full).
    """

    def __init__(self, slots=16, ord=16, depth=1 << 12, items=4096):
        check_int(self, "player/recorder depth (items)", items, 1, 1 << 17)
        self.slots, self.ord, self.depth = slots, ord, depth
        self.block = ResponseIntake(slots, ord, depth)
        beat = packet_layout(64)
        super().__init__(
            players={"frames": (beat, items), "issue": (issue_layout(depth), items),
                     "req": (request_layout(), items)},
            recorders={"wr": (wr_layout(depth), items), "ops_done": (done_layout(), items),
                       "rewind": (rewind_layout(), items), "req_frames": (beat, items)},
            ports={"timeout": In(PSN_BITS),
                   "intake": Out(CountersSignature(INTAKE_COUNTERS)),
                   "rx_overflow": Out(32)})

    def elaborate_design(self, m, players, recorders):
        d = FIFO_DEPTHS
        intake = self.block
        m.submodules.rx = rx = Receive(d["pay"], d["hdr"])
        m.submodules.intake = intake
        m.submodules.framer = framer = RequestFramer()

        def fifo(name, shape, depth):
            f = SyncFIFO(width=Shape.cast(shape).width, depth=depth)
            m.submodules[f"q_{name}"] = f
            return f

        q_hdr = fifo("hdr", header_entry_layout(), d["hdr"])
        q_pay = fifo("pay", HOST_WORD_BITS, d["pay"])
        wiring.connect(m, players["frames"].o, rx.i)
        wiring.connect(m, rx.hdr, q_hdr.w_stream)
        wiring.connect(m, rx.pay, q_pay.w_stream)
        m.d.comb += [rx.hdr_level.eq(q_hdr.level), rx.pay_level.eq(q_pay.level)]
        wiring.connect(m, q_hdr.r_stream, intake.hdr)
        wiring.connect(m, q_pay.r_stream, intake.beats)
        q_issue = fifo("issue", issue_layout(self.depth), d["issue"])
        wiring.connect(m, players["issue"].o, q_issue.w_stream)
        wiring.connect(m, q_issue.r_stream, intake.issue)
        for name, rec, shape in (("o", "wr", wr_layout(self.depth)),
                                 ("done", "ops_done", done_layout()),
                                 ("rewind", "rewind", rewind_layout())):
            q = fifo(name, shape, d[name])
            wiring.connect(m, getattr(intake, name), q.w_stream)
            wiring.connect(m, q.r_stream, recorders[rec].i)
        m.d.comb += [intake.timeout.eq(self.timeout), self.rx_overflow.eq(rx.overflow)]
        wiring.connect(m, players["req"].o, framer.i)
        wiring.connect(m, framer.o, recorders["req_frames"].i)
        sig = CountersSignature(INTAKE_COUNTERS)
        wiring.connect(m, PortView(sig, intake), wiring.flipped(self.intake))
