"""Issuer profiles: what posting RDMA work costs whoever posts it (CPU, GPU, controller),
from ``data/issuers.toml`` (sourced there), for the carriers of
:mod:`analysis.workloads.carriers` and the load model of :mod:`analysis.load.rdma`."""

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


#: Issuer profiles from ``data/issuers.toml`` (``none``, ``cpu``, ``cpu_framework``,
#: ``gpu``, ``controller``) and ``ibgda`` (GPU warps posting as DeepEP does, priced from
#: its instruction sequence: :func:`ibgda_posting_cycles`).
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
#: :meth:`analysis.workloads.carriers.Carrier.fence_cycles`).
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


# The engine's GPU issuer: an SM writing WQEs and ringing doorbells as DeepEP does.
#: SM cycles of one round trip from an SM to the L2, the wait of a global atomic (served
#: at the L2) and of a fence or release (it waits for the SM's earlier stores to be
#: acknowledged): 200 cycles.
# Ref: Ultrasonics Sonochemistry 99 (2023) 106546, Table 3, "Hardware features of
# different Nvidia GPU architectures": H100 L2 cache latency 200 clock cycles (global
# memory 400). A lower bound: pointer-chase measurements of L2 hits on newer parts run
# 222-339 cycles (NVIDIA L40, arXiv 2606.22588), and a contended atomic or a release to
# MMIO waits longer.
L2_ROUND_TRIP_SM_CYCLES = 200
#: What one WQE and one doorbell cost the SM that posts them, in DeepEP's IBGDA code
#: (csrc/kernels/ibgda_device.cuh): ``(stores, waits)`` where a store is one 16-byte
#: vector store issued (one SM cycle) and a wait is one L2 round trip.
#: WQE (``nvshmemi_ibgda_put_nbi_warp``): an ``atomicAdd`` reserving the slot
#: (``ibgda_reserve_wqe_slots``), three 16-byte stores of the control, remote-address and
#: data segments (``ibgda_write_rdma_write_wqe``: a 48-byte WQE in its 64-byte slot), the
#: ``__threadfence()`` before submitting ("WQE writes must be finished first") and the
#: ``atomicCAS`` on the ready index (``ibgda_submit_requests``): 3 stores, 3 waits.
#: Doorbell (``ibgda_post_send``, once per ``kNumRequestInBatch = 4`` WQEs): the lock's
#: ``atomicCAS``, the ``atomicMax`` on the producer index, the doorbell record written
#: with ``st_na_release`` (``ibgda_update_dbr``) and the BlueFlame doorbell written with
#: ``st_na_release`` (``ibgda_ring_db``), each release waiting for the stores before it;
#: the lock's release is a CTA-scope fence and a store: 2 stores, 4 waits.
IBGDA_WQE = (3, 3)
IBGDA_DOORBELL = (2, 4)


def ibgda_posting_cycles(l2_round_trip=L2_ROUND_TRIP_SM_CYCLES, clock_ghz=SM_CLOCK_GHZ):
    """``(wqe_cycles, doorbell_cycles)`` in cycles of 1 ns of an SM posting one WQE and
    ringing one doorbell as :data:`IBGDA_WQE` and :data:`IBGDA_DOORBELL` count them: each
    store one SM cycle, each wait ``l2_round_trip`` SM cycles, at ``clock_ghz``."""
    for name, v in (("l2_round_trip", l2_round_trip), ("clock_ghz", clock_ghz)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a number > 0, not {v!r}")
    return tuple((st + waits * l2_round_trip) / clock_ghz
                 for st, waits in (IBGDA_WQE, IBGDA_DOORBELL))


_WQE, _DB = ibgda_posting_cycles()
ISSUERS["ibgda"] = IssuerProfile(
    name="ibgda",
    title="GPU warps posting WQEs as IBGDA/DeepEP do, one QP each, in parallel (priced from "
          "the instruction sequence)",
    wqe_cycles=_WQE, doorbell_cycles=_DB, cqe_cycles=0, doorbell_batch=4, signal_every=1,
    parallel=True, status="bound",
    source="DeepEP csrc/kernels/ibgda_device.cuh (nvshmemi_ibgda_put_nbi_warp, "
           "ibgda_submit_requests with kNumRequestInBatch = 4, ibgda_post_send, "
           "ibgda_update_dbr, ibgda_ring_db); H100 L2 latency 200 cycles (Ultrasonics "
           "Sonochemistry 99 (2023) 106546, Table 3); SM clock 1.98 GHz (H100 datasheet); "
           "parallel posters: as the gpu profile (one QP and doorbell per local expert)",
    derivation=f"WQE: 3 atomics/fences x {L2_ROUND_TRIP_SM_CYCLES} SM cycles + 3 stores = "
               f"{_WQE:.1f} ns; doorbell: 4 x {L2_ROUND_TRIP_SM_CYCLES} + 2 stores = "
               f"{_DB:.1f} ns, every 4th WQE; a lower bound (uncontended L2)")
