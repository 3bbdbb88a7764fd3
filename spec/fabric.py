"""The simulation fabric's definitions: the faulty link's settings, counters and fault
words, and the link-level retry's counters and sizing rule.

# Ref: docs/faults.md (the fault model, its decision rule and its timing) and
# docs/recovery.md (the link-level retry protocol and its sizes).

The RTL blocks (:class:`rtl.fabric.faulty_link.FaultyLink`,
:class:`rtl.fabric.reliable_link.ReliableLink` and its ends) and their golden-model twins
(:mod:`pymodel.fabric`) both import these names; each computes its behaviour with its
own code.
"""

__all__ = ["FAULT_KINDS", "SETTINGS", "COUNTERS", "FLAGS", "WORD_STEPS", "WORDS_PER_FRAME",
           "CORRUPT_BEAT_SHIFT", "TX_COUNTERS", "RX_COUNTERS", "COUNTER_PORTS",
           "RETRY_SETTINGS", "RETRY_LINK_COUNTERS", "TAG_SEED_XOR", "SIDE_SEED_XOR",
           "TAG_WORDS", "SIDE_WORDS",
           "retry_sizes", "ELASTIC_MARGIN", "elastic_depth", "SWITCH_COUNTERS",
           "SWITCH_FAULT_COUNTERS", "SWITCH_DROPS", "switch_counters", "check_switch_drops",
           "SOURCE_WRITES", "check_source_write", "check_table_entries"]

# -- The faulty link ------------------------------------------------------------------------

#: Fault kinds, in the order of their random words and of their setting ports.
FAULT_KINDS = ("drop", "corrupt", "dup")

#: Run-time setting ports (name -> bits). Hold them constant from before reset.
SETTINGS = {"seed": 16,
            **{f"{k}_rate": 16 for k in FAULT_KINDS},
            **{f"{k}_burst": 8 for k in FAULT_KINDS}}

#: 32-bit counters (wrap at 2**32) and sticky error flags, in port order.
COUNTERS = ("frames_in", "dropped", "corrupted", "duplicated", "lost")
FLAGS = ("overflow", "too_long")

#: LFSR steps (:mod:`spec.lfsr`) between two random words, and words drawn per frame: one
#: per fault kind, then the word that places the corrupted bit.
WORD_STEPS = 16
WORDS_PER_FRAME = len(FAULT_KINDS) + 1

#: The corrupted beat is ``position_word >> CORRUPT_BEAT_SHIFT`` (0..15) of the frame.
CORRUPT_BEAT_SHIFT = 12

#: Faults of a link's retry signalling (a FaultyLink with a tag or a sideband only):
#: ``tag_rate`` flips one bit of a frame's sequence tag (on all its beats),
#: ``ack_drop_rate`` / ``ack_corrupt_rate`` drop or flip one bit of an ACK/NAK on the
#: reverse sideband; each ``rate / 65535`` per frame or per ACK/NAK, no bursts.
RETRY_SETTINGS = {"tag_rate": 16, "ack_drop_rate": 16, "ack_corrupt_rate": 16}
#: Their counters (32 bits): frames sent with a flipped tag (dropped ones not counted),
#: ACK/NAKs dropped, ACK/NAKs sent with a flipped bit.
RETRY_LINK_COUNTERS = ("tag_corrupted", "acks_dropped", "acks_corrupted")
#: The tag and sideband faults draw from LFSRs of their own (so that the frame faults
#: stay those of the seed): started at ``seed ^ TAG_SEED_XOR`` and ``seed ^
#: SIDE_SEED_XOR`` (0 read as 1). The tag LFSR advances ``TAG_WORDS * WORD_STEPS`` steps
#: at each first beat (words: draw, bit position), the sideband LFSR ``SIDE_WORDS *
#: WORD_STEPS`` at each ACK/NAK (words: drop draw, corrupt draw, bit position). A
#: position word ``w`` picks bit ``(w * bits) >> 16`` of a field of ``bits`` bits.
TAG_SEED_XOR = 0x5A5A
SIDE_SEED_XOR = 0x3C3C
TAG_WORDS = 2
SIDE_WORDS = 3

# -- The link-level retry -------------------------------------------------------------------

#: Counters of the sending end (ReplayTx; 32 bits, wrap); ``acks_bad``: ACK/NAKs ignored
#: because their check bit failed.
TX_COUNTERS = ("frames", "resent_frames", "resent_beats", "naks", "timeouts",
               "replay_cycles", "acks_bad")
#: Counters of the receiving end (ReplayRx; 32 bits, wrap); ``tag_bad``: frames whose
#: sequence tag failed its check bit (discarded like a lost frame).
RX_COUNTERS = ("frames_ok", "fcs_bad", "out_of_order", "duplicates", "acks", "naks",
               "no_room", "tag_bad")
#: Counter ports of a reliable link: ``tx_*`` (ReplayTx), ``rx_*`` (ReplayRx), ``link_*``
#: (the FaultyLink's counters and flags; the flags are 1 bit, the rest 32).
COUNTER_PORTS = tuple([f"tx_{n}" for n in TX_COUNTERS] + [f"rx_{n}" for n in RX_COUNTERS]
                      + [f"link_{n}" for n in COUNTERS + RETRY_LINK_COUNTERS + FLAGS])


def _pow2(n):
    return 1 << max(n - 1, 1).bit_length()


