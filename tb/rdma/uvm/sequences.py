"""Sequences of RDMA WRITE work requests: a seeded random base and its variants.

Every sequence draws a QP set (:meth:`RdmaRandomSeq.make_qps`), sends ``count``
:class:`WriteItem` s and then one :class:`RdmaRunItem`. Variants change hooks only, and
a test selects one by a factory override of :class:`RdmaRandomSeq`:

=======================  ==================================================================
``RdmaRandomSeq``        1..24 QPs (the 16-entry context cache smaller or larger than the
                         QP count), 70 % good WRITEs, every error kind possible
``RdmaAllGoodSeq``       good WRITEs only, over as many QPs as cache entries
``RdmaErrorsHeavySeq``   every error kind among the first items (shuffled), then 70 % bad
``RdmaManyQpsSeq``       1 to 4 more QPs than cache entries, QPNs crowded on a few cache
                         lines (lookups miss and write back), one WRITE in three on the
                         last QP again (a hit: every WQE rings), good and access errors
=======================  ==================================================================

Doorbell-path WRITEs go round robin over the QPs (so that the QPs with traffic are as
many as drawn); inject-path ones to any QP. Rules the sequences keep (see :mod:`.items`):
after an access error, the requester has moved its PSN on while the responder has not,
so a QP that had one carries no further doorbell-path WRITE (it is *closed*; a fresh QP
is opened when none is left; a sequence that drew a single QP keeps it single by turning
access errors before its last item into good WRITEs). The doorbell player's stall
pattern (its gaps) is one per run, drawn from :attr:`RdmaRandomSeq.gap_rates`. A
:class:`Budget` keeps the test inside the players, recorders, host memories and the
inject run's limits.
"""

import random

from pyuvm import uvm_sequence

from .items import (
    ACCESS_KINDS,
    ERROR_KINDS,
    QP_TABLE,
    WIRE_KINDS,
    QpSpec,
    RdmaRunItem,
    WriteItem,
)
from .plan import INJECT_BEATS, INJECT_FRAMES, inject_cost

__all__ = ["Budget", "RdmaRandomSeq", "RdmaAllGoodSeq", "RdmaErrorsHeavySeq",
           "RdmaManyQpsSeq"]

#: Host-memory words (of each node) left for send queues, payloads and targets: the
#: context table and the CQ take the first ones.
_RESERVED_WORDS = QP_TABLE + 1024 + 64


