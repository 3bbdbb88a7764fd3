"""The parameters of :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop` and its run-time ports,
as its golden model (:mod:`pymodel.rdma.fabric_system`) and the requester model read
them: :class:`FabricConfig`, each field checked."""

import dataclasses

from pymodel.rdma.config import HostShape
from pymodel.rdma.verbs import MIN_CQ_LOG2
from spec.formats.roce import QPC_BYTES_CHOICES, QPC_BYTES_DEFAULT
from spec.host import PROFILES
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_engine import (
    CACHE_WAYS,
    MAX_PREFETCH,
    MISS_QUEUE_RANGE,
    REQUESTER_DEFAULTS,
    RESPONDER_DEFAULTS,
    RETRY_LIMIT_RANGE,
    SIM_TIMEOUT,
    TIMEOUT_RANGE,
)
from spec.rdma_fabric import FABRIC_DEFAULTS, NODES_RANGE, pause_thresholds
from spec.rdma_read_req import SLOTS_RANGE
from spec.rdma_responder import check_mr_cache, check_read_words
from spec.rdma_stages import ACK_FRAMES_BITS, ACK_MSGS_BITS

__all__ = ["FabricConfig"]

#: Ranges of the integer fields of :class:`FabricConfig` that the RTL top and its parts
#: check (:class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`, the requester's and
#: responder's parameter checks) and the widths of the top's run-time ports.
_RANGES = {
    "nodes": NODES_RANGE, "cache_capacity": (16, 256), "depth": (1 << 6, 1 << 20),
    "link_latency": (1, 1024), "mr_entries": (2, 256),
    "credits": (MAX_FRAME_BEATS, 65535), "merge_depth": (MAX_FRAME_BEATS, 65535),
    "prefetch": (1, MAX_PREFETCH), "wqe_words": (64, 1 << 14),
    "payload_words": (64, 1 << 14), "records": (2, 4096),
    "timeout": TIMEOUT_RANGE, "retry_limit": RETRY_LIMIT_RANGE,
    "miss_queue": MISS_QUEUE_RANGE, "cq_log2": (0, 31),
    "ack_every": (0, (1 << ACK_MSGS_BITS) - 1),
    "ack_frames": (0, (1 << ACK_FRAMES_BITS) - 1), "serial": (0, 1), "pause": (0, 1),
    "hop_latency": (0, 4096), "link_retry": (0, 1),
    "reads": (0, SLOTS_RANGE[1]),
}


