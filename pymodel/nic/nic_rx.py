"""Twin of :class:`rtl.nic.nic_rx.NicRx`: check each store frame, write good ones."""

import functools

from pymodel.fcs import fcs_ok
from pymodel.nic.frames import parse_completion, parse_header
from spec.formats.nic import (
    MAC_PREFIX,
    PSN_BYTES,
    NicOp,
    completion_bytes,
    header_bytes,
    header_layout,
    padded_bytes,
)
from spec.nic import PEER_VERDICTS

__all__ = ["NicRxModel", "COUNTER_NAMES"]

#: The receiver's counters, the drop reasons in priority order (a frame with several
#: faults counts under the first).
COUNTER_NAMES = ("frames_ok", "drop_fcs", "drop_malformed", "drop_dst", "drop_addr",
                 "drop_window")

# A pure function of the framing and a length, called per frame; each call builds a
# layout, so it is cached.
_padded_bytes = functools.cache(padded_bytes)


class NicRxModel:
    """One node's receiver.

    Parameters
    ----------
    width, framing, max_payload, mem_words
        As for the RTL (``mem_words``: its ``depth``).
    node_id : int
        The ``node_id`` port.
    table : pymodel.nic.window_table.WindowTableModel
        The receiver's window table (stepped by the owner: the lookup of a frame sees
        the writes of the cycles before the beat holding the source byte).
    mem : list of int, optional
        The memory's words before the run (default zeros).
    completion : str
        ``"credit"`` or ``"e2e"``: with ``e2e`` a completion frame (opcode COMPLETION,
        its length, FCS, destination) is not malformed: it is not written nor counted,
        and :attr:`cpls` gets it in the verdict cycle (``c + 1``); a store frame from a
        node that passed FCS, format and destination gets an entry in :attr:`acks` at the
        cycle its last buffered beat is drained (``(src, dropped, ack_req)``, dropped at
        the address or window check, ``ack_req`` the header's flag). With ``credit`` the
        flag is ignored: the frame is checked, written and counted like any store.
    check : pymodel.nic.peer_retry.PeerRetryReceiverModel, optional
        ``peer_retry`` (with ``e2e``): a store frame carries its PSN in the
        :data:`~spec.formats.nic.PSN_BYTES` after the header (the length check counts
        them; the payload follows them). A store frame of a known source that passes
        FCS, format and destination is checked in its last beat's cycle (the verdict
        cycle): ``accept``, as without retry; ``duplicate`` or ``nak``: not written nor
        counted here, its ``ack`` event (same cycle as an accepted frame's) has a
        fourth item, the verdict's index (1, 2; 0 for an accepted frame); ``gap``:
        dropped, no event. The check counts the gaps and duplicates.

    ``step(c, side)``: ``side["i"]`` is the beat arriving in cycle ``c`` (a tuple
    ``(data, nbytes, first, last, mid, ...)``; ``mid`` the message id the beat carries,
    or None), the receiver is always ready. At a frame's last beat the checks decide in
    priority order: FCS, format (length field against the bytes, 0, over
    ``max_payload``, a misaligned address, the opcode, the L2 EtherType), destination,
    the memory bound, the source's window (and, for L2, the source MAC's prefix). A
    good frame's words are written from cycle ``max(c + 2, writer free)``, one a cycle;
    the step then returns ``{"written": (mid, cycle of the last word, its index in
    wr)}``, else ``{}``.

    Attributes
    ----------
    wr : tuple of lists
        ``(addr, be)`` of each word written and its cycle.
    counters : dict
        :data:`COUNTER_NAMES`.
    mem : list of int
        The local memory.
    posted : list
        ``(cycle, host-interface wr word)`` of each write (the ``pcie`` attachment).
    acks, cpls : dict
        ``e2e``: cycle -> the ``ack`` event ``(src, dropped, ack_req)``; cycle -> the ``cpl``
        event ``(src, known, status, count, dropped)``.
    """

    def __init__(self, width, framing, max_payload, mem_words, node_id, table, mem=None,
                 port=0, completion="credit", stands_for=None, check=None):
        self.e2e = completion == "e2e"
        self.check = check
        ext = PSN_BYTES if check is not None else 0
        # Wide ids (NicTop's ``destinations``): the ids are the MACs' bytes 4..5, the
        # receiver takes a frame to its own id or to an id ``stands_for(id)`` says it
        # stands for, and its ``ack`` events carry the frame's destination id.
        self.stands_for = stands_for
        self.id_bits = 8 if stands_for is None else 16
        self.prefix = MAC_PREFIX[:4] if stands_for is not None else MAC_PREFIX
        self.acks, self.cpls = {}, {}
        self.w, self.framing, self.max_payload = width, framing, max_payload
        self.mem_words, self.node_id, self.table = mem_words, node_id, table
        self.h0 = header_bytes(framing)
        h = self.h = self.h0 + ext
        self.q, self.r = divmod(h, width)
        self.nh = -(-h // width)
        self.max_push = -(-(max_payload + 4) // width)
        self.hdr_raw = bytearray(self.nh * width)
        self.counters = dict.fromkeys(COUNTER_NAMES, 0)
        layout = header_layout(framing)
        self.l2 = "src_mac" in layout.members
        src_at = layout["src_mac" if self.l2 else "src"].offset // 8 + (
            len(MAC_PREFIX) if self.l2 else 0)
        self.src_beat, self.src_lane = divmod(src_at, width)
        mac_at = src_at - len(MAC_PREFIX)
        self.prefix_at = slice(mac_at, mac_at + len(self.prefix))
        self.held = (0, 0)                 # the window read last (registered in the RTL)
        if mem is not None and len(mem) != mem_words:
            raise ValueError(f"node {port}: mem holds {len(mem)} words, not {mem_words}")
        self.mem = [0] * mem_words if mem is None else list(mem)
        self.wr = ([], [])
        self.posted = []
        self.bidx = self.count = self.pushed = 0
        self.frame = bytearray()
        self.writer_free = 0

    def step(self, c, side):
        beat = side.get("i")
        if beat is None:
            return {}
        w = self.w
        data, nb, first, last, mid = beat[:5]
        k = 0 if first else self.bidx
        base = 0 if first else self.pushed
        room = base < self.max_push
        push = k > self.q and room
        self.pushed = base + push
        self.bidx = k if k > self.q else k + 1
        self.count = (0 if first else self.count) + nb
        if first:
            self.frame = bytearray()
        raw = data.to_bytes(w, "little")
        self.frame += raw[:nb]
        if k == self.src_beat:
            self.held = self.table.entry(raw[self.src_lane])
        if k < self.nh:
            self.hdr_raw[k * w:(k + 1) * w] = raw
        if not last:
            return {}
        return self._frame_end(c, k, nb, mid, room)

    def _frame_end(self, c, k, nb, mid, room):
        w, h, held = self.w, self.h, self.held
        tail = k >= self.q and nb > self.r and room
        nbeats = self.pushed + tail
        frame, hdr_raw = self.frame, self.hdr_raw
        f = parse_header(self.framing, bytes(hdr_raw))
        length, addr = f["length"], f["addr"]
        if self.stands_for is not None:
            dst_id = int.from_bytes(f["dst_mac"][4:6], "big")
            wrong_dst = f["dst_mac"][:4] != self.prefix or not (
                dst_id == self.node_id or self.stands_for(dst_id))
        elif "dst_mac" in f:
            wrong_dst = f["dst_mac"] != MAC_PREFIX + bytes([self.node_id])
        else:
            wrong_dst = f["dst"] != self.node_id
        is_cpl = self.e2e and f["opcode"] == NicOp.COMPLETION.value
        src_known = not self.l2 or bytes(hdr_raw[self.prefix_at]) == self.prefix
        if not fcs_ok(bytes(frame)):
            reason = "drop_fcs"
        elif is_cpl:
            if ((self.count & 0xFFFF) != completion_bytes(self.framing) + 4
                    or not f["ethertype_ok"]):
                reason = "drop_malformed"
            elif wrong_dst:
                reason = "drop_dst"
            else:
                reason = None
                g = parse_completion(self.framing, bytes(hdr_raw), self.id_bits)
                self.cpls[c + 1] = (g["src"], src_known, g["status"], g["count"],
                                    g["dropped"])
        elif ((self.count & 0xFFFF) != _padded_bytes(self.framing, length + h - self.h0) + 4
              or length == 0 or length > self.max_payload or addr % w or f["opcode"] != 1
              or not f["ethertype_ok"]):
            reason = "drop_malformed"
        elif wrong_dst:
            reason = "drop_dst"
        elif addr + length > self.mem_words * w:
            reason = "drop_addr"
        elif ((self.l2 and bytes(hdr_raw[self.prefix_at]) != self.prefix)
              or not self.table.inside(held, addr, length, w)):
            reason = "drop_window"
        else:
            reason = "frames_ok"
        verdict = 0
        if (self.check is not None and not is_cpl and src_known
                and reason in ("frames_ok", "drop_addr", "drop_window")):
            psn = int.from_bytes(hdr_raw[self.h0:h], "little")
            verdict = PEER_VERDICTS.index(self.check.check(self._src(hdr_raw), psn))
            if verdict:
                reason = "gap" if verdict == 3 else None
        if reason is not None and reason != "gap":
            self.counters[reason] += 1
        start = max(c + 2, self.writer_free)
        self.writer_free = start + max(nbeats, 1)
        if (self.e2e and not is_cpl and src_known and nbeats
                and (reason in ("frames_ok", "drop_addr", "drop_window") or verdict in (1, 2))):
            src = self._src(hdr_raw)
            ev = (src, reason != "frames_ok", f["ack_req"])
            if self.check is not None:
                ev = (*ev, verdict)
            if self.stands_for is not None:
                src = int.from_bytes(hdr_raw[self.prefix_at.stop:self.prefix_at.stop + 2],
                                     "big")
                ev = (src, ev[1], ev[2], int.from_bytes(f["dst_mac"][4:6], "big"))
            self.acks[start + nbeats - 1] = ev
        if reason != "frames_ok":
            return {}
        payload = bytes(frame[h:])
        word = (addr // w) % self.mem_words
        mem, wr = self.mem, self.wr
        last_write = None
        for j in range(nbeats):
            left = length - j * w
            if left <= 0:
                break
            nbytes = min(left, w)
            chunk = payload[j * w:j * w + nbytes]
            old = mem[word + j].to_bytes(w, "little")
            mem[word + j] = int.from_bytes(chunk + old[nbytes:], "little")
            wr[0].append((word + j, (1 << nbytes) - 1))
            wr[1].append(start + j)
            self.posted.append((start + j, {"addr": word + j, "be": (1 << nbytes) - 1,
                                            "data": int.from_bytes(chunk, "little"),
                                            "last": int(left <= w)}))
            last_write = start + j
        return {"written": (mid, last_write, None if last_write is None else len(wr[1]) - 1)}

    def _src(self, hdr_raw):
        """The source id byte of a held header."""
        return hdr_raw[self.prefix_at.stop] if self.l2 else hdr_raw[1]

    def commit(self):
        pass
