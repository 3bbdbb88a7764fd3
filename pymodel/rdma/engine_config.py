"""What the RDMA tops' configurations share, declared and checked once:
:class:`EngineConfig`, the base of :class:`pymodel.rdma.config.Config` (RdmaTop) and
:class:`pymodel.rdma.fabric_config.FabricConfig` (RdmaFabricTop).

The fields are the engines' parameters and run-time ports that both tops have (the
requester's and responder's sizes, the context cache and its host image, the transport
timer, ACK coalescing, the MR cache and READ); each top's configuration adds its own
(the direct link's faults and header; the fabric's nodes, credits and pause) and states
the defaults of its top where they differ (the fabric top is smaller). Every field is
checked against the ranges the RTL accepts; a bad one raises ``ValueError`` naming it as
``<class>.<field>``. The user-facing design point, its options and their ranges as
``make sim`` states them, is :class:`spec.design_point.RdmaPoint`.
"""

import dataclasses

from spec.formats.roce import HOST_WORD_BYTES, QPC_BYTES_CHOICES, QPC_BYTES_DEFAULT, qpc_words
from spec.host import PROFILES, check_host
from spec.rdma_engine import (
    CACHE_WAYS,
    HOST_DEPTH,
    MAX_PREFETCH,
    MISS_QUEUE_RANGE,
    REQUESTER_DEFAULTS,
    RESPONDER_DEFAULTS,
    RETRY_LIMIT_RANGE,
    TIMEOUT_RANGE,
    TOP_DEFAULTS,
    ContextCacheShape,
)
from spec.rdma_read_req import SLOTS_RANGE
from spec.rdma_responder import MrTableFields, check_read_words
from spec.rdma_stages import ACK_FRAMES_BITS, ACK_MSGS_BITS

__all__ = ["HostShape", "EngineConfig", "context_words"]

#: Ranges of the integer fields of :class:`EngineConfig` that the RTL tops and their
#: parts check (the requester's and responder's parameter checks) and the widths of the
#: tops' run-time ports; ``depth``'s top end is each top's (``DEPTH_MAX``).
_RANGES = {
    "cache_capacity": (16, 256), "link_latency": (1, 1024), "mr_entries": (2, 256),
    "prefetch": (1, MAX_PREFETCH), "wqe_words": (64, 1 << 14),
    "payload_words": (64, 1 << 14), "records": (2, 4096), "windows": (0, 4096),
    "miss_queue": MISS_QUEUE_RANGE, "timeout": TIMEOUT_RANGE,
    "retry_limit": RETRY_LIMIT_RANGE, "cq_log2": (0, 31),
    "ack_every": (0, (1 << ACK_MSGS_BITS) - 1),
    "ack_frames": (0, (1 << ACK_FRAMES_BITS) - 1), "serial": (0, 1),
    "reads": (0, SLOTS_RANGE[1]),
}


def context_words(values, owner):
    """Host words of one QP context that the knobs ``values`` (a mapping of a design
    point's fields, or a run's parameters) set, the default's where they set none;
    ``ValueError`` naming ``owner`` and the knob for a size that is not accepted."""
    return qpc_words(values.get("qpc_bytes", QPC_BYTES_DEFAULT), owner)


class HostShape:
    """What a configuration with ``qpc_bytes`` and ``host`` derives from them: the
    context's host words, the tops' ``qpc_log2`` port and the host-interface profile."""

    def with_qpc_words(self, words):
        """This configuration with contexts of ``words`` host words."""
        return dataclasses.replace(self, qpc_bytes=words * HOST_WORD_BYTES)

    @classmethod
    def fields_of(cls, values):
        """The items of ``values`` (a mapping of knobs) that are fields of ``cls``."""
        names = {f.name for f in dataclasses.fields(cls)}
        return {k: v for k, v in values.items() if k in names}

    @property
    def mr_in_host(self):
        """Whether the responders' MR table is in host memory (behind an MR cache)."""
        return self.mr_shape.in_host

    @property
    def cache_shape(self):
        """Both engines' context caches as built
        (:class:`spec.rdma_engine.ContextCacheShape`: ``cache_capacity`` entries of
        ``cache_ways`` ways)."""
        return ContextCacheShape(self.cache_capacity, self.cache_ways)

    @property
    def qpc_words(self):
        """Host words of one QP context."""
        return self.qpc_bytes // HOST_WORD_BYTES

    @property
    def qpc_log2(self):
        """The tops' ``qpc_log2`` port."""
        return self.qpc_words.bit_length() - 1

    @property
    def profile(self):
        """The host-interface profile (:data:`spec.host.PROFILES`) of ``host``."""
        return PROFILES[self.host]


