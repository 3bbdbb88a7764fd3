"""The QP-context cache against its twin (Amaranth simulator), cycle by cycle."""

import random

import pytest

from pymodel.fields import pack, unpack
from pymodel.rdma.context_cache import ContextCacheModel
from rtl.rdma.context_cache import ContextCache
from spec.formats.roce import QPC_DYNAMIC_FIELDS, QPC_DYNAMIC_MASK, QPC_LAYOUT, qpc_image
from spec.rdma_stages import group_layout
from tb.amsim import run_sim

GROUPS = {"fetch": ("sq_head",), "seq": ("next_psn", "pmtu_log2")}
#: Groups of dynamic fields only, as the engines' (a context of several words writes back
#: only its dynamic word).
DYN_GROUPS = {"fetch": ("sq_head",), "seq": ("next_psn", "ack_msgs")}
assert set(DYN_GROUPS["fetch"] + DYN_GROUPS["seq"]) <= set(QPC_DYNAMIC_FIELDS)
BASE = 100


def _host_word(qpn):
    return pack(QPC_LAYOUT, valid=1, pmtu_log2=8 + qpn % 5, next_psn=qpn * 7,
                sq_head=qpn * 3, sq_base=1000 + qpn, dest_qp=qpn + 1)


@pytest.mark.parametrize("seed,entries,used,ways,words", [
    (1, 16, 16, 1, 1), (2, 16, 16, 1, 1), (3, 64, 16, 1, 1), (4, 64, 32, 1, 1),
    (5, 16, 16, 4, 1), (6, 64, 32, 8, 1), (7, 32, 16, 2, 1),
    (8, 16, 16, 1, 2), (9, 16, 16, 2, 4), (10, 32, 16, 4, 16), (11, 16, 16, 1, 4)])
