"""The Python side of :class:`rtl.sim.harness_top.HarnessTop`: bulk load, run, bulk read.

Nothing here awaits once per cycle: stimulus goes into the players' memories before
reset is released, the simulator then runs freely until every named recorder is done
(one trigger), and the results come out of the recorders' memories through VPI.
"""

from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_steps, get_sim_time

from tb.bulk_dump import snapshot, snapshot_words

__all__ = ["Harness", "HarnessTimeout", "load_memory", "load_image", "dump_memory"]

CLOCK_NS = 10


class HarnessTimeout(AssertionError):
    """The design did not finish within the cycle budget (a hang)."""


def load_memory(handle, values, start=0):
    """Write ``values`` into the Verilog memory ``handle`` from word ``start``."""
    values = list(values)
    if start + len(values) > len(handle):
        raise ValueError(f"{handle._path} holds {len(handle)} words; "
                         f"{start + len(values)} do not fit")
    for k, v in enumerate(values):
        handle[start + k].value = int(v)


def dump_memory(handle, count, start=0):
    """Read ``count`` words of the Verilog memory ``handle`` as integers.

    Reads each word's bit string through the GPI object under the cocotb handle (the
    pinned cocotb's ``_handle``), without making a cocotb handle and a ``LogicArray``
    per word: a 32,768-word host memory comes back in a third of the time. A word
    holding X or Z bits raises ``ValueError`` naming it, as ``int(handle[k].value)``
    does. A memory written to its file by :meth:`Harness.snapshot` at the current
    simulation time is read from that file instead (:mod:`tb.bulk_dump`)."""
    if start < 0 or start + count > len(handle):
        raise ValueError(f"{handle._path} holds {len(handle)} words; words {start} to "
                         f"{start + count - 1} asked")
    words = snapshot_words(handle, count, start)
    if words is not None:
        return words
    gpi, out = handle._handle, []
    for k in range(start, start + count):
        bits = gpi.get_handle_by_index(k).get_signal_val_binstr()
        try:
            out.append(int(bits, 2))
        except ValueError:
            raise ValueError(f"{handle._path}[{k}] holds {bits!r}, not a number") from None
    return out


class Harness:
    """Drive a HarnessTop: clock, reset, players, recorders."""

    def __init__(self, dut):
        self.dut = dut
        self._clock = None

    def port(self, name):
        return getattr(self.dut, name)

    def set(self, name, value):
        self.port(name).value = int(value)

    def load_player(self, name, items, stall=(1, 0), release=None):
        """Preload a player with flat ``items``, its ``(seed, rate)`` valid stalls and,
        for a timed player, the cycle from which each item may be offered."""
        load_memory(getattr(self.dut, name).items, items)
        if release is not None:
            load_memory(getattr(self.dut, name).release_at, release)
        self.set(f"{name}__count", len(items))
        self.set(f"{name}__stall_seed", stall[0])
        self.set(f"{name}__stall_rate", stall[1])

    def arm_recorder(self, name, expect, stall=(1, 0)):
        """Tell a recorder how many items to wait for and its ``(seed, rate)`` stalls."""
        self.set(f"{name}__expect", expect)
        self.set(f"{name}__stall_seed", stall[0])
        self.set(f"{name}__stall_rate", stall[1])

    async def reset(self, cycles=2):
        """Start the clock and hold reset; release it so that cycle 0 follows.

        Timing: ``rst`` is written high first; the clock (started once per harness,
        low, half a period before the next multiple of :data:`CLOCK_NS`) then gives
        ``cycles`` rising edges with ``rst`` high, each on the grid of multiples of
        :data:`CLOCK_NS`, in every test of a simulation; ``rst`` falls after the last,
        and the next rising edge is cycle 0. (Why the clock starts this way:
        docs/toolchain.md.)"""
        self.dut.rst.value = 1
        if self._clock is None:
            period = get_sim_steps(CLOCK_NS, "ns")
            wait = (period // 2 - get_sim_time("step")) % period
            if wait:
                await Timer(wait, "step")
            self._clock = Clock(self.dut.clk, CLOCK_NS, "ns", impl="gpi")
            self._clock.start(start_high=False)
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst.value = 0

    @property
    def started(self):
        """Whether :meth:`reset` has started the clock (the design has run before)."""
        return self._clock is not None

    async def hold_reset(self):
        """Put a design that has run back into reset, to load its next run.

        Timing: waits for the next rising clock edge (leaving a ``ReadOnly`` phase the
        last run ended in), writes ``rst`` high and returns after the rising edge that
        follows, the first with ``rst`` high: the design is then held in reset (nothing
        moves but the clock) until :meth:`reset` releases it, and the next run starts
        from reset as the first run of a simulation does."""
        if self._clock is None:
            raise RuntimeError("hold_reset: the clock has not started (call reset first)")
        await RisingEdge(self.dut.clk)
        self.dut.rst.value = 1
        await RisingEdge(self.dut.clk)

    async def wait_done(self, done_ports, timeout_cycles):
        """Let the simulator run until every port in ``done_ports`` reads 1.

        Returns the cycle count (``now``) when they were all seen high. Raises
        :class:`HarnessTimeout` (a hang) after ``timeout_cycles`` cycles.
        """
        period = get_sim_steps(CLOCK_NS, "ns")
        end = get_sim_time("step") + timeout_cycles * period
        await RisingEdge(self.dut.clk)
        for name in done_ports:
            port = self.port(name)
            while not int(port.value):
                left = end - get_sim_time("step")
                if left <= 0:
                    raise HarnessTimeout(f"{name} not done after {timeout_cycles} cycles")
                await First(RisingEdge(port), Timer(left, "step"))
        await ReadOnly()
        return int(self.dut.now.value)

    async def snapshot(self, memories=(), players=(), recorders=(), read_only=True):
        """Write ``memories`` (``(handle, words)`` pairs, words None for all), the stamps
        of ``players`` (``(name, count)`` pairs) and the items and stamps that the
        ``recorders`` (names) hold to files at the next falling clock edge, for
        :func:`dump_memory` to read at that simulation time
        (:func:`tb.bulk_dump.snapshot`; ``read_only`` as there). Ports and registers read
        the same before and after (the designs change only at rising edges)."""
        handles = list(memories)
        handles += [(getattr(self.dut, name).stamps, count) for name, count in players]
        for name in recorders:
            rec, n = getattr(self.dut, name), int(self.port(f"{name}__count").value)
            handles += [(rec.items, n), (rec.stamps, n)]
        await snapshot(self.dut, handles, read_only=read_only)

    def played_stamps(self, name, count):
        return dump_memory(getattr(self.dut, name).stamps, count)

    def recorded(self, name):
        """``(items, stamps)`` the recorder ``name`` holds."""
        n = int(self.port(f"{name}__count").value)
        rec = getattr(self.dut, name)
        return dump_memory(rec.items, n), dump_memory(rec.stamps, n)


def load_image(handle, words):
    """Write a ``{address: value}`` image into the Verilog memory ``handle`` (the rest
    keeps what it holds)."""
    for addr, value in sorted(words.items()):
        handle[addr].value = value
