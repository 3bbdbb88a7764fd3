"""The frame checks' unit-test bench in the Amaranth simulator: frames damaged the way
the tests play them, and :class:`rtl.rdma.frame_check.FrameCheck`'s verdict per frame."""

import zlib

from pymodel.packet import frame_to_beats, unpack_beat
from tb.amsim import run_sim

__all__ = ["damaged", "frame_check_verdicts"]


def damaged(frame, kind):
    """``frame`` (bytes, FCS last) as played: ``kind`` 0 as is, 1 a bit of its ICRC
    flipped and the FCS redone (a bad ICRC only), 2 a bit of its FCS flipped."""
    f = bytearray(frame)
    if kind == 1:
        f[-6] ^= 0x10
        f[-4:] = zlib.crc32(bytes(f[:-4])).to_bytes(4, "little")
    elif kind == 2:
        f[-1] ^= 0x80
    return bytes(f)


def frame_check_verdicts(dut, cases):
    """Play ``cases`` (``(frame, kind)``) into FrameCheck ``dut`` back to back, a 64-byte
    beat a cycle; per frame ``(fcs_ok, icrc_ok, length, len(frame), kind)``, read in the
    cycle of its last beat. Fails when a frame gives no verdict."""
    seen = []

    async def bench(ctx):
        for frame, kind in cases:
            for bits in frame_to_beats(frame, 64):
                data, nbytes, first, last = unpack_beat(64, bits)
                ctx.set(dut.beat.data, data)
                ctx.set(dut.beat.nbytes, nbytes)
                ctx.set(dut.beat.first, first)
                ctx.set(dut.beat.last, last)
                ctx.set(dut.en, 1)
                if last:
                    seen.append((ctx.get(dut.fcs_ok), ctx.get(dut.icrc_ok),
                                 ctx.get(dut.length), len(frame), kind))
                await ctx.tick()

    run_sim(dut, bench)
    assert len(seen) == len(cases)
    return seen
