"""What the RDMA engine's pipeline stages pass to each other, and the widths they share.

# Ref: docs/rdma.md ("The pipelined requester", "The pipelined responder"): each FIFO
# between two stages holds one of these layouts. Wire and host formats:
# :mod:`spec.formats.roce` and :mod:`spec.host`; the engine's sizes and counters:
# :mod:`spec.rdma_engine` and :mod:`spec.rdma_responder`.

The RTL stages (:mod:`rtl.rdma.req`, :mod:`rtl.rdma.resp`) build their ports and FIFOs
from these layouts; the golden model's twins pass dicts with the same field names and
wrap their counts with the same widths. ``entry`` is a QP-context cache entry (up to 256
entries).
"""

from amaranth import Shape
from amaranth.lib import data

from spec.formats.roce import (
    HOST_WORD_BITS,
    MSN_BITS,
    PSN_BITS,
    QPC_LAYOUT,
    QPN_BITS,
    OpCode,
    WqeOpcode,
)
from spec.host import TAG_BITS
from spec.rdma_responder import HEAD_BYTES, REST_MAX

__all__ = [
    "ENTRY_BITS", "COUNT_BITS", "SQ_INDEX_BITS", "ACK_MSGS_BITS", "ACK_FRAMES_BITS",
    "PLEN_BITS", "DOORBELL_LAYOUT", "LADDR_BITS",
    "group_layout", "writeback_layout",
    # requester
    "item_layout", "fetch_layout", "resend_layout", "batch_layout", "job_layout",
    "seg_layout", "record_layout", "cqe_req_layout", "read_layout", "write_layout_req",
    "ack_event_layout", "window_record_layout",
    # responder
    "header_entry_layout", "verify_job_layout", "write_job_layout", "ack_layout",
]

#: Bits of a cache entry number (the largest cache has 256 entries).
ENTRY_BITS = 8
#: Bits of the requester's running counts that stages compare with each other (items
#: admitted and done, records issued and appended, words reserved and released, payload
#: words issued and arrived, window sizes): they wrap, and are compared modulo
#: ``2**COUNT_BITS``, more than any two of them can differ by (the requester accepts
#: FIFOs and windows of at most 2**14 words or records).
COUNT_BITS = 16
#: Bits of a send-queue index (``sq_head``/``sq_tail`` of the QP context).
SQ_INDEX_BITS = Shape.cast(QPC_LAYOUT["sq_head"].shape).width
#: Bits of the ACK-coalescing counts of a QP (``ack_msgs``/``ack_frames`` of the QP
#: context): messages and frames sent since the QP's last ACK request, kept modulo
#: ``2**ACK_MSGS_BITS`` and ``2**ACK_FRAMES_BITS``.
ACK_MSGS_BITS = Shape.cast(QPC_LAYOUT["ack_msgs"].shape).width
ACK_FRAMES_BITS = Shape.cast(QPC_LAYOUT["ack_frames"].shape).width
#: Bits of a payload length the responder's payload writer can be asked for: at most
#: MAX_FRAME_BEATS * 64 bytes in a frame that passed the length check.
PLEN_BITS = 13

#: The 8-byte doorbell write (:data:`spec.rdma_engine.DOORBELL_OFFSET`): ``qpn`` in bytes
#: 0-2, the send queue's new tail in bytes 3-4; the modify command at
#: :data:`spec.rdma_engine.MODIFY_QP_OFFSET` has the same ``qpn``.
DOORBELL_LAYOUT = data.StructLayout({"qpn": QPN_BITS, "sq_tail": SQ_INDEX_BITS})

#: With READs and atomics (the requester's ``reads``): the WQE's opcode, and an atomic's
#: operands; a job also the low 6 bits of the local byte address, a frame descriptor the
#: whole byte address and the path MTU (for the response intake's issue).
_OPS = {"op": WqeOpcode, "swap_add": 64, "compare": 64}

_REC = {"wr_id": 64, "sq_index": SQ_INDEX_BITS, "first_psn": PSN_BITS, "msg_length": 32,
        "signalled": 1, "resend": 1, "last_of_item": 1, "null": 1, "flush": 1, "modify": 1}


def group_layout(fields):
    """The layout of a group of QP-context fields (names of :data:`QPC_LAYOUT`, a list or
    tuple); a string or an unknown name raises an error naming it."""
    if isinstance(fields, str):
        raise TypeError(f"group_layout takes a sequence of field names, not {fields!r}")
    unknown = [name for name in fields if name not in QPC_LAYOUT.members]
    if unknown:
        raise ValueError(f"group_layout: {unknown} are not fields of QPC_LAYOUT")
    return data.StructLayout({name: QPC_LAYOUT[name].shape for name in fields})


