"""Sequences of RDMA WRITE work requests: a seeded random base and its variants.

Every sequence draws the run's knobs (:class:`RunKnobs`: cache entries in use, serial,
ACK coalescing, the injection player's stalls) and a QP set, draws ``count`` (at most
:attr:`RdmaRandomSeq.max_count`) :class:`WriteItem` s, applies the posting rules below,
sends them and then one :class:`RdmaRunItem`. Variants change hooks only, and a test
selects one by a factory override of :class:`RdmaRandomSeq`:

=======================  ==================================================================
``RdmaRandomSeq``        1 QP to more QPs than cache entries in use (16 to 256 of them),
                         every posting flag drawn, ACK coalescing in one run in three,
                         70 % good WRITEs, every error kind possible
``RdmaAllGoodSeq``       good WRITEs only, over as many QPs as cache entries in use, at
                         most 12 items
``RdmaErrorsHeavySeq``   a good WRITE and every way to make every error kind among the
                         first 18 items (shuffled), then 70 % bad
``RdmaManyQpsSeq``       1 to 4 more QPs than the 16 entries in use, QPNs (both nodes)
                         crowded on a quarter of the cache lines (lookups miss and write
                         back), every third WRITE on the QP of the one before (a hit:
                         every WQE rings), good and access errors, at most 9 items
``RdmaOptimisedSeq``     the optimisations of the ladder at once: ACK coalescing, WQEs by
                         MMIO, inline payloads, doorbell batching, unsignalled WQEs; the
                         four ways to post a WQE among the first four items; one run in
                         two a burst of 17 WQEs under one doorbell
``RdmaSerialSeq``        one work item at a time (``serial``), at most 4 items
=======================  ==================================================================

Posting rules the sequences keep (see :mod:`.items`):

- the last WQE of each QP rings and is signalled (the host needs that CQE to know its
  QP is done; an unsignalled last WQE under ACK coalescing might never ask for an ACK);
- a WQE by MMIO announces itself alone: a QP's WQEs waiting for a doorbell get it just
  before (the last of them rings);
- with ACK coalescing, the QPs of a run use distinct cache entries: a QP whose message
  waits for an ACK keeps its entry busy, and a work item of another QP on that entry
  would hold up the requester's in-order front until the transport timer rewinds the
  first (docs/uvm.md, "Limits"); serial runs do not coalesce, for the same reason. This
  holds with the window state in the cache entries (``windows`` 0); with the default
  window state per QP the entry is free once the frames leave, and the rule is kept so
  that the runs stay valid on both.

A :class:`~.budget.Budget` keeps the test inside the players, recorders, host memories and the
inject run's limits.
"""

import random

from pyuvm import uvm_sequence

from .budget import Budget
from .config import CACHE_SIZES, RunKnobs
from .items import (
    ACCESS_KINDS,
    ERROR_KINDS,
    QP_TABLE,
    VARIANTS,
    WIRE_KINDS,
    QpSpec,
    RdmaRunItem,
    WriteItem,
)
from .plan import INJECT_MAX_RATE

__all__ = ["Budget", "RdmaRandomSeq", "RdmaAllGoodSeq", "RdmaErrorsHeavySeq",
           "RdmaManyQpsSeq", "RdmaOptimisedSeq", "RdmaSerialSeq"]

