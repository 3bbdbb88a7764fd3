"""The RDMA engine's sizing constants, counter names and parameter defaults.

# Ref: docs/rdma.md (the engine, its timing, the go-back-N recovery and the receive
# overflow rule). Wire and host formats: :mod:`spec.formats.roce`.

Imported by the RTL (:mod:`rtl.rdma`, :class:`rtl.tops.rdma_top.RdmaTop`), the golden
model (:mod:`pymodel.rdma`), the testbench and the reports. Times are in cycles of the
1 GHz clock of SPEC.md ("Units": one cycle is 1 ns).
"""

from amaranth.lib import data

from spec.formats.roce import ICRC_BYTES, WRITE_RETH_HEADER, header_bytes

__all__ = [
    "OUTSTANDING", "ACK_QUEUE", "DEFAULT_TIMEOUT", "TIMEOUT_RANGE", "DEFAULT_RETRY_LIMIT",
    "RETRY_LIMIT_RANGE", "REQUESTER_COUNTERS", "doorbell_layout", "DOORBELL_BYTES",
    "MAX_SEGMENT", "MAX_FRAME_BEATS", "QPN_BITS",
    "RX_FIFO_BEATS", "RX_FRAMES", "RX_FRAME_ROOM", "DROP_REASONS", "SEQUENCE_COUNTERS",
    "RESPONDER_COUNTERS",
    "LINKS", "LINK_FRAME_BEATS", "LINK_FIFO_BEATS", "DEFAULTS", "HEADLINE_QPS",
]

# -- Requester ------------------------------------------------------------------------------

#: Messages that may wait for their ACK (the size of the go-back-N window).
OUTSTANDING = 64
#: ACK/NAK events that may wait for the sequencer (an event finding it full is lost and
#: counted as ``ack_lost``; the transport timer recovers from it).
ACK_QUEUE = 64
#: Default transport timeout in cycles (4.1 us at 1 GHz): well above the round trip of
#: the largest frame (4174 bytes: 66 beats, a context miss and 64 payload words at the
#: responder, both links; about 160 cycles) and of a responder receive FIFO full of such
#: frames (about 600 cycles).
DEFAULT_TIMEOUT = 4096
#: Accepted transport timeouts (cycles).
TIMEOUT_RANGE = (64, (1 << 24) - 1)
#: Timer expiries without progress that the head of the window is resent for; the next
#: one completes it with RETRY_EXC_ERR (the 3-bit ``retry_cnt`` of ``ibv_modify_qp``).
DEFAULT_RETRY_LIMIT = 7
RETRY_LIMIT_RANGE = (0, 7)
#: Counters of the requester, in port order.
REQUESTER_COUNTERS = ("doorbells", "wqe_reads", "payload_reads", "frames", "cqe_writes",
                      "acks", "ack_dropped", "ack_unexpected", "lookups", "misses",
                      "writebacks", "retransmissions", "timeouts", "seq_naks", "ack_lost")


def doorbell_layout():
    """An MMIO doorbell write: the QP and its new send-queue tail (producer index)."""
    return data.StructLayout({"qpn": 24, "sq_tail": 16})


#: Bytes of one doorbell MMIO write over the host interface (a 64-bit register).
DOORBELL_BYTES = 8


# -- Frames -----------------------------------------------------------------------------------

#: Largest payload of one frame (the largest path MTU).
MAX_SEGMENT = 4096
#: The largest frame in 64-byte beats: a MAX_SEGMENT WRITE FIRST/ONLY with RETH, ICRC
#: and FCS (4174 bytes, 66 beats).
MAX_FRAME_BEATS = -(-(header_bytes(WRITE_RETH_HEADER) + MAX_SEGMENT + ICRC_BYTES + 4) // 64)
#: QP numbers are 24 bits on the wire (BTH DestQP).
QPN_BITS = 24

# -- Responder ------------------------------------------------------------------------------

#: Beats the receive FIFO holds (two frames of the largest MTU and some).
RX_FIFO_BEATS = 256
#: Whole frames the receive side holds (its verdict FIFO: one entry per stored frame).
RX_FRAMES = 16
#: Free beats a frame's first beat needs to be stored: room for the largest frame.
RX_FRAME_ROOM = MAX_FRAME_BEATS
#: Counters of rejected frames, in the order the checks are made.
DROP_REASONS = ("fcs_bad", "truncated", "malformed", "icrc_bad", "unknown_qp",
                "psn_nak", "access_nak", "overflow")
#: Counters of frames not written because of their PSN without a NAK: duplicates (PSN
#: behind, acknowledged again if they ask) and frames ahead after the NAK was sent.
SEQUENCE_COUNTERS = ("duplicates", "out_of_order")
#: Every counter of the responder, in port order.
RESPONDER_COUNTERS = ("frames_ok", "acks", "words", "lookups", "misses", "writebacks") \
    + DROP_REASONS + SEQUENCE_COUNTERS

# -- The co-simulation top ------------------------------------------------------------------

#: The two links, as port prefixes: ``ab`` carries node A's WRITEs, ``ba`` node B's ACKs.
LINKS = ("ab", "ba")
#: Frame buffer of each FaultyLink: the largest frame (a 4096-byte WRITE FIRST/ONLY with
#: RETH, ICRC and FCS: 4174 bytes) in 64-byte beats, so that any frame can be duplicated.
LINK_FRAME_BEATS = MAX_FRAME_BEATS
#: Beats that may wait behind a duplicate in each FaultyLink.
LINK_FIFO_BEATS = 128

#: Default parameters of RdmaTop. Host-memory latency: 64 cycles (64 ns at 1 GHz), the
#: largest LatencyMemory accepts. Host DMA reads over PCIe take 0.5 to 1 us, 500 to 1000
#: cycles (Neugebauer et al., "Understanding PCIe performance for end host networking",
#: SIGCOMM 2018): this default is a host memory about ten times closer than that
#: (docs/rdma.md). Link: 6 cycles one way, the node-to-node delay of the NIC headline
#: (2-cycle link, 2-cycle switch, 2-cycle link), so that both designs are measured on the
#: same terms. ``timeout``, ``retry_limit``: the requester's transport timeout and retry
#: limit.
DEFAULTS = dict(cache_entries=16, depth=1 << 14, mem_latency=64, link_latency=6,
                mr_entries=16, doorbells=4096, inject=1024, wire_beats=8192, events=4096,
                timeout=DEFAULT_TIMEOUT, retry_limit=DEFAULT_RETRY_LIMIT)

#: The two QP counts of the ``make sim`` headline (over DEFAULTS' 16-entry cache).
HEADLINE_QPS = (1, 4096)
