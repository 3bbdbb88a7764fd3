"""Model of :class:`rtl.tops.read_requester_top.ReadRequesterTop`: the requester's READ and
atomic blocks' twins between FIFOs, players and recorders that never stall."""

from pymodel.cycle import Fifo
from pymodel.packet import unpack_beat
from pymodel.rdma.req.request_framer import RequestFramerModel
from pymodel.rdma.req.response_intake import ResponseIntakeModel
from pymodel.rdma.resp.rx import ReceiveModel

__all__ = ["run_read_top"]


def run_read_top(beats, issues, reqs, *, timeout, slots, ord, depth, fifo_depths,
                 max_cycles=1 << 20):
    """Play flat frame ``beats``, ``issues`` and request descriptors ``reqs`` (dicts)
    from cycle 0, one item a cycle as each is taken; returns ``{recorder: [(cycle,
    item)]}`` for ``o``, ``done``, ``rewind`` (dicts) and ``req_frames`` (beat tuples
    ``(data, nbytes, first, last)``), ``issue_taken`` (the cycles the player's issues
    were taken), ``count`` (the intake's counters at the end), ``overflow`` (the
    receive stage's: frames dropped whole) and ``cycles`` (the first
    cycle with nothing left to do)."""
    d = fifo_depths
    q = {name: Fifo(d[name], name) for name in ("hdr", "pay", "issue", "o", "done",
                                                "rewind")}
    rx = ReceiveModel(q["hdr"], q["pay"])
    intake = ResponseIntakeModel({"hdr": q["hdr"], "beats": q["pay"], "issue": q["issue"],
                                  "o": q["o"], "done": q["done"], "rewind": q["rewind"]},
                                 slots, ord, depth)
    framer = RequestFramerModel()
    out = {name: [] for name in ("o", "done", "rewind", "req_frames")}
    issue_taken = []
    fi = ii = ri = 0
    for c in range(max_cycles):
        for name in ("o", "done", "rewind"):
            if q[name].can_read():
                out[name].append((c, q[name].read()))
        if fi < len(beats):
            data, nbytes, first, last = unpack_beat(64, beats[fi])
            rx.step(c, {"i": dict(data=data, nbytes=nbytes, first=first, last=last)})
            fi += 1
        if ii < len(issues) and q["issue"].can_write():
            q["issue"].write(issues[ii])
            issue_taken.append(c)
            ii += 1
        intake.step(c, {"timeout": timeout})
        offer = reqs[ri] if ri < len(reqs) else None
        taken, beat = framer.step(c, offer, True)
        if taken:
            ri += 1
        if beat is not None:
            out["req_frames"].append((c, beat))
        for f in q.values():
            f.commit()
        if (fi == len(beats) and ii == len(issues) and ri == len(reqs)
                and not framer.beats and intake.idle()
                and all(s is None for s in intake.slot)
                and not any(len(f) for f in q.values())):
            return dict(out, issue_taken=issue_taken, count=dict(intake.count),
                        overflow=rx.count["overflow"], cycles=c + 1)
    raise AssertionError(f"the read requester top was still busy after {max_cycles}")
