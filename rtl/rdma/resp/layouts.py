"""The items that travel between the responder's stages, and its host-interface ports.

Each FIFO of :class:`rtl.rdma.resp.responder.Responder` holds one of these layouts. The
host-interface layouts are the device side of ``HostInterface``
(/work/notes/host_interface_contract.md) with the ``mark``/``tag`` fields of the
responder contract on writes.
"""

from amaranth.lib import data

from rtl.rdma.ack_framer import ack_layout
from spec.formats.packet import packet_layout
from spec.rdma_responder import HEAD_BYTES, REST_MAX

__all__ = ["header_entry_layout", "verify_job_layout", "write_job_layout",
           "rd_req_layout", "rd_data_layout", "wr_layout", "ack_layout", "packet_layout",
           "PLEN_BITS"]

#: Bits of a payload length the payload writer can be asked for: at most
#: MAX_FRAME_BEATS * 64 bytes in a frame that passed the length check.
PLEN_BITS = 13


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
        "b0": 512, "b1": 512, "fcs_ok": 1, "icrc_ok": 1, "length": 16, "single": 1,
        "too_long": 1, "rest": range(REST_MAX + 1),
    })


def verify_job_layout():
    """A frame on its way from the header check to the verify stage.

    ``check`` = 0: the frame failed the FCS, length, header or ICRC check; only ``rest``
    is meaningful (every other field is 0). ``check`` = 1: the frame's fields in host
    byte order (``plen``: payload bytes, ``ip_len`` minus the headers, ICRC and pad,
    modulo 2**17; ``reth``: FIRST or ONLY; ``last``: LAST or ONLY) and ``data``, the
    frame's bytes 54 to 127 (:data:`HEAD_BYTES`).
    """
    return data.StructLayout({
        "check": 1, "rest": range(REST_MAX + 1), "qpn": 24, "psn": 24, "ack_req": 1,
        "reth": 1, "last": 1, "va": 64, "rkey": 32, "dma_len": 32, "plen": 17,
        "data": 8 * HEAD_BYTES,
    })


def write_job_layout(depth):
    """A frame for the payload writer. ``write`` = 0: pop ``rest`` beats, write nothing
    (every other field is 0). ``write`` = 1: write ``plen`` bytes from word ``addr``
    on; ``mark`` (a LAST/ONLY) puts ``mark`` and ``tag`` = ``qpn`` on the last word."""
    return data.StructLayout({
        "write": 1, "rest": range(REST_MAX + 1), "reth": 1, "addr": range(depth),
        "plen": PLEN_BITS, "mark": 1, "qpn": 24, "data": 8 * HEAD_BYTES,
    })


def rd_req_layout(depth):
    """A DMA read request (host interface ``rd_req``)."""
    return data.StructLayout({"addr": range(depth), "words": range(1, 65), "id": 8})


def rd_data_layout():
    """A DMA read completion word (host interface ``rd_data``)."""
    return data.StructLayout({"data": 512, "id": 8, "last": 1})


def wr_layout(depth):
    """A posted DMA write word (host interface ``wr``): ``last`` ends a write TLP;
    ``mark`` with ``tag`` = QPN on the last payload word of a message."""
    return data.StructLayout({"addr": range(depth), "data": 512, "be": 64, "last": 1,
                              "mark": 1, "tag": 24})
