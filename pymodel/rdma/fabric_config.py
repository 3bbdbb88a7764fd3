"""The parameters of :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop` and its run-time ports,
as its golden model (:mod:`pymodel.rdma.fabric_system`) and the requester model read
them: :class:`FabricConfig`, each field checked."""

import dataclasses

from pymodel.rdma.engine_config import EngineConfig
from pymodel.rdma.verbs import MIN_CQ_LOG2
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_engine import RESPONDER_DEFAULTS, SIM_TIMEOUT
from spec.rdma_fabric import FABRIC_DEFAULTS, NODES_RANGE, pause_thresholds

__all__ = ["FabricConfig"]

#: Ranges of the integer fields of :class:`FabricConfig` that only the fabric top has
#: (:class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`); the shared ones are
#: :class:`~pymodel.rdma.engine_config.EngineConfig`'s.
_RANGES = {
    "nodes": NODES_RANGE, "credits": (MAX_FRAME_BEATS, 65535),
    "merge_depth": (MAX_FRAME_BEATS, 65535), "pause": (0, 1), "hop_latency": (0, 4096),
    "link_retry": (0, 1),
}


@dataclasses.dataclass(frozen=True)
class FabricConfig(EngineConfig):
    """The top's parameters and run-time ports (see
    :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`): the fields of
    :class:`~pymodel.rdma.engine_config.EngineConfig` with the fabric top's defaults,
    and the fabric's own (nodes, credits, the merge, pause, the switch's hop, link
    retry). Also the shape the requester model reads its sizes and ports from.

    Defaults: :data:`spec.rdma_fabric.FABRIC_DEFAULTS`,
    :data:`spec.rdma_engine.REQUESTER_DEFAULTS` and
    :data:`~spec.rdma_engine.RESPONDER_DEFAULTS` (``responder_sizes``); 16 entries in
    use, the context tables at word 0, a CQ of 1,024 entries
    (:data:`pymodel.rdma.verbs.MIN_CQ_LOG2`), an ACK for every frame that asks; no
    pause (``pause``, ``pause_headroom``, ``pause_hysteresis``: the top's, thresholds
    checked by :func:`spec.rdma_fabric.pause_thresholds`). Each field is checked; a bad
    one raises ``ValueError`` naming it."""
    # The fabric top's defaults of EngineConfig's fields (declared there).
    cache_capacity: int = FABRIC_DEFAULTS["cache_entries"]
    depth: int = FABRIC_DEFAULTS["depth"]
    host: str = FABRIC_DEFAULTS["host"]
    link_latency: int = FABRIC_DEFAULTS["link_latency"]
    mr_entries: int = FABRIC_DEFAULTS["mr_entries"]
    #: The transport timeout of a simulated fabric run: the short SIM_TIMEOUT, as every
    #: simulated run with loss (an incast without pause drops frames at a receiver).
    timeout: int = SIM_TIMEOUT
    cq_log2: int = MIN_CQ_LOG2
    reads: int = 0
    read_words: int = 0
    responder_sizes: dict = dataclasses.field(
        default_factory=lambda: dict(RESPONDER_DEFAULTS))
    # The fabric's own.
    nodes: int = FABRIC_DEFAULTS["nodes"]
    credits: int = FABRIC_DEFAULTS["credits"]
    merge_depth: int = FABRIC_DEFAULTS["merge_depth"]
    qpc_base: int = 0
    pause: int = FABRIC_DEFAULTS["pause"]
    pause_headroom: int = FABRIC_DEFAULTS["pause_headroom"]
    pause_hysteresis: int | None = FABRIC_DEFAULTS["pause_hysteresis"]
    #: The switch's extra cycles after its crossbar (the top's ``hop_latency``).
    hop_latency: int = FABRIC_DEFAULTS["hop_latency"]
    #: 1: every link reliable, the switch's egress held by the downlinks' ``ready``.
    link_retry: int = FABRIC_DEFAULTS["link_retry"]

    DEPTH_MAX = 1 << 20
    BASES = ("qpc_base", "cq_base")

    def __post_init__(self):
        for name, (lo, hi) in _RANGES.items():
            self.integer(name, lo, hi)
        super().__post_init__()
        if (self.reads or self.read_words) and (self.pause or self.link_retry):
            self.bad("reads", "0 with pause or link_retry (the top refuses both), and so "
                              "read_words")
        if self.pause and self.link_retry:
            self.bad("link_retry", "0 with pause 1 (the top refuses both)")
        if self.pause and self.hop_latency:
            self.bad("hop_latency", "0 with pause 1 (the top refuses both)")
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
