"""Unit tests of the host interface: the RTL in the Amaranth simulator against its golden
model (every output word and its cycle, every input's accept cycle, every counter, the
final host memory), hand-computed expectations that need no model, and the parameter
checks."""

import random
from dataclasses import fields, replace

import pytest
from amaranth import Const, Value
from amaranth.back import verilog
from amaranth.sim import Simulator

from pymodel.host import HostInterfaceModel
from rtl.host import HostInterface
from rtl.host.common import chunk_layout
from rtl.host.down_scheduler import DownScheduler
from rtl.host.due_queue import DueQueue
from rtl.host.mmio_buffer import MmioBuffer
from rtl.host.read_splitter import ReadSplitter
from rtl.host.up_scheduler import UpScheduler
from rtl.host.write_buffer import WriteBuffer
from rtl.tops.host_interface_top import HostInterfaceTop
from spec.host import (
    HOST_COUNTERS,
    IDEAL64,
    ON_DIE,
    PCIE,
    PROFILES,
    HostProfile,
    check_profile,
)
from tb.host_interface import (
    SOURCES,
    Presenter,
    Run,
    Stalls,
    Stimulus,
    layouts,
    mmio_write,
    pack,
    random_stimulus,
    run_model,
    unpack,
)

FULL = (1 << 64) - 1
DEPTH = 1024
#: Gaps on every input (about 40%) and backpressure on mmio (about 50%).
GAPS = Stalls(rd_req=(0xACE1, 100), wr=(0x1234, 100), mmio_in=(0x0F0F, 100),
              mmio=(0x5A5A, 128))


def run_rtl(profile, depth, stim, stalls, cycles):
    """Drive the RTL with the players' rule for ``cycles`` cycles; the host memory is a
    Python dict with the LatencyMemory's timing (data the cycle after the address, a
    read sees the memory before the same cycle's write)."""
    dut = HostInterface(profile, depth)
    lay = layouts(depth)
    pres = Presenter(stim, stalls, cycles + 1)
    ports = {name: getattr(dut, name) for name in SOURCES}
    out = {}

    async def bench(ctx):
        mem = dict(stim.mem)
        rd_data, mmio, marked = [], [], []
        taken = {name: [] for name in SOURCES}
        shown_before = dict.fromkeys(SOURCES)
        ready_before = read_before = None
        read_back = None
        for c in range(cycles):
            shown = pres.present(c)
            for name, item in shown.items():
                if item is not shown_before[name]:
                    ctx.set(ports[name].valid, item is not None)
                    if item is not None:
                        ctx.set(ports[name].payload.as_value(), pack(lay[name], item))
                    shown_before[name] = item
            ready = pres.ready(c)
            if ready != ready_before:
                ctx.set(dut.mmio.ready, ready)
                ready_before = ready
            if read_back != read_before:
                ctx.set(dut.mem_rd_data.payload, read_back or 0)
                read_before = read_back
            for name, item in shown.items():
                if item is not None and ctx.get(ports[name].ready):
                    taken[name].append(c)
                    pres.take(name)
            if ctx.get(dut.rd_data.valid):
                rd_data.append((c, unpack(lay["rd_data"],
                                          ctx.get(dut.rd_data.payload.as_value()))))
            if ctx.get(dut.marked.valid):
                marked.append((c, ctx.get(dut.marked.payload)))
            if ready and ctx.get(dut.mmio.valid):
                mmio.append((c, unpack(lay["mmio"], ctx.get(dut.mmio.payload.as_value()))))
            read_back = None
            if ctx.get(dut.mem_rd_addr.valid):
                read_back = mem.get(ctx.get(dut.mem_rd_addr.payload), 0)
            if ctx.get(dut.mem_wr.valid):
                w = ctx.get(dut.mem_wr.payload)
                addr, data, be = int(w.addr), int(w.data), int(w.be)
                mask = sum(0xFF << (8 * k) for k in range(64) if be >> k & 1)
                mem[addr] = (mem.get(addr, 0) & ~mask) | (data & mask)
            await ctx.tick()
        out["run"] = Run(rd_data, mmio, taken,
                         {n: ctx.get(getattr(dut, n)) for n in HOST_COUNTERS}, mem, cycles,
                         marked)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out["run"]


