"""The NIC environment: one agent, the scoreboard and the coverage collector.

::

    sequence -> seqr -> driver --ap--> scoreboard.driven, coverage.items
                          |
                        bench (signals: players, recorders, clock, reset)
                          |
                       monitor --ap--> scoreboard.observed, coverage.observed

Components come from the factory (``create``), so a test swaps any of them (and the
sequence) with ``uvm_factory().set_type_override_by_type`` before building the env.
"""

from pyuvm import uvm_env

from .agent import NicAgent
from .coverage import NicCoverage
from .scoreboard import NicScoreboard

__all__ = ["NicEnv"]


class NicEnv(uvm_env):
    def build_phase(self):
        self.agent = NicAgent.create("agent", self)
        self.scoreboard = NicScoreboard.create("scoreboard", self)
        self.coverage = NicCoverage.create("coverage", self)

    def connect_phase(self):
        driver, monitor = self.agent.driver, self.agent.monitor
        driver.ap.connect(self.scoreboard.driven.analysis_export)
        driver.ap.connect(self.coverage.items.analysis_export)
        monitor.ap.connect(self.scoreboard.observed.analysis_export)
        monitor.ap.connect(self.coverage.observed.analysis_export)
