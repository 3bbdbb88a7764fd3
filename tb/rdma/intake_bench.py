"""A bench for the requester's :class:`~rtl.rdma.req.response_intake.ResponseIntake`:
frames into the receive stage's header entries and payload beats, the stage against its
twin between FIFOs (:func:`tb.stage_harness.compare_stage`), and the host memory its
writes leave."""

from pymodel.cycle import Fifo
from pymodel.fields import unpack
from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.rdma.frames import ack_frame
from pymodel.rdma.req.response_intake import ResponseIntakeModel
from pymodel.rdma.resp.rx import ReceiveModel
from rtl.rdma.req.response_intake import ResponseIntake
from spec.formats.roce import Syndrome
from spec.rdma_read_req import ORD_DEFAULT
from tb.resp_frames import A, B
from tb.stage_harness import compare_stage

__all__ = ["LEAD", "DEPTH", "entries", "memory", "run_intake"]

#: Host-memory words of the requester in these runs.
DEPTH = 1 << 12


def entries(frames):
    """Header entries and payload beats of ``frames`` as the receive stage stores them
    (:class:`~pymodel.rdma.resp.rx.ReceiveModel`, FIFOs that never fill)."""
    hdr, pay = Fifo(1 << 12, "hdr"), Fifo(1 << 16, "pay")
    rx = ReceiveModel(hdr, pay)
    for frame in frames:
        for bits in frame_to_beats(frame, 64):
            data, nbytes, first, last = unpack_beat(64, bits)
            rx.step(0, {"i": dict(data=data, nbytes=nbytes, first=first, last=last)})
            hdr.commit()
            pay.commit()
    return list(hdr.q), list(pay.q)


def memory(writes):
    """Bytes written by the host writes ``o`` (addr, data, be), later over earlier."""
    mem = {}
    for w in writes:
        for k in range(64):
            if w["be"] >> k & 1:
                mem[64 * w["addr"] + k] = (w["data"] >> (8 * k)) & 0xFF
    return mem


#: ACKs ahead of the responses, so that the issues are taken before the first response
#: is decided (``other`` counts them).
LEAD = 2


def run_intake(frames, issues, *, slots=16, ord=ORD_DEFAULT, timeout=0, seed=1,
               pop_rate=1.0, push_rate=0.7, cycles=None, limit_qpns=(0x77, 0x78)):
    """Run ``frames`` (after :data:`LEAD` ACKs) and ``issues`` through the RTL and its
    twin; the items written to ``o``, ``done``, ``rewind`` (dicts), ``taken`` (cycles
    the inputs were taken), ``count`` (the twin's counters, equal to the RTL's) and
    ``twin`` (its state at the end: RTL = twin in every cycle until then). The
    ACK limit is asked for ``limit_qpns`` in turn, one a cycle, and compared too."""
    lead = [ack_frame(B, A, 0x100, 0x78, 1, Syndrome.ACK, 3)] * LEAD
    hdr, pay = entries(lead + frames)
    dut = ResponseIntake(slots, ord, DEPTH)
    box = {}

    def make(fifos):
        box["t"] = ResponseIntakeModel(fifos, slots, ord, DEPTH)
        return box["t"]

    cycles = cycles or 6 * (len(hdr) + len(pay)) + 400
    out = compare_stage(
        dut, make, inputs={"hdr": 8, "beats": 256, "issue": 4},
        outputs={"o": 8, "done": 8, "rewind": 4},
        stimulus={"hdr": hdr, "beats": pay, "issue": issues}, cycles=cycles, seed=seed,
        push_rate={"hdr": push_rate, "beats": 1.0, "issue": 1.0}, pop_rate=pop_rate,
        side_in=lambda c, peek: {"timeout": timeout,
                                 "limit_qpn": limit_qpns[c % len(limit_qpns)]},
        side_out=tuple(ResponseIntakeModel(None).count) + ("limit", "limit_psn"))
    lay = {n: getattr(dut, n).payload.shape() for n in ("o", "done", "rewind")}
    res = {n: [unpack(lay[n], v) for _, v in out[n]] for n in lay}
    res["taken"] = out["taken"]
    res["count"] = box["t"].count
    res["twin"] = box["t"]
    return res