def test_cache_matches_model(seed, entries, used, ways, words):
    """Random lookups, fills, write-backs and group writes; ``used`` of ``entries``
    entries in use (the ``cache_log2`` port), ``ways`` ways per set, contexts of
    ``words`` host words (the ``qpc_log2`` port): the lookup's ``entry``, ``hit`` and
    ``victim``, a probe, the fill reads and write-backs, ``busy_skips`` and the
    discarded fill words as the twin's. With several words, a fill's words 2.. are
    random (they must not reach the cache) and its static word's dynamic fields too
    (they must come from word 0); a write-back is one word at ``BASE + qpn * words``
    with only dynamic fields."""
    groups = GROUPS if words == 1 else DYN_GROUPS
    dut = ContextCache(entries, 1 << 12, groups, static_reads=1, probes=1, ways=ways)
    model = ContextCacheModel(entries, groups, BASE, depth=1 << 12, used=used, ways=ways,
                              qpc_words=words)
    rng = random.Random(seed)
    # More QPs than ways in a set (conflict misses) with any associativity.
    qpns = [rng.randrange(4 * used) for _ in range(12 if ways == 1 else 2 * used)]
    latency = 6
    log = []

    async def bench(ctx):
        ctx.set(dut.base, BASE)
        ctx.set(dut.cache_log2, used.bit_length() - 1)
        ctx.set(dut.qpc_log2, words.bit_length() - 1)
        pending = []            # (due cycle, word) of fill reads, in order
        host = {}               # write-backs seen: addr -> word
        for c in range(1500):
            # --- inputs of this cycle ---
            want_req = rng.random() < 0.6
            qpn = rng.choice(qpns)
            busy = rng.random() < 0.2
            fill_room, wb_room = rng.random() < 0.8, rng.random() < 0.8
            fill_word = None
            if pending and pending[0][0] <= c:
                fill_word = pending.pop(0)[1]
            e = rng.randrange(used)
            grp = rng.choice(list(groups))
            write = (rng.random() < 0.3 and model.tags[e] is not None and model.ready(e))
            values = {f: rng.getrandbits(4) for f in groups[grp]}
            ctx.set(dut.req.valid, want_req)
            ctx.set(dut.req.payload.qpn, qpn)
            ctx.set(dut.victim_busy, busy)
            ctx.set(dut.fill_rd.ready, fill_room)
            ctx.set(dut.wb.ready, wb_room)
            ctx.set(dut.fill_data.valid, fill_word is not None)
            ctx.set(dut.fill_data.payload, fill_word or 0)
            ctx.set(dut.filled.entry, e)
            ctx.set(dut.reads[0].addr, e)
            probe_qpn = rng.choice(qpns)
            ctx.set(dut.probe[0].qpn, probe_qpn)
            for g in groups:
                ctx.set(getattr(dut, g).addr, e)
                ctx.set(getattr(dut, g).we, write and g == grp)
            ctx.set(getattr(dut, grp).wdata, group_layout(groups[grp]).const(values))
            # --- the model's view of the same cycle ---
            want = dict(q_ready=model.ready(e), static=model.static[e],
                        groups={g: model.group(g, e) for g in groups},
                        entry=model.entry_of(qpn), hit=model.hit(qpn),
                        victim=model.victim(qpn), present=model.present(probe_qpn),
                        probe_entry=model.probe_entry(probe_qpn))
            taken, fill_addr, wb = (False, None, None)
            if want_req:
                taken, fill_addr, wb = model.lookup(qpn, busy, fill_room, wb_room)
            if fill_word is not None:
                model.fill(fill_word)
            if write:
                model.write_group(grp, e, values)
            # --- compare ---
            if want_req:
                assert ctx.get(dut.entry) == want["entry"], f"cycle {c}: entry"
                assert bool(ctx.get(dut.hit)) == want["hit"], f"cycle {c}: hit"
                v = ctx.get(dut.victim)
                got_v = int(v.qpn) if v.valid else None
                assert got_v == want["victim"], f"cycle {c}: victim"
            assert bool(ctx.get(dut.probe[0].present)) == want["present"], f"cycle {c}: probe"
            assert ctx.get(dut.probe[0].entry) == want["probe_entry"], f"cycle {c}: probe"
            got_taken = ctx.get(dut.req.ready)
            assert bool(got_taken) == taken, f"cycle {c}: taken"
            got_fill = ctx.get(dut.fill_rd.payload) if ctx.get(dut.fill_rd.valid) else None
            assert got_fill == fill_addr, f"cycle {c}: fill read"
            got_wb = ((ctx.get(dut.wb.payload.addr), ctx.get(dut.wb.payload.data))
                      if ctx.get(dut.wb.valid) else None)
            if got_wb:
                got_wb = (got_wb[0], got_wb[1].as_value().value
                          if hasattr(got_wb[1], "as_value") else int(got_wb[1]))
            assert got_wb == wb, f"cycle {c}: write-back"
            assert bool(ctx.get(dut.filled.ready)) == want["q_ready"], f"cycle {c}: q_ready"
            if model.tags[e] is not None and model.ready(e):
                got_static = ctx.get(dut.reads[0].data).as_value().value
                assert got_static == want["static"], f"cycle {c}: static"
                for g in groups:
                    got_g = ctx.get(getattr(dut, g).data)
                    assert {f: int(getattr(got_g, f)) for f in groups[g]} == \
                        want["groups"][g], f"cycle {c}: group {g}"
            if fill_addr is not None:
                q, off = divmod(fill_addr - BASE, words)
                assert off == 0, f"cycle {c}: fill read inside a context"
                image = qpc_image(_host_word(q), words)
                if words > 1:       # noise where the cache must not look
                    image[1] |= rng.getrandbits(512) & QPC_DYNAMIC_MASK
                    image[2:] = [rng.getrandbits(512) for _ in image[2:]]
                due = max([c + latency] + [d + 1 for d, _ in pending[-1:]])
                pending += [(due + k, w) for k, w in enumerate(image)]
            if wb is not None:
                assert (wb[0] - BASE) % words == 0, f"cycle {c}: write-back address"
                if words > 1:
                    assert wb[1] & ~QPC_DYNAMIC_MASK == 0, f"cycle {c}: write-back word"
                host[wb[0]] = wb[1]
                log.append(("wb", c, wb[0]))
            if taken:
                log.append(("lookup", c, qpn, fill_addr is not None))
            model.commit()
            await ctx.tick()
        assert ctx.get(dut.busy_skips) == model.busy_skips
        assert ctx.get(dut.fill_discards) == model.fill_discards
        fills_done = model.count["misses"] - len(model.order)
        partial = max(model.fill_word - 2, 0)       # words 2.. of a fill still arriving
        assert model.fill_discards == fills_done * max(words - 2, 0) + partial
        assert fills_done > 0

    run_sim(dut, bench)
    assert model.busy_skips > 0
    kinds = [x[0] for x in log]
    assert kinds.count("wb") > 5 and kinds.count("lookup") > 100
    assert model.count["misses"] > 20
    assert model.count["fills_max"] >= 2