@dataclasses.dataclass(frozen=True)
class FabricConfig(HostShape):
    """The top's parameters and run-time ports (see
    :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`); ``cache_entries`` in use (the
    ``cache_log2`` port, a power of two from 16 to ``cache_capacity``) of the
    ``cache_capacity`` built. Also the shape the requester model reads its sizes and
    ports from.

    Defaults: :data:`spec.rdma_fabric.FABRIC_DEFAULTS`,
    :data:`spec.rdma_engine.REQUESTER_DEFAULTS` and
    :data:`~spec.rdma_engine.RESPONDER_DEFAULTS` (``responder_sizes``); 16 entries in
    use, the context tables at word 0, a CQ of 1,024 entries
    (:data:`pymodel.rdma.verbs.MIN_CQ_LOG2`), an ACK for every frame that asks; no
    pause (``pause``, ``pause_headroom``, ``pause_hysteresis``: the top's, thresholds
    checked by :func:`spec.rdma_fabric.pause_thresholds`). Each field is checked; a bad
    one raises ``ValueError`` naming it."""
    nodes: int = FABRIC_DEFAULTS["nodes"]
    cache_entries: int = 16
    cache_capacity: int = FABRIC_DEFAULTS["cache_entries"]
    depth: int = FABRIC_DEFAULTS["depth"]
    host: str = FABRIC_DEFAULTS["host"]
    link_latency: int = FABRIC_DEFAULTS["link_latency"]
    mr_entries: int = FABRIC_DEFAULTS["mr_entries"]
    credits: int = FABRIC_DEFAULTS["credits"]
    merge_depth: int = FABRIC_DEFAULTS["merge_depth"]
    prefetch: int = REQUESTER_DEFAULTS["prefetch"]
    wqe_words: int = REQUESTER_DEFAULTS["wqe_words"]
    payload_words: int = REQUESTER_DEFAULTS["payload_words"]
    records: int = REQUESTER_DEFAULTS["records"]
    #: The transport timeout of a simulated fabric run: the short SIM_TIMEOUT, as every
    #: simulated run with loss (an incast without pause drops frames at a receiver).
    timeout: int = SIM_TIMEOUT
    retry_limit: int = REQUESTER_DEFAULTS["retry_limit"]
    windows: int = REQUESTER_DEFAULTS["windows"]
    #: Ways per set of every engine's context cache (the tops' ``cache_ways``).
    cache_ways: int = REQUESTER_DEFAULTS["cache_ways"]
    #: Every requester's miss queue (the tops' ``miss_queue``; 0: none).
    miss_queue: int = REQUESTER_DEFAULTS["miss_queue"]
    #: Every responder's MR cache (0: the MR table on chip; :class:`pymodel.rdma.config.
    #: Config`'s ``mr_cache``).
    mr_cache: int = FABRIC_DEFAULTS["mr_cache"]
    qpc_base: int = 0
    #: Bytes of a QP context in host memory (:data:`spec.formats.roce.QPC_BYTES_DEFAULT`,
    #: the tops' ``qpc_log2`` port: ``2**qpc_log2 == qpc_bytes // 64``).
    qpc_bytes: int = QPC_BYTES_DEFAULT
    cq_base: int = 0
    cq_log2: int = MIN_CQ_LOG2
    ack_every: int = 1
    ack_frames: int = 0
    serial: int = 0
    pause: int = FABRIC_DEFAULTS["pause"]
    pause_headroom: int = FABRIC_DEFAULTS["pause_headroom"]
    pause_hysteresis: int | None = FABRIC_DEFAULTS["pause_hysteresis"]
    #: The switch's extra cycles after its crossbar (the top's ``hop_latency``).
    hop_latency: int = FABRIC_DEFAULTS["hop_latency"]
    #: 1: every link reliable, the switch's egress held by the downlinks' ``ready``.
    link_retry: int = FABRIC_DEFAULTS["link_retry"]
    #: The requesters' READ/atomic slots (0: writes only; the top's ``reads``,
    #: :data:`rtl.tops.rdma_fabric_top.READ_PARAMS`).
    reads: int = 0
    #: The responders' READ data FIFO in words (0: no READ or atomics; the top's
    #: ``read_words``).
    read_words: int = 0
    responder_sizes: dict = dataclasses.field(
        default_factory=lambda: dict(RESPONDER_DEFAULTS))

    def __post_init__(self):
        def bad(name, what):
            raise ValueError(f"FabricConfig.{name} must be {what}, "
                             f"not {getattr(self, name)!r}")

        def integer(name, lo, hi):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                bad(name, f"an integer from {lo} to {hi}")

        for name, (lo, hi) in _RANGES.items():
            integer(name, lo, hi)
        if self.depth & (self.depth - 1):
            bad("depth", "a power of two")
        try:
            check_mr_cache(self.mr_cache)
            check_read_words(self.read_words)
        except ValueError as error:
            raise ValueError(f"FabricConfig.{error}") from None
        if self.read_words and self.mr_cache:
            bad("read_words", "0 with mr_cache (READ needs the on-chip MR table)")
        if (self.reads or self.read_words) and (self.pause or self.link_retry):
            bad("reads", "0 with pause or link_retry (the top refuses both), and so "
                         "read_words")
        integer("cache_entries", 16, self.cache_capacity)
        if self.cache_entries & (self.cache_entries - 1):
            bad("cache_entries", "a power of two")
        if isinstance(self.cache_ways, bool) or self.cache_ways not in CACHE_WAYS:
            bad("cache_ways", "1, 2, 4 or 8")
        if self.cache_ways > 1 and self.windows == 0:
            bad("cache_ways", "1 with windows 0 (a window slot is a cache entry)")
        for name in ("qpc_base", "cq_base"):
            integer(name, 0, self.depth - 1)
        if isinstance(self.qpc_bytes, bool) or self.qpc_bytes not in QPC_BYTES_CHOICES:
            bad("qpc_bytes", f"one of {QPC_BYTES_CHOICES}")
        if self.host not in PROFILES:
            bad("host", f"one of {sorted(PROFILES)}")
        if not isinstance(self.responder_sizes, dict) or not set(
                self.responder_sizes) <= set(RESPONDER_DEFAULTS):
            bad("responder_sizes", f"a dict with keys from {sorted(RESPONDER_DEFAULTS)}")
        if self.pause and self.link_retry:
            bad("link_retry", "0 with pause 1 (the top refuses both)")
        if self.pause and self.hop_latency:
            bad("hop_latency", "0 with pause 1 (the top refuses both)")
        if self.pause:
            sizes = dict(RESPONDER_DEFAULTS, **self.responder_sizes)
            try:
                pause_thresholds(sizes["rx_beats"], sizes["rx_frames"], self.link_latency,
                                 self.pause_headroom, self.pause_hysteresis)
            except ValueError as exc:
                raise ValueError(f"FabricConfig.{exc}") from None

    @property
    def qpc_base_a(self):          # what the requester model reads
        return self.qpc_base
