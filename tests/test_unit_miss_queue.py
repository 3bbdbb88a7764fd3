"""The requester's miss queue against its twin (Amaranth simulator), and its contract.

The random runs drive the cache's answers (which entries are filled) from a seeded
pattern and compare every item taken and passed on, with its cycle
(:func:`tb.stage_harness.compare_stage`). The directed runs check the contract of
:class:`rtl.rdma.req.miss_queue.MissQueue` with expected orders and cycles derived by
hand from its docstring.
"""

import random

import pytest

from pymodel.cycle import Fifo
from pymodel.fields import unpack
from pymodel.rdma.config import Config
from pymodel.rdma.req.miss_queue import MissQueueModel
from rtl.rdma.req.miss_queue import MissQueue
from rtl.rdma.req.requester import Requester
from spec.rdma_engine import ContextCacheShape
from spec.rdma_stages import fetch_layout
from tb.stage_harness import compare_stage

ENTRIES = 16


class _Cache:
    """The cache as the miss queue sees it: ``ready(e)`` for this cycle's filled set."""

    def __init__(self):
        self.filling = set()

    def ready(self, e):
        return e not in self.filling


class _Twin:
    """The miss queue's twin with ``o`` written into the harness's output FIFO, as the
    RTL's ``o`` feeds the FIFO (``o.ready`` is the FIFO's room at the start of the
    cycle)."""

    def __init__(self, fifos, depth, cache, filling_of):
        self.fifos, self.cache, self.filling_of = fifos, cache, filling_of
        self.mq = MissQueueModel(cache, fifos["i"], depth)

    def step(self, c, side):
        self.cache.filling = self.filling_of(c)
        out = self.fifos["o"]
        if out.can_write() and self.mq.can_read():
            out.write(self.mq.read())
        self.mq.step(c)
        return {"waiting": len(self.mq.side.q), "filled.ready": 1}

    def commit(self):
        self.mq.side.commit()

    def busy(self):
        """Items in the side queue (they wait for their entries' fills)."""
        return bool(self.mq.side.q)


def _item(e, k, bf=0):
    """An item of entry ``e``; ``sq_tail`` numbers it (``k``) so that order is seen."""
    return dict(qpn=e + ENTRIES * 3, sq_tail=k, bf=bf, modify=0, entry=e)


def _run(depth, items, filling_of, cycles, rate=1.0, pop_rate=1.0, seed=1, quiet=None):
    box = {}

    def side_in(c, peek):
        f = filling_of(c)
        return {"filled_i.ready": lambda peek: int(peek("filled_i.entry") not in f),
                "filled_s.ready": lambda peek: int(peek("filled_s.entry") not in f)}

    def make(fifos):
        box["t"] = t = _Twin(fifos, depth, _Cache(), filling_of)
        return t

    out = compare_stage(MissQueue(ENTRIES, depth), make, inputs={"i": 8}, outputs={"o": 8},
                        stimulus={"i": items}, cycles=cycles, seed=seed, push_rate=rate,
                        pop_rate=pop_rate, side_in=side_in, side_out=("waiting", "filled.ready"),
                        quiet=quiet)
    got = [(c, unpack(fetch_layout(), v)) for c, v in out["o"]]
    return got, out, box["t"]


def _orders_kept(items, got):
    """Every item passed once; per entry, and among ``bf`` items, in the input order."""
    assert sorted(g["sq_tail"] for _, g in got) == sorted(it["sq_tail"] for it in items)
    for e in range(ENTRIES):
        want = [it["sq_tail"] for it in items if it["entry"] == e]
        assert [g["sq_tail"] for _, g in got if g["entry"] == e] == want, f"entry {e}"
    assert ([g["sq_tail"] for _, g in got if g["bf"]]
            == [it["sq_tail"] for it in items if it["bf"]])


@pytest.mark.parametrize("seed,rate,depth", [(1, 1.0, 8), (2, 0.5, 3), (3, 0.8, 1)])
def test_miss_queue_matches_twin(seed, rate, depth):
    rng = random.Random(seed)
    items = [_item(rng.randrange(6), k, bf=int(rng.random() < 0.2)) for k in range(150)]
    # Entries start and stop filling at random (a few at a time).
    pattern, cur = [], set()
    for _ in range(3000):
        if rng.random() < 0.08:
            cur = cur ^ {rng.randrange(6)}
        pattern.append(frozenset(cur))
    # An item waits for its entry's fill in the side queue (the twin busy) or at the
    # head of ``i``: no wait of its own once both are empty; 64: with margin.
    got, out, twin = _run(depth, items, lambda c: pattern[c], 3000, rate, rate, seed,
                          quiet=64)
    _orders_kept(items, got)
    assert twin.mq.count["stepped_aside"] > 10
    # Someone passed: an item left before one that entered earlier.
    seq = [g["sq_tail"] for _, g in got]
    assert seq != sorted(seq)


