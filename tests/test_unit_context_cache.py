"""The QP-context cache against its twin (Amaranth simulator), cycle by cycle."""

import random

import pytest

from pymodel.fields import pack, unpack
from pymodel.rdma.context_cache import ContextCacheModel
from rtl.rdma.context_cache import ContextCache
from spec.formats.roce import QPC_LAYOUT
from spec.rdma_stages import group_layout
from tb.amsim import run_sim

GROUPS = {"fetch": ("sq_head",), "seq": ("next_psn", "pmtu_log2")}
BASE = 100


def _host_word(qpn):
    return pack(QPC_LAYOUT, valid=1, pmtu_log2=8 + qpn % 5, next_psn=qpn * 7,
                sq_head=qpn * 3, sq_base=1000 + qpn, dest_qp=qpn + 1)


@pytest.mark.parametrize("seed,entries,used", [(1, 16, 16), (2, 16, 16), (3, 64, 16),
                                               (4, 64, 32)])
def test_cache_matches_model(seed, entries, used):
    """Random lookups, fills, write-backs and group writes; ``used`` of ``entries``
    entries in use (the ``cache_log2`` port)."""
    dut = ContextCache(entries, 1 << 12, GROUPS, static_reads=1)
    model = ContextCacheModel(entries, GROUPS, BASE, depth=1 << 12, used=used)
    rng = random.Random(seed)
    qpns = [rng.randrange(4 * used) for _ in range(12)]
    latency = 6
    log = []

    async def bench(ctx):
        ctx.set(dut.base, BASE)
        ctx.set(dut.cache_log2, used.bit_length() - 1)
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
            grp = rng.choice(list(GROUPS))
            write = (rng.random() < 0.3 and model.tags[e] is not None and model.ready(e))
            values = {f: rng.getrandbits(4) for f in GROUPS[grp]}
            ctx.set(dut.req.valid, want_req)
            ctx.set(dut.req.payload.qpn, qpn)
            ctx.set(dut.victim_busy, busy)
            ctx.set(dut.fill_rd.ready, fill_room)
            ctx.set(dut.wb.ready, wb_room)
            ctx.set(dut.fill_data.valid, fill_word is not None)
            ctx.set(dut.fill_data.payload, fill_word or 0)
            ctx.set(dut.filled.entry, e)
            ctx.set(dut.reads[0].addr, e)
            for g in GROUPS:
                ctx.set(getattr(dut, g).addr, e)
                ctx.set(getattr(dut, g).we, write and g == grp)
            ctx.set(getattr(dut, grp).wdata, group_layout(GROUPS[grp]).const(values))
            # --- the model's view of the same cycle ---
            want = dict(q_ready=model.ready(e), static=model.static[e],
                        groups={g: model.group(g, e) for g in GROUPS})
            taken, fill_addr, wb = (False, None, None)
            if want_req:
                taken, fill_addr, wb = model.lookup(qpn, busy, fill_room, wb_room)
            if fill_word is not None:
                model.fill(fill_word)
            if write:
                model.write_group(grp, e, values)
            # --- compare ---
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
                for g in GROUPS:
                    got_g = ctx.get(getattr(dut, g).data)
                    assert {f: int(getattr(got_g, f)) for f in GROUPS[g]} == \
                        want["groups"][g], f"cycle {c}: group {g}"
            if fill_addr is not None:
                pending.append((c + latency, _host_word(fill_addr - BASE)))
            if wb is not None:
                host[wb[0]] = wb[1]
                log.append(("wb", c, wb[0]))
            if taken:
                log.append(("lookup", c, qpn, fill_addr is not None))
            model.commit()
            await ctx.tick()

    run_sim(dut, bench)
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
