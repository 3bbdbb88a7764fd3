"""The PFC-like pause of a node's downlink: XOFF/XON from its responder's receive FIFOs."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject
from spec.rdma_fabric import pause_thresholds
from spec.rdma_responder import SIZE_LIMITS

__all__ = ["PauseGen"]


class PauseGen(wiring.Component):
    """Raise ``xoff`` when the responder's receive FIFOs fill, lower it when they drain.

    # Ref: IEEE 802.1Qbb-2011 (priority-based flow control), one priority class.

    Parameters
    ----------
    rx_beats, rx_frames : int
        The responder's payload and header FIFO depths
        (:class:`spec.rdma_responder.ResponderSizes`).
    link_latency : int
        Cycles of each link of the fabric (1 to 1024): the pause's sideband and the
        downlink.
    headroom : int
        Beats above the XOFF threshold (0: the least safe value,
        :func:`spec.rdma_fabric.pause_min_headroom`, ``2 * link_latency + 1``).
    hysteresis : int or None
        Beats between XOFF and XON (None: :data:`spec.rdma_fabric.PAUSE_HYSTERESIS`, one
        largest frame). The thresholds and the errors for bad values:
        :func:`spec.rdma_fabric.pause_thresholds` (``pause_headroom``,
        ``pause_hysteresis`` named).

    Ports
    -----
    pay_level, hdr_level : In
        The responder's ``rx_beats_level`` and ``rx_frames_level`` (levels at the start
        of the cycle).
    xoff : Out(1)
        The pause, a register: high from the cycle after a cycle whose levels pass an
        XOFF threshold (payload beats above ``xoff_beats`` or header entries above
        ``xoff_frames``) until the cycle after a cycle whose levels are both at most
        their XON thresholds. Carried to the switch's egress toward the node by a
        sideband of ``link_latency`` cycles (as the credits are), where it holds the
        next first beat: the frame in progress ends, none starts.
    xoffs : Out(32)
        XOFF transitions (pause raised), counted in the cycle ``xoff`` rises.

    Why no frame is dropped (the headroom)
    ---------------------------------------
    A frame admitted at the responder in cycle ``a`` passed the egress gate in
    ``a - L`` with the pause low there, so ``xoff`` was low in ``a - 2L`` and its levels
    at the start of ``s = a - 2L - 1`` were at most ``xoff_beats``/``xoff_frames``. From
    ``s`` to ``a`` at most ``a - s = 2L + 1`` beats arrive (one a cycle), each adding at
    most one payload beat or one header entry, so at ``a`` the levels are at most
    ``rx_beats - REST_MAX`` and ``rx_frames - 1``: the receive stage admits the frame.
    """

    def __init__(self, rx_beats, rx_frames, link_latency, headroom=0, hysteresis=None):
        check_int(self, "payload FIFO beats (rx_beats)", rx_beats, *SIZE_LIMITS["rx_beats"])
        check_int(self, "header FIFO frames (rx_frames)", rx_frames,
                  *SIZE_LIMITS["rx_frames"])
        check_int(self, "link latency (cycles)", link_latency, 1, 1024)
        try:
            self.thresholds = pause_thresholds(rx_beats, rx_frames, link_latency, headroom,
                                               hysteresis)
        except ValueError as exc:
            reject(self, str(exc))
        super().__init__({
            "pay_level": In(range(rx_beats + 1)),
            "hdr_level": In(range(rx_frames + 1)),
            "xoff": Out(1),
            "xoffs": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        xoff_b, xon_b, xoff_f, xon_f = self.thresholds
        pay, hdr = self.pay_level, self.hdr_level
        nxt = Signal()
        m.d.comb += nxt.eq(Mux(self.xoff, ~((pay <= xon_b) & (hdr <= xon_f)),
                               (pay > xoff_b) | (hdr > xoff_f)))
        m.d.sync += self.xoff.eq(nxt)
        with m.If(nxt & ~self.xoff):
            m.d.sync += self.xoffs.eq(self.xoffs + 1)
        return m