class RdmaRandomSeq(uvm_sequence):
    """``count`` seeded random WRITEs over a random QP set, then the run.

    Call :meth:`configure` before ``start``. Hooks for variants: :attr:`error_weights`,
    :attr:`max_count`, :meth:`draw_knobs`, :meth:`qp_count`, :meth:`stride`,
    :meth:`make_qps`, :meth:`pick_error`, :meth:`pick_qp`, :meth:`fixed`,
    :meth:`reserve`, :meth:`prepare`. After the run, :attr:`items`, :attr:`qps`,
    :attr:`knobs` and :attr:`bad_qpn` hold what was sent.
    """

    #: Relative weight of each error kind.
    error_weights = {"none": 70, **{k: 3 for k in ERROR_KINDS if k != "none"}}
    #: Most items of a test (a variant whose runs are long sends fewer).
    max_count = 1 << 16

    def __init__(self, name="RdmaRandomSeq"):
        super().__init__(name)
        self.cfg, self.seed, self.count = None, 1, 0
        self.items, self.qps, self.bad_qpn, self.knobs = [], [], None, None

    def configure(self, cfg, seed, count):
        self.cfg, self.seed, self.count = cfg, seed, count
        return self

    # -- hooks ------------------------------------------------------------------------
    def prepare(self, rng):
        """Per-run draws of a variant (after the knobs, before the QPs)."""

    def cache_sizes(self):
        """Cache entries a run may use (at most the top's capacity)."""
        return [c for c in CACHE_SIZES if c <= self.cfg.cache_capacity]

    def draw_knobs(self, rng):
        """The run's ports: cache entries in use, ACK coalescing one time in three."""
        ack = (1, 0)
        if rng.random() < 1 / 3:
            ack = (rng.choice((1, 2, 3, 4, 8, 16)), rng.choice((0, 0, 2, 8, 64)))
            if ack == (1, 0):
                ack = (4, 0)
        return RunKnobs(cache_entries=rng.choice(self.cache_sizes()), ack_every=ack[0],
                        ack_frames=ack[1], inject_stall=self._inject_stall(rng))

    @staticmethod
    def _inject_stall(rng):
        return rng.randrange(1, 1 << 16), rng.choice((0, 0, 32, 96, INJECT_MAX_RATE))

    def qp_count(self, rng):
        """QPs of the run: 1 to a few more than the cache entries in use (more only
        without coalescing: see the module docstring)."""
        c = self.knobs.cache_entries
        top = c if self.knobs.coalescing else c + 4
        return min(top, rng.choice((1, 1, 1, 2, 3, rng.randint(4, c - 1), c,
                                    rng.randint(c + 1, c + 4))))

    def stride(self, rng):
        """Send-queue slot of a new QP (``2**stride`` words): room for inline data or not."""
        return rng.choice((0, 0, 0, 1, 2, 2))

    def _qpn_a(self, rng, k):
        """Requester QPN of the ``k``-th QP (uniform over the table)."""
        return rng.randrange(QP_TABLE)

    def _qpn_b(self, rng, k):
        """Responder QPN of the ``k``-th QP (uniform over the table)."""
        return rng.randrange(QP_TABLE)

    def _new_qp(self, rng):
        used_a = {q.qpn_a for q in self.qps}
        lines = {q.qpn_a % self.knobs.cache_entries for q in self.qps}
        used_b = {q.qpn_b for q in self.qps} | {self.bad_qpn}
        while True:
            a = self._qpn_a(rng, len(self.qps))
            if a not in used_a and not (self.knobs.coalescing
                                        and a % self.knobs.cache_entries in lines):
                break
        b = self._qpn_b(rng, len(self.qps))
        while b in used_b:
            b = self._qpn_b(rng, len(self.qps))
        psn = (1 << 24) - 1 - rng.randrange(6) if rng.random() < 0.2 else \
            rng.randrange(1 << 24)                     # near the wrap one time in five
        qp = QpSpec(a, b, rng.randint(8, 12), psn, self.stride(rng))
        self.qps.append(qp)
        return qp

    def make_qps(self, rng):
        self.bad_qpn = rng.randrange(QP_TABLE)
        for _ in range(self.qp_count(rng)):
            self._new_qp(rng)

    def pick_error(self, k, rng):
        kinds = list(self.error_weights)
        return rng.choices(kinds, weights=[self.error_weights[e] for e in kinds])[0]

    def reserve(self, k):
        """Inject items that must still fit after item ``k`` (see the errors-heavy)."""
        return 0

    def pick_qp(self, k, rng):
        """The QP of host-path item ``k``: round robin over the QPs."""
        self._turn += 1
        return self.qps[self._turn % len(self.qps)]

    def fixed(self, k, qp, rng):
        """Posting flags item ``k`` must have (``bf``, ``inline``, ``ring``,
        ``signalled``, ``gap``); the others are drawn."""
        return {}

    # -- the body ---------------------------------------------------------------------
    def draw(self, rng):
        """The items, drawn under the budget, with the posting rules applied."""
        cfg, budget = self.cfg, Budget(self.cfg)
        unrung = {}
        for k in range(min(self.count, self.max_count)):
            item = WriteItem(f"write{k}")
            error = self.pick_error(k, rng)
            if error in WIRE_KINDS and not budget.wire_room():
                error = "none"
            qp = rng.choice(self.qps) if error in WIRE_KINDS else self.pick_qp(k, rng)
            item.randomize(rng, cfg, qp=qp, error=error, **self.fixed(k, qp, rng),
                           accept=lambda it, k=k: budget.fits(it, self.reserve(k)))
            budget.take(item)
            self._last = qp
            if item.path == "host":
                if item.bf and unrung.get(qp):
                    unrung.pop(qp)[-1].ring = True     # a doorbell for the waiting ones
                if item.announces:
                    unrung.pop(qp, None)
                else:
                    unrung.setdefault(qp, []).append(item)
            self.items.append(item)
        last = {it.qp: it for it in self.items if it.path == "host"}
        for it in last.values():
            it.ring = it.signalled = True

    def generate(self):
        """Draw the knobs, the QPs and the items from the sequence's seed (no simulator
        needed: the tests of the sequences call it alone)."""
        if self.cfg is None:
            raise RuntimeError(f"{self.get_name()}: call configure(cfg, seed, count) first")
        rng = random.Random(self.seed)
        self.knobs = self.draw_knobs(rng)
        self.prepare(rng)
        self.make_qps(rng)
        self._turn, self._last = rng.randrange(64), None
        self.draw(rng)
        return self

    async def body(self):
        self.generate()
        for item in self.items:
            await self.start_item(item)
            await self.finish_item(item)
        run = RdmaRunItem("run")
        run.bad_qpn, run.qps, run.knobs = self.bad_qpn, tuple(self.qps), self.knobs
        await self.start_item(run)
        await self.finish_item(run)


