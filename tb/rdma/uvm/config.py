"""What every component of the RDMA environment needs to know about the top and the run."""

import dataclasses
import zlib

from pymodel.rdma.system import Config
from spec.rdma_engine import RESPONDER_DEFAULTS, TOP_DEFAULTS
from spec.rdma_responder import REST_MAX

__all__ = ["RdmaConfig", "RunKnobs", "CACHE_SIZES"]

#: Context-cache entries a run may put in use (the ``cache_log2`` port: 16 to the top's
#: capacity, a power of two).
CACHE_SIZES = (16, 32, 64, 128, 256)


@dataclasses.dataclass(frozen=True)
class RunKnobs:
    """The engine's run-time ports of one run (set before its reset, held through it).

    ``cache_entries``: context-cache entries in use at both nodes (``cache_log2``);
    ``serial``: one work item at a time (the requester's front waits until everything is
    done); ``ack_every``/``ack_frames``: ACK coalescing (AckReq on every n-th message of a
    QP, or once m frames went without one; 0 and 1: every message); ``inject_stall``: the
    ``(seed, rate)`` of the injection player.
    """
    cache_entries: int = 16
    serial: int = 0
    ack_every: int = 1
    ack_frames: int = 0
    inject_stall: tuple = (1, 0)

    @property
    def coalescing(self):
        """Whether some messages go without AckReq."""
        return self.ack_every > 1 or self.ack_frames > 0

    def ports(self):
        """The run-time ports of the top these knobs set (by port name)."""
        return {"cache_log2": self.cache_entries.bit_length() - 1, "serial": self.serial,
                "ack_every": self.ack_every, "ack_frames": self.ack_frames}


@dataclasses.dataclass(frozen=True)
class RdmaConfig:
    """The top's parameters (:data:`spec.rdma_engine.TOP_DEFAULTS` overridden by the ones
    ``run_cosim`` passed), the capacities read from the design, and the run's seed.

    ``mmio_depth`` (MMIO words), ``inject_depth`` (beats), ``wire_depth`` (beats per link
    recorder) and ``event_depth`` (``written``/``completed`` recorders) are read by the
    bench from the design (``len`` of the Verilog memories), never restated here. ``top``
    keeps every parameter of the top (the defaults and the given ones), so that
    :meth:`engine` passes the model whatever it takes.
    """

    depth: int = TOP_DEFAULTS["depth"]
    mr_entries: int = TOP_DEFAULTS["mr_entries"]
    seed: int = 1
    count: int = 20
    mmio_depth: int = TOP_DEFAULTS["mmio"]
    inject_depth: int = TOP_DEFAULTS["inject"]
    wire_depth: int = TOP_DEFAULTS["wire_beats"]
    event_depth: int = TOP_DEFAULTS["events"]
    top: tuple = ()

    @classmethod
    def from_params(cls, params, **capacity):
        """``params``: the cocotb parameters (``top`` holds the top's own), plus
        ``seed`` and ``count``."""
        names = {f.name for f in dataclasses.fields(cls)}
        top = dict(params.get("top", {}))
        kw = {k: v for k, v in {**top, **params}.items() if k in names and k != "top"}
        return cls(**kw, **capacity, top=tuple(sorted({**TOP_DEFAULTS, **top}.items())))

    @property
    def params(self):
        """Every parameter of the top, by name."""
        return dict(TOP_DEFAULTS, **dict(self.top))

    @property
    def cache_capacity(self):
        """Context-cache entries the top was built with (the most a run may use)."""
        return self.params["cache_entries"]

    @property
    def inject_frames(self):
        """Frames an injection run may hold at the responder at once: its header
        entries (``rx_frames``), so that no frame is dropped for room."""
        return self.params["rx_frames"]

    @property
    def inject_rest_beats(self):
        """Payload beats (every beat of a frame but its first two) an injection run may
        hold at the responder: a frame whose first beat finds more than ``rx_beats -
        REST_MAX`` is dropped (``overflow``)."""
        return self.params["rx_beats"] - REST_MAX

    def engine(self, knobs=None):
        """A fresh :class:`pymodel.rdma.system.Config` of the top with the run's
        ``knobs`` (default :class:`RunKnobs`); the host driver fills in the CQ."""
        knobs = knobs or RunKnobs()
        p = self.params
        fields = {f.name for f in dataclasses.fields(Config)} - {"cache_entries"}
        return Config(**{k: p[k] for k in fields if k in p},
                      cache_entries=knobs.cache_entries, cache_capacity=p["cache_entries"],
                      responder_sizes={k: p[k] for k in RESPONDER_DEFAULTS},
                      serial=knobs.serial, ack_every=knobs.ack_every,
                      ack_frames=knobs.ack_frames)

    def test_seed(self, test_name):
        """The seed of one test: the run's seed mixed with the test's name."""
        return (self.seed * 1_000_003 + zlib.crc32(test_name.encode())) % (1 << 32)