def test_bad_parameters_name_them():
    with pytest.raises(ValueError, match="entries"):
        ContextCache(12, 1024, GROUPS)
    with pytest.raises(ValueError, match="unknown QPC field"):
        ContextCache(16, 1024, {"x": ("no_such_field",)})
    # A group is a port named after it: a name a port already has is refused.
    for taken in ("reads", "filled", "lookups"):
        with pytest.raises(ValueError, match=f"context group name '{taken}' is taken"):
            ContextCache(16, 1024, {taken: ("sq_head",)})


def test_group_reads_as_filled_until_written():
    model = ContextCacheModel(16, GROUPS, 0)
    taken, addr, wb = model.lookup(5, False, True, True)
    assert taken and addr == 5 and wb is None
    model.commit()
    model.fill(_host_word(5))
    model.commit()
    assert model.group("fetch", 5) == {"sq_head": 15}
    model.write_group("fetch", 5, {"sq_head": 16})
    model.commit()
    assert model.group("fetch", 5) == {"sq_head": 16}
    # evicting it writes the new value back, merged into the filled word
    taken, addr, wb = model.lookup(21, False, True, True)
    assert taken and addr == 21
    assert unpack(QPC_LAYOUT, wb[1])["sq_head"] == 16
    assert unpack(QPC_LAYOUT, wb[1])["next_psn"] == 35


def _directed(ways, steps, entries=16):
    """Run ``steps`` (``(qpn, victim_busy)``, one lookup a cycle, None: idle; each miss's fill data
    arrives the cycle after it) on the RTL and on the twin: per step ``(taken, entry,
    hit)`` of each, and the RTL's ``busy_skips``."""
    dut = ContextCache(entries, 1 << 12, GROUPS, ways=ways)
    model = ContextCacheModel(entries, GROUPS, BASE, depth=1 << 12, ways=ways)
    seen = {"rtl": [], "model": [], "skips": None}

    async def bench(ctx):
        ctx.set(dut.base, BASE)
        ctx.set(dut.fill_rd.ready, 1)
        ctx.set(dut.wb.ready, 1)
        fill_next = None
        for qpn, busy in steps + [(None, 0)]:
            ctx.set(dut.fill_data.valid, fill_next is not None)
            ctx.set(dut.fill_data.payload, fill_next or 0)
            if fill_next is not None:
                model.fill(fill_next)
            fill_next = None
            ctx.set(dut.req.valid, qpn is not None)
            if qpn is not None:
                ctx.set(dut.req.payload.qpn, qpn)
                ctx.set(dut.victim_busy, busy)
                e, hit = model.entry_of(qpn), model.hit(qpn)
                taken, fill, _ = model.lookup(qpn, busy, True, True)
                seen["model"].append((taken, e, hit))
                seen["rtl"].append((bool(ctx.get(dut.req.ready)), ctx.get(dut.entry),
                                    bool(ctx.get(dut.hit))))
                if fill is not None:
                    fill_next = _host_word(fill - BASE)
            model.commit()
            await ctx.tick()
        seen["skips"] = ctx.get(dut.busy_skips)

    run_sim(dut, bench)
    return seen


