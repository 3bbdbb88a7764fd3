"""The bulk reads and comparisons of the co-simulation benches, outside a simulator:
tb.bulk_dump's parse of a ``$writememh`` file, tb.scoreboard's list comparison and
tb.rdma.testbench's whole-memory comparison and frame decode give what a word-by-word
reading says, in every shape of input (equal, different, X words, odd files)."""

import math
from types import SimpleNamespace

import cocotb.utils
import pytest

from pymodel.packet import frame_to_beats
from tb import bulk_dump
from tb.rdma.testbench import frames_of, words_that_differ
from tb.scoreboard import Scoreboard

NOW = 1234


@pytest.fixture
def snapshot_file(tmp_path, monkeypatch):
    """A function that records ``text`` as the snapshot of a memory taken now and
    returns that memory's stand-in handle."""
    monkeypatch.setattr(cocotb.utils, "get_sim_time", lambda unit: NOW)
    monkeypatch.setattr(bulk_dump, "_snapshots", {})

    def make(text, name="top.mem"):
        file = tmp_path / f"{name}.hex"
        file.write_bytes(text.encode())
        bulk_dump._snapshots[name] = (NOW, file)
        return SimpleNamespace(_path=name)
    return make


WORDS = [0, 0x1F, 0, 0, (1 << 40) - 1, 0, 7]


def _lines(words, digits=12):
    return "".join(f"{w:0{digits}x}\n" for w in words)


def test_file_words_read_the_same_in_every_layout(snapshot_file):
    plain = snapshot_file(_lines(WORDS))
    assert bulk_dump.snapshot_words(plain, len(WORDS), 0) == WORDS
    assert bulk_dump.snapshot_words(plain, 3, 2) == WORDS[2:5]
    assert bulk_dump.snapshot_words(plain, 0, 0) == []
    # Comments, address marks, Windows line ends, an empty first line: the same words.
    for text in ("// comment\n" + _lines(WORDS), "@0\n" + _lines(WORDS),
                 _lines(WORDS).replace("\n", "\r\n"), "\n" + _lines(WORDS),
                 _lines(WORDS[:3]) + "@3\n" + _lines(WORDS[3:])):
        mem = snapshot_file(text, "top.other")
        assert bulk_dump.snapshot_words(mem, len(WORDS), 0) == WORDS, repr(text)


def test_file_words_name_a_bad_word_and_a_short_file(snapshot_file):
    with_x = snapshot_file(_lines(WORDS[:3]) + "00000000x001\n" + _lines(WORDS[4:]))
    with pytest.raises(ValueError, match=r"top\.mem\[3\] holds '00000000x001'"):
        bulk_dump.snapshot_words(with_x, len(WORDS), 0)
    assert bulk_dump.snapshot_words(with_x, 3, 0) == WORDS[:3]    # the X is not asked
    short = snapshot_file(_lines(WORDS), "top.short")
    with pytest.raises(RuntimeError, match=f"holds {len(WORDS)} words; {len(WORDS) + 1}"):
        bulk_dump.snapshot_words(short, len(WORDS) + 1, 0)


def test_file_words_only_at_the_snapshots_time(snapshot_file, monkeypatch):
    mem = snapshot_file(_lines(WORDS))
    monkeypatch.setattr(cocotb.utils, "get_sim_time", lambda unit: NOW + 1)
    assert bulk_dump.snapshot_words(mem, len(WORDS), 0) is None


def test_scoreboard_reports_the_same_differences():
    sb = Scoreboard().compare("x", [1, 2, 3], [1, 2, 3])
    assert (sb.checked, sb.mismatches) == (3, [])
    sb = Scoreboard().compare("x", [1, 2, 4, 5], [1, 3, 4])
    assert sb.mismatches == ["x: RTL has 4 items, model 3", "x[1]: RTL 0x2 != model 0x3"]
    assert sb.checked == 3
    sb = Scoreboard().compare("t", [(1, 2), (3, 4)], [(1, 2), (3, 5)], fmt=str)
    assert sb.mismatches == ["t[1]: RTL (3, 4) != model (3, 5)"]
    nan = math.nan                  # the same object in both lists: still unequal
    sb = Scoreboard().compare("f", [1.0, nan], [1.0, nan])
    assert len(sb.mismatches) == 1 and sb.mismatches[0].startswith("f[1]: RTL nan")
    sb = Scoreboard().compare("b", [True, 2], [True, 2])
    assert (sb.checked, sb.mismatches) == (2, [])


def test_whole_memory_differences_are_every_differing_address():
    depth = 64
    image = {3: 1 << 500, 17: 5, 63: 9, 64: 1, 99: 2}      # 64 and 99 lie past the end
    words = [image.get(a, 0) for a in range(depth)]
    assert words_that_differ(words, image, depth) == []
    words[0], words[17], words[63] = 1, 6, 0
    assert words_that_differ(words, image, depth) == [0, 17, 63]
    assert words_that_differ(words + [1, 2], image, depth) == [0, 17, 63]


def test_recorded_beats_decode_to_frames_and_their_cycles():
    frames = [bytes(range(1, 70)), b"\x05", bytes(64)]
    beats = [b for fr in frames for b in frame_to_beats(fr, 64)]
    stamps = list(range(10, 10 + len(beats)))
    assert frames_of(beats, stamps) == [([10, 11], frames[0]), ([12], frames[1]),
                                        ([13], frames[2])]
    with pytest.raises(ValueError):
        frames_of(beats[1:], stamps[1:])        # a frame without its first beat
    with pytest.raises(ValueError, match="4 beats, 3 stamps"):
        frames_of(beats, stamps[:-1])
