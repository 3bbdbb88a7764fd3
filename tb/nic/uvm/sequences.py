"""Sequences of store items: a seeded random base and its variants.

Every sequence sends ``count`` :class:`StoreItem` s and then one :class:`NicRunItem`
(the driver runs the design on it). Variants change hooks only, and a test selects one
by a factory override of :class:`NicRandomSeq`:

==========================  =============================================================
``NicRandomSeq``            mostly good stores, a few of each error kind, any src -> dst
``NicAllGoodSeq``           good stores only
``NicErrorsHeavySeq``       every error kind in the first items, then 3 in 4 bad
``NicHotspotSeq``           every store to one node (drawn), errors as the base
==========================  =============================================================

Gaps: each source's command player gets one seeded stall pattern, ``(seed, rate)``
drawn from :attr:`NicRandomSeq.gap_rates`; its items carry it (``gap``/``stall_seed``).
"""

import random

from pyuvm import uvm_sequence

from spec.formats.nic import frame_beats

from .items import ERROR_KINDS, NicRunItem, StoreItem

__all__ = ["Budget", "NicRandomSeq", "NicAllGoodSeq", "NicErrorsHeavySeq", "NicHotspotSeq"]


class Budget:
    """Room left in the top's players and recorders, so that a test never overflows them.

    Per source: command beats (``cmd<p>`` player) and uplink beats (``tx<p>`` and
    ``cr<p>`` recorders: one credit per uplink beat). Per destination port: local-memory
    writes (``wr<p>``, bounded by the store's beats) and corrupted beats (``flt<p>``).
    A sequence keeps room for the items it has still to draw, so that the last ones
    always fit (a hot spot fills one port's write recorder).
    """

    def __init__(self, cfg):
        self.cfg = cfg
        n = cfg.nodes
        self.used = {"cmd": [0] * n, "tx": [0] * n, "wr": [0] * n, "flt": [0] * n}
        self.limit = {"cmd": cfg.cmd_depth, "tx": cfg.event_depth, "wr": cfg.event_depth,
                      "flt": cfg.fault_depth}

    def need(self, item):
        cfg, w = self.cfg, self.cfg.width
        beats = -(-item.size // w)
        tx = sum(frame_beats(w, cfg.framing, len(s.payload)) for s in item.segments(cfg))
        port = cfg.port_of(item.dst)
        return {"cmd": (item.src, beats), "tx": (item.src, tx), "wr": (port, beats),
                "flt": (port, int(item.error == "fcs"))}

    def fits(self, item, later=0):
        """Whether ``item`` fits and still leaves room for ``later`` more items of the
        smallest kind (one command beat, one store frame, one write), anywhere."""
        least = {"cmd": 1, "tx": frame_beats(self.cfg.width, self.cfg.framing, 1), "wr": 1,
                 "flt": 0}
        return all(self.used[k][p] + v + later * least[k] <= self.limit[k]
                   for k, (p, v) in self.need(item).items())

    def take(self, item):
        for k, (p, v) in self.need(item).items():
            self.used[k][p] += v


class NicRandomSeq(uvm_sequence):
    """``count`` seeded random stores, then the run.

    Call :meth:`configure` before ``start``. Hooks for variants: :attr:`error_weights`,
    :attr:`gap_rates`, :meth:`pick_error`, :meth:`pick_port`, :meth:`prepare`.
    """

    #: Relative weight of each error kind.
    error_weights = {"none": 72, "fcs": 5, "wrong_dst": 5, "misaligned": 5, "length_lie": 5,
                     "out_of_window": 4, "unauthorised": 4}
    #: Stall rates a source's player may get (0: back to back).
    gap_rates = (0, 0, 32, 96, 160)

    def __init__(self, name="NicRandomSeq"):
        super().__init__(name)
        self.cfg, self.seed, self.count = None, 1, 0
        self.items = []

    def configure(self, cfg, seed, count):
        self.cfg, self.seed, self.count = cfg, seed, count
        return self

    def prepare(self, rng):
        """Per-run draws of a variant (before the first item)."""

    def pick_error(self, k, rng):
        kinds = list(self.error_weights)
        return rng.choices(kinds, weights=[self.error_weights[e] for e in kinds])[0]

    def pick_port(self, k, rng):
        """The destination port of item ``k`` (``None``: uniform)."""
        return None

    async def body(self):
        if self.cfg is None:
            raise RuntimeError(f"{self.get_name()}: call configure(cfg, seed, count) first")
        cfg, rng = self.cfg, random.Random(self.seed)
        gaps = {p: (rng.randrange(1, 1 << 16), rng.choice(self.gap_rates))
                for p in range(cfg.nodes)}
        self.prepare(rng)
        budget = Budget(cfg)
        for k in range(self.count):
            item = StoreItem(f"store{k}")
            await self.start_item(item)
            src = rng.randrange(cfg.nodes)
            seed, rate = gaps[src]
            item.randomize(rng, cfg, error=self.pick_error(k, rng), src=src,
                           port=self.pick_port(k, rng), gap=rate, stall_seed=seed,
                           accept=lambda it, left=self.count - k - 1: budget.fits(it, left))
            budget.take(item)
            self.items.append(item)
            await self.finish_item(item)
        run = NicRunItem("run")
        await self.start_item(run)
        await self.finish_item(run)


class NicAllGoodSeq(NicRandomSeq):
    """Good stores only: every one must be delivered."""

    error_weights = {"none": 1}


class NicErrorsHeavySeq(NicRandomSeq):
    """Every error kind among the first items (shuffled), then three bad stores in four."""

    error_weights = {"none": 25, "fcs": 13, "wrong_dst": 13, "misaligned": 13,
                     "length_lie": 13, "out_of_window": 13, "unauthorised": 13}

    def prepare(self, rng):
        self._first = list(ERROR_KINDS)
        rng.shuffle(self._first)

    def pick_error(self, k, rng):
        return self._first[k] if k < len(self._first) else super().pick_error(k, rng)


class NicHotspotSeq(NicRandomSeq):
    """Every store to one port (drawn per run): the egress and the receiver of that node
    are the bottleneck; credits hold the senders back."""

    def prepare(self, rng):
        self.hot = rng.randrange(self.cfg.nodes)

    def pick_port(self, k, rng):
        return self.hot
