"""The RDMA agent: sequencer, driver and monitor. None of them touches a signal; they
call :class:`tb.rdma.uvm.bench.RdmaBench` (found in the ConfigDB as ``RDMA_BENCH``).

Driver: queues each :class:`WriteItem` (and writes it to ``ap``); the
:class:`RdmaRunItem` that ends a sequence makes it plan the runs
(:func:`tb.rdma.uvm.plan.plan_runs`: host images, MR table, doorbells, injected frames
with their bad copies), write each :class:`RunPlan` to ``ap`` and run them on the bench
one after the other. Monitor: waits for the bench's ``finished`` and writes one
:class:`RunObs` per run to its ``ap``.
"""

from pyuvm import ConfigDB, uvm_agent, uvm_analysis_port, uvm_driver, uvm_monitor, uvm_sequencer

from spec.rdma import LINKS

from .items import RdmaRunItem, RunObs, WriteItem
from .plan import plan_runs

__all__ = ["RdmaAgent", "RdmaDriver", "RdmaMonitor", "SETTLE", "drain"]

#: Cycles the design keeps running after the last expected event, to catch extras (the
#: ACK of the last frame is at most two link latencies and a few states away).
SETTLE = 300


def drain(cfg, plan):
    """Cycles the responder may still need once the last injected beat is in: every
    queued frame's context miss (``1 + L``, and a write-back in the same cycle), its
    payload words and its few states (the doorbell run ends on its last CQE instead)."""
    if not plan.inject:
        return 0
    return sum(cfg.mem_latency + 12 + -(-len(f) // 64) for f in plan.inject) \
        + 4 * cfg.link_latency


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
                await self.launch(item.bad_qpn, item.qps)
            elif isinstance(item, WriteItem):
                self.items.append(item)
                self.ap.write(item)
            else:
                raise TypeError(f"{self.get_full_name()}: cannot drive {type(item)}")
            self.seq_item_port.item_done()

    async def launch(self, bad_qpn, qps):
        cfg = self.cfg
        for plan in plan_runs(cfg, self.items, bad_qpn, qps):
            self.ap.write(plan)
            # The timeout only catches a hang: four times the model's run, plus slack.
            want = plan.model()
            last = max([c[-1] for c, _ in want["wire_ab"] + want["wire_ba"]] + [0])
            self.logger.info("%s run: %d items, %d doorbells, %d injected frames, about "
                             "%d cycles", plan.kind, len(plan.items), len(plan.doorbells),
                             len(plan.inject), last)
            ports = {p: getattr(plan.engine, p) for p in ("qpc_base_a", "qpc_base_b",
                                                          "cq_base", "cq_log2")}
            for link in LINKS:                # fault-free links (the model's defaults)
                settings = getattr(plan.engine, f"faults_{link}")
                ports.update({f"{link}_{n}": v for n, v in settings.ports().items()})
            await self.bench.play(
                mem_a=plan.mem_a, mem_b=plan.mem_b, mr_table=plan.mr_table, ports=ports,
                doorbells=plan.doorbells, inject=plan.inject, stall=plan.stall,
                expect_cqes=len(plan.items) if plan.kind == "doorbell" else 0,
                timeout_cycles=4 * last + 4000, settle_cycles=SETTLE + drain(cfg, plan))
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
                doorbells=tuple(r["doorbells"]), req=dict(r["req"]), resp=dict(r["resp"]),
                links=dict(r["links"]),
                mem_a=tuple(r["mem_a"]), mem_b=tuple(r["mem_b"]), end=r["end"],
                hang=r["hang"], overflows=tuple(r["overflows"])))
        self.drop_objection()


class RdmaAgent(uvm_agent):
    """Sequencer ``seqr`` + driver ``driver`` (active) and monitor ``monitor``."""

    def build_phase(self):
        super().build_phase()
        self.monitor = RdmaMonitor.create("monitor", self)
        if self.active():
            self.seqr = uvm_sequencer("seqr", self)
            self.driver = RdmaDriver.create("driver", self)

    def connect_phase(self):
        if self.active():
            self.driver.seq_item_port.connect(self.seqr.seq_item_export)
