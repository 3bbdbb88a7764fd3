"""cocotb module of the RDMA environment: ``@pyuvm.test`` classes, run in one simulation
(in this order; each resets the design, clears what the last run left in the host
memories and the context caches, and runs its posted and inject runs).

=========================  ==================================================  ==========
test                       factory override                                    goals
=========================  ==================================================  ==========
RdmaBaseTest               (none: RdmaRandomSeq, RdmaScoreboard)
RdmaAllGoodTest            RdmaRandomSeq -> RdmaAllGoodSeq
RdmaErrorsTest             RdmaRandomSeq -> RdmaErrorsHeavySeq                 error,
                                                                               variant,
                                                                               outcome
RdmaManyQpsTest            RdmaRandomSeq -> RdmaManyQpsSeq                     cache
RdmaOptimisedTest          RdmaRandomSeq -> RdmaOptimisedSeq                   wqe_path,
                                                                               ack_req
RdmaSerialTest             RdmaRandomSeq -> RdmaSerialSeq
RdmaBrokenScoreboardTest   RdmaScoreboard -> BrokenScoreboard (expect_fail)
=========================  ==================================================  ==========

Parameters (``COSIM_PARAMS``, see :func:`tb.rdma.runner.run_rdma`): ``top`` (the top's
parameters), ``seed`` and ``count`` (work requests per test). Each test draws from
``RdmaConfig.test_seed(<test name>)``.
"""

import cocotb
import pyuvm
from pyuvm import ConfigDB, uvm_factory, uvm_test

from tb.cosim import cosim_params

from .bench import RdmaBench
from .config import RdmaConfig
from .env import RdmaEnv
from .scoreboard import BrokenScoreboard, RdmaScoreboard
from .sequences import (
    RdmaAllGoodSeq,
    RdmaErrorsHeavySeq,
    RdmaManyQpsSeq,
    RdmaOptimisedSeq,
    RdmaRandomSeq,
    RdmaSerialSeq,
)

#: Simulated-time limit of one test (a hang fails it instead of running forever).
TIMEOUT = {"timeout_time": 50, "timeout_unit": "ms"}


@pyuvm.test(**TIMEOUT)
class RdmaBaseTest(uvm_test):
    """``count`` random WRITEs: the base sequence, the full scoreboard.

    Variants override :meth:`overrides` (factory overrides, before the env is built)
    and :attr:`goals` (coverage groups that must be fully hit).
    """

    goals = ()
    #: Work requests of the test (None: the ``count`` parameter).
    count = None

    def build_phase(self):
        p = cosim_params()
        probe = RdmaConfig.from_params(p)
        bench = RdmaBench(cocotb.top, probe.depth)
        self.cfg = RdmaConfig.from_params(p, **bench.capacity())
        ConfigDB().set(None, "*", "RDMA_CFG", self.cfg)
        ConfigDB().set(None, "*", "RDMA_BENCH", bench)
        ConfigDB().set(None, "*", "TEST_NAME", type(self).__name__)
        ConfigDB().set(None, "*", "COVERAGE_GOALS", tuple(self.goals))
        self.overrides(uvm_factory())
        self.env = RdmaEnv.create("env", self)

    def overrides(self, factory):
        """Factory overrides of a variant."""

    async def run_phase(self):
        self.raise_objection()
        seed = self.cfg.test_seed(type(self).__name__)
        count = self.count or self.cfg.count
        seq = RdmaRandomSeq.create("seq").configure(self.cfg, seed, count)
        self.logger.info("%s: up to %d WRITEs, seed %d", type(seq).__name__, count, seed)
        await seq.start(self.env.agent.seqr)
        self.drop_objection()


@pyuvm.test(**TIMEOUT)
class RdmaAllGoodTest(RdmaBaseTest):
    """Good WRITEs only: every one completes with success, nothing dropped."""

    def overrides(self, factory):
        factory.set_type_override_by_type(RdmaRandomSeq, RdmaAllGoodSeq)


@pyuvm.test(**TIMEOUT)
class RdmaErrorsTest(RdmaBaseTest):
    """Errors-heavy traffic; every error kind, every way of making it and every responder
    outcome must be hit."""

    goals = ("error", "variant", "outcome")

    def overrides(self, factory):
        factory.set_type_override_by_type(RdmaRandomSeq, RdmaErrorsHeavySeq)


@pyuvm.test(**TIMEOUT)
class RdmaManyQpsTest(RdmaBaseTest):
    """Two to three times as many QPs as cache entries: hits, misses and write-backs on
    both nodes."""

    goals = ("cache",)

    def overrides(self, factory):
        factory.set_type_override_by_type(RdmaRandomSeq, RdmaManyQpsSeq)


@pyuvm.test(**TIMEOUT)
class RdmaOptimisedTest(RdmaBaseTest):
    """The ladder's optimisations at once (ACK coalescing, WQEs by MMIO, inline payloads,
    doorbell batching, unsignalled WQEs): every way to post a WQE, and messages with and
    without AckReq, must be hit."""

    goals = ("wqe_path", "ack_req")

    def overrides(self, factory):
        factory.set_type_override_by_type(RdmaRandomSeq, RdmaOptimisedSeq)


@pyuvm.test(**TIMEOUT)
class RdmaSerialTest(RdmaBaseTest):
    """One work item at a time (the ``serial`` port, the ladder's first rung); the
    scoreboard checks that no work item started before the earlier ones were answered."""

    def overrides(self, factory):
        factory.set_type_override_by_type(RdmaRandomSeq, RdmaSerialSeq)


@pyuvm.test(expect_fail=True, **TIMEOUT)
class RdmaBrokenScoreboardTest(RdmaBaseTest):
    """Negative test: the scoreboard's model is off by one value, so the test must fail
    (an AssertionError in check_phase; cocotb then records it as passed). If it passed,
    the scoreboard would not be comparing that value."""

    count = 8

    def overrides(self, factory):
        factory.set_type_override_by_type(RdmaScoreboard, BrokenScoreboard)