def check(profile, stim, stalls=None, depth=DEPTH):
    """RTL = model on everything; returns the model's run."""
    stalls = stalls or Stalls()
    want = run_model(profile, depth, stim, stalls)
    got = run_rtl(profile, depth, stim, stalls, want.cycles + 1)
    assert got.taken == want.taken
    assert [c for c, _ in got.rd_data] == [c for c, _ in want.rd_data]
    assert got.rd_data == want.rd_data
    assert got.mmio == want.mmio
    assert got.marked == want.marked
    assert want.marked or not any(w.get("mark") for w in stim.wr)
    assert got.counters == want.counters
    assert {a: v for a, v in got.mem.items() if v} == {a: v for a, v in want.mem.items() if v}
    assert all(len(want.taken[n]) == len(getattr(stim, n)) for n in SOURCES)
    return want


def both(profile, stim, stalls=None):
    """The RTL's run and the model's (asserted equal), for hand-computed checks."""
    return check(profile, stim, stalls)


# -- hand-computed expectations (no model) -----------------------------------------------

def _words_at(run):
    return [c for c, _ in run.rd_data]


def test_one_64_byte_read_on_pcie():
    """Request TLP 1 cycle (24 B at 63 B/cycle) from a + 1, completion ceil(84/63) = 2
    cycles from a + 1 + 560, so the word is on rd_data in cycle a + 1 + 560 + 2."""
    stim = Stimulus(rd_req=[{"addr": 5, "words": 1, "id": 0x3C}], mem={5: 0xDEADBEEF})
    run = both(PCIE, stim)
    a = run.taken["rd_req"][0]
    assert a == 0
    assert run.rd_data == [(a + 1 + 560 + 2, {"data": 0xDEADBEEF, "id": 0x3C, "last": 1})]
    assert run.counters == dict.fromkeys(HOST_COUNTERS, 0) | {
        "up_rd_tlps": 1, "up_overhead_bytes": 24, "up_busy_cycles": 1,
        "dn_cpl_tlps": 1, "dn_payload_bytes": 64, "dn_overhead_bytes": 20,
        "dn_busy_cycles": 2, "tags_max": 1}


def test_one_512_byte_read_on_pcie():
    """One request TLP, four completions of 128 B of ceil(148/63) = 3 cycles each, back
    to back from s = a + 561; each puts its two words in its last two cycles' successors:
    s + 3k + 2 and s + 3k + 3."""
    mem = {a: 1000 + a for a in range(64, 72)}
    stim = Stimulus(rd_req=[{"addr": 64, "words": 8, "id": 9}], mem=mem)
    run = both(PCIE, stim)
    s = run.taken["rd_req"][0] + 1 + 560
    assert _words_at(run) == [s + 3 * k + j for k in range(4) for j in (2, 3)]
    assert [w["data"] for _, w in run.rd_data] == [1000 + a for a in range(64, 72)]
    assert [w["last"] for _, w in run.rd_data] == [0] * 7 + [1]
    assert run.counters["up_rd_tlps"] == 1 and run.counters["dn_cpl_tlps"] == 4
    assert run.counters["dn_payload_bytes"] == 512
    assert run.counters["dn_overhead_bytes"] == 4 * 20
    assert run.counters["dn_busy_cycles"] == 12


def test_read_across_mrrs_and_rcb_on_pcie():
    """16 words from word 4: chunks at the 8-word MRRS boundaries (4, 8 and 4 words: three
    request TLPs in the three cycles after the accept), completions at the 2-word RCB (8
    of 2 words, 3 cycles each, back to back from the first chunk's due cycle)."""
    stim = Stimulus(rd_req=[{"addr": 4, "words": 16, "id": 1}])
    run = both(PCIE, stim)
    s = run.taken["rd_req"][0] + 1 + 560
    assert _words_at(run) == [s + 3 * k + j for k in range(8) for j in (2, 3)]
    assert run.counters["up_rd_tlps"] == 3 and run.counters["up_busy_cycles"] == 3
    assert run.counters["dn_cpl_tlps"] == 8 and run.counters["tags_max"] == 3


