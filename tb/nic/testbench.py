"""The testbench of :class:`rtl.tops.nic_top.NicTop`: one class for every bench of the top.

:class:`NicTestbench` owns the :class:`tb.harness.Harness` (clock, reset, players,
recorders) and the bus models of :mod:`tb.nic.store_driver` (one :class:`StoreSource` per
node on ``cmd<p>``, one :class:`FrameMonitor` per uplink on ``tx<p>``), and does the four
steps of a run::

    load(stores, ...)  -->  arm(want)  -->  await run(...)  -->  compare(sb, want)
    (players, node ids,     (recorder      (reset, one wait     (every beat, stamp,
     tables, fault           depths)        on the done          write, credit,
     settings, memories)                    ports, settle)       counter, memory)

The plain and retry cocotb tests (:mod:`tb.nic.cocotb_nic`, :mod:`tb.nic.cocotb_nic_retry`),
the soak (:mod:`tb.soak.cocotb_nic_soak`) and the pyuvm bench (:mod:`tb.nic.uvm.bench`)
all drive the top through it. Nothing is awaited per cycle: the stimulus is in the
players before reset and the results come out of the recorders, counters and memories in
bulk after the run.
"""

from cocotb.triggers import ClockCycles

from rtl.fabric.switch import source_write_layout, table_write_layout
from rtl.nic.window_table import window_write_layout
from rtl.tops.nic_top import write_event_layout
from spec.fabric import COUNTER_PORTS, check_source_write, check_switch_drops, switch_counters
from spec.formats.nic import ID_BITS
from spec.host import HOST_COUNTERS
from spec.nic import COUNTERS
from tb.harness import Harness, HarnessTimeout, dump_memory, load_memory
from tb.nic.store_driver import FrameMonitor, StoreSource

__all__ = ["NicTestbench", "RECORDERS"]

#: The per-node recorders: uplink beats, local-memory writes, credits back at the sender.
RECORDERS = ("tx", "wr", "cr")


