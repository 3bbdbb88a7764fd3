"""The scale-up NIC's sizing rules, counter names and parameter defaults.

# Ref: docs/nic.md (credits, segmentation, receive windows) and SPEC.md ("make sim",
# the headline scenario). Wire formats: :mod:`spec.formats.nic`.

Imported by the RTL top (:class:`rtl.tops.nic_top.NicTop`), the golden model
(:mod:`pymodel.nic`, :mod:`analysis.points`), the testbench and the reports.
"""

__all__ = ["COUNTERS", "WINDOW_WRITES", "HEADLINE_TOP", "ATTACHMENTS", "PCIE_WORD_BITS",
           "PCIE_ACK_REQ_BIT",
           "pcie_ack_req_bit",
           "check_attachment", "pcie_mmio_addr", "link_credits", "COMPLETIONS",
           "check_completion", "COMPLETION_DEFAULTS", "completion_flush_idle",
           "CPL_COUNTERS", "CPL_GEN_COUNTERS", "CPL_TRK_COUNTERS", "CPL_PEER_PORTS",
           "completion_state_bits", "RECORD_SLOTS", "check_records", "record_state_bits",
           "check_destinations", "destination_state_bits", "age_fifo_depth",
           "AGE_STAMP_BITS", "PEER_RETRY_DEFAULTS", "check_peer_retry",
           "peer_retry_state_bits", "PEER_VERDICTS"]

#: Per-node receive counters (NicRx ports; NicTop ports ``<name><node>``): frames written,
#: then one drop counter per reason, in the order a frame with several faults is counted.
COUNTERS = ("frames_ok", "drop_fcs", "drop_malformed", "drop_dst", "drop_addr",
            "drop_window")
#: Items of each ``win<p>`` player of NicTop (window-table writes of node ``p``).
WINDOW_WRITES = 16

#: The headline top of ``make sim``: 64-byte datapath, 4 nodes, 2-cycle links, 32 KB local
#: memories (512 words of 64 bytes), stores cut into frames of at most 1024 bytes.
#: How the accelerator reaches the NIC. ``integrated``: its stores arrive on the NIC's
#: command port and the receiver writes its local memory directly. ``pcie``: each store
#: of at most ``max_payload`` of the host profile (256 B) is one host posted write
#: through a :class:`rtl.host.host_interface.HostInterface` (its MMIO path), and the
#: receiver's writes leave as posted DMA writes through the same interface (docs/nic.md).
ATTACHMENTS = ("integrated", "pcie")
#: ``pcie``: a host write's 16-bit register offset carries the store's ack request (bit
#: 15: the register window of stores that ask; spec.formats.nic, "Ack request"), its
#: destination node (the 4 bits below) and its word address (the low
#: ``PCIE_WORD_BITS``): a window per node.
PCIE_WORD_BITS = 11
#: Bit of the ``pcie`` register offset that carries the store's ``ack_req``.
PCIE_ACK_REQ_BIT = 15


def check_attachment(attachment):
    """``attachment`` if it is one of :data:`ATTACHMENTS`; ``ValueError`` otherwise."""
    if attachment not in ATTACHMENTS:
        raise ValueError(f"attachment must be one of {list(ATTACHMENTS)}, "
                         f"not {attachment!r}")
    return attachment


def pcie_ack_req_bit(id_bits=None):
    """The bit of the ``pcie`` register offset that carries the ack request:
    :data:`PCIE_ACK_REQ_BIT` for node ids (``id_bits`` None or 4), else the bit above a
    destination id of ``id_bits`` above the word address (27 for 16-bit ids: a 28-bit
    offset)."""
    return PCIE_ACK_REQ_BIT if id_bits in (None, 4) else PCIE_WORD_BITS + id_bits


