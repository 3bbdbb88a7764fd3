"""Ephemeral delivery contexts: the contract of the third design's context store.

# Ref: docs/ephemeral.md (the design, the rules for late and forged packets, what the
# Ultra Ethernet reference code does and the sources).

A sender opens a delivery context toward a destination on its first message (no
handshake), holds its PSNs while messages are unacknowledged, and closes it when every
message is acknowledged and it has been idle for ``idle`` cycles (a CLOSE control frame
then tells the receiver, whose context toward that sender opened on the first arrival).
Contexts live in a fixed on-chip pool of ``pool_entries``; a new destination waits while
the pool is full. Nothing lives in host memory.

The layouts below are the contexts' bits, as the endpoint-state accounting counts them
(:func:`send_context_bits`, :func:`recv_context_bits`); the RTL pool block
(:class:`rtl.ephemeral.pool.ContextPool`) holds the part every context needs to be found,
kept and closed (key, outstanding count, activity stamp), the PSN fields belong to the
datapath that uses the pool.
"""

from amaranth.lib import data

from spec.formats.roce import PSN_BITS

__all__ = ["NODE_BITS", "STAMP_BITS", "OUTSTANDING_BITS", "ACK_COUNT_BITS",
           "SEND_CONTEXT_LAYOUT", "RECV_CONTEXT_LAYOUT", "UET_MPR", "UET_PDC_MAX",
           "POOL_ENTRIES_RANGE", "IDLE_RANGE", "EPHEMERAL_DEFAULTS", "POOL_COUNTERS",
           "Verdict", "send_context_bits", "recv_context_bits", "uet_bitmap_bits",
           "check_pool_entries", "check_idle", "check_ephemeral", "RTL_POOL_ENTRIES_MAX",
           "II_BITS", "COMPLETION_RANGE", "ACK_SLOTS_RANGE", "check_sender",
           "RECV_OUTCOMES", "RECV_DELIVERS", "RECV_ACKS", "check_receiver",
           "OPEN_OFFSET_BITS", "MAX_LANES"]

#: Bits of a node id: up to 4,096 destinations (the spectrum's largest peer count).
NODE_BITS = 12
#: Bits of a context's activity stamp (the low bits of the cycle counter at its last
#: send, arrival or ACK). A context is closed when ``now - stamp >= idle`` (mod
#: ``2**STAMP_BITS``); the pool's scan visits every entry at least every
#: ``pool_entries`` cycles, so an idle entry is closed before its stamp can wrap as long
#: as ``idle + pool_entries < 2**STAMP_BITS`` (:func:`check_idle`).
STAMP_BITS = 16
#: Bits of a context's count of runs of messages awaiting their ACK (at most one per
#: message in flight: the engine's window records, up to 4096,
#: :data:`spec.rdma_engine.REQUESTER_DEFAULTS`).
OUTSTANDING_BITS = 13
#: Bits of the sender's count of messages of a context sent since the last one that asked
#: for an ACK (ACK coalescing: one ACK per 16 messages at most,
#: :data:`spec.rdma_engine.ACK_COALESCE`).
ACK_COUNT_BITS = 5

#: A sender's context: the destination, the next PSN to send, the oldest unacknowledged
#: PSN (go-back-N: every PSN in ``[acked_psn, next_psn)`` is in flight, the cumulative
#: ACK is the per-packet ACK state of the window), the runs awaiting their ACK
#: (``outstanding``), the messages since the last ACK request and the stamp.
#: PSNs as RoCEv2's BTH (24 bits, :data:`spec.formats.roce.PSN_BITS`).
SEND_CONTEXT_LAYOUT = data.StructLayout({
    "valid": 1, "dest": NODE_BITS, "next_psn": PSN_BITS, "acked_psn": PSN_BITS,
    "outstanding": OUTSTANDING_BITS, "unasked": ACK_COUNT_BITS, "stamp": STAMP_BITS,
})
#: A receiver's context: the source, the next expected PSN and the stamp (for the
#: fallback close when a CLOSE frame is lost).
RECV_CONTEXT_LAYOUT = data.StructLayout({
    "valid": 1, "src": NODE_BITS, "expected_psn": PSN_BITS, "stamp": STAMP_BITS,
})

