"""Twin of :class:`rtl.nic.tx_framer.NicTxFramer` with the L2 padder and FCS inserter
behind it: the wire beats of one store frame and what each beat needs."""

import functools

from pymodel.nic.frames import build_frame
from pymodel.packet import frame_to_beats
from spec.formats.nic import header_bytes, padded_bytes

__all__ = ["TxFramerModel", "SLOT_KINDS"]

#: What a wire beat of a frame is: ``hdr`` (header only: the command's first beat must
#: be valid, not consumed), ``body`` (consumes a command beat), ``tail`` (the rest of the
#: last command beat, not consumed), ``pad`` (the L2 padder's zero beat), ``spill`` (the
#: FCS beat). Only ``hdr`` and ``body`` wait for a valid command beat.
SLOT_KINDS = ("hdr", "body", "tail", "pad", "spill")

# A pure function of the framing and a length, called per frame; each call builds a
# layout, so it is cached.
_padded_bytes = functools.cache(padded_bytes)


class TxFramerModel:
    """Frame store commands: header, the payload shifted behind it, padding, FCS.

    Zero latency and no bubble, so the twin works a frame at a time: ``step(c, side)``
    with ``side["i"]`` the segment (a :class:`pymodel.nic.store.Store`) whose first
    command beat is at ``cmd`` and ``side["node_id"]`` returns ``{"o": (slots, frame)}``:
    the frame's wire beats as ``(kind, beat)`` (:data:`SLOT_KINDS`), one a cycle while
    ``o`` is taken, and the frame's bytes with FCS.

    ``ext`` (0 or :data:`spec.formats.nic.PSN_BYTES`, ``peer_retry``): bytes between the
    header and the payload, the frame's PSN (``psn`` of :meth:`slots`, little endian);
    the framer then shifts the payload as behind a header ``ext`` bytes longer.
    """

    def __init__(self, width, framing, id_bits=8, ext=0):
        self.w, self.framing, self.id_bits, self.ext = width, framing, id_bits, ext
        self.h = header_bytes(framing) + ext

    def slots(self, store, node_id, psn=0):
        """The wire beats of ``store``'s frame from node ``node_id``: ``(slots, frame)``."""
        w, (q, r) = self.w, divmod(self.h, self.w)
        cmd = store.beats(w)
        body = (psn.to_bytes(self.ext, "little") if self.ext else b"") + store.payload
        frame = build_frame(self.framing, node_id, store.dst, store.addr, store.length,
                            body, ack_req=store.ack_req, id_bits=self.id_bits)
        wire = frame_to_beats(frame, w)
        kinds = ["hdr"] * q + ["body"] * len(cmd)
        nb = cmd[-1][1]
        if r and nb > w - r:
            kinds.append("tail")
        # The padder's zero beats (L2 frames under 60 bytes), then the FCS spill beat.
        padded = _padded_bytes(self.framing, len(store.payload) + self.ext)
        kinds += ["pad"] * (-(-padded // w) - len(kinds))
        if padded - (-(-padded // w) - 1) * w > w - 4:
            kinds.append("spill")
        if len(kinds) != len(wire):
            raise AssertionError(f"model: {len(kinds)} slots for {len(wire)} beats")
        return list(zip(kinds, wire, strict=True)), frame

    def step(self, c, side):
        store = side.get("i")
        return {"o": None if store is None else self.slots(store, side["node_id"])}

    def commit(self):
        pass