class NicTestbench:
    """Load, arm, run and compare one NicTop co-simulation.

    Parameters
    ----------
    dut : cocotb handle
        The top.
    nodes, width, mem_words : int
        The top's parameters.

    Attributes
    ----------
    harness : Harness
        Clock, reset and bulk access to players and recorders.
    sources : list of StoreSource
        Command players; :meth:`load` queues and loads the stores.
    links : list of FrameMonitor
        Uplink recorders; read frames after the run.
    end, hang : int, str or None
        ``now`` when :meth:`run` returned; the timeout message if the done ports did not
        all rise in time (the results are still read: they show the cause).
    """

    def __init__(self, dut, nodes, width, mem_words, destinations=None, switch_faults=False):
        self.dut, self.nodes, self.width, self.mem_words = dut, nodes, width, mem_words
        self.switch_faults = switch_faults     # a top built with ``switch_faults``
        self.harness = Harness(dut)
        # A top with ``destinations``: 16-bit ids, switch tables of 2 x destinations.
        self.id_bits = 8 if destinations is None else ID_BITS
        self.entries = 256 if destinations is None else 2 * destinations
        self.sources = [StoreSource(self.harness, f"cmd{p}", width, id_bits=self.id_bits)
                        for p in range(nodes)]
        self.links = [FrameMonitor(self.harness, f"tx{p}", width) for p in range(nodes)]
        self.end = self.hang = None
        self._wr = write_event_layout(mem_words)
        self._win = window_write_layout(mem_words)
        self._tbl = table_write_layout(nodes, self.id_bits)
        self._src = source_write_layout(nodes, self.id_bits)

    # -- load, arm, run ----------------------------------------------------------------------
    def load(self, stores, node_ids, *, stalls=None, faults=None, table=(), windows=None,
             link_settings=None, clear_memories=False, sources=(), switch_drops=None):
        """Put a run's stimulus into the design (before :meth:`run`).

        ``stores[p]``: the :class:`pymodel.nic.system.Store` list of node ``p`` (queued on
        its source after any queued there before; a source loaded by an earlier run is
        replaced by a fresh one, and so is the uplink monitor); ``node_ids[p]``: its node id;
        ``stalls[p]``: the ``(seed, rate)`` of its command player; ``faults[p]``: downlink
        beat numbers of port ``p`` to corrupt; ``table``: switch-table writes ``(node,
        port)``; ``sources``: the switch's source-table writes ``(node, port)`` (``port``
        = nodes: any port); ``windows[p]``: window-table writes ``(src, base, size)`` (words) of
        node ``p``'s receiver; ``link_settings``: a
        :class:`pymodel.fabric.faulty_link.FaultSettings` for the wires of a top built
        with ``retry``; ``clear_memories``: zero the local memories first (several runs
        in one simulation); ``switch_drops[p]``: egress ``p``'s frame numbers to drop
        inside the switch (a top built with ``switch_faults``;
        :func:`spec.fabric.check_switch_drops`). Every player is loaded, empty if it has
        nothing to play.
        """
        h, stalls, faults, windows = self.harness, stalls or {}, faults or {}, windows or {}
        if switch_drops and not self.switch_faults:
            raise ValueError("switch_drops: the top needs switch_faults")
        drops = check_switch_drops(switch_drops or {}, self.nodes)
        h.load_player("tbl", [self._tbl.const({"node": n, "port": o}).as_bits()
                              for n, o in table])
        checked = [check_source_write(self.nodes, n, o, entries=self.entries)
                   for n, o in sources]
        h.load_player("src", [self._src.const({"node": n, "port": o}).as_bits()
                              for n, o in checked])
        if link_settings is not None:
            for name, value in {**link_settings.ports(),
                                **link_settings.retry_ports()}.items():
                h.set(f"flt__{name}", value)
        for p in range(self.nodes):
            if self.sources[p].loaded:         # a later run: fresh players, fresh models
                self.sources[p] = StoreSource(h, f"cmd{p}", self.width,
                                              id_bits=self.id_bits)
                self.links[p] = FrameMonitor(h, f"tx{p}", self.width)
            src = self.sources[p]
            src.stall = tuple(stalls.get(p, (1, 0)))
            for s in stores.get(p, ()):
                src.send_nowait(s)
            src.load()
            h.load_player(f"flt{p}", list(faults.get(p, ())))
            if self.switch_faults:
                h.load_player(f"sflt{p}", list(drops.get(p, ())))
            h.load_player(f"win{p}", [self._win.const({"src": s, "base": b, "size": z})
                                      .as_bits() for s, b, z in windows.get(p, ())])
            h.set(f"node_id__{p}", node_ids[p])
            if clear_memories:
                load_memory(getattr(self.dut, f"mem{p}").mem, [0] * self.mem_words)

    def arm(self, want=None):
        """Tell the recorders how many items to wait for: those the model ``want`` (the
        dict of :meth:`pymodel.nic.system.NicSystemModel.run`) predicts, or none (their
        ``done`` is then high from the start and they record whatever comes)."""
        for p in range(self.nodes):
            if want is None:
                counts = dict.fromkeys(RECORDERS, 0)
            else:
                counts = {"tx": len(want["tx"][p][0]), "wr": len(want["wr"][p][0]),
                          "cr": len(want["cr"][p])}
            self.links[p].arm(counts["tx"])
            self.harness.arm_recorder(f"wr{p}", counts["wr"])
            self.harness.arm_recorder(f"cr{p}", counts["cr"])

    def done_ports(self, kinds=("tx", "wr", "cr", "cmd")):
        """The ``done`` ports of every node's players and recorders of ``kinds``."""
        return [f"{kind}{p}__done" for p in range(self.nodes) for kind in kinds]

    async def run(self, timeout_cycles, *, done=None, until=0, drain=0):
        """Reset, then let the simulator run until every port of ``done`` (default: all of
        :meth:`done_ports`) reads 1, then on to cycle ``until`` at least, then ``drain``
        cycles more. Returns the cycle the done ports were all seen (``now`` at a
        timeout, which is kept in :attr:`hang`). The memories, command stamps and
        recorders are then written to files half a cycle later
        (:meth:`tb.harness.Harness.snapshot`), from which the results below read them."""
        await self.harness.reset()
        self.hang = None
        try:
            done_at = await self.harness.wait_done(
                self.done_ports() if done is None else done, timeout_cycles=timeout_cycles)
        except HarnessTimeout as exc:
            self.hang, done_at = str(exc), int(self.dut.now.value)
        if done_at < until:
            await ClockCycles(self.dut.clk, until - done_at)
        if drain:
            await ClockCycles(self.dut.clk, drain)
        self.end = int(self.dut.now.value)
        h = self.harness
        await h.snapshot([(getattr(self.dut, f"mem{p}").mem, self.mem_words)
                          for p in range(self.nodes)],
                         players=[(f"cmd{p}", int(h.port(f"cmd{p}__count").value))
                                  for p in range(self.nodes)],
                         recorders=[f"{k}{p}" for p in range(self.nodes)
                                    for k in RECORDERS], read_only=False)
        return done_at

    # -- results, valid after the run --------------------------------------------------------
    def capacity(self):
        """Depths of the command players, recorders and fault players (the smallest over
        the nodes), read from the design's memories."""
        d = self.dut
        return {
            "cmd_depth": min(len(getattr(d, f"cmd{p}").items) for p in range(self.nodes)),
            "event_depth": min(len(getattr(d, f"{k}{p}").items) for p in range(self.nodes)
                               for k in RECORDERS),
            "fault_depth": min(len(getattr(d, f"flt{p}").items) for p in range(self.nodes)),
        }

    def command_stamps(self, p):
        """The accept cycle of every command beat of each store node ``p`` issued (one
        list per store, in order; ``StoreSource.stamps`` gives the first and last)."""
        src = self.sources[p]
        beats, out, k = src.beat_stamps(), [], 0
        for s in src.stores:
            n = len(s.beats(self.width))
            out.append(beats[k:k + n])
            k += n
        return out

    def uplink_beats(self, p):
        """``(raw beats, cycles)`` the uplink recorder of node ``p`` saw."""
        return self.links[p].beats()

    def write_events(self, p):
        """``(raw write events, cycles)`` of node ``p``'s local-memory recorder."""
        return self.harness.recorded(f"wr{p}")

    def writes(self, p):
        """``(word address, byte enables, cycle)`` of every local-memory write of node p."""
        out = []
        for raw, cyc in zip(*self.write_events(p), strict=True):
            ev = self._wr.from_bits(raw)
            out.append((int(ev.addr), int(ev.be), cyc))
        return out

    def write_event(self, addr, be):
        """The raw recorder item of a write (to compare with :meth:`write_events`)."""
        return self._wr.const({"addr": addr, "be": be}).as_bits()

    def credit_stamps(self, p):
        """Cycles in which a credit reached sender ``p``."""
        return self.harness.recorded(f"cr{p}")[1]

    def counters(self, p):
        """Node ``p``'s receive counters (:data:`spec.nic.COUNTERS`)."""
        return {c: int(getattr(self.dut, f"rx__{p}__{c}").value) for c in COUNTERS}

    def link_counters(self, p):
        """``{"up<p>": ..., "down<p>": ...}``: the counters of node ``p``'s reliable links
        (:data:`spec.fabric.COUNTER_PORTS`; a top built with ``retry``). In Verilog,
        ``tx_frames`` of port ``up[p]`` is ``up__<p>__tx__frames``."""
        return {f"{side}{p}": {n: int(getattr(self.dut, f"{side}__{p}__"
                                              + n.replace("_", "__", 1)).value)
                               for n in COUNTER_PORTS} for side in ("up", "down")}

    def host_counters(self, p):
        """Node ``p``'s host-interface counters (a top built with ``attachment="pcie"``;
        :data:`spec.host.HOST_COUNTERS`)."""
        return {n: int(getattr(self.dut, f"hi__{p}__{n}").value) for n in HOST_COUNTERS}

    def memory(self, p):
        """Node ``p``'s whole local memory (words)."""
        return dump_memory(getattr(self.dut, f"mem{p}").mem, self.mem_words)

    def switch_counters(self):
        """The switch's counters (:func:`spec.fabric.switch_counters`: with
        ``switch_faults`` also ``drop_fault``)."""
        return {n: int(getattr(self.dut, f"switch_counters__{n}").value)
                for n in switch_counters(self.switch_faults)}

    def credit_errors(self):
        return int(self.dut.credit_errors.value)

    def overflows(self):
        """Recorders that had more items than room (their extra items are lost)."""
        return [f"{k}{p}" for p in range(self.nodes) for k in RECORDERS
                if int(self.harness.port(f"{k}{p}__overflow").value)]

    # -- compare -----------------------------------------------------------------------------
    def compare(self, sb, want, *, links=False):
        """Compare the run with the model's ``want`` on ``sb`` (a
        :class:`tb.scoreboard.Scoreboard`): every uplink beat and its cycle, every command
        accept cycle, every local-memory write and its cycle, every credit arrival, each
        node's counters (and, with ``links``, its reliable links' counters; with a
        ``pcie`` attachment, its host interface's counters) and whole memory; the
        switch's counters; no hang;
        the credit-error flag.

        Returns ``{p: {"cmd", "wr", "cr", "mem", "starts"}}``: the RTL's command beat
        stamps, write stamps, credit stamps, memory words and each store's first command
        beat cycle, for the caller's own checks and figures.
        """
        got = {}
        for q in range(self.nodes):
            tx_items, tx_stamps = self.uplink_beats(q)
            sb.compare(f"tx{q} beats", tx_items, want["tx"][q][0])
            sb.compare(f"tx{q} cycles", tx_stamps, want["tx"][q][1], fmt=str)
            cmd_stamps = self.sources[q].beat_stamps()
            sb.compare(f"cmd{q} accept cycles", cmd_stamps, want["cmd_stamps"][q], fmt=str)
            wr_items, wr_stamps = self.write_events(q)
            sb.compare(f"wr{q} writes", wr_items,
                       [self.write_event(a, b) for a, b in want["wr"][q][0]])
            sb.compare(f"wr{q} cycles", wr_stamps, want["wr"][q][1], fmt=str)
            cr_stamps = self.credit_stamps(q)
            sb.compare(f"cr{q} credit cycles", cr_stamps, want["cr"][q], fmt=str)
            counters = self.counters(q)
            for c in COUNTERS:
                sb.equal(f"{c}{q}", counters[c], want["counters"][q][c])
            if links:
                for key, values in self.link_counters(q).items():
                    for name in COUNTER_PORTS:
                        sb.equal(f"{key}_{name}", values[name], want["links"][key][name])
            for name, value in want.get("host", {}).get(q, {}).items():
                sb.equal(f"hi{q}_{name}", self.host_counters(q)[name], value)
            mem = self.memory(q)
            sb.compare(f"mem{q}", mem, want["mem"][q])
            got[q] = {"cmd": cmd_stamps, "wr": wr_stamps, "cr": cr_stamps, "mem": mem,
                      "starts": [a for a, _ in self.sources[q].stamps()]}
        for name, value in self.switch_counters().items():
            sb.equal(f"switch {name}", value, want["switch"][name])
        sb.equal("hang", self.hang, None)
        sb.equal("credit errors", self.credit_errors(), int(want["credit_errors"]))
        return got
