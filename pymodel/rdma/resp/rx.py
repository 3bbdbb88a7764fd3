"""Twin of :class:`rtl.rdma.resp.rx.Receive` (from its docstring)."""

from pymodel.fcs import fcs_ok
from pymodel.rdma.frames import icrc_of
from spec.formats.scaleup import framing
from spec.rdma_responder import MAX_FRAME_BEATS, REST_MAX

__all__ = ["ReceiveModel"]


class ReceiveModel:
    """Frames in, header entries into ``hdr`` and payload beats into ``pay`` (Fifos).

    ``step(c, side)`` takes ``side["i"]``, the beat arriving in cycle ``c`` (a dict with
    ``data``, ``nbytes``, ``first``, ``last``) or None.
    """

    def __init__(self, hdr, pay, header="roce"):
        self.hdr, self.pay = hdr, pay
        f = framing(header)
        self.icrc = icrc_of(header)
        #: ``icrc_ok`` is low below this many bytes: 64 with RoCEv2 headers (see the
        #: RTL), the scale-up framing's ``check_min`` with the scale-up header.
        self.icrc_min = 64 if f.lead_in else f.check_min
        self.frame = bytearray()
        self.beats = 0                # beats of the current frame so far
        self.b0 = self.b1 = 0
        self.dropping = False
        self.count = dict(overflow=0, rx_beats_max=0, rx_frames_max=0)

    def step(self, c, side):
        cnt = self.count
        if len(self.pay) > cnt["rx_beats_max"]:
            cnt["rx_beats_max"] = len(self.pay)
        if len(self.hdr) > cnt["rx_frames_max"]:
            cnt["rx_frames_max"] = len(self.hdr)
        beat = side.get("i")
        if beat is None:
            return {}
        if beat["first"]:
            self.frame, self.beats, self.b1 = bytearray(), 0, 0
            self.b0 = beat["data"]
            self.dropping = not (len(self.pay) <= self.pay.depth - REST_MAX
                                 and len(self.hdr) < self.hdr.depth)
        index = self.beats
        self.beats += 1
        if index == 1:
            self.b1 = beat["data"]
        self.frame += beat["data"].to_bytes(64, "little")[:beat["nbytes"]]
        if not self.dropping and 2 <= index < MAX_FRAME_BEATS:
            self.pay.write(beat["data"])
        if beat["last"]:
            if self.dropping:
                cnt["overflow"] += 1
            else:
                self.hdr.write(self._entry())
        return {}

    def _entry(self):
        frame, n = bytes(self.frame), self.beats
        length = len(frame) & 0xFFFF
        return dict(b0=self.b0, b1=self.b1, fcs_ok=int(fcs_ok(frame)),
                    icrc_ok=int(length >= self.icrc_min
                                and self.icrc(frame[:-8]) == frame[-8:-4]),
                    length=length, single=int(n == 1), too_long=int(n > MAX_FRAME_BEATS),
                    rest=max(0, min(n, MAX_FRAME_BEATS) - 2))

    def idle(self):
        return True

    def commit(self):
        pass
