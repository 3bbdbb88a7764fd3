"""The NIC agent: sequencer, driver and monitor. None of them touches a signal; they
call :class:`tb.nic.uvm.bench.NicBench` (found in the ConfigDB as ``NIC_BENCH``).

Driver: each :class:`StoreItem` goes to its source's ``StoreSource.send_nowait`` (and to
the driver's ``ap``); the :class:`NicRunItem` that ends a sequence makes the driver pick
the stall pattern of each player, turn every ``fcs`` item into a downlink beat number
for the fault injector of its destination, write the :class:`Stimulus` to ``ap`` and run
the bench. Monitor: waits for the bench's ``finished`` and writes everything the
recorders hold to its ``ap``.
"""

from pyuvm import ConfigDB, uvm_analysis_port, uvm_driver, uvm_monitor

from pymodel.nic.system import NicSystemModel
from tb.uvm_common import AgentBase

from .items import (
    CommandObs,
    FrameObs,
    NicRunItem,
    NodeObs,
    RunObs,
    Stimulus,
    StoreItem,
    UplinkObs,
    WriteObs,
)

__all__ = ["NicAgent", "NicDriver", "NicMonitor", "plan_faults"]


class _DownlinkTap(NicSystemModel):
    """The golden model, also keeping which message each downlink beat carries."""

    def __init__(self, *args):
        super().__init__(*args)
        self.downlink = {}

    def _receive(self, port, beats, *args, **kwargs):
        self.downlink[port] = [beat[4] for _, beat in beats]
        return super()._receive(port, beats, *args, **kwargs)


def plan_faults(cfg, items, stalls):
    """Downlink beat numbers that corrupt the frames of the ``fcs`` items.

    The fault injector of port ``p`` counts the beats of its downlink from reset, and
    which frame a beat belongs to depends on the switch's arbitration, so a planning run
    of the golden model without faults gives the order. A fault changes bytes, never
    timing, so the order holds with the faults in (and the scoreboard's own run, with
    the faults, is the oracle that checks the outcome).

    Returns ``(faults, targets, cycles)``: ``faults[p]`` increasing beat numbers,
    ``targets`` ``(item index, port, beat)`` per fault, ``cycles`` the planning run's
    length.
    """
    model = _DownlinkTap(cfg.width, cfg.framing, cfg.nodes, cfg.link_latency,
                         cfg.mem_words, cfg.max_payload, cfg.credits)
    stores = {p: [it.store() for it in items if it.src == p] for p in range(cfg.nodes)}
    want = model.run(stores, cfg.node_ids, stalls, window_writes=cfg.window_writes())
    mids, k = {}, 0                       # item index -> message ids (model's numbering)
    for p in range(cfg.nodes):
        for i, it in enumerate(items):
            if it.src == p:
                n = len(it.segments(cfg))
                mids[i] = list(range(k, k + n))
                k += n
    faults = {p: [] for p in range(cfg.nodes)}
    targets = []
    for i, it in enumerate(items):
        if it.error != "fcs":
            continue
        port = cfg.port_of(it.dst)
        seg = mids[i][it.fault_pick % len(mids[i])]
        where = [b for b, m in enumerate(model.downlink[port]) if m == seg]
        beat = where[(it.fault_pick // len(mids[i])) % len(where)]
        faults[port].append(beat)
        targets.append((i, port, beat))
    return {p: sorted(v) for p, v in faults.items()}, tuple(targets), want["cycles"]


class NicDriver(uvm_driver):
    """Queues store items in the bench's sources; runs the bench on a NicRunItem."""

    def build_phase(self):
        self.bench = ConfigDB().get(self, "", "NIC_BENCH")
        self.cfg = ConfigDB().get(self, "", "NIC_CFG")
        self.ap = uvm_analysis_port("ap", self)
        self.items = []

    async def run_phase(self):
        while True:
            item = await self.seq_item_port.get_next_item()
            if isinstance(item, NicRunItem):
                await self.launch()
            elif isinstance(item, StoreItem):
                self.queue(item)
            else:
                raise TypeError(f"{self.get_full_name()}: cannot drive {type(item)}")
            self.seq_item_port.item_done()

    def queue(self, item):
        if not 0 <= item.src < self.cfg.nodes:
            raise ValueError(f"{item}: source {item.src} is not a node")
        self.bench.sources[item.src].send_nowait(item.store())
        self.items.append(item)
        self.ap.write(item)

    def stalls(self):
        """One stall pattern per command player: the one its items carry."""
        out = {p: (1, 0) for p in range(self.cfg.nodes)}
        seen = {}
        for it in self.items:
            pat = (it.stall_seed, it.gap)
            if seen.setdefault(it.src, pat) != pat:
                raise ValueError(f"{it}: source {it.src} already runs the stall pattern "
                                 f"{seen[it.src]} (one pattern per player)")
            out[it.src] = pat
        return out

    async def launch(self):
        cfg = self.cfg
        stalls = self.stalls()
        faults, targets, cycles = plan_faults(cfg, self.items, stalls)
        self.ap.write(Stimulus(stalls, faults, cfg.node_ids, targets))
        self.logger.info("running %d stores (%d faults), about %d cycles",
                         len(self.items), len(targets), cycles)
        # The timeout only catches a hang; the drain bounds what is in flight once every
        # player is done: the frames' tails, every ingress buffer's credits worth of
        # beats through one egress, both links, the receiver's writer.
        drain = (cfg.nodes * (cfg.credits + 8) + 4 * cfg.link_latency
                 + 2 * -(-(cfg.max_payload + 32) // cfg.width) + 64)
        await self.bench.play(stalls, faults, cfg.node_ids, timeout_cycles=4 * cycles + 4000,
                              drain_cycles=drain, windows=cfg.window_writes())


class NicMonitor(uvm_monitor):
    """After the run, every observation of the recorders, on ``ap``."""

    def build_phase(self):
        self.bench = ConfigDB().get(self, "", "NIC_BENCH")
        self.cfg = ConfigDB().get(self, "", "NIC_CFG")
        self.ap = uvm_analysis_port("ap", self)

    async def run_phase(self):
        self.raise_objection()
        await self.bench.finished.wait()
        self.publish()
        self.drop_objection()

    def publish(self):
        b = self.bench
        for p in range(self.cfg.nodes):
            for k, stamps in enumerate(b.command_stamps(p)):
                self.ap.write(CommandObs(p, k, tuple(stamps)))
            beats, stamps = b.uplink_beats(p)
            self.ap.write(UplinkObs(p, tuple(beats), tuple(stamps)))
            link = b.links[p]
            while not link.empty():
                f = link.recv_nowait()
                self.ap.write(FrameObs(p, f.data, f.start, f.end))
            for addr, be, cyc in b.writes(p):
                self.ap.write(WriteObs(p, addr, be, cyc))
            self.ap.write(NodeObs(p, b.counters(p), tuple(b.credit_stamps(p)),
                                  tuple(b.memory(p))))
        self.ap.write(RunObs(b.end, b.hang, b.credit_errors(), tuple(b.overflows())))


class NicAgent(AgentBase):
    """Sequencer ``seqr`` + driver ``driver`` (active) and monitor ``monitor``."""

    DRIVER = NicDriver
    MONITOR = NicMonitor
