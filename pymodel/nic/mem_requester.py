"""Twin of :class:`rtl.nic.mem_requester.MemRequester`."""

from pymodel.nic.mem_frames import build_mem_frame, request_payload
from pymodel.packet import frame_chunks
from spec.formats.nic_mem import MEM_WIDTH, MemOp

__all__ = ["MemRequesterModel"]


class MemRequesterModel:
    """``step(c, side)``: ``side["cmd"]`` the command at the player (a dict of
    ``mem_cmd_layout`` fields, or None) and ``side["tag"]`` the table's free tag (None:
    none free) -> ``{"o": (data, nbytes, first, last) or None, "entry": ...}``: the
    one-beat request frame offered, and the tag entry it takes when it is sent."""

    def __init__(self, framing, node_id, mem_words):
        self.framing, self.node_id, self.mem_words = framing, node_id, mem_words

    def step(self, c, side):
        cmd, tag = side.get("cmd"), side.get("tag")
        if cmd is None or tag is None:
            return {"o": None, "entry": None}
        op = MemOp(cmd["op"])
        length = cmd["length"] if op is MemOp.LOAD else 8
        frame = build_mem_frame(self.framing, self.node_id, cmd["dst"], op, tag, length,
                                cmd["addr"], request_payload(op, cmd["a"], cmd["b"]))
        (beat,) = frame_chunks(frame, MEM_WIDTH)
        return {"o": beat, "entry": ((cmd["laddr"] >> 6) % self.mem_words, length, op.value,
                                       cmd["dst"])}

    def commit(self):
        pass
