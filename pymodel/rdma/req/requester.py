"""Twin of :class:`rtl.rdma.req.requester.Requester`: its stage twins and FIFOs."""

import zlib
from types import MappingProxyType

from pymodel.cycle import Fifo, Staged, StagedLog
from pymodel.fields import field_slot
from pymodel.rdma.context_cache import ContextCacheModel
from pymodel.rdma.frames import icrc, scaleup_icrc
from pymodel.rdma.req.ack_queue import AckQueueModel
from pymodel.rdma.req.completion import CompletionUnitModel
from pymodel.rdma.req.cqe_writer import CqeWriterModel
from pymodel.rdma.req.doorbell_intake import DoorbellIntakeModel
from pymodel.rdma.req.frame_sender import FrameSenderModel
from pymodel.rdma.req.host_ports import read_offer, write_offer
from pymodel.rdma.req.miss_queue import MissQueueModel
from pymodel.rdma.req.payload_fetch import PayloadFetchModel
from pymodel.rdma.req.qp_front import QpFrontModel
from pymodel.rdma.req.read_path import IssuePort, ReadEvents, ack_held
from pymodel.rdma.req.response_intake import ResponseIntakeModel
from pymodel.rdma.req.sequencer import SequencerModel
from pymodel.rdma.req.wqe_fetch import WqeFetchModel
from pymodel.rdma.resp.rx import ReceiveModel
from spec.formats.roce import (
    ACK_HEADER,
    ETH_LAYOUT,
    ETHERTYPE_IPV4,
    ICRC_BYTES,
    IP_PROTO_UDP,
    ROCE_UDP_PORT,
    OpCode,
    bswap,
    header_bytes,
)
from spec.formats.scaleup import SU_ACK_HEADER, Header, ScaleUpType, framing
from spec.rdma_engine import (
    FETCH_GROUP,
    FIFO_DEPTHS,
    RD_FILL,
    RD_PAYLOAD,
    RD_WQE,
    REQUESTER_COUNTERS,
    REQUESTER_SIZES,
    SEQ_GROUP,
)
from spec.rdma_fabric import FCS_BYTES
from spec.rdma_read_req import INTAKE_COUNTERS as READ_COUNTERS
from spec.rdma_read_req import ORD_DEFAULT, SENDER_COUNTERS
from spec.rdma_responder import RX_BEATS, RX_FRAMES
from spec.rdma_stages import COUNT_BITS

__all__ = ["RequesterModel", "ack_frame_ok"]

_COUNT_MASK = (1 << COUNT_BITS) - 1
#: The side inputs of a stage that has none.
_NO_SIDE = MappingProxyType({})
_NO_OFFER = (None, None)             # a host port's (fifo, request) offering nothing
#: ``(offset, mask)`` of the ACK header fields an event takes (QPN, PSN, syndrome, MSN).
_ACK_SLOTS = tuple(field_slot(ACK_HEADER, path) for path in (
    "bth.dest_qp", "bth.psn", "aeth.syndrome", "aeth.msn"))


#: Bytes of an ACKNOWLEDGE frame (headers, ICRC, FCS: 66) and its IPv4 total length (48).
_ACK_FRAME_BYTES = header_bytes(ACK_HEADER) + ICRC_BYTES + FCS_BYTES
_ACK_IP_LENGTH = _ACK_FRAME_BYTES - header_bytes(ETH_LAYOUT) - FCS_BYTES
#: Frame bytes of the ACK header fields :func:`ack_frame_ok` checks.
_IP_LENGTH_AT, _ETHERTYPE_AT, _PROTOCOL_AT, _DPORT_AT, _OPCODE_AT = (
    field_slot(ACK_HEADER, path)[0] // 8 for path in (
        "ip.total_length", "eth.ethertype", "ip.protocol", "udp.dport", "bth.opcode"))


def _be16(b, k):
    return int.from_bytes(b[k:k + 2], "big")


#: The same for the scale-up header: frame bytes (26 + 4 + 4), the header's ``length``
#: (BTH, AETH, ICRC: 20) and the frame bytes of ``length``, ``type`` and the opcode.
_SU_ACK_SLOTS = tuple(field_slot(SU_ACK_HEADER, path) for path in (
    "bth.dest_qp", "bth.psn", "aeth.syndrome", "aeth.msn"))
