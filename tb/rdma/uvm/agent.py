"""The RDMA agent: sequencer, driver and monitor. None of them touches a signal; they
call :class:`tb.rdma.uvm.bench.RdmaBench` (found in the ConfigDB as ``RDMA_BENCH``).

Driver: queues each :class:`WriteItem` (and writes it to ``ap``); the
:class:`RdmaRunItem` that ends a sequence makes it plan the runs
(:func:`tb.rdma.uvm.plan.plan_runs`: host images, MR table, MMIO writes, injected frames
with their bad copies, run-time ports), write each :class:`RunPlan` to ``ap`` and run
them on the bench one after the other. Monitor: waits for the bench's ``finished`` and
writes one :class:`RunObs` per run to its ``ap``.
"""

from pyuvm import ConfigDB, uvm_analysis_port, uvm_driver, uvm_monitor

from spec.rdma import LINKS
from tb.uvm_common import AgentBase

from .items import ACCESS_KINDS, RdmaRunItem, RunObs, WriteItem
from .plan import plan_runs

__all__ = ["RdmaAgent", "RdmaDriver", "RdmaMonitor", "SETTLE", "expected_marks",
           "settle_cycles"]

#: Cycles the design keeps running after the model's last event, to catch extras.
SETTLE = 150


def expected_marks(plan, items):
    """What the run must reach before it settles, from the items' intent: a
    ``completed`` mark per CQE (signalled or failed WQEs of a posted run) and a
    ``written`` mark per message that lands (every item but an access error)."""
    mine = [items[k] for k in plan.items]
    cqes = sum(it.cqe() for it in mine) if plan.kind == "posted" else 0
    return {"completed": cqes, "written": sum(it.error not in ACCESS_KINDS for it in mine)}


def settle_cycles(want, expect, injected):
    """Cycles to run on once the run's ``done`` ports are high (the players empty, the
    ``expect`` marks recorded): :data:`SETTLE` after the last event of the model's run
    ``want`` (NAKs of an access error's later frames, for one, come after its CQE)."""
    ends = [c[-1] for c, _ in want["wire_ab"]] if injected else want["mmio_stamps"]
    done = max([want[name][n - 1][0] if n <= len(want[name]) else want["cycles"]
                for name, n in expect.items() if n] + ends[-1:] + [0])
    last = max([c for c, _ in want["written"] + want["completed"]] + want["mmio_stamps"]
               + [c[-1] for c, _ in want["wire_ab"] + want["wire_ba"]] + [0])
    return SETTLE + max(0, last - done)


class RdmaDriver(uvm_driver):
    """Queues work requests; plans and runs them on an RdmaRunItem."""

    def build_phase(self):
        self.bench = ConfigDB().get(self, "", "RDMA_BENCH")
        self.cfg = ConfigDB().get(self, "", "RDMA_CFG")
        self.ap = uvm_analysis_port("ap", self)
        self.items = []

    async def run_phase(self):
        while True:
            item = await self.seq_item_port.get_next_item()
            if isinstance(item, RdmaRunItem):
                await self.launch(item)
            elif isinstance(item, WriteItem):
                self.items.append(item)
                self.ap.write(item)
            else:
                raise TypeError(f"{self.get_full_name()}: cannot drive {type(item)}")
            self.seq_item_port.item_done()

    async def launch(self, run):
        for plan in plan_runs(self.cfg, self.items, run.bad_qpn, run.qps, run.knobs):
            self.ap.write(plan)
            # The timeout only catches a hang: four times the model's run, plus slack.
            want = plan.model()
            self.logger.info("%s run: %d items, %d MMIO writes, %d injected frames, %s, "
                             "about %d cycles", plan.kind, len(plan.items),
                             len(plan.announcements), len(plan.inject), plan.knobs,
                             want["cycles"])
            eng = plan.engine
            ports = dict(qpc_base_a=eng.qpc_base_a, qpc_base_b=eng.qpc_base_b,
                         cq_base=eng.cq_base, cq_log2=eng.cq_log2, ack_timeout=eng.timeout,
                         qpc_log2=eng.qpc_log2,
                         **plan.knobs.ports())
            links = {link: getattr(eng, f"faults_{link}") for link in LINKS}
            expect = expected_marks(plan, self.items)
            await self.bench.play(
                mem_a=plan.mem_a, mem_b=plan.mem_b, mr_table=plan.mr_table, mmio=plan.mmio,
                release=plan.release, inject=plan.inject,
                inject_stall=plan.knobs.inject_stall, ports=ports, links=links,
                expect=expect, timeout_cycles=4 * want["cycles"] + 5000,
                settle_cycles=settle_cycles(want, expect, bool(plan.inject)))
        b = self.bench.seconds
        self.logger.info("bench time: load %.1f s, simulate %.1f s, read back %.1f s",
                         b["load"], b["run"], b["read"])
        self.bench.finish()


class RdmaMonitor(uvm_monitor):
    """After the runs, one :class:`RunObs` per run, on ``ap``."""

    def build_phase(self):
        self.bench = ConfigDB().get(self, "", "RDMA_BENCH")
        self.ap = uvm_analysis_port("ap", self)

    async def run_phase(self):
        self.raise_objection()
        await self.bench.finished.wait()
        for k, r in enumerate(self.bench.results):
            self.ap.write(RunObs(
                index=k, kind=r["kind"],
                ab=(tuple(r["ab"][0]), tuple(r["ab"][1])),
                ba=(tuple(r["ba"][0]), tuple(r["ba"][1])),
                written=(tuple(r["written"][0]), tuple(r["written"][1])),
                completed=(tuple(r["completed"][0]), tuple(r["completed"][1])),
                mmio=tuple(r["mmio"]), counters=r["counters"],
                mem_a=tuple(r["mem_a"]), mem_b=tuple(r["mem_b"]), end=r["end"],
                hang=r["hang"], overflows=tuple(r["overflows"])))
        self.drop_objection()


class RdmaAgent(AgentBase):
    """Sequencer ``seqr`` + driver ``driver`` (active) and monitor ``monitor``."""

    DRIVER = RdmaDriver
    MONITOR = RdmaMonitor
