"""The requester's side of RDMA READ and atomics: the outstanding-operation table's
limits, its port layouts and counters, shared by the RTL and its twin.

# Ref: IBTA Vol 1 Rel 1.4 chapter 9 (RDMA READ: the responses carry consecutive PSNs from
# the request's, one per path-MTU packet, FIRST/MIDDLE/LAST or ONLY; atomics: one PSN, the
# ATOMIC ACKNOWLEDGE's AtomicAckETH carries the original value; reliable service: the
# requester checks each response's PSN against the one it expects). The requester's rule
# for a response PSN as Linux rxe applies it (drivers/infiniband/sw/rxe/rxe_comp.c,
# ``check_psn``): behind the expected PSN, a duplicate, dropped; ahead of it while a
# READ or atomic waits, responses were lost and the operations are retried from the
# expected PSN (``COMPST_ERROR_RETRY``).
"""

from amaranth.lib import data

from spec.formats.roce import PSN_BITS, QPN_BITS

__all__ = ["ORD_DEFAULT", "SLOTS_RANGE", "READ_MAX_BYTES", "LEN_BITS", "PMTU_LOG2_RANGE",
           "INTAKE_COUNTERS", "SENDER_COUNTERS", "REQUESTER_READ_COUNTERS", "issue_layout",
           "done_layout", "rewind_layout", "slot_layout", "slot_bits", "packets_of"]

#: Outstanding RDMA READ and atomic operations a QP may have (the initiator depth, ORD):
#: 16, the ``max_qp_rd_atom`` (and ``max_qp_init_rd_atom``) that ``ibv_devinfo -v`` shows
#: for ConnectX adapters; Linux mlx5 sets ``max_qp_rd_atom = 1 << log_max_ra_req_qp`` and
#: ``max_qp_init_rd_atom = 1 << log_max_ra_res_qp`` (drivers/infiniband/hw/mlx5/main.c,
#: ``mlx5_ib_query_device``).
ORD_DEFAULT = 16
#: Slots of the requester's outstanding-operation table (all QPs together).
SLOTS_RANGE = (1, 64)
#: The longest READ one operation asks for: the engine's longest message (16 KiB,
#: :data:`spec.formats.roce.WQE_LAYOUT`'s ``length``).
READ_MAX_BYTES = 1 << 14
LEN_BITS = READ_MAX_BYTES.bit_length()
#: Path MTUs 256 to 4096 bytes (IBTA Vol 1 section 9.4, the PMTU values of a QP).
PMTU_LOG2_RANGE = (8, 12)

#: ``responses``: READ RESPONSE / ATOMIC ACKNOWLEDGE frames accepted (their data handed to
#: the host); ``duplicates``: good responses with a PSN behind the expected one (dropped);
#: ``gaps``: good responses with a PSN ahead of it (dropped; the QP's operations are
#: re-requested from the expected PSN); ``malformed``: good responses at the expected PSN
#: with the wrong opcode, length or syndrome for the operation; ``unmatched``: good
#: responses of a QP with nothing outstanding; ``bad``: frames failing the FCS, ICRC,
#: length or header check; ``other``: good frames that are not responses (ACKs);
#: ``rewinds``: re-requests asked for (gaps and timeouts); ``timeouts``: those asked for
#: by the timer; ``words``: host words written.
INTAKE_COUNTERS = ("responses", "duplicates", "gaps", "malformed", "unmatched", "bad",
                   "other", "rewinds", "timeouts", "words")
#: The frame sender's counters of a requester with reads: ``req_frames``: READ and
#: atomic request frames started (first sends and resends); ``req_unframed``: READ and
#: atomic descriptors consumed without a frame (they waited a transport timeout for a
#: response slot; recovered as a lost frame is); ``lost_frames``: frames a framer
#: started whose beats did not all reach the link (the WRITE chain and the request
#: framer sending in one cycle at the output mux): 0 in a correct build, an assertion
#: kept as a counter. ``frames`` (:data:`spec.rdma_engine.REQUESTER_COUNTERS`) counts
#: both chains' frames started, so ``frames - req_frames`` are the WRITE frames.
SENDER_COUNTERS = ("req_frames", "req_unframed", "lost_frames")
#: The members of a requester's ``read`` counters port: the response intake's, then the
#: frame sender's.
REQUESTER_READ_COUNTERS = INTAKE_COUNTERS + SENDER_COUNTERS


def issue_layout(depth):
    """An operation sent: ``atomic`` (COMPARE & SWAP or FETCH & ADD) or an RDMA READ of
    ``length`` bytes (0 .. READ_MAX_BYTES; 0: one READ RESPONSE ONLY without payload) at
    path MTU ``2**pmtu_log2``; its QP and first PSN; ``laddr``, the local byte address
    the data (or the 8-byte original value) goes to: 64-byte aligned for a READ, 8-byte
    aligned for an atomic."""
    return data.StructLayout({
        "atomic": 1, "qpn": QPN_BITS, "psn": PSN_BITS, "pmtu_log2": 4,
        "laddr": range(64 * depth), "length": LEN_BITS,
    })


def done_layout():
    """An operation whose data has been handed to the host interface: its QP, its last
    PSN, ``atomic``."""
    return data.StructLayout({"qpn": QPN_BITS, "psn": PSN_BITS, "atomic": 1})


def rewind_layout():
    """Re-request the QP's outstanding operations from ``psn`` on (go-back-N)."""
    return data.StructLayout({"qpn": QPN_BITS, "psn": PSN_BITS})


def slot_layout(depth):
    """One slot of the outstanding-operation table (its age-matrix row apart):
    ``next_psn``, the PSN of the response expected next, ``last_psn`` the operation's
    last; ``addr`` the local byte address and ``left`` the bytes of the responses still
    to come; ``started``: a response of the operation has been accepted; ``rewound``: a
    re-request is on its way and no response has been accepted since."""
    return data.StructLayout({
        "valid": 1, "atomic": 1, "qpn": QPN_BITS, "next_psn": PSN_BITS,
        "last_psn": PSN_BITS, "pmtu_log2": 4, "addr": range(64 * depth),
        "left": LEN_BITS, "started": 1, "rewound": 1,
    })


def slot_bits(depth, slots):
    """Requester state per outstanding operation: a slot and its row of the age
    matrix."""
    return data.StructLayout(slot_layout(depth).members).size + slots


def packets_of(length, pmtu_log2):
    """Response packets of a READ of ``length`` bytes: ``max(1, ceil(length / pmtu))``."""
    return max(1, -(-length // (1 << pmtu_log2)))