def test_one_256_byte_write_on_pcie():
    """Four full words, the last with ``last``: one TLP of ceil(280/63) = 5 cycles that
    starts the cycle after the last word is accepted and writes one word per cycle."""
    words = [{"addr": 100 + k, "data": (k + 1) * 0x0101, "be": FULL, "last": int(k == 3)}
             for k in range(4)]
    run = both(PCIE, Stimulus(wr=words))
    assert run.taken["wr"] == [0, 1, 2, 3]
    assert {a: run.mem[a] for a in range(100, 104)} == {100 + k: (k + 1) * 0x0101
                                                        for k in range(4)}
    assert run.counters == dict.fromkeys(HOST_COUNTERS, 0) | {
        "up_wr_tlps": 1, "up_payload_bytes": 256, "up_overhead_bytes": 24,
        "up_busy_cycles": 5}


def test_partial_write_and_byte_enables():
    """One word with 5 bytes enabled pays for 8 (whole dwords) and changes only those 5
    bytes; a 64-byte write without ``last`` waits for its TLP to fill (4 words)."""
    old = int.from_bytes(bytes(range(64)), "little")
    be = 0b11111 << 8
    words = [{"addr": 7, "data": (1 << 512) - 1, "be": be, "last": 1}]
    run = both(PCIE, Stimulus(wr=words, mem={7: old}))
    mask = 0xFF_FF_FF_FF_FF << 64
    assert run.mem[7] == old | mask
    assert run.counters["up_payload_bytes"] == 8
    assert run.counters["up_busy_cycles"] == 1                # ceil(32 / 63)


def test_mmio_write_of_100_bytes_on_pcie():
    """Two words taken in s and s + 1 (s = 0: down is free), d = ceil(124/63) = 2, so
    they enter the buffer in s + 1 and s + 2 and are on mmio from s + 2 and s + 3."""
    words = mmio_write(0x40, 100, int.from_bytes(bytes(range(100)), "little"))
    run = both(PCIE, Stimulus(mmio_in=words))
    assert run.taken["mmio_in"] == [0, 1]
    assert [c for c, _ in run.mmio] == [2, 3]
    assert [w for _, w in run.mmio] == words
    assert run.counters == dict.fromkeys(HOST_COUNTERS, 0) | {
        "dn_mmio_tlps": 1, "dn_payload_bytes": 100, "dn_overhead_bytes": 24,
        "dn_busy_cycles": 2}


def test_one_tag_serialises_reads():
    """tags = 1: the second read's request TLP waits until the cycle after the first's
    completion starts (a + 1 + 560 + 1), and every free cycle in between counts as a tag
    wait."""
    stim = Stimulus(rd_req=[{"addr": 0, "words": 1, "id": 1}, {"addr": 1, "words": 1,
                                                               "id": 2}])
    run = both(replace(PCIE, tags=1), stim)
    a = run.taken["rd_req"][0]
    second = a + 1 + 560 + 1
    assert _words_at(run) == [a + 563, second + 560 + 2]
    assert run.counters["tag_wait_cycles"] == second - (a + 2)
    assert run.counters["tags_max"] == 1


def test_round_robin_on_both_directions():
    """A read and a whole write both ready in the same free cycle: READ first after reset,
    then WRITE; a due completion and a host write together: CPL first, then MMIO."""
    words = [{"addr": 8, "data": 1, "be": FULL, "last": 1}]
    stim = Stimulus(rd_req=[{"addr": 0, "words": 1, "id": 1}], wr=words)
    model = HostInterfaceModel(ON_DIE, DEPTH)
    model.trace = []
    model.step(0, rd_req=stim.rd_req[0], wr=words[0])
    for c in range(1, 4):
        model.step(c)
    assert [(c, e) for c, e, _ in model.trace] == [(1, "rd_tlp"), (2, "wr_tlp")]
    both(ON_DIE, stim)


# -- RTL against the model ----------------------------------------------------------------

ODD = {
    "bpc1": replace(PCIE, bytes_per_cycle=1, read_latency=40),
    "bpc17": replace(PCIE, bytes_per_cycle=17, read_latency=100),
    "bpc32_small": replace(ON_DIE, bytes_per_cycle=32, read_latency=30, tags=2, rd_queue=1,
                           mmio_fifo_words=4, wr_fifo_words=4, max_read_request=64,
                           max_payload=64, rcb=64),
    "tags1": replace(IDEAL64, read_latency=25, tags=1, rd_queue=2),
    "tags2": replace(PCIE, read_latency=50, tags=2),
    "mps4096_fifo8": replace(ON_DIE, read_latency=12, wr_fifo_words=8, mmio_fifo_words=5,
                             max_read_request=128, rcb=128, max_payload=4096),
    "overheads64": replace(PCIE, req_overhead=64, cpl_overhead=64, mmio_overhead=64,
                           bytes_per_cycle=48, read_latency=1, rcb=256),
}


