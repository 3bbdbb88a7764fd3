"""The RDMA top's parameters and run-time ports as the system model reads them.

:class:`Config` mirrors :class:`rtl.tops.rdma_top.RdmaTop`'s parameters (sizes, link
latency, transport timer, reliability) and its run-time ports (context-table and CQ
bases, cache entries in use, ACK coalescing, serial mode, selective repeat), with the faults of each
link. Frozen; every field is checked against the ranges the RTL accepts, a bad one
raising ``ValueError`` that names it. The fields both RDMA tops have are declared and
checked once, in :class:`pymodel.rdma.engine_config.EngineConfig`.
"""

import dataclasses

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.rdma.engine_config import EngineConfig, HostShape
from spec.formats.scaleup import check_header
from spec.rdma_engine import TOP_DEFAULTS

__all__ = ["Config", "HostShape"]


@dataclasses.dataclass(frozen=True)
class Config(EngineConfig):
    """The top's parameters and run-time ports (see :class:`rtl.tops.rdma_top.RdmaTop`):
    the fields of :class:`~pymodel.rdma.engine_config.EngineConfig` with RdmaTop's
    defaults, and the direct link's own: ``qpc_base_a``/``qpc_base_b`` (each node's
    context table), ``selective``, ``header``, each link's faults, and ``link_retry``
    (both links are reliable links, the top's parameter of that name).

    Frozen: a run with other values is a new Config (``dataclasses.replace``). Each field
    is checked; a bad one raises ``ValueError`` naming it."""
    qpc_base_a: int = 0
    qpc_base_b: int = 0
    #: Recovery, the ``selective`` port of both engines: 0 go-back-N (the default, IBTA),
    #: 1 selective repeat (docs/recovery.md, "Selective repeat").
    selective: int = 0
    #: The framing (``"roce"`` or ``"scaleup"``, :mod:`spec.formats.scaleup`).
    header: str = TOP_DEFAULTS["header"]
    faults_ab: FaultSettings = dataclasses.field(default_factory=FaultSettings)
    faults_ba: FaultSettings = dataclasses.field(default_factory=FaultSettings)
    link_retry: bool = False

    BASES = ("qpc_base_a", "qpc_base_b", "cq_base")

    def __post_init__(self):
        if not isinstance(self.link_retry, bool):
            self.bad("link_retry", "True or False")
        check_header(self.header)
        super().__post_init__()
        self.integer("selective", 0, 1)
        if self.reads and self.header != "roce":
            self.bad("reads", "0 with the scale-up header (READs are framed in RoCEv2)")
        for name in ("faults_ab", "faults_ba"):
            if not isinstance(getattr(self, name), FaultSettings):
                self.bad(name, "a FaultSettings")
