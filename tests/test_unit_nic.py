"""Unit tests of the NIC blocks (Amaranth simulator), the formats and the model."""

import random

import pytest

from pymodel.nic.frames import build_frame, parse_header, wire_bytes
from pymodel.nic.system import Store
from pymodel.packet import beats_to_frames, frame_to_beats, pack_beat, unpack_beat
from rtl.common.min_frame_padder import MinFramePadder
from rtl.fabric.switch import Switch
from rtl.nic.credit_return import CreditReturn
from rtl.nic.nic_rx import NicRx
from rtl.nic.nic_tx import NicTx
from rtl.nic.store_segmenter import StoreSegmenter
from rtl.nic.tx_framer import NicTxFramer
from rtl.nic.window_table import WindowTable, window_table_bits
from rtl.tops.nic_top import NicTop
from spec.checks import silence
from spec.fabric_profiles import nic_top_credits
from spec.formats.nic import Framing, frame_beats, header_bytes, store_cmd_layout
from spec.nic import link_credits
from tb.amsim import get_all, put_all, run_sim
from tb.nic.wirecheck import l2_frame_problems

SIZES = (1, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129)


def _cmd_items(width, stores):
    layout = store_cmd_layout(width)
    return [layout.const({"dst": s.dst, "addr": s.addr, "length": s.length,
                          "ack_req": int(s.ack_req), "data": d,
                          "nbytes": n, "first": f, "last": la}).as_bits()
            for s in stores for d, n, f, la in s.beats(width)]


