"""Twin of :class:`rtl.rdma.req.requester.Requester`: its stage twins and FIFOs."""

import zlib

from pymodel.cycle import Fifo, Staged, StagedLog
from pymodel.fields import field_slot
from pymodel.rdma.context_cache import ContextCacheModel
from pymodel.rdma.frames import icrc
from pymodel.rdma.req.completion import CompletionUnitModel
from pymodel.rdma.req.cqe_writer import CqeWriterModel
from pymodel.rdma.req.doorbell_intake import DoorbellIntakeModel
from pymodel.rdma.req.frame_sender import FrameSenderModel
from pymodel.rdma.req.host_ports import read_offer, write_offer
from pymodel.rdma.req.payload_fetch import PayloadFetchModel
from pymodel.rdma.req.qp_front import QpFrontModel
from pymodel.rdma.req.sequencer import SequencerModel
from pymodel.rdma.req.wqe_fetch import WqeFetchModel
from spec.formats.roce import (
    ACK_HEADER,
    ETHERTYPE_IPV4,
    IP_PROTO_UDP,
    ROCE_UDP_PORT,
    OpCode,
    bswap,
)
from spec.rdma_engine import (
    FETCH_GROUP,
    FIFO_DEPTHS,
    RD_FILL,
    RD_PAYLOAD,
    RD_WQE,
    REQUESTER_COUNTERS,
    REQUESTER_DEFAULTS,
    SEQ_GROUP,
)

__all__ = ["RequesterModel", "ack_frame_ok"]

_M16 = 0xFFFF
#: ``(offset, mask)`` of the ACK header fields an event takes (QPN, PSN, syndrome, MSN).
_ACK_SLOTS = tuple(field_slot(ACK_HEADER, path) for path in (
    "bth.dest_qp", "bth.psn", "aeth.syndrome", "aeth.msn"))


def _be16(b, k):
    return int.from_bytes(b[k:k + 2], "big")


def ack_frame_ok(frame):
    """What the AckReceiver accepts: a good 66-byte RoCEv2 ACKNOWLEDGE frame."""
    return (len(frame) == 66
            and zlib.crc32(frame[:-4]) == int.from_bytes(frame[-4:], "little")
            and icrc(frame[:-8]) == frame[-8:-4]
            and _be16(frame, 16) == 48 and _be16(frame, 12) == ETHERTYPE_IPV4
            and frame[23] == IP_PROTO_UDP and _be16(frame, 36) == ROCE_UDP_PORT
            and frame[42] == OpCode.RC_ACKNOWLEDGE.value)