def pcie_mmio_addr(dst, addr, ack_req=False, id_bits=4):
    """The host write's register offset of a store of node ``dst``, byte ``addr``, with
    ``ack_req`` (bit :data:`PCIE_ACK_REQ_BIT`). ``id_bits`` 16 (a NIC with
    ``destinations``): the destination id takes 16 bits above the word address and the
    ack request the bit above them (a 28-bit offset, :func:`pcie_ack_req_bit`)."""
    ack_bit = pcie_ack_req_bit(id_bits)
    return (bool(ack_req) << ack_bit | dst << PCIE_WORD_BITS
            | ((addr // 64) & ((1 << PCIE_WORD_BITS) - 1)))


HEADLINE_TOP = dict(width=64, nodes=4, link_latency=2, mem_words=512, max_payload=1024)


def link_credits(width, max_payload):
    """Switch ingress buffer per port, in beats: twice ``max_payload + 28`` bytes (the
    20-byte L2 header, the 4-byte FCS and 4 bytes of margin), rounded up to beats; the
    credits each sender starts with. A sizing rule (a depth), shared by the RTL top and
    the model."""
    return 2 * (-(-(max_payload + 28) // width))


#: How a sender learns that a store is done. ``credit``: the link credit of its last
#: beat comes back (one hop: the switch's ingress buffer let it go). ``e2e``: the
#: receiver returns a completion frame (``spec.formats.nic`` completion header) once
#: the store is written in its memory (behind PCIe: its last posted write taken by the
#: host interface, the RDMA responder's ACK point), or dropped at the address or window
#: check, and the sender counts them per destination (docs/nic.md, End-to-end
#: completion).
COMPLETIONS = ("credit", "e2e")


def check_completion(completion):
    """``completion`` if it is one of :data:`COMPLETIONS`; ``ValueError`` otherwise."""
    if completion not in COMPLETIONS:
        raise ValueError(f"completion must be one of {list(COMPLETIONS)}, "
                         f"not {completion!r}")
    return completion


def _rdma_defaults():
    from spec.rdma_engine import ACK_COALESCE, SIM_TIMEOUT
    return ACK_COALESCE["ack_every"], SIM_TIMEOUT


#: Defaults of the end-to-end completion. ``coalesce``: one completion per 16 finished
#: frames of a source, the RDMA engine's coalesced ACK rate
#: (``spec.rdma_engine.ACK_COALESCE["ack_every"]``), so that the two designs' e2e rows
#: compare like with like (the classic scheme: RFC 1122 section 4.2.3.2, an ACK per
#: N segments plus a timer; Ultra Ethernet and IRN coalesce ACKs the same way).
#: ``timeout``: 4096 cycles without a completion while frames are outstanding, the RDMA
#: requester's transport timeout of simulated runs (``spec.rdma_engine.SIM_TIMEOUT``), for
#: the same reason.
#: The idle flush is sized from the frame (:func:`completion_flush_idle`).
COMPLETION_DEFAULTS = dict(zip(("coalesce", "timeout"), _rdma_defaults(), strict=True))


def completion_flush_idle(width, framing, max_payload):
    """Cycles without a new frame of a source after which its pending completion is sent
    (the source's stream has gone idle): twice the longest frame's beats. A source that
    sends back to back delivers a frame at least every longest frame at the receiver,
    and one frame of another sender may come in between; waiting longer only delays
    the last completion."""
    from spec.formats.nic import frame_beats
    return 2 * frame_beats(width, framing, max_payload)


#: Per-node counters of the end-to-end completion (NicTop ports ``cgen[p]``, ``otrk[p]``):
#: the generator's (completions sent by the receiver; finished store frames of tracked
#: sources that carried ``ack_req``, honest or forged), then the tracker's (completions
#: accepted by the sender, completions dropped by the sender: forged, a count beyond what
#: was sent, from a source it sent nothing, from an unknown L2 source MAC, or not
#: advancing).
CPL_GEN_COUNTERS = ("cpl_sent", "ack_req_seen")
CPL_TRK_COUNTERS = ("cpl_ok", "cpl_bad")
CPL_COUNTERS = CPL_GEN_COUNTERS + CPL_TRK_COUNTERS
#: Per (sender ``p``, destination ``d``): element ``d`` of NicTop's ``otrk[p].<name>``:
#: frames outstanding (sent minus completed), frames completed (cumulative, modulo
#: ``2**COMPLETION_COUNT_BITS``), of those dropped by the receiver, timeouts.
CPL_PEER_PORTS = ("outstanding", "completed", "dropped", "timeouts")


def completion_state_bits(peers, coalesce, flush_idle, timeout):
    """State bits of the end-to-end completion of one node: ``(receiver, sender)``.

    Receiver (completion generator) per source: the finished and dropped counts
    (2 x 16), the pending count (``bits(coalesce)``), the idle age
    (``bits(flush_idle)``), the dropped flag and the ack-request flag; plus the frame
    being sent (the 48-bit completion header, destination, beat index and busy flag).
    Sender (outstanding tracker) per destination: sent, completed and dropped counts
    (3 x 16), the timer (``bits(timeout - 1)``) and the timeout counter (16)."""
    from spec.formats.nic import COMPLETION_COUNT_BITS as b
    gen = peers * (2 * b + coalesce.bit_length() + flush_idle.bit_length() + 2) + 48 + 8 + 8
    trk = peers * (3 * b + (timeout - 1).bit_length() + 16)
    return gen, trk


#: Slots of the completion-record ring of a NicTop built with records (``make sim``'s
#: points): one record per accepted completion (one per ``coalesce`` = 16 frames), so
#: 16 slots hold the completions of 256 frames before the ring wraps; the owner bit
#: (:data:`spec.formats.nic.completion_record_layout`) tells the host a new record from
#: an old one at any size, as the RDMA engine's CQ (``cq_log2``) does.
RECORD_SLOTS = 16


def check_records(records, mem_words, completion):
    """``records`` (the slots of the completion-record ring at the top of the node's
    memory, ``mem_words - records`` to ``mem_words - 1``; 0: none, a store completes at
    its sender's tracker) if it is 0, or a power of two of at most ``mem_words // 2``
    with ``completion`` ``"e2e"``; ``ValueError`` naming it otherwise."""
    if not isinstance(records, int) or isinstance(records, bool) or records < 0 or (
            records & (records - 1)) or (records and records > mem_words // 2):
        raise ValueError(f"records must be 0 (none) or a power of two of at most "
                         f"mem_words // 2 = {mem_words // 2} (ring slots), not {records!r}")
    if records and completion != "e2e":
        raise ValueError(f"records {records}: completion records need completion 'e2e', "
                         f"not {completion!r}")
    return records


def record_state_bits(peers, records):
    """State bits of a node's completion-record writer: a pending flag per destination
    and the record counter (``log2(records)`` bits of slot and the owner bit); 0 without
    records."""
    return peers + records.bit_length() if records else 0


def check_destinations(destinations, framing, completion):
    """NicTop's ``destinations`` (docs/nic.md, "4,096 destinations"): None (node ids
    are the nodes', 8 bits) or a power of two from 512 to
    :data:`spec.formats.nic.DESTINATIONS`: the sender (node 0) sends to that many
    destination ids, each with its own end-to-end completion state, 16-bit ids in the L2
    MACs (``framing`` "l2"), with ``completion`` "e2e". Returns it; ``ValueError``
    naming it."""
    from spec.formats.nic import DESTINATIONS, Framing

    if destinations is None:
        return None
    if (not isinstance(destinations, int) or isinstance(destinations, bool)
            or not 512 <= destinations <= DESTINATIONS
            or destinations & (destinations - 1)):
        raise ValueError(f"destinations must be None or a power of two from 512 to "
                         f"{DESTINATIONS}, not {destinations!r}")
    if Framing(framing) is not Framing.L2:
        raise ValueError(f"destinations {destinations} needs framing 'l2' (16-bit ids in "
                         f"the MACs), not {framing!r}")
    if completion != "e2e":
        raise ValueError(f"destinations {destinations} needs completion 'e2e' (the "
                         f"per-destination state), not {completion!r}")
    return destinations


#: Bits of an age FIFO item's stamp (:func:`age_fifo_depth`): an item is judged within
#: ``2**15`` cycles of its frame (the generator's port is free at least every few
#: cycles: frames are 2 beats or more).
AGE_STAMP_BITS = 16


def age_fifo_depth(flush_idle):
    """Items of a keyed completion generator's age FIFO (:class:`rtl.nic.
    completion_keyed.CompletionKeyed`): one per frame younger than ``flush_idle``
    cycles (at most one a cycle) and 2 waiting for the port, rounded up to a power of
    two."""
    return 1 << (flush_idle + 2).bit_length()


def destination_state_bits(destinations, receivers, coalesce, flush_idle, timeout,
                           records):
    """State bits of the end-to-end completion at ``destinations`` ids over
    ``receivers`` receivers: ``(receivers' part, sender's part)``.

    Sender: the tracker's entries (:class:`pymodel.nic.tracker_memory.
    TrackerMemoryModel`: 4 x 16 counts and the deadline stamp), its sent FIFO (2 ids)
    and scan pointer; with ``records``, a pending flag per destination and the FIFO of
    the pending ids in the order their completions were accepted (``destinations``
    ids at most), and the record counter. Receivers: per destination id its generator entry
    (:func:`pymodel.nic.completion_keyed.keyed_entry_bits`, the ids split over the
    receivers), per receiver a ready FIFO slot per id it stands for, the age FIFO
    (:func:`age_fifo_depth` items of id, count and a 16-bit stamp) and the frame held
    (as :func:`completion_state_bits`)."""
    from spec.formats.nic import COMPLETION_COUNT_BITS as b

    ids = (destinations - 1).bit_length()
    stamp = timeout.bit_length() + 1
    trk = destinations * (4 * b + stamp) + 2 * ids + ids
    if records:
        trk += destinations * (ids + 1) + records.bit_length()
    entry = 2 * b + coalesce.bit_length() + 3
    ages = age_fifo_depth(flush_idle) * (ids + b + AGE_STAMP_BITS)
    gen = destinations * (entry + ids) + receivers * (ages + 48 + 8 + 8)
    return gen, trk


#: Defaults of the per-peer end-to-end retry (``peer_retry``; docs/nic.md, "Per-peer
#: retry"). ``window``: frames the sender may have unacknowledged, over all its
#: destinations; the replay buffer's slots (a slot holds one frame until its
#: destination's cumulative ACK covers it). 512: a power of two above one sender's
#: frames in flight over a round trip of the ``pod`` profile at line rate (2 x 500
#: cycles one way, :func:`spec.fabric_profiles.one_way`, plus the completion's 24 cycles
#: of docs/nic.md's e2e table, over 3 cycles a 128-byte L2 frame at W = 64: 342
#: frames), so the window never throttles a single stream at the profiles modelled.
#: The sender's timeout is the completion's (:data:`COMPLETION_DEFAULTS`).
PEER_RETRY_DEFAULTS = {"window": 512}


def check_peer_retry(peer_retry, completion, window=None):
    """``(peer_retry, window)`` checked: ``peer_retry`` a bool that needs ``completion``
    ``"e2e"`` (the completion is its cumulative ACK); ``window`` (None: the default) a
    power of two from 2 to ``2**(PSN_BITS - 1)`` (go-back-N's window below the PSN
    space, with room to tell a duplicate from a frame ahead). ``ValueError`` naming the
    parameter otherwise."""
    from spec.formats.nic import PSN_BITS
    if not isinstance(peer_retry, bool):
        raise ValueError(f"peer_retry must be True or False, not {peer_retry!r}")
    if peer_retry and completion != "e2e":
        raise ValueError(f"peer_retry needs completion 'e2e', not {completion!r}")
    window = PEER_RETRY_DEFAULTS["window"] if window is None else window
    top = 1 << (PSN_BITS - 1)
    if (not isinstance(window, int) or isinstance(window, bool) or window < 2
            or window > top or window & (window - 1)):
        raise ValueError(f"window must be a power of two from 2 to {top}, not {window!r}")
    return peer_retry, window


def peer_retry_state_bits(peers, window, frame_bytes):
    """State bits the per-peer retry adds to a node with end-to-end completion
    (:func:`completion_state_bits`): ``(receiver, sender per peer, replay buffer)``.

    The completion's counts already are the transport's sequence state: the tracker's
    ``sent`` is the next PSN to a destination, its ``completed`` the oldest
    unacknowledged PSN, its timer the retry timer and its timeout counter the one the
    retry counts; the generator's ``count`` is the PSN it expects from a source (the
    RTL blocks :class:`rtl.nic.peer_retry_sender.PeerRetrySender` and
    :class:`rtl.nic.peer_retry_check.PeerRetryCheck` hold copies of them while they are
    blocks of their own). Added at the receiver per source: the gap and duplicate
    counters (2 x 16) and the NAK-sent flag. Added at the sender per destination: the
    go-back cursor (a PSN), the going-back flag and the resent counter (16). The replay
    buffer: ``window`` slots of one frame (``8 * frame_bytes``), its destination id (8),
    PSN (:data:`spec.formats.nic.PSN_BITS`) and a valid flag; the buffer is shared by
    the destinations (what it holds grows with the frames in flight, not with the
    peers)."""
    from spec.formats.nic import PSN_BITS as b
    rx = peers * (2 * 16 + 1)
    tx = peers * (b + 1 + 16)
    replay = window * (8 * frame_bytes + 8 + b + 1)
    return rx, tx, replay


#: The per-peer retry receiver's verdicts on a store frame (docs/nic.md, "Per-peer
#: retry"), by index (the RTL's 2-bit ``verdict``): in order (take it), duplicate (not
#: written, re-ACK), the first gap since the last frame in order (dropped, NAK), a
#: further gap (dropped, counted).
PEER_VERDICTS = ("accept", "duplicate", "nak", "gap")