class RdmaAllGoodSeq(RdmaRandomSeq):
    """Good WRITEs only, over as many QPs as cache entries in use (round robin): every
    one completes (with a CQE when signalled) and lands in host memory B. At most 12
    items: each misses at both ends, and the responder's misses are one at a time."""

    error_weights = {"none": 1}
    max_count = 12

    def qp_count(self, rng):
        return self.knobs.cache_entries


class RdmaErrorsHeavySeq(RdmaRandomSeq):
    """A good WRITE and every way of making every error kind (each ``kind/variant`` of
    :data:`VARIANTS`) among the first 18 items (shuffled), then seven bad WRITEs in
    ten."""

    error_weights = {"none": 30, **{k: 7 for k in ERROR_KINDS if k != "none"}}

    def prepare(self, rng):
        self._first = [(k, v) for k in ERROR_KINDS for v in VARIANTS[k]]
        rng.shuffle(self._first)

    def pick_error(self, k, rng):
        return self._first[k][0] if k < len(self._first) else super().pick_error(k, rng)

    def fixed(self, k, qp, rng):
        return {"variant": self._first[k][1]} if k < len(self._first) else {}

    def reserve(self, k):
        return sum(e in WIRE_KINDS for e, _ in self._first[k + 1:])


class RdmaManyQpsSeq(RdmaRandomSeq):
    """More QPs than the 16 cache entries in use (one to four more), used round robin,
    their QPNs (at both nodes) on a quarter of the cache lines: the contexts thrash on
    both nodes (misses and dirty write-backs: the six QPs of nine items on four lines,
    some must share one). Every third WRITE goes to the QP of the one before (a hit between
    misses). Mostly good WRITEs; no ACK coalescing (QPs share entries)."""

    error_weights = {"none": 88, **{k: 3 for k in ACCESS_KINDS}}
    #: A miss waits for the QP on its entry to finish, then for a fill over PCIe: about
    #: a thousand cycles a WRITE. Nine items reach six QPs: two must share a line.
    max_count = 9

    def draw_knobs(self, rng):
        return RunKnobs(cache_entries=16, inject_stall=self._inject_stall(rng))

    def qp_count(self, rng):
        return self.knobs.cache_entries + rng.randint(1, 4)

    def pick_qp(self, k, rng):
        """Round robin, but every third item on the QP of the one before."""
        if self._last is not None and k % 3 == 2:
            return self._last
        return super().pick_qp(k, rng)

    def fixed(self, k, qp, rng):
        # Every WQE rings (each is its own lookup), back to back (the misses are the point).
        return {"ring": True, "gap": 0}

    def prepare(self, rng):
        n = self.knobs.cache_entries
        self._lines = rng.sample(range(n), max(1, n // 4))

    def _crowded(self, rng):
        n = self.knobs.cache_entries
        return rng.choice(self._lines) + n * rng.randrange(QP_TABLE // n)

    def _qpn_a(self, rng, k):
        return self._crowded(rng)

    def _qpn_b(self, rng, k):
        return self._crowded(rng)


class RdmaOptimisedSeq(RdmaRandomSeq):
    """The ladder's optimisations at once, over 1 to 4 QPs whose slots hold inline data:
    ACK coalescing (every 2nd to 16th message, or 8 to 64 frames), WQEs by MMIO, inline
    payloads, doorbell batching, unsignalled WQEs; good WRITEs and access errors. The
    first four items take the four ways to post a WQE (doorbell or MMIO, payload in
    memory or inline) in a random order; the first of them is inline and unsignalled, so
    that its frame goes without AckReq. One run in two (with 20 items or more) is a
    *burst*: from the fourth item on, every WQE goes to one QP without a doorbell until
    the last, so that one doorbell announces 17 or more WQEs (more than one WQE read of
    the prefetch depth, 16)."""

    error_weights = {"none": 85, **{k: 4 for k in ACCESS_KINDS}}
    #: First item of a burst (the four ways to post come first; the fourth, doorbell with
    #: the payload in memory, opens the burst).
    burst_from = 3

    def draw_knobs(self, rng):
        return RunKnobs(cache_entries=rng.choice(self.cache_sizes()),
                        ack_every=rng.choice((2, 3, 4, 8, 16)),
                        ack_frames=rng.choice((0, 8, 16, 64)),
                        inject_stall=self._inject_stall(rng))

    def qp_count(self, rng):
        return rng.randint(1, 4)

    def stride(self, rng):
        return 2

    def prepare(self, rng):
        self._burst = self.count - self.burst_from >= 17 and rng.random() < 0.5
        inline = [(bf, True) for bf in (False, True)]
        rest = [(True, False)]
        rng.shuffle(inline)
        rest.append(inline.pop())
        rng.shuffle(rest)
        tail = rest + [(False, False)]
        if not self._burst:
            rng.shuffle(tail)
        self._ways = inline + tail

    def pick_qp(self, k, rng):
        if self._burst and k >= self.burst_from:
            return self.qps[0]
        return super().pick_qp(k, rng)

    def fixed(self, k, qp, rng):
        if self._burst and k >= self.burst_from:
            return {"bf": False, "ring": False, "signalled": rng.random() < 0.3,
                    **({"inline": False} if k == self.burst_from else {})}
        if k >= len(self._ways):
            return {"signalled": rng.random() < 0.3}
        bf, inline = self._ways[k]
        return {"bf": bf, "inline": inline, **({"signalled": False} if k == 0 else {})}

    def pick_error(self, k, rng):
        error = super().pick_error(k, rng)
        # A burst stays one doorbell: no access error inside it (an access error rings).
        return "none" if k == 0 or (self._burst and k >= self.burst_from) else error


class RdmaSerialSeq(RdmaRandomSeq):
    """One work item at a time (the ``serial`` port: the requester's front takes the
    next doorbell or WQE by MMIO only when everything before is acknowledged), at most 4
    items (each takes two host round trips, context misses and the ACK: over PCIe 1300
    to 2000 cycles) over 1 to 3 QPs, every posting flag drawn; no ACK coalescing."""

    error_weights = {"none": 85, **{k: 4 for k in ACCESS_KINDS}}
    max_count = 4

    def draw_knobs(self, rng):
        return RunKnobs(cache_entries=rng.choice(self.cache_sizes()), serial=1,
                        inject_stall=self._inject_stall(rng))

    def qp_count(self, rng):
        return rng.randint(1, 3)

    def fixed(self, k, qp, rng):
        return {"gap": 0}                  # the front waits anyway