class RequesterModel:
    """The requester, stepped one cycle at a time.

    Each cycle: :meth:`offers` gives the read request and write word the requester
    offers the host interface (both come from FIFO heads, so they do not depend on
    anything of the same cycle); then :meth:`step` with the host interface's
    ``ready``s, the word it delivers on ``rd_data``, the MMIO word it offers, and the ACK
    frame whose last beat arrives this cycle; it returns whether the MMIO word was
    taken. Frames go out through ``send(first_beat_cycle, frame)``. Then
    :meth:`commit`.
    """

    def __init__(self, cfg, send, **sizes):
        p = dict(REQUESTER_DEFAULTS)
        p.update({k: getattr(cfg, k) for k in p if hasattr(cfg, k)})
        unknown = set(sizes) - set(p)
        if unknown:
            raise ValueError(f"unknown requester parameter(s): {sorted(unknown)}")
        p.update(sizes)
        self.cfg, self.p = cfg, p
        n = cfg.cache_capacity
        used = cfg.cache_entries
        d = FIFO_DEPTHS
        self._staged = StagedLog()          # the FIFOs to commit at the end of a cycle
        f = self.fifos = {name: Fifo(depth, name, self._staged) for name, depth in d.items()}
        f["wqe"] = Fifo(p["wqe_words"], "wqe", self._staged)
        f["payload"] = Fifo(p["payload_words"], "payload", self._staged)
        f["events"] = Fifo(p["ack_queue"], "events", self._staged)
        self.cache = ContextCacheModel(n, {"fetch": FETCH_GROUP, "seq": SEQ_GROUP},
                                       cfg.qpc_base_a, cfg.depth, used)
        self.intake = DoorbellIntakeModel(f["items"], f["bf"])
        log = self._staged
        self.front = QpFrontModel(self.cache, f["items"], f["fetch"], f["rd_fill"],
                                  f["wr_wb"], log=log)
        self.fetch = WqeFetchModel(self.cache, f["fetch"], f["resend"], f["rd_wqe"],
                                   f["batch"], p["prefetch"], p["wqe_words"], p["records"],
                                   log=log)
        self.seq = SequencerModel(self.cache, f["batch"], f["wqe"], f["bf"], f["jobs"],
                                  f["inline"], log=log)
        self.pay = PayloadFetchModel(cfg.depth, f["jobs"], f["inline"], f["rd_pay"],
                                     f["segs"], f["payload"], p["payload_words"], log=log)
        self.sender = FrameSenderModel(self.cache, f["segs"], f["payload"], f["recs"], send)
        self.comp = CompletionUnitModel(n, p["records"], p["retry_limit"], f["recs"],
                                        f["events"], f["cqes"], f["resend"], used)
        self.cqw = CqeWriterModel(f["cqes"], f["wr_cqe"], cfg.cq_base, cfg.cq_log2,
                                  cfg.depth)
        self.arrived = Staged(0, name="arrived", log=log)
        self.ack_lost = self.acks = self.ack_dropped = 0
        self.timeout = cfg.timeout
        self._offered = None        # what offers() showed in this cycle

    # ---- the host interface ----
    def offers(self):
        """``(read request, write word)`` offered this cycle (dicts or None)."""
        self._offered = self._offer()
        (_, rd), (_, wr) = self._offered
        return rd, wr

    def _offer(self):
        f = self.fifos
        return (read_offer(f["rd_fill"], f["rd_wqe"], f["rd_pay"]),
                write_offer(f["wr_wb"], f["wr_cqe"]))

    def mmio_ready(self, word):
        """``mmio.ready`` for the word the host interface offers this cycle."""
        return self.intake.would_take(word)

    def step(self, c, mmio=None, rd_data=None, rd_ready=False, wr_ready=False, ack=None):
        f = self.fifos
        cfg = self.cfg
        # The host interface takes what was offered at the start of the cycle.
        (rd_fifo, _), (wr_fifo, _) = self._offered or self._offer()
        if rd_ready and rd_fifo is not None:
            rd_fifo.read()
        if wr_ready and wr_fifo is not None:
            wr_fifo.read()
        if rd_data is not None:
            ident = rd_data["id"]
            if ident == RD_FILL:
                self.cache.fill(rd_data["data"])
            elif ident == RD_WQE:
                f["wqe"].write(rd_data["data"])
            elif ident == RD_PAYLOAD:
                f["payload"].write(rd_data["data"])
                self.arrived.set((self.arrived.value + 1) & _M16)
        if ack is not None:
            self._ack(ack)
        # A stage whose inputs are empty (and, for the framer, with no payload pops due)
        # passes the cycle by without a change: it is not called then.
        taken = self.intake.step(mmio) if mmio is not None else False
        self.front.step(self.comp, cfg.serial)
        if f["resend"].q or f["fetch"].q:
            self.fetch.step(self.seq.released.value, self.comp)
        err = self.comp.err_out
        if f["batch"].q or err is not None:
            self.seq.step(cfg.ack_every, cfg.ack_frames, err)
        self.pay.step(self.arrived.value)
        if f["segs"].q or self.sender.pops:
            self.sender.step(c)
        self.comp.step(c, self.fetch.issued.value, self.timeout)
        if f["cqes"].q:
            self.cqw.step()
        return taken

    def _ack(self, frame):
        if not ack_frame_ok(frame):
            self.ack_dropped += 1
            return
        self.acks += 1
        raw = int.from_bytes(frame[:58], "little")
        qpn, psn, syndrome, msn = (raw >> offset & mask for offset, mask in _ACK_SLOTS)
        ev = dict(qpn=bswap(qpn, 3), psn=bswap(psn, 3), syndrome=syndrome, msn=bswap(msn, 3))
        if self.fifos["events"].can_write():
            self.fifos["events"].write(ev)
        else:
            self.ack_lost += 1

    def commit(self):
        """End of the cycle: the staged changes of the FIFOs and of the registers of the
        doorbell-to-payload stages (all in the requester's :class:`StagedLog`), of the
        context cache and of the completion unit take effect."""
        self._offered = None
        self._staged.commit()
        self.cache.commit()
        self.comp.commit()

    def busy(self):
        """Anything left to do without new input (for idle skipping)."""
        return (any(not fifo.idle() for fifo in self.fifos.values())
                or self.sender.busy() or self.comp.win_total.value != 0
                or self.comp.state.value != 0 or self.comp.err_out is not None
                or bool(self.cache.order))

    def counters(self):
        out = {}
        for part in (self.intake, self.front, self.fetch, self.seq, self.pay, self.sender,
                     self.comp, self.cqw):
            out.update(part.count)
        out.update(self.cache.count)
        out.update(acks=self.acks, ack_dropped=self.ack_dropped, ack_lost=self.ack_lost)
        return {k: out[k] for k in REQUESTER_COUNTERS}