def test_items_pass_a_filling_one():
    # Entry 0 fills until cycle 20. Items: A (entry 0), B (entry 1), C (entry 0),
    # D (entry 2), pushed one a cycle from cycle 0, each in i from the cycle after.
    items = [_item(0, 0), _item(1, 1), _item(0, 2), _item(2, 3)]
    got, out, _ = _run(4, items, lambda c: {0} if c < 20 else set(), 40)
    # A steps aside at 1; B passes at 2; C steps aside at 3 (A of its entry waits);
    # D passes at 4. Entry 0 filled from cycle 20: A leaves at 20, C at 21.
    assert [(c, g["sq_tail"]) for c, g in got] == [(2, 1), (4, 3), (20, 0), (21, 2)]
    assert out["taken"]["i"] == [1, 2, 3, 4]


def test_full_side_queue_blocks():
    # Depth 2: A, B, C of filling entries 0, 1, 2, then D of filled entry 3.
    items = [_item(0, 0), _item(1, 1), _item(2, 2), _item(3, 3)]
    got, out, _ = _run(2, items, lambda c: {0, 1, 2} if c < 20 else set(), 40)
    # A and B step aside at 1 and 2; the side queue is full, so C waits at the head of
    # i and D behind it. From cycle 20 all are filled: A leaves from the side queue at
    # 20 while C may go directly (no item of entry 2 waits aside) but waits for ``o``
    # behind A; B at 21; then C at 22, D at 23.
    assert [(c, g["sq_tail"]) for c, g in got] == [(20, 0), (21, 1), (22, 2), (23, 3)]


def test_bf_items_keep_their_order():
    # A WQE by MMIO (bf) of filling entry 0 steps aside; a later bf item of a filled
    # entry may not pass it (their words share one FIFO); a plain item may.
    items = [_item(0, 0, bf=1), _item(1, 1, bf=1), _item(2, 2)]
    got, _, _ = _run(4, items, lambda c: {0} if c < 20 else set(), 40)
    assert [(c, g["sq_tail"]) for c, g in got] == [(3, 2), (20, 0), (21, 1)]


def test_depth_checked():
    with pytest.raises(ValueError, match="miss queue depth"):
        MissQueue(ENTRIES, 0)
    with pytest.raises(ValueError, match="miss queue depth"):
        MissQueue(ENTRIES, 65)
    with pytest.raises(ValueError, match="miss queue depth"):
        Requester(ContextCacheShape(16), miss_queue=65)
    with pytest.raises(ValueError, match="miss_queue"):
        Config(miss_queue=-1)
    with pytest.raises(ValueError, match="miss queue depth"):
        MissQueueModel(_Cache(), Fifo(4), 0)
    from analysis.load.rdma_knobs import check_load_knobs
    with pytest.raises(ValueError, match="miss_queue"):
        check_load_knobs(128, 10, {"miss_queue": 65})
    assert check_load_knobs(128, 10, {})["miss_queue"] == 0


def test_depth_0_builds_no_miss_queue():
    # 0 is the blocking behaviour: the fetch FIFO feeds the WQE fetch stage directly.
    from amaranth.hdl import Fragment
    names = lambda r: {s[1] for s in Fragment.get(r, None).subfragments}  # noqa: E731
    assert "miss" not in names(Requester(ContextCacheShape(16)))
    assert "miss" in names(Requester(ContextCacheShape(16), miss_queue=8))


def test_fast_path_refuses_a_miss_queue():
    # Items passing one another are the cycle model's schedule, not the closed forms'.
    from analysis.fastpath import fast_point
    with pytest.raises(ValueError, match="miss queue"):
        fast_point("rdma", msg_bytes=128, messages=256, qps=64, miss_queue=8)
    with pytest.raises(ValueError, match="miss_queue"):
        fast_point("rdma", msg_bytes=128, messages=256, miss_queue=65)


def test_system_model_skipping_with_a_miss_queue():
    # The system model's idle skipping changes nothing with items waiting aside
    # (test_rdma_system_model.py does the same without a miss queue): 300 QPs over 16
    # entries miss on most messages.
    import dataclasses

    from pymodel.rdma.system import simulate
    from tb.rdma.cocotb_rdma import config, scenario

    params = dict(kind="writes", messages=80, sizes=[64, 200], qps=300, cache_entries=16,
                  rung="+doorbell batching 16")
    runs = []
    for skip in (False, True):
        cfg, knobs = config({"miss_queue": 8}, params)
        assert cfg.miss_queue == 8
        v, _, _ = scenario(params, cfg, knobs)
        items, release = v.mmio_items()
        cfg = dataclasses.replace(cfg, cq_base=v.cq_base, cq_log2=v.cq_log2)
        runs.append(simulate(cfg, v.mem_a, v.mem_b, v.mr_table, items, release, skip=skip))
    full, skipped = runs
    assert full["wire_ab"] and len(full["completed"]) > 0
    for key in ("wire_ab", "wire_ba", "written", "completed", "mmio_stamps", "req", "resp",
                "host_a", "host_b", "links", "mem_a", "mem_b"):
        assert skipped[key] == full[key], key
