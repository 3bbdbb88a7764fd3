"""The RDMA top's parameters and run-time ports as the system model reads them.

:class:`Config` mirrors :class:`rtl.tops.rdma_top.RdmaTop`'s parameters (sizes, link
latency, transport timer, reliability) and its run-time ports (context-table and CQ
bases, cache entries in use, ACK coalescing, serial mode, selective repeat), with the faults of each
link. Frozen; every field is checked against the ranges the RTL accepts, a bad one
raising ``ValueError`` that names it.
"""

import dataclasses

from pymodel.fabric.faulty_link import FaultSettings
from spec.formats.roce import HOST_WORD_BYTES, QPC_BYTES_CHOICES, QPC_BYTES_DEFAULT
from spec.formats.scaleup import check_header
from spec.host import PROFILES
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
)
from spec.rdma_read_req import SLOTS_RANGE
from spec.rdma_responder import check_mr_cache, check_read_words
from spec.rdma_stages import ACK_FRAMES_BITS, ACK_MSGS_BITS

__all__ = ["Config"]


#: Ranges of the integer fields of :class:`Config` that the RTL top and its parts check
#: (:class:`rtl.tops.rdma_top.RdmaTop`, the requester's and responder's parameter
#: checks) and the widths of the top's run-time ports.
_RANGES = {
    "cache_capacity": (16, 256), "depth": (1 << 6, 1 << 32), "link_latency": (1, 1024),
    "mr_entries": (2, 256), "prefetch": (1, MAX_PREFETCH), "wqe_words": (64, 1 << 14),
    "payload_words": (64, 1 << 14), "records": (2, 4096),
    "windows": (0, 4096), "miss_queue": MISS_QUEUE_RANGE, "timeout": TIMEOUT_RANGE,
    "retry_limit": RETRY_LIMIT_RANGE,
    "cq_log2": (0, 31), "ack_every": (0, (1 << ACK_MSGS_BITS) - 1),
    "ack_frames": (0, (1 << ACK_FRAMES_BITS) - 1), "serial": (0, 1), "selective": (0, 1),
}


