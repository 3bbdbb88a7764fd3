"""The golden model's shortcuts compute what the plain code computes.

Each speed-up of the cycle models keeps a plain definition next to it; here the two
are held against each other on many inputs: the fault pattern's LFSR jumps by table
against :func:`pymodel.stall.lfsr_step` walked step by step, the ACK sender's beats
against :func:`pymodel.packet.frame_to_beats`, a :class:`pymodel.cycle.StagedLog`
against committing every FIFO and register, a :class:`pymodel.cycle.StagedNonzero`'s
set of entries in use against scanning its whole file, the frame headers packed with the
cached addressing part against a whole :func:`pymodel.fields.pack`, the BTH, RETH and
AETH placed field by field against :func:`pymodel.fields.pack`, the ICRC in three runs
against one run over a masked copy, the fields read at their
:func:`pymodel.fields.field_slot` against :func:`pymodel.fields.unpack`, and the host
interface's 32-bit counters wrapped when one may have passed 2**32 against wrapping them
after every cycle.
"""

import random

import pytest

from pymodel.cycle import Fifo, Staged, StagedLog, StagedNonzero, commit_all
from pymodel.fabric.faulty_link import _advance
from pymodel.fields import field_slot, pack, unpack
from pymodel.host.host_interface import HostInterfaceModel
from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.rdma.frames import (
    Endpoint,
    _aeth_word,
    _bth,
    _bth_word,
    _headers,
    _icrc_plain,
    _reth_word,
    icrc,
    with_fcs,
    write_frame,
)
from pymodel.rdma.resp.ack import ack_beats
from pymodel.stall import lfsr_step
from spec.formats.roce import (
    ACK_HEADER,
    AETH_LAYOUT,
    BTH_LAYOUT,
    CQE_LAYOUT,
    MR_LAYOUT,
    QPC_LAYOUT,
    RETH_LAYOUT,
    WQE_LAYOUT,
    WRITE_HEADER,
    WRITE_RETH_HEADER,
    OpCode,
    Syndrome,
    bswap,
    header_bytes,
)
from spec.host import PROFILES
from tb.host_interface import SOURCES, Presenter, Stalls, random_stimulus


def _walk(state, steps):
    for _ in range(steps):
        state = lfsr_step(state)
    return state


@pytest.mark.parametrize("steps", [1, 16, 48])
def test_lfsr_jump_table_equals_stepping(steps):
    for state in range(0, 1 << 16, 7):
        assert _advance(state, steps) == _walk(state, steps), state


def test_ack_beats_equal_the_packet_split():
    rng = random.Random(5)
    for _ in range(300):
        job = dict(smac=rng.getrandbits(48), sip=rng.getrandbits(32),
                   dmac=rng.getrandbits(48), dip=rng.getrandbits(32),
                   src_qp=rng.getrandbits(24), dest_qp=rng.getrandbits(24),
                   psn=rng.getrandbits(24), msn=rng.getrandbits(24),
                   syndrome=rng.choice(list(Syndrome)).value)
        beats = ack_beats(job)
        frame = b"".join(b["data"].to_bytes(64, "little")[:b["nbytes"]] for b in beats)
        want = []
        for bits in frame_to_beats(frame, 64):
            data, nbytes, first, last = unpack_beat(64, bits)
            want.append(dict(data=data, nbytes=nbytes, first=int(first), last=int(last)))
        assert beats == want


def _plain_headers(layout, src, dst, qpn_src, transport_len, bth, ext, ext_name):
    """The headers as one :func:`pack` of every field, checksum filled in after (the
    fields are the model's own: what this checks is the caching and the OR)."""
    from pymodel.rdma.frames import addressing_fields, ipv4_checksum
    fields = dict(addressing_fields(src, dst, qpn_src, transport_len), bth=bth)
    if ext is not None:
        fields[ext_name] = ext
    raw = bytearray(pack(layout, fields).to_bytes(header_bytes(layout), "little"))
    raw[24:26] = ipv4_checksum(bytes(raw[14:34])).to_bytes(2, "big")
    return bytes(raw)


