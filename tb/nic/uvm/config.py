"""What every component of the NIC environment needs to know about the top and the run."""

import dataclasses
import zlib

from pymodel.nic.system import NicSystemModel

__all__ = ["NicConfig"]


@dataclasses.dataclass(frozen=True)
class NicConfig:
    """The top's parameters (as ``run_cosim`` passed them), the capacities read from the
    design, and the run's seed.

    ``cmd_depth``, ``event_depth`` and ``fault_depth`` are the depths of the command
    players, of the recorders and of the fault players: the bench reads them from the
    design (``len`` of the Verilog memories), so they are never restated here.

    ``windowed``: whether the receivers' per-source windows are the restricted pattern
    of :meth:`windows` (else every source may write the whole memory). Every run writes
    all ``nodes x nodes`` entries, so that the table (a memory, kept across resets)
    never carries one test's windows into the next.
    """

    width: int
    nodes: int
    framing: str
    link_latency: int
    mem_words: int
    max_payload: int
    credits: int
    seed: int = 1
    count: int = 40
    cmd_depth: int = 0
    event_depth: int = 0
    fault_depth: int = 0
    windowed: bool = True

    @classmethod
    def from_params(cls, params, **capacity):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names}, **capacity)

    @property
    def window(self):
        """Bytes of each node's local memory: the addresses a store may reach."""
        return self.mem_words * self.width

    @property
    def node_ids(self):
        """Node id of each port (the reset switch table routes id ``n`` to ``n mod N``,
        so identity ids need no table write)."""
        return tuple(range(self.nodes))

    def windows(self):
        """``{(port, src node id): (base, size)}`` in words, for every port and node.

        Windowed: with ``k = (src port - port) mod nodes`` and ``M`` = ``mem_words``,
        ``k % 4`` = 0 (loopback): ``[0, 7M/8)``; 1: ``[M/8, M)`` (to the memory's end);
        2: ``[M/4, 3M/4)``; 3: ``[0, M/2)``. Each is a proper, non-empty part of the
        memory, so every route can carry both a good store and an unauthorised one.
        """
        m, n = self.mem_words, self.nodes
        pattern = ((0, m - m // 8), (m // 8, m - m // 8), (m // 4, m // 2), (0, m // 2))
        return {(d, self.node_ids[s]): pattern[(s - d) % n % 4] if self.windowed else (0, m)
                for d in range(n) for s in range(n)}

    def window_writes(self):
        """The ``win<p>`` players' items ``{port: [(src, base, size)]}`` (words)."""
        out = {d: [] for d in range(self.nodes)}
        for (d, src), (base, size) in self.windows().items():
            out[d].append((src, base, size))
        return out

    def inside(self, port, src, addr, length):
        """Whether the bytes ``[addr, addr + length)`` are inside the window of source
        node ``src`` at ``port`` (the power-up window, the whole memory, for a node id
        no node has)."""
        base, size = self.windows().get((port, src), (0, self.mem_words))
        return base * self.width <= addr and addr + length <= (base + size) * self.width

    def port_of(self, node):
        """The switch port a frame for node id ``node`` leaves by (the reset table)."""
        return node % self.nodes

    def test_seed(self, test_name):
        """The seed of one test: the run's seed mixed with the test's name, so that the
        tests of one run draw different traffic and each is reproducible alone."""
        return (self.seed * 1_000_003 + zlib.crc32(test_name.encode())) % (1 << 32)

    def model(self):
        return NicSystemModel(self.width, self.framing, self.nodes, self.link_latency,
                              self.mem_words, self.max_payload, self.credits)
