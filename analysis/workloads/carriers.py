"""Carrying a workload's messages by each design: per-message costs from the golden model.

A :class:`Carrier` answers one question, memoised per message size and connection count:
what does one message of ``msg_bytes`` cost on this design (:meth:`Carrier.cost`)? The
numbers come from an *engine cost function* with the signature of
:func:`analysis.fastpath.fast_point` (the default), never from constants of this module:

- NIC (``design="nic"``): a message is cut into stores of at most the NIC's
  ``max_payload`` (the accelerator issues stores; there is no descriptor, doorbell or
  completion queue). Its issuer (``issuer=``, :data:`NIC_ISSUERS`) is ``none`` (the
  stores cost the accelerator nothing) or ``sm``: a message of ``B`` bytes costs the SM
  ``issuer_cycles = sm_store_issue_cycles(B)`` (``ceil(B / 512)`` warp-wide 16-byte
  stores at one a cycle, 1.98 GHz), and a flag waits for a system-scope fence,
  :meth:`Carrier.fence_cycles` (applied by :func:`analysis.workloads.timing.comm_time`).
  Behind the ``pcie`` attachment (knob ``attachment="pcie"``) a store is one posted
  write of at most the PCIe profile's maximum payload (256 bytes,
  :data:`spec.host.PROFILES`), and its costs come from the NIC's cycle-level model
  (:func:`analysis.points.cycle_point`, exact; the fast path does not cover that
  attachment) over :data:`NIC_PCIE_MESSAGES` stores.
- RDMA (``design="rdma"``): a message is one WRITE (the engine segments it at the path
  MTU); a message above ``analysis.points.RDMA_MAX_BYTES`` (64 KiB, the largest the
  engine model accepts) is posted as several WRITEs. A :class:`Rung` of the
  optimisation ladder says which engine cost function and knobs to use and, optionally,
  its doorbell batching and completion signalling; an :class:`IssuerProfile` says what
  posting costs whoever posts (CPU, GPU, controller; ``data/issuers.toml``, sourced).
  :data:`RUNGS` are the rungs of :data:`spec.rdma_engine.LADDER` on the pipelined
  engine's fast path (:mod:`analysis.rdma.fastpath`); they post as the issuer does (a
  rung with ``posting=True`` hands the effective doorbell batch and signalling to the
  engine as its ``ring_every`` and ``signal_every`` knobs, so the engine's doorbells
  and CQEs are the issuer's). A WQE carries at most 192 bytes inline
  (:data:`spec.rdma_engine.MAX_INLINE_WORDS` words): on the inline rungs a larger
  payload is read from host memory, its WQE still written by MMIO (as mlx5's
  BlueFlame posts any WQE that fits its 256-byte buffer).

For a message of ``n`` engine messages (stores or WRITEs) of sizes ``s_1..s_n`` (the
engine's own numbers for back-to-back messages of one size: ``ii``, ``latency``, ...):

- ``ii_cycles = sum(ii(s_j))``; ``latency_cycles = sum(ii(s_j), j < n) + latency(s_n)``,
  the same for ``completion_cycles``; ``wire_bytes``, ``ctrl_ops``, ``ctrl_bytes`` are
  sums (``ctrl_ops`` is the total of the engine's control actions per message, the
  ``ctrl_ops`` dict of the engine summed over its kinds).
- Issuer (RDMA): one WQE per message, whatever its size (a real WRITE carries up to
  2**31 bytes, IBTA; only the engine *model* stops at 64 KiB, so a larger message is
  costed as consecutive 64 KiB WRITEs but posted once): ``wqes = 1``, ``doorbells = 1 /
  doorbell_batch``, ``cqes = 1 / signal_every``; ``issuer_cycles = wqe_cycles x wqes +
  doorbell_cycles x doorbells + cqe_cycles x cqes``.
- ``cycles = max(ii_cycles, issuer_cycles / lanes)``: the issuer and the engine work in
  parallel, one message apart, so the slower sets the rate. ``lanes`` is 1 for an
  issuer that posts one message after the other (a CPU thread or proxy) and ``conns``
  for a parallel one (GPU warps, a poster and a doorbell per QP: ``parallel`` in
  ``data/issuers.toml``); a message's own posting still takes ``issuer_cycles``.

``conns`` is what the engine keeps state for: RDMA queue pairs used round robin (the
engine model's ``qps``, up to 4096: context-cache misses appear when they outnumber the
cache entries), NIC destination peers (``peers``, up to 254; the NIC keeps no per-peer
state, so its cost does not depend on it).

Another engine plugs in as a :class:`Rung` with its own ``cost_fn`` and knobs; the
generator and the timing code do not change. Where the engine's fast path does not
cover a point (:mod:`analysis.rdma.fastpath`: e.g. ACK coalescing over many QPs, which
meets the transport timeout), :meth:`Carrier.cost` raises its ``ValueError``.

The issuer profiles are in :mod:`analysis.workloads.issuers`, the rungs in
:mod:`analysis.workloads.rungs`; this module re-exports their names.
"""