class HostShape:
    """What a configuration with ``qpc_bytes`` and ``host`` derives from them (shared by
    :class:`Config` and the fabric's ``FabricConfig``): the context's host words, the
    tops' ``qpc_log2`` port and the host-interface profile."""

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
class Config(HostShape):
    """The top's parameters and run-time ports (see :class:`rtl.tops.rdma_top.RdmaTop`):
    ``cache_entries`` context-cache entries in use at each node (the ``cache_log2`` port,
    a power of two from 16) of the ``cache_capacity`` the top was built with;
    ``link_retry``: both links are reliable links (the top's parameter of that name).

    Frozen: a run with other values is a new Config (``dataclasses.replace``). Each field
    is checked; a bad one raises ``ValueError`` naming it."""
    cache_entries: int = 16
    cache_capacity: int = TOP_DEFAULTS["cache_entries"]
    depth: int = HOST_DEPTH
    host: str = "pcie"
    link_latency: int = 6
    mr_entries: int = 16
    prefetch: int = REQUESTER_DEFAULTS["prefetch"]
    wqe_words: int = REQUESTER_DEFAULTS["wqe_words"]
    payload_words: int = REQUESTER_DEFAULTS["payload_words"]
    records: int = REQUESTER_DEFAULTS["records"]
    timeout: int = REQUESTER_DEFAULTS["timeout"]
    retry_limit: int = REQUESTER_DEFAULTS["retry_limit"]
    windows: int = REQUESTER_DEFAULTS["windows"]
    #: Ways per set of both context caches (the tops' ``cache_ways``: 1, 2, 4, 8).
    cache_ways: int = REQUESTER_DEFAULTS["cache_ways"]
    miss_queue: int = REQUESTER_DEFAULTS["miss_queue"]
    qpc_base_a: int = 0
    qpc_base_b: int = 0
    #: Bytes of a QP context in host memory, both nodes (the top's ``qpc_log2`` port,
    #: ``2**qpc_log2 == qpc_bytes // 64``): 64 to 1024, a power of two; default 256, the
    #: room of mlx5's 232-byte context (:data:`spec.formats.roce.QPC_BYTES_DEFAULT`).
    qpc_bytes: int = QPC_BYTES_DEFAULT
    cq_base: int = 0
    cq_log2: int = 10
    ack_every: int = 1
    ack_frames: int = 0
    serial: int = 0
    #: Recovery, the ``selective`` port of both engines: 0 go-back-N (the default, IBTA),
    #: 1 selective repeat (docs/recovery.md, "Selective repeat").
    selective: int = 0
    #: Node B's MR table: 0 on chip (the default), else the entries of the MR cache in
    #: front of the table in host memory B (:data:`spec.rdma_engine.TOP_DEFAULTS`).
    mr_cache: int = TOP_DEFAULTS["mr_cache"]
    #: Node B's responder: 0 without RDMA READ (the default), else the words of its READ
    #: data FIFO (:data:`spec.rdma_engine.TOP_DEFAULTS`).
    read_words: int = TOP_DEFAULTS["read_words"]
    #: Node A's requester: 0 without RDMA READ and atomics (the default), else the slots
    #: of its outstanding READs and atomics (:data:`spec.rdma_engine.TOP_DEFAULTS`).
    reads: int = TOP_DEFAULTS["reads"]
    #: The framing (``"roce"`` or ``"scaleup"``, :mod:`spec.formats.scaleup`).
    header: str = TOP_DEFAULTS["header"]
    responder_sizes: dict = dataclasses.field(default_factory=dict)
    faults_ab: FaultSettings = dataclasses.field(default_factory=FaultSettings)
    faults_ba: FaultSettings = dataclasses.field(default_factory=FaultSettings)
    link_retry: bool = False

    def __post_init__(self):
        def bad(name, what):
            raise ValueError(f"Config.{name} must be {what}, not {getattr(self, name)!r}")

        def integer(name, lo, hi):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                bad(name, f"an integer from {lo} to {hi}")

        if not isinstance(self.link_retry, bool):
            bad("link_retry", "True or False")
        check_header(self.header)
        for name, (lo, hi) in _RANGES.items():
            integer(name, lo, hi)
        for name in ("depth", "cache_capacity", "mr_entries"):
            if getattr(self, name) & (getattr(self, name) - 1):
                bad(name, "a power of two")
        integer("cache_entries", 16, self.cache_capacity)
        if self.cache_entries & (self.cache_entries - 1):
            bad("cache_entries", "a power of two")
        if self.windows and (self.windows & (self.windows - 1)
                             or self.windows < self.cache_capacity):
            bad("windows", f"0 or a power of two from cache_capacity "
                           f"({self.cache_capacity}) to 4096")
        if isinstance(self.cache_ways, bool) or self.cache_ways not in CACHE_WAYS:
            bad("cache_ways", "1, 2, 4 or 8")
        if self.cache_ways > 1 and self.windows == 0:
            bad("cache_ways", "1 with windows 0 (a window slot is a cache entry)")
        for name in ("qpc_base_a", "qpc_base_b", "cq_base"):
            integer(name, 0, self.depth - 1)
        if isinstance(self.qpc_bytes, bool) or self.qpc_bytes not in QPC_BYTES_CHOICES:
            bad("qpc_bytes", f"one of {QPC_BYTES_CHOICES}")
        try:
            check_mr_cache(self.mr_cache)
            check_read_words(self.read_words)
        except ValueError as error:
            raise ValueError(f"Config.{error}") from None
        if self.reads:
            integer("reads", *SLOTS_RANGE)
            if self.header != "roce":
                bad("reads", "0 with the scale-up header (READs are framed in RoCEv2)")
        if self.host not in PROFILES:
            bad("host", f"one of {sorted(PROFILES)}")
        if not isinstance(self.responder_sizes, dict) or not set(
                self.responder_sizes) <= set(RESPONDER_DEFAULTS):
            bad("responder_sizes", f"a dict with keys from {sorted(RESPONDER_DEFAULTS)}")
        for name in ("faults_ab", "faults_ba"):
            if not isinstance(getattr(self, name), FaultSettings):
                bad(name, "a FaultSettings")