def writeback_layout(depth):
    """A context write-back (the context cache's ``wb`` port): word ``addr``, ``data``."""
    return data.StructLayout({"addr": range(depth), "data": HOST_WORD_BITS})


# -- Requester --------------------------------------------------------------------------------

def item_layout():
    """Doorbell intake -> front: a doorbell (or a WQE by MMIO: ``bf``; or a QP modify
    command to RTS: ``modify``)."""
    return data.StructLayout({"qpn": QPN_BITS, "sq_tail": SQ_INDEX_BITS, "bf": 1,
                              "modify": 1})


def fetch_layout():
    """Front -> WQE fetch: the item and its (pinned) cache entry."""
    return data.StructLayout({"qpn": QPN_BITS, "sq_tail": SQ_INDEX_BITS, "bf": 1,
                              "modify": 1, "entry": ENTRY_BITS})


def resend_layout(reads=False):
    """Completion -> WQE fetch: one message to send again (with ``reads``: ``take``, a
    READ or atomic that takes a response-intake slot when it is sent)."""
    take = {"take": 1} if reads else {}
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": QPN_BITS,
                              "sq_index": SQ_INDEX_BITS, "first_psn": PSN_BITS, **take})


def batch_layout():
    """WQE fetch -> sequencer: ``count`` WQEs from slot ``first`` (0 for an item with
    no new WQE, ``null``; a null batch with ``modify`` for a modify command), from the
    fetched-WQE FIFO or the MMIO one (``bf``)."""
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": QPN_BITS, "first": SQ_INDEX_BITS,
                              "count": 6, "stride_log2": 2, "bf": 1, "resend": 1,
                              "first_psn": PSN_BITS, "last_of_item": 1, "null": 1,
                              "modify": 1})


def job_layout(depth, reads=False):
    """Sequencer -> payload fetch: one message (with ``reads``: its WQE opcode, an
    atomic's operands, ``laddr_lo`` the low 6 bits of the local byte address)."""
    ops = dict(_OPS, laddr_lo=6) if reads else {}
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": QPN_BITS, "psn": PSN_BITS,
                              "laddr": range(depth), "raddr": 64, "rkey": 32, "inline": 1,
                              "ack_req": 1, "pmtu_log2": 4, **_REC, **ops})


#: Bits of a local byte address in a frame descriptor (with ``reads``): 2**32 bytes,
#: more than the largest host memory (2**26 words of 64 bytes).
LADDR_BITS = 32


def seg_layout(reads=False):
    """Payload fetch -> frame sender: one frame, and (on the message's last frame) the
    record of the message (with ``reads``: the WQE opcode, an atomic's operands, the
    local byte address ``laddr`` and ``pmtu_log2``)."""
    ops = dict(_OPS, laddr=LADDR_BITS, pmtu_log2=4) if reads else {}
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": QPN_BITS, "opcode": OpCode,
                              "psn": PSN_BITS, "length": 13, "va": 64, "rkey": 32,
                              "ack_req": 1, "words": 7, "last_seg": 1, **_REC, **ops})


def record_layout(reads=False):
    """Frame sender -> completion: a message sent (or an item done without one); with
    ``reads`` its WQE opcode ``op``."""
    ops = {"op": WqeOpcode} if reads else {}
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": QPN_BITS, "last_psn": PSN_BITS,
                              **_REC, **ops})


def cqe_req_layout(reads=False):
    """Completion -> CQE writer (with ``reads``: the WQE opcode ``op``)."""
    ops = {"op": WqeOpcode} if reads else {}
    return data.StructLayout({"wr_id": 64, "status": 8, "qpn": QPN_BITS, "byte_len": 32,
                              "sq_index": SQ_INDEX_BITS, **ops})


def read_layout(depth):
    """A client's DMA read: ``words`` (1..64) words from word ``addr``."""
    return data.StructLayout({"addr": range(depth), "words": 7})


def write_layout_req(depth):
    """A client's DMA write of one word (a whole-word write, its own TLP)."""
    return data.StructLayout({"addr": range(depth), "data": HOST_WORD_BITS, "mark": 1,
                              "tag": TAG_BITS})


def window_record_layout(reads=False):
    """A message in its QP's window, as the completion unit keeps it until its ACK (with
    ``reads``: its WQE opcode ``op``)."""
    ops = {"op": WqeOpcode} if reads else {}
    return data.StructLayout({"qpn": QPN_BITS, "first_psn": PSN_BITS, "last_psn": PSN_BITS,
                              "wr_id": 64, "sq_index": SQ_INDEX_BITS, "msg_length": 32,
                              "signalled": 1, **ops})


