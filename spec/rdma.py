"""The RoCEv2 frames' sizes, the responder's drop reasons and the RDMA top's links.

# Ref: docs/rdma.md (the engine, its checks and recovery). Wire and host formats:
# :mod:`spec.formats.roce`; the pipelined engine's own definitions (stages, sizes,
# defaults, counters, the optimisation ladder): :mod:`spec.rdma_engine` and
# :mod:`spec.rdma_responder`.

Times are in cycles of the 1 GHz clock of SPEC.md ("Units": one cycle is 1 ns).
"""

from spec.formats.roce import ICRC_BYTES, QPN_BITS, WRITE_RETH_HEADER, header_bytes

__all__ = ["DOORBELL_BYTES", "MAX_SEGMENT", "MAX_FRAME_BEATS", "QPN_BITS", "DROP_REASONS",
           "SEQUENCE_COUNTERS", "LINKS", "LINK_FRAME_BEATS", "LINK_FIFO_BEATS"]

#: Bytes of one doorbell MMIO write over the host interface (a 64-bit register).
DOORBELL_BYTES = 8

# -- Frames -----------------------------------------------------------------------------------

#: Largest payload of one frame (the largest path MTU).
MAX_SEGMENT = 4096
#: The largest frame in 64-byte beats: a MAX_SEGMENT WRITE FIRST/ONLY with RETH, ICRC
#: and FCS (4174 bytes, 66 beats).
MAX_FRAME_BEATS = -(-(header_bytes(WRITE_RETH_HEADER) + MAX_SEGMENT + ICRC_BYTES + 4) // 64)

# -- Responder ------------------------------------------------------------------------------

#: Counters of rejected frames, in the order the checks are made.
#: ``qp_err``: the frame's QP context is in the ERR state (spec.formats.roce.QpState).
DROP_REASONS = ("fcs_bad", "truncated", "malformed", "icrc_bad", "unknown_qp", "qp_err",
                "psn_nak", "access_nak", "overflow")
#: Counters of frames not written because of their PSN without a NAK: duplicates (PSN
#: behind, acknowledged again if they ask) and frames ahead after the NAK was sent.
SEQUENCE_COUNTERS = ("duplicates", "out_of_order")

# -- The co-simulation top ------------------------------------------------------------------

#: The two links, as port prefixes: ``ab`` carries node A's WRITEs, ``ba`` node B's ACKs.
LINKS = ("ab", "ba")
#: Frame buffer of each FaultyLink: the largest frame (a 4096-byte WRITE FIRST/ONLY with
#: RETH, ICRC and FCS: 4174 bytes) in 64-byte beats, so that any frame can be duplicated.
LINK_FRAME_BEATS = MAX_FRAME_BEATS
#: Beats that may wait behind a duplicate in each FaultyLink.
LINK_FIFO_BEATS = 128
