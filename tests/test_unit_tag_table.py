"""TagTable in the Amaranth simulator against its twin, cycle by cycle: random takes,
answers and releases (a take only while a tag is free, as the requester does), the
lowest free tag, the pending lookups (tags at and above ``tags`` included) and the
busy count."""

import random

from pymodel.nic.tag_table import TagTableModel
from rtl.nic.tag_table import TagTable
from tb.amsim import run_sim


def test_tag_table_matches_model():
    tags, words = 6, 16
    dut = TagTable(tags, words)
    model = TagTableModel(tags)
    rng = random.Random(9)
    seen = {"exhausted": 0, "checked": 0}

    async def bench(ctx):
        for _ in range(600):
            free = model.free_tag()
            assert ctx.get(dut.free) == (free is not None)
            if free is not None:
                assert ctx.get(dut.free_tag) == free
            else:
                seen["exhausted"] += 1
            assert ctx.get(dut.outstanding) == model.outstanding
            look = rng.randrange(8)               # 6 and 7: beyond the table
            ctx.set(dut.lookup_tag, look)
            assert ctx.get(dut.lookup_pending) == model.pending(look)
            if model.pending(look):
                e = ctx.get(dut.lookup_entry)
                assert (e.laddr, e.length, e.op.value, e.dst) == model.entries[look]
            take = free is not None and rng.random() < 0.5
            entry = (rng.randrange(words), rng.randrange(1, 257), 1, rng.randrange(4))
            answer = model.pending(look) and rng.random() < 0.6
            busy_done = [t for t in range(tags) if model.busy[t] and not model.pend[t]]
            release = rng.choice(busy_done) if busy_done and rng.random() < 0.5 else None
            ctx.set(dut.take, take)
            ctx.set(dut.take_entry, {"laddr": entry[0], "length": entry[1], "op": entry[2],
                                     "dst": entry[3]})
            ctx.set(dut.answer, answer)
            ctx.set(dut.release, release is not None)
            ctx.set(dut.release_tag, release or 0)
            await ctx.tick()
            model.step(0, {"take": entry if take else None,
                           "answer": look if answer else None, "release": release})
            seen["checked"] += 1

    run_sim(dut, bench)
    assert seen["checked"] == 600 and seen["exhausted"] > 0
