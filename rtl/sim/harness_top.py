"""Base class for co-simulation tops: cycle counter, stimulus players, result recorders."""

from amaranth import ClockDomain, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.sim.stream_player import StreamPlayer
from rtl.sim.stream_recorder import StreamRecorder
from spec.ports import (
    PlayerControlSignature,
    PortView,
    RecorderControlSignature,
    ports_by_name,
)

__all__ = ["HarnessTop"]


def _replace(obj, path, value):
    """Put ``value`` at ``path`` (a port's path in a signature's ``flatten``: member
    names, and indices into arrays) of interface ``obj``."""
    for step in path[:-1]:
        obj = obj[step] if isinstance(step, int) else getattr(obj, step)
    if isinstance(path[-1], int):
        obj[path[-1]] = value
    else:
        setattr(obj, path[-1], value)


class HarnessTop(wiring.Component):
    """A top whose only boundary to Python is configuration ports and bulk memories.

    Parameters
    ----------
    players : dict
        ``name -> (shape, depth)`` or ``(shape, depth, timed)``: a :class:`StreamPlayer`
        instance ``name`` (with a ``release_at`` memory if ``timed``) whose ``count``,
        ``stall_seed``, ``stall_rate`` and ``done`` are the top port ``name``, an
        ``In(PlayerControlSignature(depth))`` (:class:`spec.ports.PlayerControlSignature`;
        in Verilog ``name__count``, ``name__stall_seed``, ``name__stall_rate``,
        ``name__done``).
    recorders : dict
        ``name -> (shape, depth)``: a :class:`StreamRecorder` instance ``name`` whose
        ``expect``, ``stall_seed``, ``stall_rate`` (in) and ``count``, ``done``,
        ``overflow`` (out) are the top port ``name``, an
        ``In(RecorderControlSignature(depth))``
        (:class:`spec.ports.RecorderControlSignature`; in Verilog ``name__expect`` and so
        on).
    ports : dict
        Further top ports of the design, as for ``wiring.Component``.

    Subclasses implement :meth:`elaborate_design`, which wires the design to
    ``self.player_streams[name]`` (an ``Out`` stream) and ``self.recorder_streams[name]``
    (an ``In`` stream). ``now`` counts cycles from 0 in the first cycle after reset.

    Static ports: every ``In`` port (configuration, counts, seeds; the ``In`` members of
    a port of a signature, such as a link's settings, too) is set before reset
    and held through the run, so the design sees it through a register without reset,
    loaded every cycle (also during reset): the value set before reset, one cycle later.
    While :meth:`elaborate_design` runs, ``self.<port>`` is that register. This is for
    simulation speed, not behaviour: Verilator re-evaluates all logic that depends
    combinationally on a top input at every change of any input (the clock's too),
    which made that logic (most of RdmaTop's) run twice a cycle. A subclass names in
    ``LIVE_PORTS`` any ``In`` port that changes during a run; those stay direct.

    Reset: the ``sync`` domain's reset is the ``rst`` port through a register (reset
    asserts and releases one cycle after the port does), for the same reason: a reset
    taken straight from a top input made every register's next-state logic depend on
    an input. ``clk`` and ``rst`` are ordinary ports of the signature.
    """

    #: ``In`` ports that may change while the design runs (not registered).
    LIVE_PORTS = ("clk", "rst")

    def __init__(self, players=None, recorders=None, ports=None):
        self._players = dict(players or {})
        self._recorders = dict(recorders or {})
        sig = {"clk": In(1), "rst": In(1), "now": Out(32)}
        for name, (_, depth, *_) in self._players.items():
            sig[name] = In(PlayerControlSignature(depth))
        for name, (_, depth) in self._recorders.items():
            sig[name] = In(RecorderControlSignature(depth))
        sig.update(ports or {})
        super().__init__(sig)

    def elaborate_design(self, m, players, recorders):
        """Wire the design under test. ``players``/``recorders`` map names to instances."""
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain("sync")
        rst_held = Signal(init=1, reset_less=True)
        m.d.comb += [cd.clk.eq(self.clk), cd.rst.eq(rst_held)]
        m.d.sync += rst_held.eq(self.rst)
        m.d.sync += self.now.eq(self.now + 1)
        swapped = []
        for path, member, port in self.signature.flatten(self):
            if member.flow == In and path[0] not in self.LIVE_PORTS:
                held = Signal.like(port, name="__".join(map(str, path)) + "_held",
                                   reset_less=True)
                m.d.sync += held.eq(port)
                swapped.append((path, port, held))
        for path, _, held in swapped:
            _replace(self, path, held)
        try:
            self._elaborate_parts(m)
        finally:
            for path, port, _ in swapped:
                _replace(self, path, port)
        return m

    def _elaborate_parts(self, m):
        # The control ports are read through the signature (ports_by_name), so that the
        # registers swapped in for their ``In`` members are what the blocks see.
        players, recorders = {}, {}
        for name, (shape, depth, *opts) in self._players.items():
            p = players[name] = StreamPlayer(shape, depth, timed=bool(opts and opts[0]))
            m.submodules[name] = p
            sig = PlayerControlSignature(depth)
            wiring.connect(m, PortView(sig, ports_by_name(self, name)), PortView(sig.flip(), p))
            m.d.comb += p.now.eq(self.now)
        for name, (shape, depth) in self._recorders.items():
            r = recorders[name] = StreamRecorder(shape, depth)
            m.submodules[name] = r
            sig = RecorderControlSignature(depth)
            wiring.connect(m, PortView(sig, ports_by_name(self, name)), PortView(sig.flip(), r))
            m.d.comb += r.now.eq(self.now)
        self.elaborate_design(m, players, recorders)