def retry_sizes(latency, max_frame_beats):
    """The default sizes of a reliable link: ``(tx_depth, rx_depth, timeout)``.

    The replay buffer holds a round trip (``2 * latency`` + a frame to be judged + a
    frame being sent + a few cycles) and the room kept for a whole frame, so that a
    steady stream never waits for an ACK; the delivery buffer holds two frames; the
    timeout is that round trip again plus the longest frame, so that it fires only when
    an ACK can no longer come. Ref: docs/recovery.md, "State and sizes".
    """
    trip = 2 * latency + 2 * max_frame_beats + 8
    return _pow2(trip + max_frame_beats), _pow2(2 * max_frame_beats + 2), \
        trip + max_frame_beats


# -- The switch's elastic hop ---------------------------------------------------------

#: Entries an elastic delay (the switch hop under backpressure,
#: :class:`rtl.fabric.elastic_delay.ElasticDelay`) keeps beyond its latency: ``latency``
#: entries carry one beat a cycle while the output is ready (each stays exactly
#: ``latency`` cycles); the margin lets the output stall for a cycle or two before the
#: delay's input stops taking beats. Ref: docs/fabric.md, "The hop under link retry".
ELASTIC_MARGIN = 2


def elastic_depth(latency):
    """The entries of an elastic delay of ``latency`` cycles: ``latency +
    ELASTIC_MARGIN``."""
    return latency + ELASTIC_MARGIN


# -- The switch's source check ---------------------------------------------------------

#: Counters of the switch (32 bits, wrap; NicTop ports of the same name).
SWITCH_COUNTERS = ("drop_spoofed",)
#: Items of NicTop's ``src`` player (source-table writes).
SOURCE_WRITES = 16

# -- Frames dropped inside the switch (a test's fault; Switch's ``faults``) ----------------

#: The counter a switch built with ``faults`` adds to :data:`SWITCH_COUNTERS`.
SWITCH_FAULT_COUNTERS = ("drop_fault",)
#: Items of each of NicTop's ``sflt<p>`` players (egress frame numbers to drop).
SWITCH_DROPS = 16


def switch_counters(faults=False):
    """The counters of a switch built with or without ``faults``."""
    return SWITCH_COUNTERS + (SWITCH_FAULT_COUNTERS if faults else ())


def check_switch_drops(drops, ports):
    """Check the frames to drop inside a switch of ``ports`` ports: ``{egress port:
    frame numbers}``, each list strictly increasing integers from 0 to ``2**32 - 1``
    (the switch consumes them in order), at most :data:`SWITCH_DROPS` per port. Returns
    ``{port: tuple}``; raises ``ValueError`` naming ``switch_drops``.
    Ref: docs/recovery.md, "Frames lost inside the switch"."""
    if not isinstance(drops, dict):
        raise ValueError(f"switch_drops must be a dict of port: frame numbers, "
                         f"not {drops!r}")
    out = {}
    for port, frames in drops.items():
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < ports:
            raise ValueError(f"switch_drops: port must be 0 to {ports - 1}, not {port!r}")
        frames = tuple(frames)
        if (len(frames) > SWITCH_DROPS
                or any(not isinstance(f, int) or isinstance(f, bool) or not 0 <= f < 1 << 32
                       for f in frames)
                or any(a >= b for a, b in zip(frames[:-1], frames[1:], strict=True))):
            raise ValueError(f"switch_drops[{port}] must be at most {SWITCH_DROPS} "
                             f"strictly increasing frame numbers (0 to 2**32 - 1), "
                             f"not {frames!r}")
        out[port] = frames
    return out


def check_source_write(ports, node, port, entries=256):
    """Check one source-table write ``(node, port)`` of a switch of ``ports`` ports and
    ``entries`` table entries: ``node`` a node id 0..``entries - 1``, ``port`` an
    ingress port 0..``ports - 1`` or ``ports`` (any port). Returns ``(node, port)``;
    raises ``ValueError`` naming the bad field.
    Ref: docs/nic.md, "Source check at the switch"."""
    if not isinstance(node, int) or not 0 <= node < entries:
        raise ValueError(f"source write: node must be a node id 0..{entries - 1}, "
                         f"not {node!r}")
    if not isinstance(port, int) or not 0 <= port <= ports:
        raise ValueError(f"source write: port must be an ingress port 0..{ports - 1} or "
                         f"{ports} (any port), not {port!r}")
    return node, port


def check_table_entries(entries, framing):
    """The route and source tables' entries of a switch: 256 (8-bit ids, either
    framing) or a power of two from 512 to 2**16 (16-bit ids in the L2 MACs' bytes 4..5,
    :data:`spec.formats.nic.ID_BITS`; the table is indexed by the id's low bits).
    Returns ``(entries, id_bits)``; ``ValueError`` naming the bad one.
    Ref: docs/nic.md, "4,096 destinations"."""
    from spec.formats.nic import ID_BITS, check_id_bits

    if (not isinstance(entries, int) or isinstance(entries, bool) or entries < 256
            or entries > 1 << ID_BITS or entries & (entries - 1)):
        raise ValueError(f"table_entries must be a power of two from 256 to "
                         f"{1 << ID_BITS}, not {entries!r}")
    id_bits = 8 if entries == 256 else ID_BITS
    return entries, check_id_bits(id_bits, framing)
