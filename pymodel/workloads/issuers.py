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


# The NIC's issuer: the SM instructions that write a message into the NIC's window.
#: Bytes one warp-wide vector store moves: 32 threads (CUDA C++ Programming Guide, "SIMT
#: Architecture": a warp is 32 threads) x 16 bytes (PTX ISA, "st": ``.v4`` of ``.b32``,
#: a 16-byte vector store per thread).
SM_STORE_BYTES = 32 * 16
#: Clock the SM's issue cycles are converted with, GHz: H100 SXM5 boost clock, 1.98 GHz
#: (NVIDIA H100 Tensor Core GPU datasheet: 67 TFLOPS FP32 = 132 SMs x 128 FP32 lanes x 2
#: FLOP x 1.98 GHz; NVIDIA H100 Tensor Core GPU Architecture whitepaper: 132 SMs of 128
#: FP32 lanes on the SXM5 part).
SM_CLOCK_GHZ = 1.98


def sm_store_issue_cycles(msg_bytes):
    """Cycles of 1 ns an SM takes to issue the stores of a ``msg_bytes`` message:
    ``ceil(msg_bytes / SM_STORE_BYTES)`` warp-wide 16-byte vector stores, one instruction
    issued per cycle by the warp's sub-partition scheduler (NVIDIA H100 Tensor Core GPU
    Architecture whitepaper: each of an SM's four partitions has one warp scheduler
    dispatching one warp instruction per clock), at :data:`SM_CLOCK_GHZ`.
    ``ValueError`` naming ``msg_bytes`` unless it is an integer >= 1."""
    if not isinstance(msg_bytes, int) or isinstance(msg_bytes, bool) or msg_bytes < 1:
        raise ValueError(f"msg_bytes must be an integer >= 1, not {msg_bytes!r}")
    return -(-msg_bytes // SM_STORE_BYTES) / SM_CLOCK_GHZ


#: The NIC's issuer profiles (stores from the accelerator's SMs; no WQE, doorbell or CQE):
#: ``none`` (stores cost the SM nothing) and ``sm`` (the stores' issue cycles,
#: :func:`sm_store_issue_cycles`, and a system-scope fence before each flag, whose cost
#: is the completion of the last data store as the NIC's model computes it:
#: :meth:`pymodel.workloads.carriers.Carrier.fence_cycles`).
NIC_ISSUERS = {
    "none": ISSUERS["none"],
    "sm": IssuerProfile(
        name="sm", title="SM warps storing into the NIC's window, a fence before each flag",
        wqe_cycles=0, doorbell_cycles=0, cqe_cycles=0, doorbell_batch=1, signal_every=1,
        status="derived",
        source="PTX ISA: st.v4 (16 bytes a thread), fence.sc.sys / st.release.sys (memory "
               "consistency model: a release at system scope orders the thread's earlier "
               "stores before the flag); CUDA C++ Programming Guide: 32-thread warps; H100 "
               "whitepaper: one warp instruction issued per clock per SM partition; H100 "
               "datasheet: 1.98 GHz boost clock",
        derivation="stores: ceil(B / 512) issue cycles at 1.98 GHz; fence: the last data "
                   "store's completion less its issue interval, from the NIC's model, once "
                   "per flag"),
}
