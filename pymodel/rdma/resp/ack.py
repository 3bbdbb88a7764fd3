"""Twin of :class:`rtl.rdma.resp.ack.AckSender` (from its docstring)."""

from pymodel.packet import frame_chunks
from pymodel.rdma.frames import Endpoint, ack_frame

#: Bytes a beat of the responder's output stream.
_WIDTH = 64

__all__ = ["AckSenderModel", "ack_beats"]


def ack_beats(job, header="roce"):
    """The beats (dicts) of the ACKNOWLEDGE frame of an ACK job (``ack_layout`` dict):
    64 bytes a beat, the last one holding the rest (two beats with RoCEv2 headers, one
    with the scale-up header)."""
    frame = ack_frame(Endpoint(job["smac"], job["sip"]), Endpoint(job["dmac"], job["dip"]),
                      job["src_qp"], job["dest_qp"], job["psn"], job["syndrome"], job["msn"],
                      header=header)
    return [dict(data=data, nbytes=nbytes, first=int(first), last=int(last))
            for data, nbytes, first, last in frame_chunks(frame, _WIDTH)]


class AckSenderModel:
    """ACK jobs from ``i`` (a Fifo) to beats on ``o``.

    In a system: :meth:`present` is the beat on ``o`` at the start of the cycle,
    :meth:`advance` says whether it was taken. In a unit test :meth:`step` does both
    with an output Fifo ``o`` as the taker.
    """

    def __init__(self, i, o=None, header="roce"):
        self.i, self.o, self.header = i, o, header
        self.spill = None          # beat 1 of the frame whose beat 0 left
        self.count = dict(acks=0)
        self._built = (None, None)     # (the head job, its beats): built once per job

    def _beats(self, job):
        if self._built[0] is not job:
            self._built = (job, ack_beats(job, self.header))
        return self._built[1]

    def present(self):
        if self.spill is not None:
            return self.spill
        return self._beats(self.i.head())[0] if self.i.can_read() else None

    def advance(self, taken):
        if not taken:
            return
        if self.spill is not None:
            self.spill = None
            return
        beats = self._beats(self.i.read())
        self.spill = beats[1] if len(beats) > 1 else None
        self.count["acks"] += 1

    def step(self, c, side):
        beat = self.present()
        taken = beat is not None and self.o.can_write()
        if taken:
            self.o.write(beat)
        self.advance(taken)
        return {}

    def commit(self):
        pass