from dataclasses import dataclass

from analysis.workloads.issuers import (  # noqa: F401
    DATA,
    ISSUERS,
    NIC_ISSUERS,
    IssuerProfile,
    load_issuers,
    sm_store_issue_cycles,
)
from analysis.workloads.rungs import (  # noqa: F401  (re-exported for callers of this module)
    MAX_INLINE_BYTES,
    RUNGS,
    Rung,
    _default_cost_fn,
    ladder_cost,
)

__all__ = ["Carrier", "Rung", "IssuerProfile", "MessageCost", "RUNGS", "ISSUERS",
           "load_issuers", "NIC_FRAMINGS"]

NIC_FRAMINGS = ("compact", "l2")
_MAX_QPS = 4096
_MAX_PEERS = 254


#: Back-to-back messages each engine point runs by default: the fast path of the RDMA
#: engine gives the steady state from this many on (analysis.rdma.fastpath.MIN_MESSAGES).
MESSAGES = 2000
#: Stores each cycle-level point of the NIC behind PCIe runs: the steady state is reached
#: within a few stores (ii, latency, host bytes and in-flight bits are the same at 200
#: and 1,000 stores of 64, 256 and 1,024 bytes; tests/test_workloads_density.py).
NIC_PCIE_MESSAGES = 200

def _nic_pcie_cost_fn(design, *, msg_bytes, messages, **knobs):
    # The NIC's cycle-level model (the fast path does not cover the pcie attachment).
    from analysis.points import cycle_point
    return cycle_point(design, msg_bytes=msg_bytes, messages=min(messages, NIC_PCIE_MESSAGES),
                       **knobs)




@dataclass(frozen=True)
class MessageCost:
    """The cost of one message of ``msg_bytes`` on one carrier (see the module doc).

    Cycles are cycles of 1 ns; ``ctrl_by_kind`` is the engine's ``ctrl_ops`` dict summed
    over the message's stores or WRITEs; ``host_bytes`` is ``None`` where the engine
    model has no host interface (the integrated NIC); ``inflight_bits`` is the engine's
    state held in flight while it streams messages of this size back to back (the
    largest of its stores' or WRITEs' ``inflight_bits``).
    """

    msg_bytes: int
    chunks: int
    ii_cycles: float
    latency_cycles: float
    completion_cycles: float
    wire_bytes: float
    ctrl_ops: float
    ctrl_by_kind: dict
    ctrl_bytes: float
    host_bytes: float | None
    inflight_bits: float
    wqes: float
    doorbells: float
    cqes: float
    issuer_cycles: float
    cycles: float


