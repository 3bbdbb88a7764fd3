"""The RDMA environment: one agent, the scoreboard and the coverage collector.

::

    sequence -> seqr -> driver --ap--> scoreboard.driven, coverage.items
                          |              (WriteItems, then one RunPlan per run)
                        bench (signals: players, recorders, memories, clock, reset)
                          |
                       monitor --ap--> scoreboard.observed, coverage.observed
                                         (one RunObs per run)

Components come from the factory (``create``), so a test swaps any of them (and the
sequence) with ``uvm_factory().set_type_override_by_type`` before building the env.
"""

from pyuvm import uvm_env

from .agent import RdmaAgent
from .coverage import RdmaCoverage
from .scoreboard import RdmaScoreboard

__all__ = ["RdmaEnv"]


class RdmaEnv(uvm_env):
    def build_phase(self):
        self.agent = RdmaAgent.create("agent", self)
        self.scoreboard = RdmaScoreboard.create("scoreboard", self)
        self.coverage = RdmaCoverage.create("coverage", self)

    def connect_phase(self):
        driver, monitor = self.agent.driver, self.agent.monitor
        driver.ap.connect(self.scoreboard.driven.analysis_export)
        driver.ap.connect(self.coverage.items.analysis_export)
        monitor.ap.connect(self.scoreboard.observed.analysis_export)
        monitor.ap.connect(self.coverage.observed.analysis_export)
