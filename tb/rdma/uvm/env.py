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

from tb.uvm_common import EnvBase

from .agent import RdmaAgent
from .coverage import RdmaCoverage
from .scoreboard import RdmaScoreboard

__all__ = ["RdmaEnv"]


class RdmaEnv(EnvBase):
    AGENT = RdmaAgent
    SCOREBOARD = RdmaScoreboard
    COVERAGE = RdmaCoverage
