"""The fuzz invariants, checked on the RTL's results without the golden model.

Each function takes what the RTL left (memory words, counters, recorded writes) and what
the fuzz scenario says is allowed (windows, frames injected, the tail's bytes), and
returns a list of violations (text; empty: none). They are used by the fuzz cocotb
modules (:mod:`tb.rdma.cocotb_fuzz`, :mod:`tb.nic.cocotb_fuzz`) and tested on their own
with images that break them (tests/test_fuzz.py). :func:`chunk_record` and
:func:`report_chunk` are the per-chunk bookkeeping both modules share.
"""

import json
import time
from collections import Counter

__all__ = ["outside_windows", "writes_outside", "counted_once", "tail_missing",
           "executed_at_most", "add_counts", "read_bytes", "chunk_record", "report_chunk"]


def _inside(byte, windows):
    return any(base <= byte < base + size for base, size in windows)


def outside_windows(words, initial, windows, word_bytes):
    """Bytes of a memory outside every window that differ from the initial image.

    ``words``: the memory after the run (a list of ints, word ``k`` at byte
    ``k * word_bytes``); ``initial``: ``{word: int}`` before it (missing: 0);
    ``windows``: ``(first byte, bytes)`` where writes are allowed. Returns violations
    naming the first 8 bytes found (their address, value before and after)."""
    bad = []
    for k, value in enumerate(words):
        before = initial.get(k, 0)
        if value == before:
            continue
        diff = value ^ before
        for j in range(word_bytes):
            if (diff >> (8 * j)) & 0xFF and not _inside(k * word_bytes + j, windows):
                bad.append(f"byte {k * word_bytes + j:#x} outside every window changed "
                           f"{(before >> 8 * j) & 0xFF:#04x} -> {(value >> 8 * j) & 0xFF:#04x}")
                if len(bad) >= 8:
                    return bad
    return bad


def writes_outside(writes, windows, word_bytes):
    """Recorded memory writes ``(word, byte enables)`` that touch a byte outside every
    window ``(first byte, bytes)``."""
    bad = []
    for k, (word, be) in enumerate(writes):
        for j in range(word_bytes):
            if (be >> j) & 1 and not _inside(word * word_bytes + j, windows):
                bad.append(f"write {k} (word {word}, byte enables {be:#x}) touches byte "
                           f"{word * word_bytes + j:#x} outside every window")
                break
        if len(bad) >= 8:
            break
    return bad


def counted_once(counters, outcomes, injected):
    """The outcome counters ``outcomes`` (accepted + one per drop reason) must add up
    to the frames injected: each frame counted exactly once. Counters that read as
    text (X bits) are a violation of their own."""
    bad = [f"counter {n} reads {counters[n]!r}" for n in outcomes
           if not isinstance(counters[n], int)]
    total = sum(counters[n] for n in outcomes if isinstance(counters[n], int))
    if total != injected:
        bad.append(f"outcome counters add up to {total}, {injected} frames injected "
                   f"({', '.join(f'{n}={counters[n]}' for n in outcomes if counters[n])})")
    return bad


def tail_missing(read, want):
    """The tail's bytes ``want`` (``{byte address: bytes}``) that the memory does not
    hold: ``read(address, n)`` returns ``n`` bytes of the memory."""
    bad = []
    for addr, payload in sorted(want.items()):
        have = read(addr, len(payload))
        if have != payload:
            first = next(j for j in range(len(payload)) if have[j] != payload[j])
            bad.append(f"tail write at {addr:#x} ({len(payload)} bytes) not delivered: "
                       f"byte {first} is {have[first]:#04x}, sent {payload[first]:#04x}")
    return bad


def executed_at_most(what, executed, most):
    """An operation executed ``executed`` times (a counter of the design) that may run at
    most ``most`` times (derived from the frames injected, e.g. one atomic per PSN):
    a violation if more, or if the counter reads as text (X bits)."""
    if not isinstance(executed, int):
        return [f"{what}: counter reads {executed!r}"]
    if executed > most:
        return [f"{what}: executed {executed} times, at most {most} possible (one per "
                f"distinct PSN of the requests injected)"]
    return []


def add_counts(total, counts):
    """Add the ``{name: n}`` ``counts`` into ``total`` (in place); returns ``total``."""
    for name, n in counts.items():
        total[name] = total.get(name, 0) + n
    return total


def read_bytes(words, word_bytes):
    """``read(address, n)`` over a memory given as a list of words."""
    def read(addr, n):
        first, last = addr // word_bytes, (addr + n - 1) // word_bytes
        raw = b"".join(words[k].to_bytes(word_bytes, "little")
                       for k in range(first, last + 1))
        return raw[addr - first * word_bytes:][:n]
    return read


def chunk_record(k, chunk, injected, cycles, model_cycles, by_outcome, violations, hang,
                 mismatches, t0, by_effect=None, kind_of=None):
    """The fuzz.json line of chunk ``k`` (both designs write the same keys).
    ``by_effect``: counters of what the accepted frames did beyond the outcome (READs
    and atomics executed, responses sent); ``kind_of(frame)``: the frame kind of a fuzz
    frame, counted in ``by_frame`` (the fillers and the tail by their own names)."""
    def kind(m):
        return m.kind if m.kind in ("filler", "tail") or kind_of is None else kind_of(m.frame)
    return {
        "by_effect": dict(by_effect or {}),
        "by_frame": dict(Counter(kind(m) for m in chunk.frames)),
        "chunk": k, "frames": chunk.fuzz_frames, "injected": injected,
        "cycles": cycles, "model_cycles": model_cycles, "by_outcome": by_outcome,
        "by_mutation": dict(Counter(m.label for m in chunk.frames)),
        "by_field": dict(Counter(m.field for m in chunk.frames if m.field)),
        "violations": violations, "hangs": int(hang is not None), "hang": hang,
        "mismatches": len(mismatches), "first_mismatches": mismatches[:8],
        "seconds": time.perf_counter() - t0,
    }


def report_chunk(dut, record, mismatches, out):
    """Log what went wrong in a chunk, append its record to the file ``out`` (if
    given); returns 1 if the chunk failed (violations, a hang or mismatches), else 0."""
    k = record["chunk"]
    for line in record["violations"] + mismatches[:8]:
        dut._log.error("chunk %d: %s", k, line)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")
    return int(bool(record["violations"] or record["hang"] or mismatches))

