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

from tb.uvm_common import EnvBase

from .agent import NicAgent
from .coverage import NicCoverage
from .scoreboard import NicScoreboard

__all__ = ["NicEnv"]


class NicEnv(EnvBase):
    AGENT = NicAgent
    SCOREBOARD = NicScoreboard
    COVERAGE = NicCoverage
