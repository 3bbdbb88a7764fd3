"""Co-simulation top of the faulty link: one player, one FaultyLink, one recorder."""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.fabric.faulty_link import FaultyLink
from rtl.sim.harness_top import HarnessTop
from spec.checks import check_int
from spec.formats.packet import packet_layout

__all__ = ["FaultyLinkTop"]


class FaultyLinkTop(HarnessTop):
    """``src`` (player) -> :class:`FaultyLink` -> ``sink`` (recorder).

    Parameters
    ----------
    width, latency, max_frame_beats, fifo_depth : int
        Those of the link.
    depth : int
        Beats the player and the recorder hold (16 to 65536).

    Extra ports: the link's ``settings`` (:data:`spec.fabric.SETTINGS`; hold them from
    before reset) and ``counters`` (its counters and flags); in Verilog
    ``settings__<name>`` and ``counters__<name>``.
    The link never pushes back, so the ``sink`` recorder must run without stalls; a
    beat it can not take is lost, as on a wire.
    """

    def __init__(self, width, latency, max_frame_beats=64, fifo_depth=64, depth=4096):
        self.depth = check_int(self, "recorder/player depth", depth, 16, 65536)
        self.link = FaultyLink(width, latency, max_frame_beats, fifo_depth)
        self.width = width
        lay = packet_layout(width)
        settings, counters = FaultyLink.port_signatures()
        super().__init__(players={"src": (lay, depth)}, recorders={"sink": (lay, depth)},
                         ports={"settings": In(settings), "counters": Out(counters)})

    def elaborate_design(self, m, players, recorders):
        m.submodules.link = link = self.link
        wiring.connect(m, players["src"].o, link.i)
        wiring.connect(m, link.o, recorders["sink"].i)
        wiring.connect(m, wiring.flipped(self.settings), link.settings)
        wiring.connect(m, link.counters, wiring.flipped(self.counters))