def ack_event_layout():
    """ACK receiver -> completion: the QP an ACK is for, its PSN, syndrome and MSN."""
    return data.StructLayout({"qpn": QPN_BITS, "psn": PSN_BITS, "syndrome": 8,
                              "msn": MSN_BITS})


# -- Responder --------------------------------------------------------------------------------

def header_entry_layout():
    """One received frame, written by the receive stage at its last beat.

    ``b0``, ``b1``: frame beats 0 and 1 as received (``b1`` zero for a one-beat frame);
    ``fcs_ok``, ``icrc_ok``, ``length``: :class:`rtl.rdma.frame_check.FrameCheck`'s
    verdict at the last beat (``icrc_ok`` forced low below 64 bytes, see
    :class:`rtl.rdma.resp.rx.Receive`); ``single``: the frame had one beat;
    ``too_long``: it had more than MAX_FRAME_BEATS beats; ``rest``: beats of it in the
    payload FIFO.
    """
    return data.StructLayout({
        "b0": HOST_WORD_BITS, "b1": HOST_WORD_BITS, "fcs_ok": 1, "icrc_ok": 1, "length": 16,
        "single": 1, "too_long": 1, "rest": range(REST_MAX + 1),
    })


def verify_job_layout(head_bytes=HEAD_BYTES, reads=False):
    """A frame on its way from the header check to the verify stage.

    ``check`` = 0: the frame failed the FCS, length, header or ICRC check; only ``rest``
    is meaningful (every other field is 0). ``check`` = 1: ``entry``, the QP's
    context-cache entry (the header check's lookup), and the frame's fields in host
    byte order (``plen``: payload bytes, ``ip_len`` minus the headers, ICRC and pad,
    modulo 2**17; ``reth``: FIRST or ONLY; ``last``: LAST or ONLY) and ``data``, the
    frame's bytes 54 to 127 (:data:`HEAD_BYTES`; with the scale-up header 22 to 127,
    ``head_bytes`` = 106: :attr:`spec.formats.scaleup.Framing.head_bytes`). With
    ``reads`` (a responder that executes RDMA READ) one more field, ``read``: the frame
    is a READ request (then ``reth`` and ``last`` are set too); ``atomic``: an atomic
    (``cmp``: COMPARE & SWAP, else FETCH & ADD; ``last`` set, ``reth`` not; ``va`` and
    ``rkey`` from its AtomicETH, the operands in ``data``).
    """
    fields = {
        "check": 1, "rest": range(REST_MAX + 1), "qpn": QPN_BITS, "entry": ENTRY_BITS,
        "psn": PSN_BITS,
        "ack_req": 1, "reth": 1, "last": 1, "va": 64, "rkey": 32, "dma_len": 32,
        "plen": 17, "data": 8 * head_bytes,
    }
    if reads:
        fields.update(read=1, atomic=1, cmp=1)
    return data.StructLayout(fields)


def write_job_layout(depth, head_bytes=HEAD_BYTES):
    """A frame for the payload writer. ``write`` = 0: pop ``rest`` beats, write nothing
    (every other field is 0). ``write`` = 1: write ``plen`` bytes from word ``addr``
    on; ``mark`` (a LAST/ONLY) puts ``mark`` and ``tag`` = ``qpn`` on the last word."""
    return data.StructLayout({
        "write": 1, "rest": range(REST_MAX + 1), "reth": 1, "addr": range(depth),
        "plen": PLEN_BITS, "mark": 1, "qpn": QPN_BITS, "data": 8 * head_bytes,
    })


def ack_layout(reads=False):
    """Verify -> ACK sender (the ACK framer's input): one ACK or NAK to send:
    addressing, PSN, AETH syndrome and MSN. With ``reads`` (a responder that executes
    RDMA READ) the same FIFO carries READs to answer, in order with the ACKs: ``read``
    set, ``va`` and ``length`` (bytes) of the data, ``pmtu_log2`` of the QP, ``psn`` of
    the first response packet, ``msn`` for the AETHs; and atomics: ``atomic`` set, ``cmp``
    (COMPARE & SWAP), ``va``, the operands ``swap`` (or the add value) and ``compare``;
    with ``replay`` the atomic is not executed and ``swap`` is the saved original value
    to answer with."""
    fields = {
        "dmac": 48, "smac": 48, "sip": 32, "dip": 32, "src_qp": QPN_BITS,
        "dest_qp": QPN_BITS, "psn": PSN_BITS, "syndrome": 8, "msn": MSN_BITS,
    }
    if reads:
        fields.update(read=1, va=64, length=32, pmtu_log2=4, atomic=1, replay=1, cmp=1,
                      swap=64, compare=64)
    return data.StructLayout(fields)