_SU_ACK_FRAME_BYTES = header_bytes(SU_ACK_HEADER) + ICRC_BYTES + FCS_BYTES
_SU_ACK_LENGTH = _SU_ACK_FRAME_BYTES - framing("scaleup").outer - FCS_BYTES
_SU_LENGTH_AT, _SU_TYPE_AT, _SU_OPCODE_AT = (
    field_slot(SU_ACK_HEADER, path)[0] // 8 for path in ("su.length", "su.type",
                                                          "bth.opcode"))


def scaleup_ack_ok(frame):
    """What the AckReceiver built for the scale-up header accepts: a good 34-byte
    ACKNOWLEDGE frame (FCS, ICRC, ``length`` 20, ``type`` BTH)."""
    return (len(frame) == _SU_ACK_FRAME_BYTES
            and zlib.crc32(frame[:-FCS_BYTES]) == int.from_bytes(frame[-FCS_BYTES:], "little")
            and (scaleup_icrc(frame[:-FCS_BYTES - ICRC_BYTES])
                 == frame[-FCS_BYTES - ICRC_BYTES:-FCS_BYTES])
            and _be16(frame, _SU_LENGTH_AT) == _SU_ACK_LENGTH
            and frame[_SU_TYPE_AT] == ScaleUpType.BTH.value
            and frame[_SU_OPCODE_AT] == OpCode.RC_ACKNOWLEDGE.value)


def ack_frame_ok(frame, header="roce"):
    """What the AckReceiver accepts: a good 66-byte RoCEv2 ACKNOWLEDGE frame (or, with
    ``header="scaleup"``, :func:`scaleup_ack_ok`)."""
    if header != "roce" and framing(header).header is Header.SCALEUP:
        return scaleup_ack_ok(frame)
    return (len(frame) == _ACK_FRAME_BYTES
            and zlib.crc32(frame[:-FCS_BYTES]) == int.from_bytes(frame[-FCS_BYTES:], "little")
            and icrc(frame[:-FCS_BYTES - ICRC_BYTES]) == frame[-FCS_BYTES - ICRC_BYTES:-FCS_BYTES]
            and _be16(frame, _IP_LENGTH_AT) == _ACK_IP_LENGTH
            and _be16(frame, _ETHERTYPE_AT) == ETHERTYPE_IPV4
            and frame[_PROTOCOL_AT] == IP_PROTO_UDP and _be16(frame, _DPORT_AT) == ROCE_UDP_PORT
            and frame[_OPCODE_AT] == OpCode.RC_ACKNOWLEDGE.value)


