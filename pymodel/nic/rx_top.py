"""Cycle-exact twin of :class:`rtl.tops.nic_rx_top.NicRxTop`: the receiver alone.

Built from the receive model of :class:`pymodel.nic.system.NicSystemModel` (NicRx's rules:
checks, counters, the writer's timing) fed with the beats of the top's timed ``raw``
player instead of a downlink.
"""

from pymodel.nic.system import NicSystemModel
from pymodel.packet import frame_to_beats, unpack_beat
from spec.nic import link_credits

__all__ = ["play_cycles", "nic_rx_run"]


def play_cycles(release):
    """The cycle each beat of the ``raw`` player enters the receiver (always ready, no
    stalls): ``max(release[k], previous + 1)``, from cycle 0."""
    out, prev = [], -1
    for r in release:
        prev = max(r, prev + 1)
        out.append(prev)
    return out


def nic_rx_run(width, framing, max_payload, mem_words, frames, release, node_id, windows):
    """Play ``frames`` (bytes with FCS) into the receiver.

    ``release``: one release cycle per beat of the frames; ``windows``: the ``win``
    player's ``(src, base, size)`` writes (cycles 0, 1, ...). Returns ``raw_stamps``
    (the cycle of each beat), ``wr`` (``(addr, be)`` items and their cycles, the ``wr``
    recorder), ``counters`` (:data:`spec.nic.COUNTERS`) and ``mem`` (the local memory's
    words, from all zeros).
    """
    beats = [unpack_beat(width, b) for fr in frames for b in frame_to_beats(fr, width)]
    if len(release) != len(beats):
        raise ValueError(f"release: {len(release)} cycles for {len(beats)} beats")
    cycles = play_cycles(release)
    model = NicSystemModel(width, framing, 2, 1, mem_words, max_payload,
                           link_credits(width, max_payload))
    rx = model._receive(0, [(c, (*b, None)) for c, b in zip(cycles, beats, strict=True)],
                        node_id, set(), [], windows=list(windows))
    return {"raw_stamps": cycles, "wr": rx["wr"], "counters": rx["counters"],
            "mem": rx["mem"], "cycles": (max(rx["wr"][1] + cycles) if cycles else 0)}