def test_headers_with_cached_addressing_equal_one_pack():
    rng = random.Random(9)
    ends = [Endpoint(rng.getrandbits(48), rng.getrandbits(32)) for _ in range(3)]
    for _ in range(300):
        src, dst = rng.sample(ends, 2)
        qpn, length = rng.randrange(1 << 24), rng.choice([4, 20, 68, 1028, rng.randrange(4096)])
        bth = _bth(OpCode.RC_RDMA_WRITE_ONLY, rng.randrange(1 << 24), rng.randrange(1 << 24),
                   rng.randint(0, 1), rng.randrange(4))
        for layout, ext, name in (
                (WRITE_RETH_HEADER, {"va": rng.getrandbits(64), "rkey": rng.getrandbits(32),
                                     "dma_length": rng.getrandbits(32)}, "reth"),
                (WRITE_HEADER, None, None),
                (ACK_HEADER, {"syndrome": 0, "msn": rng.getrandbits(24)}, "aeth")):
            want = _plain_headers(layout, src, dst, qpn, length, bth, ext, name)
            assert _headers(layout, src, dst, qpn, length, bth, ext, name) == want
            # The BTH and the extension as their layouts' integers.
            sub = {"reth": RETH_LAYOUT, "aeth": AETH_LAYOUT}.get(name)
            assert _headers(layout, src, dst, qpn, length, pack(BTH_LAYOUT, bth),
                            pack(sub, ext) if ext else None, name) == want


def test_staged_log_commits_as_committing_everything():
    """Random reads, writes and register writes on two identical sets of FIFOs and
    registers: one committed through a StagedLog, one by committing every item."""

    log = StagedLog()
    logged = [Fifo(4, f"f{k}", log) for k in range(5)] + [Staged(0, name="r", log=log),
                                                          Staged(0, size=4, name="a", log=log)]
    plain = [Fifo(4, f"f{k}") for k in range(5)] + [Staged(0, name="r"),
                                                    Staged(0, size=4, name="a")]
    for cycle in range(3000):
        for items in (logged, plain):
            r = random.Random(cycle)
            for fifo in items[:5]:
                if r.random() < 0.5 and fifo.can_read():
                    fifo.read()
                if r.random() < 0.5 and fifo.can_write():
                    fifo.write(cycle)
            if r.random() < 0.3:
                items[5].set(cycle)
                if r.random() < 0.3:
                    items[5].set(cycle)         # the same value again: allowed
            if r.random() < 0.3:
                items[6].set(r.randrange(4), cycle)
        log.commit()
        commit_all(plain)
        assert [list(f.q) for f in logged[:5]] == [list(f.q) for f in plain[:5]]
        assert [f.high for f in logged[:5]] == [f.high for f in plain[:5]]
        assert logged[5].value == plain[5].value and logged[6].value == plain[6].value
    for reg in (Staged(0, name="r", log=log), Staged(0, name="r")):
        reg.set(1)
        with pytest.raises(AssertionError, match="two different writes"):
            reg.set(2)


def test_staged_nonzero_keeps_the_entries_in_use():
    """The completion unit's windows visit ``nonzero`` instead of all 4,096 slots: after
    random writes (counts up and down to 0, through a StagedLog and directly), the set
    is the indexes whose committed value is not 0, and the values are a Staged file's."""
    r = random.Random(5)
    log = StagedLog()
    kept, plain = StagedNonzero(0, size=64, name="w", log=log), Staged(0, size=64, name="w")
    for _ in range(3000):
        for k in r.sample(range(64), r.randrange(4)):
            value = max(0, kept[k] + r.choice((-1, 1, 1)))
            kept.set(k, value)
            plain.set(k, value)
        if r.random() < 0.5:
            log.commit()
        else:
            commit_all([kept])
            log.items.clear()
        plain.commit()
        assert kept.value == plain.value
        assert kept.nonzero == {k for k, v in enumerate(plain.value) if v}
    assert StagedNonzero(3, size=4).nonzero == {0, 1, 2, 3}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_counter_wrap_when_due_equals_wrapping_every_cycle(profile):
    """Counters started a little below 2**32, random traffic with gaps, then idle cycles
    skipped: the counters equal, after every step, those of a twin that looks for the
    wrap in every cycle (the plain rule)."""
    prof = PROFILES[profile]
    rng = random.Random(3)
    stim = random_stimulus(rng, prof, 1024, reads=30, writes=30, mmio=15)
    gaps = Stalls(rd_req=(0xACE1, 100), wr=(0x1234, 100), mmio_in=(0x0F0F, 100))
    models = [HostInterfaceModel(prof, 1024, stim.mem) for _ in range(2)]
    start = {name: (1 << 32) - 1 - rng.randrange(3000) for name in models[0].counters}
    for m in models:
        m.counters.update(start)
    pres = Presenter(stim, gaps, 40_000)
    c, wrapped = 0, 0
    while c is not None and c < 40_000:
        shown = pres.present(c)
        models[1]._wrap_check = 0           # the plain rule: look in every cycle
        results = [m.step(c, **shown) for m in models]
        assert results[0] == results[1], c
        assert models[0].counters == models[1].counters, c
        wrapped += min(models[0].counters.values()) < 1 << 31
        for name in SOURCES:
            if getattr(results[0], f"{name}_taken"):
                pres.take(name)
        c = c + 1 if not pres.done() else models[0].next_event(c)
    assert pres.done() and wrapped


