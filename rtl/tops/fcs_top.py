"""Co-simulation top of the FCS blocks: an inserter chain and a checker chain."""

from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from rtl.common.fcs_checker import FcsChecker
from rtl.common.fcs_inserter import FcsInserter
from rtl.sim.harness_top import HarnessTop
from spec.formats.packet import check_width, packet_layout

__all__ = ["FcsTop"]


class FcsTop(HarnessTop):
    """``gen_src -> FcsInserter -> gen_sink`` and ``chk_src -> FcsChecker -> chk_sink``.

    Extra ports: ``frames_ok``, ``frames_bad`` of the checker.
    """

    def __init__(self, width, depth=2048):
        self.width = check_width(width, self)
        lay = packet_layout(width)
        super().__init__(
            players={"gen_src": (lay, depth), "chk_src": (lay, depth)},
            recorders={"gen_sink": (lay, depth), "chk_sink": (lay, depth)},
            ports={"frames_ok": Out(32), "frames_bad": Out(32)})

    def elaborate_design(self, m, players, recorders):
        m.submodules.inserter = ins = FcsInserter(self.width)
        m.submodules.checker = chk = FcsChecker(self.width)
        wiring.connect(m, players["gen_src"].o, ins.i)
        wiring.connect(m, ins.o, recorders["gen_sink"].i)
        wiring.connect(m, players["chk_src"].o, chk.i)
        wiring.connect(m, chk.o, recorders["chk_sink"].i)
        m.d.comb += [self.frames_ok.eq(chk.frames_ok), self.frames_bad.eq(chk.frames_bad)]