class Budget:
    """Room left in the top's players, recorders and host memories.

    Doorbell run: doorbells (player), beats on the A->B link (recorder), CQEs
    (``completed`` recorder), payload words in each host memory. Inject run:
    :data:`INJECT_FRAMES` frames and :data:`INJECT_BEATS` beats (the responder's
    buffers), and the inject player's depth.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.used = {"doorbells": 0, "wire": 0, "events": 0, "words": 0, "inj_frames": 0,
                     "inj_beats": 0}
        self.limit = {"doorbells": cfg.doorbell_depth, "wire": cfg.wire_depth,
                      "events": cfg.event_depth,
                      "words": (cfg.depth - _RESERVED_WORDS) // 2,
                      "inj_frames": INJECT_FRAMES,
                      "inj_beats": min(INJECT_BEATS, cfg.inject_depth)}

    @staticmethod
    def need(item):
        words = 2 * -(-item.size // 64) + 2          # payload, target (with its gap), WQE
        if item.path == "inject":
            frames, beats = inject_cost(item)
            return {"inj_frames": frames, "inj_beats": beats, "words": words}
        return {"doorbells": 1, "events": 1, "words": words,
                "wire": sum(-(-n // 64) for n in item.frames())}

    def fits(self, item, reserve=0):
        """Whether ``item`` fits, keeping room for ``reserve`` more inject items of the
        smallest kind (two frames, four beats)."""
        need = self.need(item)
        keep = {"inj_frames": 2 * reserve, "inj_beats": 4 * reserve}
        return all(self.used[k] + v + keep.get(k, 0) <= self.limit[k] for k, v in need.items())

    def wire_room(self):
        """Whether one more (smallest) inject item fits."""
        return (self.used["inj_frames"] + 2 <= self.limit["inj_frames"]
                and self.used["inj_beats"] + 4 <= self.limit["inj_beats"])

    def take(self, item):
        for k, v in self.need(item).items():
            self.used[k] += v


class RdmaRandomSeq(uvm_sequence):
    """``count`` seeded random WRITEs over a random QP set, then the run.

    Call :meth:`configure` before ``start``. Hooks for variants: :attr:`error_weights`,
    :attr:`gap_rates`, :attr:`ring`, :meth:`qp_count`, :meth:`make_qps`, :meth:`pick_error`,
    :meth:`pick_qp`, :meth:`reserve`, :meth:`prepare`. After the run, :attr:`items` and
    :attr:`bad_qpn` hold what was sent.
    """

    #: Relative weight of each error kind.
    error_weights = {"none": 70, **{k: 3 for k in ERROR_KINDS if k != "none"}}
    #: Stall rates the doorbell player may get (0: back to back).
    gap_rates = (0, 0, 32, 96, 160, 224)
    #: Whether each WQE rings its doorbell (None: drawn per item).
    ring = None
    #: A single drawn QP stays single (access errors only on the last item).
    keep_single = True

    def __init__(self, name="RdmaRandomSeq"):
        super().__init__(name)
        self.cfg, self.seed, self.count = None, 1, 0
        self.items, self.qps, self.bad_qpn = [], [], None

    def configure(self, cfg, seed, count):
        self.cfg, self.seed, self.count = cfg, seed, count
        return self

    def prepare(self, rng):
        """Per-run draws of a variant (before the QPs)."""

    def qp_count(self, rng):
        """QPs of the run: 1..24, so that the 16-entry cache is smaller or larger."""
        return rng.choice((1, 1, 1, 2, 3, rng.randint(4, 15), 16, rng.randint(17, 24)))

    def _qpn_a(self, rng, k):
        """Requester QPN of the ``k``-th QP (uniform over the table)."""
        return rng.randrange(QP_TABLE)

    def _new_qp(self, rng):
        used_a = {q.qpn_a for q in self.qps}
        used_b = {q.qpn_b for q in self.qps} | {self.bad_qpn}
        a = self._qpn_a(rng, len(self.qps))
        while a in used_a:
            a = self._qpn_a(rng, len(self.qps))
        b = rng.randrange(QP_TABLE)
        while b in used_b:
            b = rng.randrange(QP_TABLE)
        psn = (1 << 24) - 1 - rng.randrange(6) if rng.random() < 0.2 else \
            rng.randrange(1 << 24)                     # near the wrap one time in five
        qp = QpSpec(a, b, rng.randint(8, 12), psn)
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

    def pick_qp(self, open_qps, rng):
        """The QP of a doorbell-path item: round robin over the open QPs."""
        self._turn += 1
        return open_qps[self._turn % len(open_qps)]

    async def body(self):
        if self.cfg is None:
            raise RuntimeError(f"{self.get_name()}: call configure(cfg, seed, count) first")
        cfg, rng = self.cfg, random.Random(self.seed)
        stall = (rng.randrange(1, 1 << 16), rng.choice(self.gap_rates))
        self.prepare(rng)
        self.make_qps(rng)
        single = len(self.qps) == 1 and self.keep_single
        closed, self._turn, self._last = set(), rng.randrange(64), None
        budget = Budget(cfg)
        for k in range(self.count):
            item = WriteItem(f"write{k}")
            await self.start_item(item)
            error = self.pick_error(k, rng)
            if error in WIRE_KINDS and not budget.wire_room():
                error = "none"
            if error in ACCESS_KINDS and single and k < self.count - 1:
                error = "none"                # one QP stays one: its access error comes last
            if error in WIRE_KINDS:
                qp = rng.choice(self.qps)
            else:
                open_qps = [q for q in self.qps if q not in closed]
                qp = self.pick_qp(open_qps, rng) if open_qps else self._new_qp(rng)
            if error.startswith("access"):
                closed.add(qp)
            item.randomize(rng, cfg, qp=qp, error=error, gap=stall[1], stall_seed=stall[0],
                           ring=self.ring,
                           accept=lambda it, k=k: budget.fits(it, self.reserve(k)))
            budget.take(item)
            self._last = qp
            self.items.append(item)
            await self.finish_item(item)
        run = RdmaRunItem("run")
        run.bad_qpn, run.qps = self.bad_qpn, tuple(self.qps)
        await self.start_item(run)
        await self.finish_item(run)


class RdmaAllGoodSeq(RdmaRandomSeq):
    """Good WRITEs only, over as many QPs as the cache has entries (round robin): every
    one completes with success and lands in host memory B."""

    error_weights = {"none": 1}

    def qp_count(self, rng):
        return self.cfg.cache_entries


class RdmaErrorsHeavySeq(RdmaRandomSeq):
    """Every error kind among the first items (shuffled), then seven bad WRITEs in ten."""

    error_weights = {"none": 30, **{k: 7 for k in ERROR_KINDS if k != "none"}}
    keep_single = False               # every kind must come, the access ones included

    def prepare(self, rng):
        self._first = [k for k in ERROR_KINDS if k != "none"]
        rng.shuffle(self._first)

    def pick_error(self, k, rng):
        return self._first[k] if k < len(self._first) else super().pick_error(k, rng)

    def reserve(self, k):
        return sum(e in WIRE_KINDS for e in self._first[k + 1:])


class RdmaManyQpsSeq(RdmaRandomSeq):
    """More QPs than cache entries (one to four more), used round robin, their QPNs on a
    quarter of the cache lines: the contexts thrash on both nodes (misses and dirty
    write-backs). Mostly good WRITEs, so that the doorbell run carries nearly all."""

    error_weights = {"none": 88, **{k: 3 for k in ACCESS_KINDS}}
    #: Every WQE rings: a WRITE on the last QP again is a second lookup (a hit).
    ring = True

    def qp_count(self, rng):
        return self.cfg.cache_entries + rng.randint(1, 4)

    def pick_qp(self, open_qps, rng):
        """Round robin, but one time in three the last QP again (a hit between misses)."""
        if self._last in open_qps and rng.random() < 1 / 3:
            return self._last
        return super().pick_qp(open_qps, rng)

    def prepare(self, rng):
        n = self.cfg.cache_entries
        self._lines = rng.sample(range(n), max(1, n // 4))

    def _qpn_a(self, rng, k):
        n = self.cfg.cache_entries
        return rng.choice(self._lines) + n * rng.randrange(QP_TABLE // n)