@pytest.mark.parametrize("gaps", [False, True], ids=["no_gaps", "gaps"])
@pytest.mark.parametrize("name", list(PROFILES))
def test_random_mix_named_profiles(name, gaps):
    """Reads of 1..64 words at random addresses, posted writes of 1..9 words and host
    writes of 1..256 bytes, on each named profile, with and without input gaps and
    ``mmio`` backpressure."""
    rng = random.Random(f"{name}-{gaps}")
    stim = random_stimulus(rng, PROFILES[name], DEPTH, reads=16, writes=12, mmio=10)
    run = check(PROFILES[name], stim, GAPS if gaps else None)
    assert run.rd_data and run.mmio and run.counters["up_wr_tlps"] >= 12


@pytest.mark.parametrize("name", list(ODD))
def test_random_mix_odd_profiles(name):
    """The same kind of mix on narrow links, few tags, small buffers, MPS larger than
    the write buffer and big overheads, with gaps and backpressure."""
    profile = ODD[name]
    rng = random.Random(name)
    few = profile.bytes_per_cycle < 16 or profile.tags == 1
    stim = random_stimulus(rng, profile, DEPTH, reads=6 if few else 12, writes=8,
                           mmio=6, sizes=list(range(1, 17)) if few else None)
    run = check(profile, stim, GAPS)
    assert run.counters["tags_max"] <= profile.tags
    if profile.tags <= 2:
        assert run.counters["tag_wait_cycles"] > 0


@pytest.mark.parametrize("profile", [PCIE, replace(ON_DIE, read_latency=16,
                                                     max_read_request=128, rcb=64)],
                         ids=["pcie", "mrrs128"])