class RequesterModel:
    """The requester, stepped one cycle at a time.

    Each cycle: :meth:`offers` gives the read request and write word the requester
    offers the host interface (both come from FIFO heads, so they do not depend on
    anything of the same cycle); then :meth:`step` with the host interface's
    ``ready``s, the word it delivers on ``rd_data``, the MMIO word it offers, the ACK
    frame whose last beat arrives this cycle and the link's ``go`` (1: not held); it
    returns whether the MMIO word was taken. Frames go out through
    ``send(first_beat_cycle, frame)``. Then :meth:`commit`. ``cfg``: the configuration
    (:class:`~pymodel.rdma.engine_config.EngineConfig`) whose context cache's shape
    (``cfg.cache_shape``), requester sizes (:data:`spec.rdma_engine.REQUESTER_SIZES`, by
    name; ``sizes`` overrides them) and ports the twin takes.
    """

    def __init__(self, cfg, send, reads=None, **sizes):
        self.reads = getattr(cfg, "reads", 0) if reads is None else reads
        p = dict(REQUESTER_SIZES)
        p.update({k: getattr(cfg, k) for k in p if hasattr(cfg, k)})
        unknown = set(sizes) - set(p)
        if unknown:
            raise ValueError(f"unknown requester parameter(s): {sorted(unknown)}")
        p.update(sizes)
        self.cfg, self.p = cfg, p
        self.header = framing(getattr(cfg, "header", "roce")).header.value
        shape = cfg.cache_shape
        n = shape.entries
        used = cfg.cache_entries
        d = FIFO_DEPTHS
        self._staged = StagedLog()          # the FIFOs to commit at the end of a cycle
        f = self.fifos = {name: Fifo(depth, name, self._staged) for name, depth in d.items()}
        f["wqe"] = Fifo(p["wqe_words"], "wqe", self._staged)
        f["payload"] = Fifo(p["payload_words"], "payload", self._staged)
        self.cache = ContextCacheModel(n, {"fetch": FETCH_GROUP, "seq": SEQ_GROUP},
                                       cfg.qpc_base_a, cfg.depth, used, shape.ways,
                                       cfg.qpc_words)
        self.intake = DoorbellIntakeModel(f["items"], f["bf"])
        log = self._staged
        self.front = QpFrontModel(n, f["items"], f["fetch"], self.cache.entry_of,
                                  self._lookup, self._query, log=log,
                                  need=self._need, need_taken=self._need_taken,
                                  hit=lambda qpn, side: self.cache.hit(qpn))
        # With a miss queue, the WQE fetch stage reads the miss queue's ``o``.
        self.miss = (MissQueueModel(self.cache, f["fetch"], p["miss_queue"], log=log)
                     if p["miss_queue"] else None)
        if self.miss is not None:
            f["miss"] = self.miss.side
        self.fetch = WqeFetchModel(self.cache, self.miss or f["fetch"], f["resend"],
                                   f["rd_wqe"],
                                   f["batch"], p["prefetch"], p["wqe_words"], p["records"],
                                   log=log)
        reads = self.reads
        self.seq = SequencerModel(self.cache, f["batch"], f["wqe"], f["bf"], f["jobs"],
                                  f["inline"], log=log, reads=reads)
        self.pay = PayloadFetchModel(cfg.depth, f["jobs"], f["inline"], f["rd_pay"],
                                     f["segs"], f["payload"], p["payload_words"], log=log,
                                     reads=reads)
        self.rx = self.read_intake = self.issue = None
        if reads:
            for name, depth in (("rx_hdr", RX_FRAMES), ("rx_pay", RX_BEATS),
                                ("rd_resp", d["wr_cqe"]), ("ops_done", d["cqes"]),
                                ("ops_rewind", d["cqes"])):
                f[name] = Fifo(depth, name, self._staged)
            self.rx = ReceiveModel(f["rx_hdr"], f["rx_pay"])
            self.issue = IssuePort()
            self.read_intake = ResponseIntakeModel(
                {"hdr": f["rx_hdr"], "beats": f["rx_pay"], "issue": self.issue,
                 "o": f["rd_resp"], "done": f["ops_done"], "rewind": f["ops_rewind"]},
                reads, min(ORD_DEFAULT, reads), cfg.depth)
        self.wr_locked = False          # the write arbiter inside a READ data TLP
        self.sender = FrameSenderModel(self.cache, f["segs"], f["payload"], f["recs"], send,
                                       self.header, reads, self)
        self.comp = CompletionUnitModel(shape, p["records"], p["retry_limit"], f["recs"],
                                        None, f["cqes"], f["resend"], used,
                                        p["windows"], self.cache.present,
                                        entry_of=self.cache.probe_entry)
        self.cqw = CqeWriterModel(f["cqes"], f["wr_cqe"], cfg.cq_base, cfg.cq_log2,
                                  cfg.depth)
        self.events = self.comp.ev = AckQueueModel(self.comp.slot)
        if reads:
            self.comp.ev = ReadEvents(f["ops_done"], f["ops_rewind"], self.events)
        self.arrived = Staged(0, name="arrived", log=log)
        self.ack_lost = self.acks = self.ack_dropped = self.ack_wait_cycles = 0
        self.ack_held = None        # the ACK receiver's held event (the queue was full)
        self.timeout = cfg.timeout
        self.selective = getattr(cfg, "selective", 0)   # (a fabric's Config has none)
        self._offered = None        # what offers() showed in this cycle
        self._cycle = 0
        self._rd_srcs = (f["rd_fill"], f["rd_wqe"], f["rd_pay"])  # (FIFOs bound once)
        self._wr_srcs = (f["wr_wb"], f["wr_cqe"], f.get("rd_resp"))
        self._inputs = tuple(f.get(n) for n in ("items", "resend", "fetch", "miss", "batch",
                                                "jobs", "segs", "cqes", "ops_done"))

    # ---- the context cache and the completion unit, as the QP front sees them ----
    def _lookup(self, qpn, victim_busy, side):
        """The cache takes the lookup (and asks for a fill and a write-back)."""
        f = self.fifos
        taken, fill, wb = self.cache.lookup(qpn, victim_busy, f["rd_fill"].can_write(),
                                            f["wr_wb"].can_write())
        if fill is not None:
            f["rd_fill"].write(fill)
        if wb is not None:
            f["wr_wb"].write(wb)
        return taken

    def _query(self, e, qpn, side):
        comp = self.comp
        keep, vopen = comp.query(qpn, self.cache.victim(qpn), self._cycle)
        return comp.done[e], keep, vopen, comp.err_out == e

    def _need(self, side):
        return self.comp.need()

    def _need_taken(self):
        self.comp.need_taken()

    # ---- the host interface ----
    def offers(self):
        """``(read request, write word)`` offered this cycle (dicts or None)."""
        self._offered = self._offer()
        (_, rd), (_, wr) = self._offered
        return rd, wr

    def _offer(self):
        fill, wqe, pay = self._rd_srcs      # (start of the cycle: none popped yet)
        rd = (read_offer(fill, wqe, pay, self.cache.words) if fill.q or wqe.q or pay.q
              else _NO_OFFER)
        wb, cqe, data = self._wr_srcs
        wr = (write_offer(wb, cqe, data, self.wr_locked)
              if wb.q or cqe.q or (data is not None and data.q) else _NO_OFFER)
        return rd, wr

    # ---- the frame sender's view of the response intake ----
    def issue_ready(self, qpn):
        """The intake's ``issue.ready`` for QP ``qpn`` (the table of the start of the
        cycle: the sender steps before the intake)."""
        return self.read_intake.issue_ready(qpn)

    def offer(self, item):
        self.issue.offer(item)

    def mmio_ready(self, word):
        """``mmio.ready`` for the word the host interface offers this cycle."""
        return self.intake.would_take(word)

    def step(self, c, mmio=None, rd_data=None, rd_ready=False, wr_ready=False, ack=None,
             go=1, beat=None):
        """... ``beat``: with ``reads``, the beat arriving on ``i`` in this cycle (a dict
        ``data``, ``nbytes``, ``first``, ``last``; ``ack`` is the frame it ends)."""
        f = self.fifos
        self._cycle = c
        cfg, comp, reads = self.cfg, self.comp, self.reads
        items, resend, fetch, miss, batch, jobs, segs, cqes, ops_done = self._inputs
        # The host interface takes what was offered at the start of the cycle.
        (rd_fifo, _), (wr_fifo, wr_word) = self._offered or self._offer()
        if rd_ready and rd_fifo is not None:
            rd_fifo.read()
        if wr_ready and wr_fifo is not None:
            wr_fifo.read()
            if reads and wr_fifo is f["rd_resp"]:
                self.wr_locked = not wr_word["last"]
        if reads:
            # The ACK queue's head waits while it is an ACK reaching the QP's oldest
            # unanswered READ or atomic (the intake's limit, start of the cycle).
            comp.ev.held = ack_held(self.events, self.read_intake)
            self.rx.step(c, {"i": beat})
        if rd_data is not None:
            ident = rd_data["id"]
            if ident == RD_FILL:
                self.cache.fill(rd_data["data"])
            elif ident == RD_WQE:
                f["wqe"].write(rd_data["data"])
            elif ident == RD_PAYLOAD:
                f["payload"].write(rd_data["data"])
                self.arrived.set((self.arrived.value + 1) & _COUNT_MASK)
        if ack is not None or self.ack_held is not None:
            self._ack(ack)
        # Each stage is stepped with its side inputs (the ports of the same names, from
        # the other stages' registers of the start of the cycle). A stage whose inputs
        # are empty (and, for the framer, with no payload pops due) passes the cycle by
        # without a change: it is not called then.
        taken = (self.intake.step(c, {"mmio": mmio})["mmio.ready"] == 1
                 if mmio is not None else False)
        if items.q or comp.need() is not None:
            self.front.step(c, {
                "hold": False, "serial": cfg.serial,
                "idle": (self.front.adm_total.value == comp.done_total.value
                         and comp.win_total.value == 0)})
        else:
            self.front.stalled = False
        if resend.q or fetch.q or miss is not None and miss.q:
            self.fetch.step(c, {"released": self.seq.released.value, "hold": comp.hold,
                                "win_total": comp.win_total.value,
                                "appended": comp.appended.value})
            if self.miss is not None:
                self.miss.step(c)
        err, seq = comp.err_out, self.seq
        seq.take_dropped = False
        if batch.q or err is not None:
            seq.step(c, {"ack_every": cfg.ack_every, "ack_frames": cfg.ack_frames,
                         "err_valid": err is not None, "err_entry": err})
        if jobs.q or self.pay.grown:     # (else its step changes nothing)
            self.pay.step(c, {"pay_arrived": self.arrived.value})
        sender = self.sender
        sender.clear()
        if segs.q or sender.pops:
            sender.step(c, {"go": go, "timeout": self.timeout})
        side = {"issued": self.fetch.issued.value, "timeout": self.timeout,
                "selective": self.selective, "resent": sender.resent}
        if not reads:
            comp.step(c, side)
        else:   # (the intake's table and job of the start of the cycle: it steps after)
            ri = self.read_intake
            comp.step(c, dict(side, held=ri.holds, took=sender.took,
                              done_pending=ri.done_pending() or ops_done.can_read(),
                              take_dropped=seq.take_dropped))
            ri.step(c, {"timeout": 0, "evict": comp.reads.evict})
        if cqes.q:
            self.cqw.step(c, _NO_SIDE)
        return taken

    def _ack(self, frame):
        """The ACK receiver's cycle: the frame whose last beat arrives (or None) and the
        held event; the events queue's room is its start-of-cycle level's."""
        ev = None
        if frame is not None:
            if not ack_frame_ok(frame, self.header):
                self.ack_dropped += 1
            else:
                self.acks += 1
                slots = _ACK_SLOTS if self.header == "roce" else _SU_ACK_SLOTS
                raw = int.from_bytes(frame[:64], "little")
                qpn, psn, syndrome, msn = (raw >> offset & mask for offset, mask in slots)
                ev = dict(qpn=bswap(qpn, 3), psn=bswap(psn, 3), syndrome=syndrome,
                          msn=bswap(msn, 3))
        offered = self.ack_held if self.ack_held is not None else ev
        if offered is None:
            return
        events = self.events
        if events.can_write():
            events.write(offered)
            self.ack_held = ev if self.ack_held is not None else None
            return
        self.ack_wait_cycles += 1
        if self.ack_held is None:
            self.ack_held = ev
        elif ev is not None:
            self.ack_lost += 1

    def commit(self):
        """End of the cycle: the staged changes of the FIFOs and of the registers of the
        doorbell-to-payload stages (all in the requester's :class:`StagedLog`), of the
        context cache and of the completion unit take effect."""
        self._offered = None
        self._staged.commit()
        self.cache.commit()
        self.comp.commit()
        self.events.commit()

    def busy(self):
        """Anything left to do without new input (for idle skipping)."""
        if self.reads and (not self.read_intake.idle()
                           or any(sl is not None for sl in self.read_intake.slot)):
            return True
        return (self.ack_held is not None or not self.events.idle()
                or any(not fifo.idle() for fifo in self.fifos.values())
                or self.sender.busy() or self.comp.win_total.value != 0
                or self.comp.busy() or self.comp.err_out is not None
                or bool(self.cache.order))

    def counters(self):
        out = {}
        for part in (self.intake, self.front, self.fetch, self.seq, self.pay, self.sender,
                     self.comp, self.cqw):
            out.update(part.count)
        out.update(self.cache.count)
        out.update(acks=self.acks, ack_dropped=self.ack_dropped, ack_lost=self.ack_lost,
                   ack_wait_cycles=self.ack_wait_cycles,
                   ack_coalesced=self.events.coalesced)
        out = {k: out[k] for k in REQUESTER_COUNTERS}
        if self.reads:
            out.update({f"read_{k}": self.read_intake.count[k] for k in READ_COUNTERS})
            out.update({f"read_{k}": self.sender.count[k] for k in SENDER_COUNTERS})
        return out
