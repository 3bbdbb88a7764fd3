"""Twin of :class:`rtl.rdma.req.request_framer.RequestFramer` (from its docstring)."""

from collections import deque

from pymodel.packet import frame_chunks
from pymodel.rdma.frames import Endpoint
from pymodel.rdma.read_frames import atomic_request_frame, read_request_frame
from spec.formats.roce import OpCode

__all__ = ["RequestFramerModel", "request_frame"]


def request_frame(d):
    """The frame (with ICRC and FCS) of descriptor ``d`` (a dict of
    :func:`~rtl.rdma.req.request_framer.request_layout`'s fields)."""
    src, dst = Endpoint(d["smac"], d["sip"]), Endpoint(d["dmac"], d["dip"])
    if d["opcode"] == OpCode.RC_RDMA_READ_REQUEST.value:
        return read_request_frame(src, dst, d["src_qp"], d["dest_qp"], d["psn"], d["va"],
                                  d["rkey"], d["dma_length"], ack_req=bool(d["ack_req"]))
    return atomic_request_frame(d["opcode"], src, dst, d["src_qp"], d["dest_qp"], d["psn"],
                                d["va"], d["rkey"], d["swap_add"], d["compare"],
                                ack_req=bool(d["ack_req"]))


class RequestFramerModel:
    """``step(c, i, o_ready)``: ``i`` the descriptor offered in cycle ``c`` (or None),
    ``o_ready`` the link's ready. Returns ``(taken, beat)``: whether the descriptor was
    taken and the beat ``(data, nbytes, first, last)`` offered in the cycle (or None)."""

    def __init__(self):
        self.beats = deque()

    def step(self, c, i, o_ready):
        beat = self.beats[0] if self.beats else None
        sent_last = beat is not None and o_ready and beat[3]
        if beat is not None and o_ready:
            self.beats.popleft()
        taken = i is not None and (beat is None or sent_last)
        if taken:
            self.beats.extend(frame_chunks(request_frame(i), 64))
        return taken, beat