#: Bits of an open packet's offset: its PSN minus its context's first PSN, carried with the
#: open flag so that the receiver knows the context's first PSN and opens the context only
#: there (an open packet with a nonzero offset, its context's first packet missing, is
#: refused as a gap; docs/ephemeral.md, "Late, duplicate and forged packets"). The sender
#: sets the open flag until the context's first ACK, so the offset is below the packets a
#: context has in flight (its go-back-N window): 12 bits take a window of up to 4,096
#: packets, the most window records :data:`OUTSTANDING_BITS` counts (512 by default,
#: :data:`spec.rdma_engine.REQUESTER_DEFAULTS` ``records``). Ultra
#: Ethernet carries the same: a SYN request's 12-bit PSN offset in the place of the
#: destination PDC id, and the target opens its PDC at ``psn - offset``. Ref:
#: github.com/ultraethernet/uet-ref-prov, in-kernel-ses/driver/uet_pds/pds/uet_pds.c
#: (``syn_offset``, ``mode_psn_off``, ``rx_bm_base_psn = pds_psn - pds_syn_off`` in
#: ``uet_pdsm_assign_tgt_pdc``) and its header's ``UET_PDS_REQ_PSN_OFF_MASK 0x0fff``.
OPEN_OFFSET_BITS = 12

#: The Ultra Ethernet reference code's PDC window ("maximum PSN range", packets) and its
#: PDC table size. Ref: github.com/ultraethernet/uet-ref-prov,
#: in-kernel-ses/driver/uet_pds/pds/uet_pds.c (``UET_DEFAULT_MPR 128``,
#: ``UET_PDC_MAX 64``; a PDC keeps ``tx_bm``, ``ack_bm`` and ``rx_bm`` bitmaps over it).
UET_MPR = 128
UET_PDC_MAX = 64

#: Pool sizes a build accepts (entries, a power of two) and idle times (cycles).
POOL_ENTRIES_RANGE = (2, 4096)
IDLE_RANGE = (1, (1 << STAMP_BITS) - POOL_ENTRIES_RANGE[1] - 1)

#: Most contexts the RTL pool block builds (its lookup compares every entry's key in one
#: cycle; :class:`rtl.ephemeral.pool.ContextPool`); the model takes
#: :data:`POOL_ENTRIES_RANGE`.
RTL_POOL_ENTRIES_MAX = 256
#: Bits of the sender's run-time issue spacing ``ii`` (cycles between two messages sent,
#: 1 to ``2**II_BITS - 1``; the engine's datapath at its best rung gives 4 at ``board``
#: and ``pod``, :func:`tb.ephemeral.point.datapath_row`).
II_BITS = 8
#: Cycles from a message that asks for an ACK to that ACK at the sender, as the sender
#: block takes them at run time: its ACK queue compares the due cycle with the pool's
#: ``now`` (``STAMP_BITS``), so a delay must be shorter than its wrap.
COMPLETION_RANGE = (1, (1 << STAMP_BITS) - 1)
#: ACKs awaited at once that the sender block's ACK queue holds (a power of two; a
#: message that would ask for one more waits): at least ``completion / ii`` rounded up
#: for a flow that never waits on it.
ACK_SLOTS_RANGE = (2, 4096)
#: Most lanes of a point: endpoints behind one attachment, each a sender of its own with
#: its own pool, the destinations split among them (:func:`tb.ephemeral.point.model_point`).
MAX_LANES = 64

#: Defaults. ``pool_entries``: 256 contexts (the RC engine's largest context cache, so
#: that the two on-chip stores compare at one size). ``idle``: 64 cycles after the last
#: send or ACK (16 messages at the engine's 4 cycles a message: a destination written
#: again within that keeps its context; chosen, not measured, and swept in
#: docs/ephemeral.md). ``ack_every``: one ACK per 16 messages of a context, as the RC
#: engine's best rung (:data:`spec.rdma_engine.ACK_COALESCE`). ``lookahead``: messages of
#: the posting queue the sender sees when it decides whether a message is its context's
#: last for now (it then asks for an ACK): a 16-deep FIFO, as the engine's item FIFO
#: (:data:`spec.rdma_engine.FIFO_DEPTHS` ``items``).
EPHEMERAL_DEFAULTS = dict(pool_entries=256, idle=64, ack_every=16, lookahead=16)

#: The pool block's counters, in port order: contexts opened, closed (idle scan), cycles
#: a lookup waited on a full pool, lookups without ``open`` for a key that has no
#: context (a late packet of a closed context: refused, nothing opened).
POOL_COUNTERS = ("opens", "closes", "full_waits", "stale")

#: The receiver's outcomes of a packet, one counter each, in port order (the rules:
#: docs/ephemeral.md, "Late, duplicate and forged packets"): ``stale`` (no context, no open
#: flag, or a CLOSE for a source without one), ``opened`` (no context, the open flag with
#: offset 0: the context's first packet, an entry free), ``full`` (the same, no entry
#: free), ``delivered`` (the expected PSN), ``duplicate`` (an older PSN), ``reopened`` (a
#: newer PSN, the open flag with offset 0), ``gap`` (a newer PSN without it, or an open
#: packet with a nonzero offset and no context: a packet before it is missing),
#: ``closed`` (a CLOSE that freed its source's context).
RECV_OUTCOMES = ("stale", "opened", "full", "delivered", "duplicate", "reopened", "gap",
                 "closed")
