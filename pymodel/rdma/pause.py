"""Twin of :class:`rtl.rdma.pause.PauseGen` (from its docstring)."""

from spec.rdma_fabric import pause_thresholds

__all__ = ["PauseGenModel"]


class PauseGenModel:
    """XOFF/XON from the responder's FIFO levels, one cycle at a time.

    :meth:`step` with the levels at the start of cycle ``c`` returns ``xoff`` of cycle
    ``c + 1`` (the register's next value); ``xoff`` is its value in ``c``. Bad
    thresholds raise ``ValueError`` naming ``pause_headroom`` or ``pause_hysteresis``
    (:func:`spec.rdma_fabric.pause_thresholds`).
    """

    def __init__(self, rx_beats, rx_frames, link_latency, headroom=0, hysteresis=None):
        self.xoff_b, self.xon_b, self.xoff_f, self.xon_f = pause_thresholds(
            rx_beats, rx_frames, link_latency, headroom, hysteresis)
        self.xoff = False
        self.xoffs = 0

    def step(self, pay_level, hdr_level):
        if self.xoff:
            nxt = not (pay_level <= self.xon_b and hdr_level <= self.xon_f)
        else:
            nxt = pay_level > self.xoff_b or hdr_level > self.xoff_f
        if nxt and not self.xoff:
            self.xoffs += 1
        self.xoff = nxt
        return nxt