@dataclasses.dataclass(frozen=True)
class EngineConfig(MrTableFields, HostShape):
    """The fields both RDMA tops have (module doc), with RdmaTop's defaults
    (:data:`spec.rdma_engine.TOP_DEFAULTS`, :data:`~spec.rdma_engine.REQUESTER_DEFAULTS`);
    ``cache_entries`` context-cache entries in use (the ``cache_log2`` port, a power of two
    from 16) of the ``cache_capacity`` built; the MR table's fields are
    :class:`spec.rdma_responder.MrTableFields`' (its shape ``mr_shape``). Frozen: another
    run is another config (``dataclasses.replace``)."""
    cache_entries: int = 16
    cache_capacity: int = TOP_DEFAULTS["cache_entries"]
    depth: int = HOST_DEPTH
    host: str = "pcie"
    link_latency: int = 6
    prefetch: int = REQUESTER_DEFAULTS["prefetch"]
    wqe_words: int = REQUESTER_DEFAULTS["wqe_words"]
    payload_words: int = REQUESTER_DEFAULTS["payload_words"]
    records: int = REQUESTER_DEFAULTS["records"]
    timeout: int = REQUESTER_DEFAULTS["timeout"]
    retry_limit: int = REQUESTER_DEFAULTS["retry_limit"]
    windows: int = REQUESTER_DEFAULTS["windows"]
    #: Ways per set of every engine's context cache (the tops' ``cache_ways``: 1, 2, 4,
    #: 8).
    cache_ways: int = REQUESTER_DEFAULTS["cache_ways"]
    #: Every requester's miss queue (the tops' ``miss_queue``; 0: none).
    miss_queue: int = REQUESTER_DEFAULTS["miss_queue"]
    #: Bytes of a QP context in host memory (the tops' ``qpc_log2`` port,
    #: ``2**qpc_log2 == qpc_bytes // 64``): 64 to 1024, a power of two; default 256, the
    #: room of mlx5's 232-byte context (:data:`spec.formats.roce.QPC_BYTES_DEFAULT`).
    qpc_bytes: int = QPC_BYTES_DEFAULT
    cq_base: int = 0
    cq_log2: int = 10
    ack_every: int = 1
    ack_frames: int = 0
    serial: int = 0
    #: The requesters' READ/atomic slots: 0 without RDMA READ and atomics (the default).
    reads: int = TOP_DEFAULTS["reads"]
    #: The responders' READ data FIFO in words: 0 without RDMA READ (the default).
    read_words: int = TOP_DEFAULTS["read_words"]
    responder_sizes: dict = dataclasses.field(default_factory=dict)

    #: Largest host memory of the top, in words.
    DEPTH_MAX = 1 << 32
    #: The fields that are word addresses in host memory (below ``depth``).
    BASES = ("cq_base",)

    def bad(self, name, what):
        """Raise ``ValueError`` naming field ``name`` of this configuration."""
        raise ValueError(f"{type(self).__name__}.{name} must be {what}, "
                         f"not {getattr(self, name)!r}")

    def integer(self, name, lo, hi):
        """Field ``name`` is an int from ``lo`` to ``hi``, else :meth:`bad`."""
        v = getattr(self, name)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            self.bad(name, f"an integer from {lo} to {hi}")

    def __post_init__(self):
        for name, (lo, hi) in dict(_RANGES, depth=(1 << 6, self.DEPTH_MAX)).items():
            self.integer(name, lo, hi)
        for name in ("depth", "cache_capacity", "mr_entries"):
            if getattr(self, name) & (getattr(self, name) - 1):
                self.bad(name, "a power of two")
        self.integer("cache_entries", 16, self.cache_capacity)
        if self.cache_entries & (self.cache_entries - 1):
            self.bad("cache_entries", "a power of two")
        if self.windows and (self.windows & (self.windows - 1)
                             or self.windows < self.cache_capacity):
            self.bad("windows", f"0 or a power of two from cache_capacity "
                                f"({self.cache_capacity}) to 4096")
        if isinstance(self.cache_ways, bool) or self.cache_ways not in CACHE_WAYS:
            self.bad("cache_ways", "1, 2, 4 or 8")
        if self.cache_ways > 1 and self.windows == 0:
            self.bad("cache_ways", "1 with windows 0 (a window slot is a cache entry)")
        for name in self.BASES:
            self.integer(name, 0, self.depth - 1)
        if isinstance(self.qpc_bytes, bool) or self.qpc_bytes not in QPC_BYTES_CHOICES:
            self.bad("qpc_bytes", f"one of {QPC_BYTES_CHOICES}")
        try:
            mr = self.mr_shape
            check_read_words(self.read_words)
            check_host(self.host)
            mr.check_reads(self.read_words)
        except ValueError as error:
            raise ValueError(f"{type(self).__name__}.{error}") from None
        if not isinstance(self.responder_sizes, dict) or not set(
                self.responder_sizes) <= set(RESPONDER_DEFAULTS):
            self.bad("responder_sizes", f"a dict with keys from {sorted(RESPONDER_DEFAULTS)}")