class Carrier:
    """One design carrying messages, with per-message costs from an engine cost function.

    Parameters
    ----------
    design : {"nic", "rdma"}
    framing : {"compact", "l2"}
        The NIC's framing (ignored for RDMA).
    rung : str or Rung
        RDMA rung (a key of :data:`RUNGS` or a :class:`Rung`; default the pipelined
        engine); ignored for the NIC.
    issuer : str or IssuerProfile
        RDMA issuer (a key of :data:`ISSUERS`); for the NIC a key of
        :data:`NIC_ISSUERS` (``none``: the SMs' stores cost nothing; ``sm``: their issue
        cycles and a fence before each flag).
    knobs : dict
        Extra engine knobs (those of :func:`analysis.points.resolve` for the design, but
        ``qps``, ``peers`` and ``framing``, which the carrier sets).
    messages : int
        Back-to-back messages each engine point runs (at least 2 x ``conns`` are run, so
        every connection is used twice and the context cache reaches its steady state);
        default :data:`MESSAGES`.

    Raises
    ------
    ValueError
        For an unknown design, framing, rung or issuer, or an engine knob the cost
        function rejects (checked once, at construction, on a 64-byte message).
    """

    def __init__(self, design, *, framing="compact", rung="pipelined", issuer="none",
                 knobs=None, messages=MESSAGES):
        if design not in ("nic", "rdma"):
            raise ValueError(f"design must be 'nic' or 'rdma', not {design!r}")
        if design == "nic" and framing not in NIC_FRAMINGS:
            raise ValueError(f"framing must be one of {NIC_FRAMINGS}, not {framing!r}")
        if isinstance(rung, str):
            if rung not in RUNGS:
                raise ValueError(f"rung must be one of {sorted(RUNGS)}, not {rung!r}")
            rung = RUNGS[rung]
        if design == "nic":
            if not isinstance(issuer, str) or issuer not in NIC_ISSUERS:
                raise ValueError(f"issuer of the NIC must be one of {sorted(NIC_ISSUERS)}, "
                                 f"not {issuer!r}")
            issuer = NIC_ISSUERS[issuer]
        elif isinstance(issuer, str):
            if issuer not in ISSUERS:
                raise ValueError(f"issuer must be one of {sorted(ISSUERS)}, not {issuer!r}")
            issuer = ISSUERS[issuer]
        taken = sorted({"qps", "peers", "framing"} & set(knobs or {}))
        if taken:
            raise ValueError(f"knobs {taken} are set by the carrier (qps and peers per "
                             f"message from conns, framing from framing=)")
        if not isinstance(messages, int) or messages < 2:
            raise ValueError(f"messages must be an integer >= 2, not {messages!r}")
        self.design, self.framing, self.rung, self.issuer = design, framing, rung, issuer
        self.knobs = dict(knobs or {})
        self.messages = messages
        from analysis.points import NIC_DEFAULTS, RDMA_MAX_BYTES
        if design == "nic":
            self._knobs = dict(self.knobs, framing=framing)
            self._fn = _default_cost_fn
            #: Largest engine message: a NIC store of max_payload, a 64 KiB WRITE.
            self.max_chunk = self._knobs.get("max_payload", NIC_DEFAULTS["max_payload"])
            if self._knobs.get("attachment") == "pcie":
                from spec.host import PROFILES
                self._fn = _nic_pcie_cost_fn
                self.max_chunk = min(self.max_chunk, PROFILES["pcie"].max_payload)
        else:
            self._knobs = dict(rung.knobs, **self.knobs)
            if rung.posting:
                self._knobs.setdefault("ring_every", self.doorbell_batch)
                self._knobs.setdefault("signal_every", self.signal_every)
            self._fn = rung.cost_fn or _default_cost_fn
            self.max_chunk = RDMA_MAX_BYTES
        self._memo = {}
        self._point(64, 1)                        # surfaces a bad knob now

    @property
    def attachment(self):
        """Where the design meets its host: the NIC's ``attachment`` (``integrated`` or
        ``pcie``), the RDMA engine's host-interface profile (``pcie``, ``on_die``, ...)."""
        from analysis.points import NIC_DEFAULTS, RDMA_DEFAULTS
        if self.design == "nic":
            return self._knobs.get("attachment", NIC_DEFAULTS["attachment"])
        return self._knobs.get("host", RDMA_DEFAULTS["host"])

    @property
    def name(self):
        """A short label: ``nic-compact``, ``rdma-sequential-gpu``, ..."""
        if self.design == "nic":
            return f"nic-{self.framing}" + ("-sm" if self.issuer.name == "sm" else "")
        return f"rdma-{self.rung.name}-{self.issuer.name}"

    @property
    def doorbell_batch(self):
        """WQEs per doorbell (the rung's, else the issuer's)."""
        return self.rung.doorbell_batch or self.issuer.doorbell_batch

    @property
    def signal_every(self):
        """WQEs per CQE (the rung's, else the issuer's)."""
        return self.rung.signal_every or self.issuer.signal_every

    def _point(self, size, conns):
        key = (size, conns)
        if key not in self._memo:
            if self.design == "nic":
                cap = 15 if self._knobs.get("attachment") == "pcie" else _MAX_PEERS
                knobs = dict(self._knobs, peers=min(conns, cap))
                n = max(self.messages, 2 * knobs["peers"] + 2)
            else:
                knobs = dict(self._knobs, qps=min(conns, _MAX_QPS))
                n = max(self.messages, 2 * knobs["qps"])
            self._memo[key] = self._fn(self.design, msg_bytes=size, messages=n, **knobs)
        return self._memo[key]

    def fence_cycles(self, msg_bytes, conns=1):
        """Cycles a flag waits behind a system-scope fence (PTX ``fence.sc.sys``, or the
        flag as ``st.release.sys``) after a data message of ``msg_bytes`` sent over
        ``conns`` peers: the flag leaves when the message's last store is complete, as the
        NIC's model computes its completion (the engine model's ``completion_cycles``,
        the link credit of its last beat), less the store's issue interval (``ii``),
        which the sender's occupancy already counts. 0 for an RDMA carrier and for the
        NIC's ``none`` issuer."""
        for name, v in (("msg_bytes", msg_bytes), ("conns", conns)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, not {v!r}")
        if self.design != "nic" or self.issuer.name != "sm":
            return 0.0
        last = msg_bytes % self.max_chunk or self.max_chunk
        p = self._point(last, conns)
        return max(float(p["completion_cycles"] - p["ii_cycles"]), 0.0)

    def cost(self, msg_bytes, conns=1):
        """The :class:`MessageCost` of one message of ``msg_bytes`` (an int >= 1) when the
        sender spreads its messages over ``conns`` connections (QPs or peers, >= 1).
        Raises ``ValueError`` naming ``msg_bytes`` or ``conns`` when out of range, and the
        engine cost function's ``ValueError`` for a point it does not cover (the fast
        path says so; there is no silent fallback to other numbers)."""
        for name, v in (("msg_bytes", msg_bytes), ("conns", conns)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, not {v!r}")
        key = ("cost", msg_bytes, conns)
        if key in self._memo:
            return self._memo[key]
        full, rest = divmod(msg_bytes, self.max_chunk)
        parts = [(self.max_chunk, full)] if full else []
        if rest:
            parts.append((rest, 1))
        pts = [(self._point(s, conns), k) for s, k in parts]
        last = pts[-1][0]
        n = full + (1 if rest else 0)
        ii = sum(p["ii_cycles"] * k for p, k in pts)
        kinds = {}
        for p, k in pts:
            for kind, v in p["ctrl_ops"].items():
                kinds[kind] = kinds.get(kind, 0) + v * k
        host = (None if any(p.get("host_bytes") is None for p, _ in pts)
                else sum(p["host_bytes"] * k for p, k in pts))
        if self.design == "nic":
            wqes = doorbells = cqes = 0
            issuer = sm_store_issue_cycles(msg_bytes) if self.issuer.name == "sm" else 0
        else:
            wqes = 1
            doorbells = 1 / self.doorbell_batch
            cqes = 1 / self.signal_every
            issuer = (self.issuer.wqe_cycles * wqes + self.issuer.doorbell_cycles
                      * doorbells + self.issuer.cqe_cycles * cqes)
        # A parallel issuer posts on every QP at once: per message, 1/conns of its cost.
        lanes = min(conns, _MAX_QPS) if self.design == "rdma" and self.issuer.parallel else 1
        cost = MessageCost(
            msg_bytes=msg_bytes, chunks=n, ii_cycles=ii,
            latency_cycles=ii - last["ii_cycles"] + last["latency_cycles"],
            completion_cycles=ii - last["ii_cycles"] + last["completion_cycles"],
            wire_bytes=sum(p["wire_bytes"] * k for p, k in pts),
            ctrl_ops=sum(kinds.values()), ctrl_by_kind=kinds,
            ctrl_bytes=sum(p["ctrl_bytes"] * k for p, k in pts), host_bytes=host,
            inflight_bits=max(p.get("inflight_bits") or 0 for p, _ in pts),
            wqes=wqes, doorbells=doorbells, cqes=cqes, issuer_cycles=issuer,
            cycles=max(ii, issuer / lanes))
        self._memo[key] = cost
        return cost
