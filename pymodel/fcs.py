"""Twins of the FCS inserter and checker: frames, counters and cycle-exact transfers."""

import zlib

from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.stall import stall_pattern

__all__ = ["PREAMBLE_SFD_BYTES", "IFG_BYTES", "phy_bytes", "FCS_GOOD_RESIDUE", "fcs_bytes",
           "fcs_ok", "FcsInserterModel", "FcsCheckerModel"]


def fcs_bytes(frame):
    """The 4-byte FCS of ``frame`` as sent on the wire (``zlib.crc32``, LSB first)."""
    return zlib.crc32(frame).to_bytes(4, "little")


#: Bytes an Ethernet PHY spends around every frame: preamble + SFD, and the minimum
#: inter-packet gap. Ref: IEEE 802.3-2022 clause 3.2.1 (preamble, SFD) and 4.4.2 (IPG).
PREAMBLE_SFD_BYTES = 8
IFG_BYTES = 12


def phy_bytes(frame_with_fcs):
    """Bytes a frame (FCS included) costs on the wire: preamble/SFD + frame + IFG."""
    return PREAMBLE_SFD_BYTES + len(frame_with_fcs) + IFG_BYTES


#: ``zlib.crc32`` of any frame followed by its own FCS (IEEE 802.3 clause 3.2.9).
FCS_GOOD_RESIDUE = 0x2144DF1C


def fcs_ok(frame_with_fcs):
    """Whether the frame, read as payload + FCS, has a correct FCS (the residue rule)."""
    return zlib.crc32(frame_with_fcs) == FCS_GOOD_RESIDUE


class FcsInserterModel:
    """Player -> FcsInserter -> recorder, as :class:`rtl.common.fcs_inserter.FcsInserter`.

    ``run(frames, src, sink)`` takes the frames without FCS and the ``(seed, rate)`` stall
    patterns of the player and the recorder, and returns ``(out_beats, out_stamps,
    in_stamps)``: every beat the recorder takes with its cycle, and the cycle each input
    beat was taken.
    """

    def __init__(self, width):
        self.width = width

    def expected_frames(self, frames):
        return [bytes(f) + fcs_bytes(f) for f in frames]

    def run(self, frames, src=(1, 0), sink=(1, 0), max_cycles=None):
        w = self.width
        in_beats = [b for f in frames for b in frame_to_beats(f, w)]
        out_frames = self.expected_frames(frames)
        # Output beats of each input beat: the FCS either fits the last beat or spills.
        out_beats = [b for f in out_frames for b in frame_to_beats(f, w)]
        max_cycles = max_cycles or 16 * (len(out_beats) + 16)
        src_stall = stall_pattern(*src, max_cycles)
        sink_stall = stall_pattern(*sink, max_cycles)
        out_stamps, in_stamps = [], []
        i = o = 0
        spill = False
        for c in range(max_cycles):
            if o == len(out_beats):
                break
            ready = not sink_stall[c]
            if spill:
                if ready:
                    out_stamps.append(c)
                    o += 1
                    spill = False
                continue
            if i < len(in_beats) and not src_stall[c] and ready:
                _, nbytes, _, last = unpack_beat(w, in_beats[i])
                in_stamps.append(c)
                out_stamps.append(c)
                i += 1
                o += 1
                spill = last and nbytes > w - 4
        else:
            raise RuntimeError("model did not finish: raise max_cycles")
        return out_beats, out_stamps, in_stamps


class FcsCheckerModel:
    """Player -> FcsChecker -> recorder, as :class:`rtl.common.fcs_checker.FcsChecker`.

    ``run(frames, src, sink)`` returns ``(out_beats, stamps, frames_ok, frames_bad)``.
    """

    def __init__(self, width):
        self.width = width

    def run(self, frames, src=(1, 0), sink=(1, 0), max_cycles=None):
        w = self.width
        beats = [b for f in frames for b in frame_to_beats(f, w)]
        max_cycles = max_cycles or 16 * (len(beats) + 16)
        src_stall = stall_pattern(*src, max_cycles)
        sink_stall = stall_pattern(*sink, max_cycles)
        stamps = []
        for c in range(max_cycles):
            if len(stamps) == len(beats):
                break
            if not src_stall[c] and not sink_stall[c]:
                stamps.append(c)
        else:
            raise RuntimeError("model did not finish: raise max_cycles")
        good = sum(fcs_ok(bytes(f)) for f in frames)
        return beats, stamps, good, len(frames) - good