@pytest.mark.parametrize("width", [8, 16])
@pytest.mark.parametrize("framing", ["l2", "compact"])
@pytest.mark.parametrize("pattern", [(1,), (1, 1, 0, 1, 0)])
def test_framer_builds_the_model_frames(width, framing, pattern):
    """Every edge size, every other store with ``ack_req``, with and without stalls on
    both sides: the frames equal the model's byte for byte; without stalls they leave
    back to back (no idle cycle)."""
    rng = random.Random(width)
    stores = [Store(rng.randrange(256), width * rng.randrange(64),
                    bytes(rng.getrandbits(8) for _ in range(n)), ack_req=k % 2)
              for k, n in enumerate(SIZES)]
    dut = NicTxFramer(width, framing)
    # The framer does not pad (NicTx pads L2 frames behind it): header + payload.
    want = [build_frame(framing, 5, s.dst, s.addr, s.length, s.payload, fcs=False,
                        ack_req=s.ack_req)[:header_bytes(framing) + s.length]
            for s in stores]
    nbeats = sum(-(-len(f) // width) for f in want)
    got = []

    async def source(ctx):
        ctx.set(dut.node_id, 5)
        ctx.set(dut.start_ok, 1)
        await put_all(ctx, dut.cmd, _cmd_items(width, stores), pattern)

    async def sink(ctx):
        got.extend(await get_all(ctx, dut.o, nbeats, pattern))

    run_sim(dut, source, sink)
    assert beats_to_frames([b for b, _ in got], width) == want
    if pattern == (1,):
        cycles = [c for _, c in got]
        assert cycles[-1] - cycles[0] == nbeats - 1, "a bubble between frames"


@pytest.mark.parametrize("width,max_payload", [(16, 64), (8, 8)])
@pytest.mark.parametrize("pattern", [(1,), (1, 1, 0, 1, 0)])
def test_segmenter_cuts_like_the_model(width, max_payload, pattern):
    """Long stores leave as commands of at most ``max_payload`` bytes whose addresses,
    lengths, ack requests and beats equal the model's segments (a lying header length
    included); a store's ``ack_req`` is on its last segment only; without stalls every
    beat moves in its own cycle (no bubble)."""
    rng = random.Random(max_payload)
    sizes = (1, max_payload - 1, max_payload, max_payload + 1, 3 * max_payload,
             3 * max_payload + 5, 200)
    stores = [Store(rng.randrange(256), width * rng.randrange(1024),
                    bytes(rng.getrandbits(8) for _ in range(n)), ack_req=k % 2 == 0)
              for k, n in enumerate(sizes) if n]
    stores.append(Store(7, 0, bytes(3 * max_payload), length=max_payload + 9, ack_req=True))
    for s in stores[:-1]:                 # independent of the model: the last one asks
        segs = s.segments(width, max_payload)
        assert [g.ack_req for g in segs] == [False] * (len(segs) - 1) + [s.ack_req]
    dut = StoreSegmenter(width, max_payload)
    want = _cmd_items(width, [seg for s in stores for seg in s.segments(width, max_payload)])
    got = []

    async def source(ctx):
        await put_all(ctx, dut.i, _cmd_items(width, stores), pattern)

    async def sink(ctx):
        got.extend(await get_all(ctx, dut.o, len(want), pattern))

    run_sim(dut, source, sink)
    assert [b for b, _ in got] == want
    if pattern == (1,):
        assert got[-1][1] - got[0][1] == len(want) - 1, "a bubble in the segmenter"


@pytest.mark.parametrize("width", [8, 16, 64])
@pytest.mark.parametrize("pattern", [(1,), (1, 1, 0, 1, 0)])
def test_padder_pads_short_packets_with_zeros(width, pattern):
    """Packets under 60 bytes leave as 60 bytes ending in zeros (garbage above
    ``nbytes`` cleared), longer ones unchanged; no idle cycle without stalls."""
    rng = random.Random(width)
    sizes = (1, 5, 16, 21, 44, 59, 60, 61, 64, 65, 130)
    packets = [bytes(rng.getrandbits(8) for _ in range(n)) for n in sizes]
    items = []
    for pkt in packets:
        for b in frame_to_beats(pkt, width):
            data, nb, first, last = unpack_beat(width, b)
            garbage = rng.getrandbits(8 * (width - nb)) << (8 * nb)
            items.append(pack_beat(width, data | garbage, nb, first, last))
    want = [p + bytes(max(0, 60 - len(p))) for p in packets]
    nbeats = sum(-(-len(p) // width) for p in want)
    dut = MinFramePadder(width, 60)
    got = []

    async def source(ctx):
        await put_all(ctx, dut.i, items, pattern)

    async def sink(ctx):
        got.extend(await get_all(ctx, dut.o, nbeats, pattern))

    run_sim(dut, source, sink)
    assert beats_to_frames([b for b, _ in got], width) == want
    if pattern == (1,):
        assert got[-1][1] - got[0][1] == nbeats - 1, "an idle cycle in the padder"


def test_tx_waits_for_credits_and_never_overruns():
    """With credits for just one frame, the second frame waits for returned credits."""
    width, framing = 16, "compact"
    length = 40
    need = frame_beats(width, framing, length)
    dut = NicTx(width, framing, need, 512)
    stores = [Store(1, 0, bytes(range(length))), Store(2, 64, bytes(range(length)))]
    sent = []

    async def bench(ctx):
        items = _cmd_items(width, stores)
        k = 0
        for cycle in range(30 + 2 * need):
            ctx.set(dut.cmd.valid, k < len(items))
            if k < len(items):
                ctx.set(dut.cmd.payload.as_value(), items[k])
            ctx.set(dut.o.ready, 1)
            ctx.set(dut.give, 20 <= cycle < 20 + need)
            if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready):
                k += 1
            if ctx.get(dut.o.valid):
                sent.append(cycle)
            await ctx.tick()
        assert not ctx.get(dut.underflow) and not ctx.get(dut.overflow)

    run_sim(dut, bench)
    assert sent[:need] == list(range(need)), "the first frame goes at once"
    # The last of the returned credits is given in cycle 20 + need - 1: usable a cycle later.
    assert sent[need:] == list(range(20 + need, 20 + 2 * need))


def test_compact_header_and_wire_efficiency():
    """Compact header <= 8 bytes, so a 128-byte store is >= 80% of its wire bytes."""
    assert header_bytes("compact") <= 8
    frame = build_frame("compact", 0, 1, 0, 128, bytes(128))
    assert wire_bytes(frame) - 128 <= 32
    assert 128 / wire_bytes(frame) >= 0.8
    assert len(build_frame("l2", 0, 1, 0, 128, bytes(128))) == 20 + 128 + 4


#: Headers written out by hand from the wire format (docs/nic.md; spec/formats/nic.py):
#: the 6-byte store header is opcode (bits 0..1, STORE = 1), ack_req (bit 2), length (bits
#: 3..15) and addr (bits 16..47), little endian; compact = dst, src, store header; L2 =
#: dst MAC, src MAC (02:00:00:00:00:<node>), EtherType 0x88B5 big endian, store header.
#: No layout, no model code: ``(src, dst, addr, length, compact header, L2 header)``.
GOLDEN_HEADERS = [
    # 1 | 77 << 3 = 0x0269; addr 0x00001240.
    (3, 9, 0x1240, 77, "09 03 69 02 40 12 00 00",
     "02 00 00 00 00 09  02 00 00 00 00 03  88 b5  69 02 40 12 00 00"),
    # 1 | 8191 << 3 = 0xfff9; addr 0xdeadbec0.
    (0x41, 0xFE, 0xDEADBEC0, 8191, "fe 41 f9 ff c0 be ad de",
     "02 00 00 00 00 fe  02 00 00 00 00 41  88 b5  f9 ff c0 be ad de"),
    # 1 | 1 << 3 = 0x0009; addr 0.
    (0, 1, 0, 1, "01 00 09 00 00 00 00 00",
     "02 00 00 00 00 01  02 00 00 00 00 00  88 b5  09 00 00 00 00 00"),
]


def test_ack_req_is_bit_2_of_the_store_header():
    """By hand: 1 | 1 << 2 | 77 << 3 = 0x026d (the first golden header with the flag);
    parsed back as the flag, opcode STORE."""
    for framing, text in ((Framing.COMPACT, "09 03 6d 02 40 12 00 00"),
                          (Framing.L2, "02 00 00 00 00 09  02 00 00 00 00 03  88 b5  "
                                       "6d 02 40 12 00 00")):
        want = bytes.fromhex(text)
        frame = build_frame(framing, 3, 9, 0x1240, 77, bytes(40), ack_req=True)
        assert frame[:len(want)] == want, framing
        f = parse_header(framing, frame)
        assert (f["opcode"], f["ack_req"], f["length"]) == (1, 1, 77)


@pytest.mark.parametrize("src,dst,addr,length,compact,l2", GOLDEN_HEADERS)
def test_headers_are_the_hand_written_bytes(src, dst, addr, length, compact, l2):
    for framing, text in ((Framing.COMPACT, compact), (Framing.L2, l2)):
        want = bytes.fromhex(text)
        frame = build_frame(framing, src, dst, addr, length, bytes(min(length, 40)))
        assert frame[:len(want)] == want, framing
        assert header_bytes(framing) == len(want)


@pytest.mark.parametrize("size", [1, 39, 40, 41, 100, 1500])
def test_l2_frames_decode_with_scapy(size):
    """The model's L2 frames (which the RTL framer's are compared with) as scapy and zlib
    read them: MACs, EtherType 0x88B5, FCS, the IEEE 802.3 minimum of 64 bytes."""
    from scapy.layers.l2 import Ether

    frame = build_frame("l2", 5, 12, 0x40, size, bytes(7 * k & 0xFF for k in range(size)))
    assert l2_frame_problems(frame, 5, 12) == []
    pkt = Ether(frame[:-4])
    assert (pkt.dst, pkt.src, pkt.type) == ("02:00:00:00:00:0c", "02:00:00:00:00:05", 0x88B5)
    assert len(frame) == max(64, 20 + size + 4)
    broken = bytearray(frame)
    broken[len(frame) // 2] ^= 0x10
    assert l2_frame_problems(bytes(broken), 5, 12) == ["FCS"]
    assert "source MAC 02:00:00:00:00:05" in l2_frame_problems(frame, 6)


@pytest.mark.parametrize("width,max_payload", [(64, 1024), (16, 512), (8, 64), (32, 96)])
def test_link_credits_hold_two_largest_frames_and_size_the_switch(width, max_payload):
    """The credit rule (spec.fabric_profiles.nic_top_credits, at least spec.nic.
    link_credits) leaves room for two of the longest frames of either framing, and NicTop
    gives the same number to every sender's credit counter and to every switch ingress
    buffer (a mismatch would overrun a buffer or stall)."""
    credits = nic_top_credits("board", width, max_payload)
    assert credits >= link_credits(width, max_payload)
    for framing in Framing:
        assert credits >= 2 * frame_beats(width, framing, max_payload)
    top = NicTop(width=width, nodes=2, max_payload=max_payload, mem_words=16, items=4,
                 events=4)
    silence(top)                         # built for its parameters only, never elaborated
    assert top.switch.fifo_depth == credits
    assert [tx.max_credits for tx in top.txs] == [credits] * 2


@pytest.mark.parametrize("framing", list(Framing))
def test_header_round_trip(framing):
    frame = build_frame(framing, 3, 9, 0x1240, 77, bytes(77))
    f = parse_header(framing, frame)
    assert (f["length"], f["addr"], f["opcode"], f["ethertype_ok"]) == (77, 0x1240, 1, True)
    assert frame[5 if framing is Framing.L2 else 0] == 9


@pytest.mark.parametrize("make,word", [
    (lambda: NicTxFramer(12, "l2"), "width"),
    (lambda: NicTxFramer(16, "ipv4"), "framing"),
    (lambda: NicTx(16, "l2", 0, 512), "credits"),
    (lambda: StoreSegmenter(16, 24), "multiple of the width"),
    (lambda: MinFramePadder(16, 0), "min_bytes"),
    (lambda: StoreSegmenter(16, 8), "max_payload"),
    (lambda: StoreSegmenter(16, 8192), "max_payload"),
    (lambda: NicRx(16, "l2", 0, 64), "max_payload"),
    (lambda: NicRx(16, "compact", 64, 1), "depth"),
    (lambda: WindowTable(12, 16), "width"),
    (lambda: WindowTable(16, 1), "depth"),
    (lambda: WindowTable(16, 2**21), "depth"),
    (lambda: Switch(16, 1, "l2", 8), "ports"),
    (lambda: Switch(16, 4, "l2", 1), "fifo_depth"),
    (lambda: CreditReturn(0), "latency"),
    (lambda: NicTop(nodes=1), "nodes"),
])
def test_bad_parameters_name_themselves(make, word):
    with pytest.raises(ValueError, match=word):
        make()


def test_store_beats_follow_the_packet_rules():
    s = Store(0, 0, bytes(range(40)))
    beats = s.beats(16)
    assert [unpack_beat(16, b)[1] if isinstance(b, int) else b[1] for b in beats] == [16, 16, 8]



@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_switch_matches_model_with_table_write(framing):
    """Random frames on all ports (contention on the outputs), after rewriting the table
    through its port: egress beats and credit pulses, cycle by cycle, equal the model's
    (round robin, one-cycle forwarding)."""
    from pymodel.fabric.switch import SwitchModel
    from pymodel.packet import frame_to_beats
    from spec.formats.nic import dst_byte

    width, ports, depth, cycles = 8, 4, 64, 160
    dut = Switch(width, ports, framing, depth)
    model = SwitchModel(ports, framing, depth, width=width)
    rng = random.Random(7)
    remap = {1: 3, 3: 1}
    off = dst_byte(framing)
    streams = {}
    for p in range(ports):
        beats = []
        for _ in range(5):
            frame = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(8, 40)))
            frame[off] = rng.randrange(ports)
            beats += frame_to_beats(bytes(frame), width)
        streams[p] = beats
    arrivals, got = [], []

    async def bench(ctx):
        ctx.set(dut.table_wr.valid, 1)
        for node, port in remap.items():
            ctx.set(dut.table_wr.payload.node, node)
            ctx.set(dut.table_wr.payload.port, port)
            await ctx.tick()
        ctx.set(dut.table_wr.valid, 0)
        for c in range(cycles):
            now = {}
            for p in range(ports):
                link = dut.i[p]
                send = bool(streams[p]) and (c + p) % 3 != 0     # gaps inside frames
                ctx.set(link.valid, send)
                if send:
                    beat = streams[p].pop(0)
                    ctx.set(link.payload.as_value(), beat)
                    now[p] = unpack_beat(width, beat)
            arrivals.append(now)
            got.append(([ctx.get(dut.o[p].payload.as_value())
                         if ctx.get(dut.o[p].valid) else None
                         for p in range(ports)],
                        [ctx.get(dut.credit[p]) for p in range(ports)]))
            await ctx.tick()

    run_sim(dut, bench)
    for node, port in remap.items():
        model.table[node] = port
    from pymodel.packet import pack_beat
    want = [([None] * ports, None)]
    for c in range(cycles):
        egress, pops = model.cycle(c, arrivals[c])
        want[c] = (want[c][0], [int(p in pops) for p in range(ports)])
        want.append(([pack_beat(width, *egress[p][:4]) if p in egress else None
                      for p in range(ports)], None))
    assert got == want[:cycles]
    assert all(not s for s in streams.values())
    assert sum(sum(c) for _, c in got) == sum(len(a) for a in arrivals), "beats lost"


class _FakeFabric:
    """Just enough of tb.harness.Harness to load a player."""

    def __init__(self):
        self.loaded = {}

    def load_player(self, name, items, stall=(1, 0), release=None):
        self.loaded[name] = (items, stall)
        self.released = release


def test_store_source_queues_then_loads_once():
    """send_nowait queues, load() writes every beat in order with the stall pattern,
    and a store sent after load() is refused with a message naming the player."""
    from tb.nic.store_driver import StoreSource
    harness = _FakeFabric()
    src = StoreSource(harness, "cmd0", 16, stall=(5, 40))
    stores = [Store(1, 0, bytes(range(40))), Store(2, 64, bytes(3))]
    for s in stores:
        src.send_nowait(s)
    assert src.count() == 2 and not src.empty()
    src.load()
    items, stall = harness.loaded["cmd0"]
    assert items == _cmd_items(16, stores) and stall == (5, 40)
    assert harness.released == [0, 0, 0, 0]          # untimed stores: all at once
    assert src._spans == [(0, 2), (3, 3)]
    with pytest.raises(RuntimeError, match="cmd0"):
        src.send_nowait(stores[0])


# -- protection: the per-source receive windows ----------------------------------------

def test_window_table_reads_registered_and_checks_every_edge():
    """Power-up: every source has the whole memory. A write is seen by lookups from the
    next cycle (a lookup in the write's own cycle reads the old entry); ``inside``
    holds exactly when ``[addr, addr + length)`` is in the window, with no wrap past
    2**32."""
    w, depth = 16, 8
    dut = WindowTable(w, depth)
    seen = {}

    async def check(ctx, name, cases):
        for addr, length, want in cases:
            ctx.set(dut.addr, addr)
            ctx.set(dut.length, length)
            seen[(name, addr, length)] = (ctx.get(dut.inside), want)

    async def bench(ctx):
        ctx.set(dut.src, 9)
        ctx.set(dut.lookup, 1)
        await ctx.tick()
        ctx.set(dut.lookup, 0)
        await check(ctx, "power-up", [(0, 1, 1), (0, 128, 1), (112, 16, 1), (112, 17, 0),
                                      (128, 1, 0), (2**32 - 16, 32, 0)])
        # Write src 9 = words [2, 5) while looking it up: the lookup reads the old entry.
        ctx.set(dut.wr.valid, 1)
        ctx.set(dut.wr.payload, {"src": 9, "base": 2, "size": 3})
        ctx.set(dut.lookup, 1)
        await ctx.tick()
        ctx.set(dut.wr.valid, 0)
        ctx.set(dut.lookup, 0)
        await check(ctx, "same cycle", [(0, 128, 1)])
        ctx.set(dut.lookup, 1)
        await ctx.tick()
        ctx.set(dut.lookup, 0)
        ctx.set(dut.src, 3)                 # held: a new src without lookup changes nothing
        await check(ctx, "window", [(32, 48, 1), (32, 1, 1), (64, 16, 1), (79, 1, 1),
                                    (32, 49, 0), (80, 1, 0), (16, 16, 0), (16, 32, 0),
                                    (31, 2, 0), (2**32 - 16, 112, 0), (2**32 - 48, 96, 0)])
        ctx.set(dut.wr.valid, 1)
        ctx.set(dut.wr.payload, {"src": 3, "base": 7, "size": 0})
        await ctx.tick()
        ctx.set(dut.wr.valid, 0)
        ctx.set(dut.lookup, 1)
        await ctx.tick()
        await check(ctx, "empty", [(112, 1, 0), (0, 1, 0), (112, 0, 1)])
        ctx.set(dut.wr.valid, 1)           # a window reaching past the memory
        ctx.set(dut.wr.payload, {"src": 3, "base": 7, "size": 8})
        await ctx.tick()
        ctx.set(dut.wr.valid, 0)
        await ctx.tick()
        await check(ctx, "past the end", [(112, 128, 1), (112, 129, 0), (96, 17, 0)])

    run_sim(dut, bench)
    bad = {k: v for k, v in seen.items() if v[0] != v[1]}
    assert not bad, bad
    assert len(seen) == 6 + 1 + 11 + 3 + 3


def test_window_table_bits():
    assert window_table_bits(256) == 256 * (8 + 9)
    assert window_table_bits(512) == 256 * (9 + 10)


def _rx_frame(framing, src, dst, addr, length, payload, prefix=None):
    """A store frame with FCS; ``prefix`` replaces the L2 source MAC's first 5 bytes."""
    from pymodel.fcs import fcs_bytes
    frame = bytearray(build_frame(framing, src, dst, addr, length, payload, fcs=False))
    if prefix is not None:
        frame[6:11] = prefix
    return bytes(frame) + fcs_bytes(bytes(frame))


@pytest.mark.parametrize("width", [8, 64])
@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_rx_windows_match_the_model(width, framing):
    """NicRx against the model's receiver (``NicSystemModel._receive``), cycle by cycle:
    every write and its cycle, and the counters, for stores inside, at both edges of,
    one byte over, below, straddling and above a source's window, from a source with an
    empty window, past the memory and past 2**32, an L2 source MAC with a foreign
    prefix, and window writes that race the frames. At width 8 the L2 source byte is in
    the second beat; at width 64 every frame here is one or two beats."""
    from pymodel.nic.system import NicSystemModel
    from rtl.nic.nic_rx import DropReason
    w, depth, me, mp = width, 16, 5, 4 * width
    dut = NicRx(w, framing, mp, depth)
    rng = random.Random(width)

    def frame(src, addr, length, prefix=None):
        return _rx_frame(framing, src, me, addr, length, rng.randbytes(length), prefix)

    frames = [
        frame(1, 2 * w, 4 * w),               # the whole window [2w, 6w): both edges
        frame(1, 3 * w, 2 * w),               # inside
        frame(1, 3 * w, 3 * w + 1),           # one byte over the end
        frame(1, w, w),                       # below the base
        frame(1, w, 2 * w),                   # straddling the base
        frame(1, 6 * w, 1),                   # just above
        frame(1, 5 * w, w),                   # the last word (good after bad)
        frame(2, 0, 1),                       # empty window: unauthorised source
        frame(3, 8 * w, 2 * w),               # explicit whole memory
        frame(7, 15 * w, w),                  # window up to the memory's end
        frame(7, 15 * w, w + 1),              # past the memory (and the window)
        frame(7, 2**32 - w, 2 * w),           # past 2**32
        frame(99, 12 * w, w),                 # never written: the power-up window
        frame(1, 2 * w, w, prefix=bytes(5) if framing == "l2" else None),
        frame(4, 0, w),                       # races the write of (4, 0, 0) ...
        frame(4, 0, w),                       # ... which this one sees
    ]
    beats, cyc = [], 8
    for f in frames:
        for b in frame_to_beats(f, w):
            beats.append((cyc, b))
            cyc += 1
        cyc += 1                              # one idle cycle between frames
    from rtl.nic.nic_rx import source_byte
    src_beat = source_byte(framing) // w
    first_of = [c for c, b in beats if unpack_beat(w, b)[2]]
    race = first_of[-2] + src_beat            # the cycle frame 14 reads its window
    writes = [(1, 2, 4), (2, 9, 0), (3, 0, 16), (7, 15, 1)]
    writes += [(200, 0, 0)] * (race - len(writes)) + [(4, 0, 0)]
    end = cyc + 3 * depth + 8
    got, counters = [], {}

    async def bench(ctx):
        ctx.set(dut.node_id, me)
        k = 0
        for c in range(end):
            ctx.set(dut.win_wr.valid, c < len(writes))
            if c < len(writes):
                s, b, z = writes[c]
                ctx.set(dut.win_wr.payload, {"src": s, "base": b, "size": z})
            now = k < len(beats) and beats[k][0] == c
            ctx.set(dut.i.valid, now)
            if now:
                ctx.set(dut.i.payload.as_value(), beats[k][1])
                k += 1
            if ctx.get(dut.wr.valid):
                got.append((ctx.get(dut.wr.payload.addr), ctx.get(dut.wr.payload.be), c,
                            ctx.get(dut.wr.payload.data)))
            await ctx.tick()
        for name in ("frames_ok",) + tuple(f"drop_{r}" for r in DropReason.ORDER):
            counters[name] = ctx.get(getattr(dut, name))

    run_sim(dut, bench)
    model = NicSystemModel(w, framing, 2, 2, depth, mp, 64)
    want = model._receive(0, [(c, unpack_beat(w, b) + (None,)) for c, b in beats], me,
                          set(), [], writes)
    assert [g[:3] for g in got] == [(a, be, c) for (a, be), c in zip(*want["wr"],
                                                                        strict=True)]
    assert counters == want["counters"]
    l2 = framing == "l2"
    assert counters == {"frames_ok": 7 + (not l2), "drop_fcs": 0, "drop_malformed": 0,
                        "drop_dst": 0, "drop_addr": 2, "drop_window": 6 + l2}, counters
    # Independently of the model: the memory holds the authorised frames, in order.
    authorised = [0, 1, 6, 8, 9, 12, 14] + ([] if l2 else [13])
    mem, rtl = bytearray(depth * w), bytearray(depth * w)
    for k in sorted(authorised):
        hdr = parse_header(framing, frames[k])
        h = header_bytes(framing)
        mem[hdr["addr"]:hdr["addr"] + hdr["length"]] = frames[k][h:h + hdr["length"]]
    for a, be, _, data in got:
        for j in range(w):
            if be >> j & 1:
                rtl[a * w + j] = data >> (8 * j) & 0xFF
    assert rtl == mem



def test_store_source_loads_each_stores_release_on_its_first_beat():
    """A timed store: its release on its first command beat, 0 on the others (offered at
    once); a bad release names itself."""
    from tb.nic.store_driver import StoreSource
    harness = _FakeFabric()
    src = StoreSource(harness, "cmd0", 16)
    for s in [Store(1, 0, bytes(40), release=9), Store(2, 64, bytes(3), release=4),
              Store(2, 64, bytes(17))]:
        src.send_nowait(s)
    src.load()
    assert harness.released == [9, 0, 0, 4, 0, 0]
    for bad in (-1, 1 << 32, 2.0, True):
        with pytest.raises(ValueError, match="release"):
            Store(1, 0, bytes(4), release=bad)


@pytest.mark.parametrize("framing", ["compact", "l2"])
def test_rx_without_completion_ignores_ack_req(framing):
    """A receiver without end-to-end completion (``credit``) ignores a store's
    ``ack_req``: a flagged frame is written and counted in ``frames_ok`` like the same
    frame without the flag (the flag asks for a completion this receiver does not send;
    no counter of its own, so the credit NIC keeps its area). The opcode's two bits
    hold STORE (1); 0 and 3 are malformed. RTL = the model's receiver, cycle by cycle,
    and independently of the model: two writes of identical bytes, two frames dropped."""
    from pymodel.fcs import fcs_bytes
    from pymodel.nic.system import NicSystemModel
    from spec.formats.nic import store_header_layout

    w, depth, me = 16, 16, 5
    h = header_bytes(framing)
    payload = bytes(range(32))

    def frame(addr, ack_req=False, opcode=None):
        raw = bytearray(build_frame(framing, 1, me, addr, 32, payload, fcs=False,
                                    ack_req=ack_req))
        if opcode is not None:           # rewrite the opcode bits of the store header
            raw[h - 6] = raw[h - 6] & ~0b11 | opcode
        assert store_header_layout["opcode"].offset == 0
        return bytes(raw) + fcs_bytes(bytes(raw))

    frames = [frame(0), frame(2 * w, ack_req=True), frame(4 * w, opcode=0),
              frame(4 * w, ack_req=True, opcode=3)]
    beats, cyc = [], 4
    for f in frames:
        for b in frame_to_beats(f, w):
            beats.append((cyc, b))
            cyc += 1
        cyc += 1
    dut = NicRx(w, framing, 64, depth)
    got, counters = [], {}

    async def bench(ctx):
        ctx.set(dut.node_id, me)
        k = 0
        for c in range(cyc + 24):
            now = k < len(beats) and beats[k][0] == c
            ctx.set(dut.i.valid, now)
            if now:
                ctx.set(dut.i.payload.as_value(), beats[k][1])
                k += 1
            if ctx.get(dut.wr.valid):
                got.append((ctx.get(dut.wr.payload.addr), c, ctx.get(dut.wr.payload.data)))
            await ctx.tick()
        for name in ("frames_ok", "drop_malformed"):
            counters[name] = ctx.get(getattr(dut, name))

    run_sim(dut, bench)
    model = NicSystemModel(w, framing, 2, 2, depth, 64, 64)
    want = model._receive(0, [(c, unpack_beat(w, b) + (None,)) for c, b in beats], me,
                          set(), [], [])
    assert [(a, c) for a, c, _ in got] == [(a, c) for (a, _), c in zip(*want["wr"],
                                                                       strict=True)]
    assert counters == {"frames_ok": 2, "drop_malformed": 2}
    assert {k: want["counters"][k] for k in counters} == counters
    assert [a for a, _, _ in got] == [0, 1, 2, 3]
    assert got[0][2] == got[2][2] and got[1][2] == got[3][2]


def test_pcie_register_offset_carries_the_ack_request():
    """The ``pcie`` host write's 16-bit register offset, by hand: bit 15 the ack request,
    bits 11..14 the destination node, bits 0..10 the 64-byte word; a store the host
    splits into posted writes of 256 bytes (MPS) asks on its last write only."""
    from spec.nic import pcie_mmio_addr

    assert pcie_mmio_addr(9, 0x40 * 5) == 9 << 11 | 5
    assert pcie_mmio_addr(15, 64 * 2047, ack_req=True) == 0x8000 | 15 << 11 | 2047
    writes = Store(1, 0, bytes(600), ack_req=True).host_writes()
    assert [(len(s.payload), s.ack_req) for s in writes] == [(256, False), (256, False),
                                                             (88, True)]
    assert not any(s.ack_req for s in Store(1, 0, bytes(600)).host_writes())
