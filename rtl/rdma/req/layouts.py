"""What the requester's stages pass to each other through their FIFOs.

Every stage-to-stage item is one of these layouts; the golden model uses dicts with
the same field names. ``entry`` is a QP-context cache entry (up to 256 entries).
"""

from amaranth.lib import data

from spec.formats.roce import OpCode

__all__ = ["ENTRY_BITS", "item_layout", "fetch_layout",
           "resend_layout", "batch_layout", "job_layout", "seg_layout", "record_layout",
           "cqe_req_layout", "read_layout", "write_layout_req"]

#: Bits of a cache entry number.
ENTRY_BITS = 8

_REC = {"wr_id": 64, "sq_index": 16, "first_psn": 24, "msg_length": 32, "signalled": 1,
        "resend": 1, "last_of_item": 1, "null": 1, "flush": 1, "modify": 1}


def item_layout():
    """Doorbell intake -> front: a doorbell (or a WQE by MMIO: ``bf``; or a QP modify
    command to RTS: ``modify``)."""
    return data.StructLayout({"qpn": 24, "sq_tail": 16, "bf": 1, "modify": 1})


def fetch_layout():
    """Front -> WQE fetch: the item and its (pinned) cache entry."""
    return data.StructLayout({"qpn": 24, "sq_tail": 16, "bf": 1, "modify": 1,
                              "entry": ENTRY_BITS})


def resend_layout():
    """Completion -> WQE fetch: one message to send again."""
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": 24, "sq_index": 16,
                              "first_psn": 24})


def batch_layout():
    """WQE fetch -> sequencer: ``count`` WQEs from slot ``first`` (0 for an item with
    no new WQE, ``null``; a null batch with ``modify`` for a modify command), from the
    fetched-WQE FIFO or the MMIO one (``bf``)."""
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": 24, "first": 16, "count": 6,
                              "stride_log2": 2, "bf": 1, "resend": 1, "first_psn": 24,
                              "last_of_item": 1, "null": 1, "modify": 1})


def job_layout(depth):
    """Sequencer -> payload fetch: one message."""
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": 24, "psn": 24,
                              "laddr": range(depth), "raddr": 64, "rkey": 32, "inline": 1,
                              "ack_req": 1, "pmtu_log2": 4, **_REC})


def seg_layout():
    """Payload fetch -> frame sender: one frame, and (on the message's last frame) the
    record of the message."""
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": 24, "opcode": OpCode, "psn": 24,
                              "length": 13, "va": 64, "rkey": 32, "ack_req": 1,
                              "words": 7, "last_seg": 1, **_REC})


def record_layout():
    """Frame sender -> completion: a message sent (or an item done without one)."""
    return data.StructLayout({"entry": ENTRY_BITS, "qpn": 24, "last_psn": 24, **_REC})


def cqe_req_layout():
    """Completion -> CQE writer."""
    return data.StructLayout({"wr_id": 64, "status": 8, "qpn": 24, "byte_len": 32,
                              "sq_index": 16})


def read_layout(depth):
    """A client's DMA read: ``words`` (1..64) words from word ``addr``."""
    return data.StructLayout({"addr": range(depth), "words": 7})


def write_layout_req(depth):
    """A client's DMA write of one word (a whole-word write, its own TLP)."""
    return data.StructLayout({"addr": range(depth), "data": 512, "mark": 1, "tag": 24})
