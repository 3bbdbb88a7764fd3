"""cocotb module of the NIC environment: ``@pyuvm.test`` classes, run in one simulation
(in this order; each resets the design and clears the local memories first).

=========================  ==================================================  ==========
test                       factory override                                    goals
=========================  ==================================================  ==========
NicBaseTest                (none: NicRandomSeq, NicScoreboard)
NicAllGoodTest             NicRandomSeq -> NicAllGoodSeq
NicErrorsTest              NicRandomSeq -> NicErrorsHeavySeq                   error,
                                                                               outcome
NicHotspotTest             NicRandomSeq -> NicHotspotSeq
NicBrokenScoreboardTest    NicScoreboard -> BrokenScoreboard (expect_fail)
=========================  ==================================================  ==========

Parameters (``COSIM_PARAMS``, see :mod:`tb.nic.uvm.run`): the top's, plus ``seed`` and
``count`` (stores per test). Each test draws from ``NicConfig.test_seed(<test name>)``.
"""

import cocotb
import pyuvm
from pyuvm import ConfigDB, uvm_factory, uvm_test

from tb.cosim import cosim_params

from .bench import NicBench
from .config import NicConfig
from .env import NicEnv
from .scoreboard import BrokenScoreboard, NicScoreboard
from .sequences import NicAllGoodSeq, NicErrorsHeavySeq, NicHotspotSeq, NicRandomSeq

#: Simulated-time limit of one test (a hang fails it instead of running forever).
TIMEOUT = {"timeout_time": 20, "timeout_unit": "ms"}


@pyuvm.test(**TIMEOUT)
class NicBaseTest(uvm_test):
    """``count`` random stores from every node: the base sequence, the full scoreboard.

    Variants override :meth:`overrides` (factory overrides, before the env is built)
    and :attr:`goals` (coverage groups that must be fully hit).
    """

    goals = ()
    #: Restricted per-source receive windows (``NicConfig.windows``); else the whole
    #: memory for every source.
    windowed = True

    def build_phase(self):
        p = cosim_params()
        bench = NicBench(cocotb.top, p["nodes"], p["width"], p["mem_words"])
        self.cfg = NicConfig.from_params(p, windowed=self.windowed, **bench.capacity())
        ConfigDB().set(None, "*", "NIC_CFG", self.cfg)
        ConfigDB().set(None, "*", "NIC_BENCH", bench)
        ConfigDB().set(None, "*", "TEST_NAME", type(self).__name__)
        ConfigDB().set(None, "*", "COVERAGE_GOALS", tuple(self.goals))
        self.overrides(uvm_factory())
        self.env = NicEnv.create("env", self)

    def overrides(self, factory):
        """Factory overrides of a variant."""

    async def run_phase(self):
        self.raise_objection()
        seed = self.cfg.test_seed(type(self).__name__)
        seq = NicRandomSeq.create("seq").configure(self.cfg, seed, self.cfg.count)
        self.logger.info("%s: %d stores, seed %d, %s framing", type(seq).__name__,
                         self.cfg.count, seed, self.cfg.framing)
        await seq.start(self.env.agent.seqr)
        self.drop_objection()


@pyuvm.test(**TIMEOUT)
class NicAllGoodTest(NicBaseTest):
    """Good stores only, with every window the whole memory (so that stores of up to
    4096 bytes are drawn): everything delivered, nothing dropped."""

    windowed = False

    def overrides(self, factory):
        factory.set_type_override_by_type(NicRandomSeq, NicAllGoodSeq)


@pyuvm.test(**TIMEOUT)
class NicErrorsTest(NicBaseTest):
    """Errors-heavy traffic; every error kind and every receiver outcome must be hit."""

    goals = ("error", "outcome")

    def overrides(self, factory):
        factory.set_type_override_by_type(NicRandomSeq, NicErrorsHeavySeq)


@pyuvm.test(**TIMEOUT)
class NicHotspotTest(NicBaseTest):
    """Every store to one node."""

    def overrides(self, factory):
        factory.set_type_override_by_type(NicRandomSeq, NicHotspotSeq)


@pyuvm.test(expect_fail=True, **TIMEOUT)
class NicBrokenScoreboardTest(NicBaseTest):
    """Negative test: the scoreboard's model is off by one value, so the test must fail
    (an AssertionError in check_phase; cocotb then records it as passed). If it passed,
    the scoreboard would not be comparing that value."""

    def overrides(self, factory):
        factory.set_type_override_by_type(NicScoreboard, BrokenScoreboard)