_LAYOUTS = (ACK_HEADER, WRITE_HEADER, WRITE_RETH_HEADER, BTH_LAYOUT, WQE_LAYOUT, CQE_LAYOUT,
            QPC_LAYOUT, MR_LAYOUT)


def _paths(fields, prefix=""):
    for name, value in fields.items():
        if isinstance(value, dict):
            yield from _paths(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


@pytest.mark.parametrize("layout", _LAYOUTS, ids=lambda lay: str(len(lay.members)))
def test_field_slots_read_what_unpack_reads(layout):
    rng = random.Random(11)
    width = layout.size
    for _ in range(200):
        value = rng.getrandbits(width)
        for path, want in _paths(unpack(layout, value)):
            offset, mask = field_slot(layout, path)
            assert (value >> offset) & mask == want, path
    with pytest.raises(KeyError):
        field_slot(layout, "no_such_field")


def test_header_words_equal_their_packed_fields():
    rng = random.Random(13)
    for _ in range(2000):
        op = rng.choice(list(OpCode))
        qp, psn = rng.getrandbits(24), rng.getrandbits(26)
        ack, pad = rng.choice([0, 1, True, False]), rng.randrange(4)
        assert (_bth_word(op.value, qp, psn, ack, pad)
                == pack(BTH_LAYOUT, _bth(op, qp, psn, ack, pad)))
        va, rkey, n = rng.getrandbits(64), rng.getrandbits(32), rng.getrandbits(32)
        assert _reth_word(va, rkey, n) == pack(RETH_LAYOUT, {
            "va": bswap(va, 8), "rkey": bswap(rkey, 4), "dma_length": bswap(n, 4)})
        syn, msn = rng.getrandbits(8), rng.getrandbits(26)
        assert _aeth_word(syn, msn) == pack(AETH_LAYOUT, {"syndrome": syn,
                                                          "msn": bswap(msn & 0xFFFFFF, 3)})


def test_icrc_in_runs_equals_one_run_over_a_masked_copy():
    rng = random.Random(17)
    for n in list(range(47, 200)) + [rng.randrange(200, 9100) for _ in range(200)]:
        frame = rng.randbytes(n)
        assert icrc(frame) == _icrc_plain(frame), n
        assert icrc(bytearray(frame)) == _icrc_plain(bytearray(frame)), n
    for n in (0, 14, 46):                   # too short to hold the masked bytes
        with pytest.raises(IndexError):
            icrc(bytes(n))
        with pytest.raises(IndexError):
            _icrc_plain(bytes(n))


def test_write_frames_equal_frames_of_packed_headers():
    """Whole WRITE frames (opcode by value or by member) against headers of one
    :func:`pack` of every field, the plain ICRC and FCS; other opcodes refused alike."""
    rng = random.Random(19)
    ends = [Endpoint(rng.getrandbits(48), rng.getrandbits(32)) for _ in range(3)]
    writes = [OpCode.RC_RDMA_WRITE_FIRST, OpCode.RC_RDMA_WRITE_MIDDLE,
              OpCode.RC_RDMA_WRITE_LAST, OpCode.RC_RDMA_WRITE_ONLY]
    for _ in range(400):
        src, dst = rng.sample(ends, 2)
        op = rng.choice(writes)
        qpn, dqp, psn = rng.getrandbits(24), rng.getrandbits(24), rng.getrandbits(25)
        ack = rng.randint(0, 1)
        payload = rng.randbytes(rng.choice([0, 1, 3, 64, 255, 1024]))
        va, rkey, n = rng.getrandbits(64), rng.getrandbits(32), rng.getrandbits(32)
        pad = -len(payload) % 4
        body = payload + bytes(pad)
        bth = _bth(op, dqp, psn, ack, pad)
        if op in (OpCode.RC_RDMA_WRITE_FIRST, OpCode.RC_RDMA_WRITE_ONLY):
            reth = {"va": bswap(va, 8), "rkey": bswap(rkey, 4), "dma_length": bswap(n, 4)}
            hdr = _plain_headers(WRITE_RETH_HEADER, src, dst, qpn, 32 + len(body), bth, reth,
                                 "reth")
        else:
            hdr = _plain_headers(WRITE_HEADER, src, dst, qpn, 16 + len(body), bth, None, None)
        want = with_fcs(hdr + body + _icrc_plain(hdr + body))
        for opcode in (op, op.value):
            assert write_frame(opcode, src, dst, qpn, dqp, psn, ack, payload, va=va,
                               rkey=rkey, dma_length=n) == want
    for bad in (OpCode.RC_ACKNOWLEDGE, OpCode.RC_ACKNOWLEDGE.value, 0x55):
        with pytest.raises(ValueError):
            write_frame(bad, *ends[:2], 1, 2, 3, 0, b"x")