#: The outcomes whose packet is written to memory, and those that send an ACK (the
#: delivered ones and a duplicate, whose ACK is sent again; a refusal sends nothing).
RECV_DELIVERS = ("opened", "delivered", "reopened")
RECV_ACKS = RECV_DELIVERS + ("duplicate",)


class Verdict:
    """The outcome of a lookup (:class:`rtl.ephemeral.pool.ContextPool`'s ``verdict``):
    ``HIT`` the key has a context; ``OPENED`` it had none, ``open`` was asked and a free
    entry now holds it; ``FULL`` it had none, ``open`` was asked and no entry is free
    (the lookup is not taken); ``STALE`` it had none and ``open`` was not asked (taken,
    refused, counted)."""
    HIT, OPENED, FULL, STALE = 0, 1, 2, 3
    BITS = 2


def send_context_bits():
    """Bits of one sender context (:data:`SEND_CONTEXT_LAYOUT`)."""
    return SEND_CONTEXT_LAYOUT.size


def recv_context_bits():
    """Bits of one receiver context (:data:`RECV_CONTEXT_LAYOUT`)."""
    return RECV_CONTEXT_LAYOUT.size


def uet_bitmap_bits(mpr=UET_MPR):
    """Bits a context would add with Ultra Ethernet's selective-ACK bitmaps over a window
    of ``mpr`` packets: the sender's send and ACK bitmaps and the receiver's receive
    bitmap (``3 * mpr``; the reference code's ``tx_bm``, ``ack_bm``, ``rx_bm``)."""
    return 3 * mpr


def _int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value


def check_pool_entries(value, name="pool_entries"):
    """A pool size: a power of two in :data:`POOL_ENTRIES_RANGE`."""
    _int(name, value, *POOL_ENTRIES_RANGE)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two, not {value!r}")
    return value


def check_idle(value, name="idle"):
    """An idle time in cycles, in :data:`IDLE_RANGE`."""
    return _int(name, value, *IDLE_RANGE)


def check_ephemeral(pool_entries, idle, ack_every, lookahead):
    """Every knob of the design checked; ``ValueError`` names the first bad one.

    ``lookahead`` at most ``pool_entries``: a context whose run has not asked for its ACK
    waits for a message of its destination among the next ``lookahead`` posted; when a
    new destination waits for a free entry, the messages it holds back (``lookahead - 1``
    after it) go to at most ``lookahead - 1`` destinations, so with at least ``lookahead``
    entries one entry is not waiting on them and frees itself; with fewer, every entry
    can wait on the held-back messages and the flow never ends (docs/ephemeral.md)."""
    check_pool_entries(pool_entries)
    check_idle(idle)
    _int("ack_every", ack_every, 1, (1 << ACK_COUNT_BITS) - 1)
    _int("lookahead", lookahead, 0, 4096)
    if lookahead > pool_entries:
        raise ValueError(f"lookahead ({lookahead}) must be at most pool_entries "
                         f"({pool_entries}): with more, every context can wait for a "
                         f"message held behind one that waits for a free context, and the "
                         f"flow never ends (docs/ephemeral.md)")


def check_sender(entries, idle, ack_every, ii, completion, ack_slots=None):
    """The sender block's and its twin's knobs (:class:`rtl.ephemeral.sender.
    EphemeralSender`); ``ValueError`` names the first bad one. ``ack_slots`` None: an
    unbounded ACK queue (the twin only)."""
    check_pool_entries(entries, "entries")
    check_idle(idle)
    _int("ack_every", ack_every, 1, (1 << ACK_COUNT_BITS) - 1)
    _int("ii", ii, 1, (1 << II_BITS) - 1)
    _int("completion", completion, *COMPLETION_RANGE)
    if ack_slots is not None:
        _int("ack_slots", ack_slots, *ACK_SLOTS_RANGE)
        if ack_slots & (ack_slots - 1):
            raise ValueError(f"ack_slots must be a power of two, not {ack_slots!r}")


def check_receiver(entries, idle):
    """The receiver's knobs (:class:`rtl.ephemeral.receiver.EphemeralReceiver` and its
    twin): ``entries`` contexts (a power of two, :data:`POOL_ENTRIES_RANGE`) and the
    ``idle`` time after which a context without arrivals closes (the fallback for a lost
    CLOSE); ``ValueError`` names the first bad one."""
    check_pool_entries(entries, "entries")
    check_idle(idle)