def test_ways_hits_plru_busy_skip_and_invalid_first():
    """4 ways, 16 entries: 4 sets, set ``s`` in entries ``4s`` to ``4s + 3``; QPs 0, 4,
    8, 12, 16, 20 all map to set 0. Expected entries follow from the tree pseudo-LRU
    (a node points to its less recently used half; an access turns its path away)."""
    steps = [(0, 0), (4, 0), (8, 0), (12, 0),        # misses fill the invalid ways in order
             (0, 0), (4, 0), (8, 0), (12, 0),        # a hit in every way; way 3 touched last
             (16, 1),                                # LRU way 0 busy: skipped, made MRU
             (16, 0),                                # then the tree names way 2
             (20, 0),                                # and now way 1 (0 and 2 recent)
             (1, 0), (1, 0),                         # set 1: a miss then a hit in way 0
             (5, 0)]                                 # an invalid way (5) before the pLRU's 6
    want = [(True, 0, False), (True, 1, False), (True, 2, False), (True, 3, False),
            (True, 0, True), (True, 1, True), (True, 2, True), (True, 3, True),
            (False, 0, False), (True, 2, False), (True, 1, False),
            (True, 4, False), (True, 4, True), (True, 5, False)]
    seen = _directed(4, steps)
    assert seen["model"] == want
    assert seen["rtl"] == want
    assert seen["skips"] == 1


def test_one_way_is_direct_mapped():
    """With one way QP ``q`` is in entry ``q % 16`` whatever came before (an idle
    cycle after each miss lets its fill land: a filling entry is not evicted)."""
    steps = [(3, 0), (19, 1), (19, 0), (None, 0), (3, 0), (None, 0), (35, 0)]
    want = [(True, 3, False), (False, 3, False), (True, 3, False), (True, 3, False),
            (True, 3, False)]
    seen = _directed(1, steps)
    assert seen["model"] == want and seen["rtl"] == want


def test_bad_ways_refused():
    for ways in (0, 3, 16, True, "4"):
        with pytest.raises(ValueError, match="cache_ways"):
            ContextCache(16, 1024, GROUPS, ways=ways)
        with pytest.raises(ValueError, match="cache_ways"):
            ContextCacheModel(16, GROUPS, ways=ways)


def test_context_of_four_words_directed():
    """A 256-byte context (4 words): the fill reads at ``BASE + 4 q``, the cache keeps
    word 1's static fields and word 0's dynamic fields, discards words 2 and 3, and an
    eviction writes back only word 0 (at ``BASE + 4 q``, static fields zero)."""
    model = ContextCacheModel(16, DYN_GROUPS, BASE, qpc_words=4)
    taken, addr, wb = model.lookup(5, False, True, True)
    assert taken and addr == BASE + 20 and wb is None
    model.commit()
    ctx = unpack(QPC_LAYOUT, _host_word(5))
    word0 = pack(QPC_LAYOUT, sq_head=ctx["sq_head"], next_psn=ctx["next_psn"])
    word1 = pack(QPC_LAYOUT, **{**ctx, "sq_head": 999, "next_psn": 777})   # stale copies
    for w in (word0, word1, (1 << 512) - 1, 12345):
        model.fill(w)
        model.commit()
    assert model.ready(5) and model.fill_discards == 2
    assert model.static_of(5) == ctx
    model.write_group("fetch", 5, {"sq_head": 16})
    model.commit()
    taken, addr, wb = model.lookup(21, False, True, True)
    assert taken and addr == BASE + 84
    assert wb[0] == BASE + 20
    want = pack(QPC_LAYOUT, sq_head=16, next_psn=ctx["next_psn"])
    assert wb[1] == want


def test_bad_qpc_words_refused():
    for words in (0, 3, 32, True):
        with pytest.raises(ValueError, match="qpc_bytes"):
            ContextCacheModel(16, GROUPS, qpc_words=words)
