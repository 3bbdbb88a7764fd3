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