def test_every_read_size_and_boundary(profile):
    """Every size from 1 to 64 words at a start offset that walks through every position
    of the MRRS and RCB grids; the split counts are checked by hand too."""
    span, piece = profile.max_read_request // 64, profile.rcb // 64
    reads = [{"addr": 8 * k + (k * 5) % 16, "words": k + 1, "id": k}
             for k in range(64)]
    run = check(profile, Stimulus(rd_req=reads, mem={a: a * 7 for a in range(DEPTH)}))

    def cuts(addr, words, size):
        return len({(addr + j) // size for j in range(words)})

    assert run.counters["up_rd_tlps"] == sum(cuts(r["addr"], r["words"], span)
                                             for r in reads)
    # Completions split at the RCB inside each chunk (chunks are RCB-aligned pieces).
    assert run.counters["dn_cpl_tlps"] == sum(cuts(r["addr"], r["words"], piece)
                                              for r in reads)
    assert [w["data"] for _, w in run.rd_data] == [
        (r["addr"] + j) * 7 for r in reads for j in range(r["words"])]
    assert [w["id"] for _, w in run.rd_data if w["last"]] == list(range(64))


@pytest.mark.parametrize("profile", [PCIE, replace(ON_DIE, max_payload=128)],
                         ids=["mps256", "mps128"])
def test_write_tlps_split_at_last_and_mps(profile):
    """Runs of 1 .. 2 MPS + 1 full words: a TLP ends at ``last`` or at MPS; the TLP count
    and payload are checked by hand, the rest against the model (with gaps)."""
    per = profile.max_payload // 64
    words, runs = [], list(range(1, 2 * per + 2))
    for n in runs:
        base = 16 * n
        words += [{"addr": base + j, "data": n << 16 | j, "be": FULL,
                   "last": int(j == n - 1)} for j in range(n)]
    run = check(profile, Stimulus(wr=words), GAPS)
    assert run.counters["up_wr_tlps"] == sum(-(-n // per) for n in runs)
    assert run.counters["up_payload_bytes"] == 64 * len(words)
    assert all(run.mem[w["addr"]] == w["data"] for w in words)


def test_write_without_last_closes_at_mps():
    """A stream of 11 full words and no ``last``: TLPs of 4, 4, and the last 3 words
    wait (never sent) until a ``last`` arrives."""
    words = [{"addr": j, "data": j + 1, "be": FULL, "last": int(j == 11)}
             for j in range(12)]
    run = check(PCIE, Stimulus(wr=words))
    assert run.counters["up_wr_tlps"] == 3


def test_every_mmio_size():
    """Host writes of every length 1..256 bytes with gaps between writes and
    backpressure on ``mmio``: words, cycles and counters equal the model; the payload
    bytes are the sum of the lengths."""
    rng = random.Random(7)
    words = []
    for nbytes in range(1, 257):
        words += mmio_write(nbytes, nbytes, rng.getrandbits(8 * nbytes))
    run = check(PCIE, Stimulus(mmio_in=words), GAPS)
    assert [w for _, w in run.mmio] == words
    assert run.counters["dn_payload_bytes"] == sum(range(1, 257))
    assert run.counters["dn_mmio_tlps"] == 256


def test_mmio_buffer_full_holds_the_host():
    """``mmio.ready`` low for long stretches and a 4-word buffer: a host write waits
    until all its words fit; nothing is lost or reordered."""
    profile = replace(PCIE, mmio_fifo_words=4)
    rng = random.Random(3)
    words = []
    for k in range(30):
        words += mmio_write(k, rng.choice([1, 64, 65, 128, 200, 256]), rng.getrandbits(2048))
    run = check(profile, Stimulus(mmio_in=words), Stalls(mmio=(0x77, 220)))
    assert [w for _, w in run.mmio] == words


def test_reads_and_writes_to_the_same_words():
    """Reads and writes of the same few words interleave: each read returns the memory
    as the completion reads it (after the writes before that cycle), as the model says."""
    rng = random.Random(11)
    stim = random_stimulus(rng, IDEAL64, 16, reads=12, writes=12, mmio=0, mem_words=16)
    check(replace(IDEAL64, read_latency=3), stim, GAPS, depth=16)


def test_nothing_happens_without_inputs():
    """After reset with no input, every output stays idle and every counter 0."""
    run = run_rtl(PCIE, DEPTH, Stimulus(), Stalls(), 50)
    assert run.rd_data == [] and run.mmio == [] and run.mem == {}
    assert run.counters == dict.fromkeys(HOST_COUNTERS, 0)


def test_read_latency_costs_no_logic():
    """The longest read latency builds the same logic as the shortest (a due stamp, not a
    delay line): the exported Verilog differs only in the constant."""
    def export(latency):
        # The memory side's ``ready``s are constants (always-ready streams), which cannot
        # be Verilog ports: export every port but those.
        hi = HostInterface(replace(PCIE, read_latency=latency), 64)
        ports = [Value.cast(v) for _, _, v in hi.signature.flatten(hi)
                 if not isinstance(v, Const)]
        return verilog.convert(hi, name="h", ports=ports, emit_src=False)

    short, long = export(1), export(65535)
    assert len(short.splitlines()) == len(long.splitlines())
    assert abs(len(short) - len(long)) < 16


def test_due_stamps_wrap_with_the_cycle_count():
    """A chunk pushed 10 cycles before the 32-bit cycle count wraps, with a 20-cycle
    latency, is offered from exactly 20 cycles later (after the wrap), not before."""
    dut = DueQueue(replace(PCIE, read_latency=20), 64)
    start = (1 << 32) - 10
    seen = []

    async def bench(ctx):
        ctx.set(dut.now, start)
        ctx.set(dut.push.valid, 1)
        ctx.set(dut.push.payload.as_value(),
                pack(chunk_layout(64), {"addr": 3, "words": 1, "id": 5, "last": 1}))
        assert not ctx.get(dut.piece.valid)
        await ctx.tick()
        ctx.set(dut.push.valid, 0)
        for k in range(1, 40):
            ctx.set(dut.now, (start + k) % (1 << 32))
            if ctx.get(dut.piece.valid):
                seen.append(k)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == list(range(20, 40))


# -- the model on its own --------------------------------------------------------------------

def test_model_idle_skipping_matches_stepping_every_cycle():
    """Stepping only at next_event once the inputs are in gives the same outputs and
    counters as stepping every cycle, including tag waits and busy cycles."""
    profile = replace(PCIE, tags=2)
    stim = random_stimulus(random.Random(5), profile, DEPTH, reads=6, writes=4, mmio=0)
    full = run_model(profile, DEPTH, stim)
    model = HostInterfaceModel(profile, DEPTH, stim.mem)
    pres = Presenter(stim, Stalls(), full.cycles + 1)
    rd_data, c = [], 0
    while c is not None:
        r = model.step(c, **pres.present(c))
        for name in SOURCES:
            if getattr(r, f"{name}_taken"):
                pres.take(name)
        if r.rd_data:
            rd_data.append((c, r.rd_data))
        c = c + 1 if not pres.done() else model.next_event(c)
    assert rd_data == full.rd_data
    assert model.counters == full.counters and model.counters["tag_wait_cycles"] > 0
    with pytest.raises(ValueError, match="can not be skipped"):
        m2 = HostInterfaceModel(profile, DEPTH)
        m2.step(0, rd_req={"addr": 0, "words": 1, "id": 0})
        m2.step(1000)


@pytest.mark.parametrize("bad", [
    {"rd_req": {"addr": 0, "words": 0, "id": 0}},
    {"rd_req": {"addr": DEPTH, "words": 1, "id": 0}},
    {"mmio_in": {"addr": 0, "nbytes": 0, "data": 0, "first": 1, "last": 1}},
    {"mmio_in": {"addr": 0, "nbytes": 511, "data": 0, "first": 1, "last": 0}},
], ids=["zero_words", "addr_out_of_range", "zero_bytes", "longer_than_buffer"])
def test_model_rejects_inputs_the_contract_forbids(bad):
    profile = replace(PCIE, mmio_fifo_words=4)
    with pytest.raises(ValueError):
        HostInterfaceModel(profile, DEPTH).step(0, **bad)


def test_model_rejects_a_host_write_cut_short():
    model = HostInterfaceModel(PCIE, DEPTH)
    words = mmio_write(0, 128, 0)
    model.step(0, mmio_in=words[0])
    with pytest.raises(ValueError, match="withdrew"):
        model.step(1)


# -- parameter checks -----------------------------------------------------------------------

#: For each field, values it must reject.
BAD = {
    "bytes_per_cycle": [0, 65, 63.0],
    "req_overhead": [-1, 65],
    "cpl_overhead": [-1, 65],
    "mmio_overhead": [-1, 65],
    "read_latency": [0, 65536],
    "tags": [0, 1025],
    "max_read_request": [32, 8192, 384],
    "max_payload": [32, 8192, 200],
    "rcb": [32, 512, 96],
    "mmio_fifo_words": [3, 1025],
    "wr_fifo_words": [3, 1025],
    "rd_queue": [0, 257, True],
}


def test_bad_values_cover_every_field():
    assert set(BAD) == {f.name for f in fields(HostProfile)}


@pytest.mark.parametrize("field", list(BAD))
def test_bad_profile_field_is_named(field):
    """Every field out of range (or of the wrong kind) raises ValueError naming it and
    the value, on construction and in check_profile."""
    for value in BAD[field]:
        with pytest.raises(ValueError, match=rf"host profile field '{field}' must be .*"
                                             rf"not {value!r}"):
            replace(PCIE, **{field: value})


def test_profiles_pass_their_checks():
    for profile in PROFILES.values():
        assert check_profile(profile) is profile
    with pytest.raises(ValueError, match="must be a HostProfile"):
        check_profile({"tags": 1})


@pytest.mark.parametrize("part", [HostInterface, ReadSplitter, DueQueue, WriteBuffer,
                                  UpScheduler, DownScheduler])
def test_bad_depth_and_profile_are_rejected(part):
    with pytest.raises(ValueError, match="depth.*power of two"):
        part(PCIE, 1000)
    with pytest.raises(ValueError, match="depth.*from 2 to"):
        part(PCIE, 1)
    with pytest.raises(ValueError, match="must be a HostProfile"):
        part("pcie", 1024)


def test_bad_profile_is_rejected_by_the_buffer_and_the_model():
    with pytest.raises(ValueError, match="must be a HostProfile"):
        MmioBuffer(None)
    with pytest.raises(ValueError, match="must be a HostProfile"):
        HostInterfaceModel("pcie", 1024)
    with pytest.raises(ValueError, match="power of two"):
        HostInterfaceModel(PCIE, 1000)


def test_top_rejects_bad_sizes():
    with pytest.raises(ValueError, match="player depth"):
        HostInterfaceTop(PCIE, items=8)
    with pytest.raises(ValueError, match="recorder depth"):
        HostInterfaceTop(PCIE, words=70000)
