"""Issuer profiles: what posting RDMA work costs whoever posts it (CPU, GPU, controller),
from ``data/issuers.toml`` (sourced there), for the carriers of
:mod:`pymodel.workloads.carriers` and the load model of :mod:`pymodel.load.rdma`."""

import tomllib
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class IssuerProfile:
    """What posting RDMA work costs (cycles of 1 ns) and how the issuer uses the engine.

    ``doorbell_batch`` WQEs per doorbell and ``signal_every`` WQEs per CQE are the
    issuer's default policy (a :class:`Rung` may override them). ``parallel``: the
    issuer posts on every QP at once (a poster per QP, each ringing its own doorbell, as
    GPU warps do with IBGDA), so a sender spreading its messages over ``q`` QPs posts
    ``q`` of them in the time of one; otherwise it posts one after the other (a CPU
    thread, a proxy). ``status`` says how the costs were obtained: ``derived``,
    ``bound`` or ``assumption`` (data file).
    """

    name: str
    title: str
    wqe_cycles: float
    doorbell_cycles: float
    cqe_cycles: float
    doorbell_batch: int
    signal_every: int
    status: str
    source: str
    derivation: str
    parallel: bool = False

    def __post_init__(self):
        for k in ("wqe_cycles", "doorbell_cycles", "cqe_cycles"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                raise ValueError(f"issuer {self.name!r}: {k} must be a number >= 0, "
                                 f"not {v!r}")
        for k in ("doorbell_batch", "signal_every"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"issuer {self.name!r}: {k} must be an integer >= 1, "
                                 f"not {v!r}")
        if not isinstance(self.parallel, bool):
            raise ValueError(f"issuer {self.name!r}: parallel must be true or false, "
                             f"not {self.parallel!r}")
        if self.status not in ("derived", "bound", "assumption", "measured"):
            raise ValueError(f"issuer {self.name!r}: unknown status {self.status!r}")


def load_issuers(path=DATA / "issuers.toml"):
    """The issuer profiles of a data file, ``{name: IssuerProfile}``."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    return {name: IssuerProfile(name=name, **body) for name, body in doc.items()}


#: Issuer profiles from ``data/issuers.toml``: ``none``, ``cpu``, ``cpu_framework``,
#: ``gpu``, ``controller``.
ISSUERS = load_issuers()
