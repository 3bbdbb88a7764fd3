"""What every component of the RDMA environment needs to know about the top and the run."""

import dataclasses
import zlib

from pymodel.rdma.engine import Config
from spec.rdma import DEFAULTS

__all__ = ["RdmaConfig"]


@dataclasses.dataclass(frozen=True)
class RdmaConfig:
    """The top's parameters (:data:`spec.rdma.DEFAULTS` overridden by the ones
    ``run_cosim`` passed), the capacities read from the design, and the run's seed.

    ``doorbell_depth``, ``inject_depth`` (beats), ``wire_depth`` (beats per link recorder)
    and ``event_depth`` (``written``/``completed`` recorders) are read by the bench from
    the design (``len`` of the Verilog memories), never restated here. ``top`` keeps every
    parameter of the top (the defaults and the given ones), so that :meth:`engine` passes
    the model whatever it takes (the transport timeout, for one).
    """

    cache_entries: int = DEFAULTS["cache_entries"]
    depth: int = DEFAULTS["depth"]
    mem_latency: int = DEFAULTS["mem_latency"]
    link_latency: int = DEFAULTS["link_latency"]
    mr_entries: int = DEFAULTS["mr_entries"]
    seed: int = 1
    count: int = 20
    doorbell_depth: int = DEFAULTS["doorbells"]
    inject_depth: int = DEFAULTS["inject"]
    wire_depth: int = DEFAULTS["wire_beats"]
    event_depth: int = DEFAULTS["events"]
    top: tuple = ()

    @classmethod
    def from_params(cls, params, **capacity):
        """``params``: the cocotb parameters (``top`` holds the top's own), plus
        ``seed`` and ``count``."""
        names = {f.name for f in dataclasses.fields(cls)}
        top = dict(params.get("top", {}))
        kw = {k: v for k, v in {**top, **params}.items() if k in names and k != "top"}
        return cls(**kw, **capacity, top=tuple(sorted({**DEFAULTS, **top}.items())))

    def engine(self):
        """A fresh :class:`pymodel.rdma.engine.Config` (``Verbs`` fills in its run-time
        ports: context tables and CQ)."""
        top = dict(DEFAULTS, **dict(self.top))
        return Config(**{f.name: top[f.name] for f in dataclasses.fields(Config)
                         if f.name in top})

    def test_seed(self, test_name):
        """The seed of one test: the run's seed mixed with the test's name."""
        return (self.seed * 1_000_003 + zlib.crc32(test_name.encode())) % (1 << 32)
