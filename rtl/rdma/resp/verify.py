"""Verify stage of the responder: QP, PSN and access checks, the QP's receive state.

This file stays whole (one RTL block over 400 lines): every decision of the stage is
taken in one cycle from the same signals (the context group, the MR, the
selective-repeat bitmap, the saved atomic results) in one decision tree, whose branches
the class docstring lists in order; split, the tree could not be read against it.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.context_cache import CACHE_LOG2_BITS
from rtl.rdma.resp.header import inflight_bits
from spec.checks import check_int, reject
from spec.formats.roce import MR_LAYOUT, MR_LAYOUT_RA, PSN_BITS, QPN_BITS, QpState, Syndrome, bswap
from spec.ports import (
    CacheGroupSignature,
    CacheReadSignature,
    FillQuerySignature,
    ports_by_name,
)
from spec.rdma_responder import (
    ATOMIC_QPS,
    HEAD_BYTES,
    IRD,
    RESP_GROUP,
    SIZE_LIMITS,
    SR_WINDOW,
    check_mr_table,
)
from spec.rdma_stages import ack_layout, group_layout, verify_job_layout, write_job_layout

__all__ = ["Verify", "VERIFY_COUNTERS"]

#: Counters of this stage, in port order.
VERIFY_COUNTERS = ("frames_ok", "unknown_qp", "duplicates", "psn_nak", "out_of_order",
                   "access_nak", "qp_err", "sr_placed")


class Verify(wiring.Component):
    """Decide each frame against its QP context and the MR table, one frame per cycle.

    Parameters
    ----------
    entries, jobs : int
        Context-cache entries; depth of the verify-job FIFO (width of the done counts).
    depth : int
        Host-memory words (``addr`` of the write jobs).
    mr : MrTableShape
        The responder's MR table (:class:`spec.rdma_responder.MrTableShape`; None: its
        default): its ``entries`` (indexed by ``rkey % entries``), on chip and read
        combinationally (``mr_addr``), or in host memory behind the responder's MR cache
        (``mr.in_host``; ports ``mr_key`` ...).

    Ports
    -----
    i : In(stream.Signature(verify_job_layout()))
        From the header check, in frame order.
    w : Out(stream.Signature(write_job_layout(depth)))
        One job per frame for the payload writer (``write`` = 0 for every frame not
        written, so that it pops the frame's payload beats).
    ack : Out(stream.Signature(ack_layout()))
        The ACK/NAK a frame causes, to the ACK sender.
    filled : Out(FillQuerySignature(entries))
        Is the job's cache entry filled (``filled.ready``)?
    ctx : Out(CacheReadSignature(entries))
        The cache's static read port: ``valid`` and the ACK addressing.
    group : Out(CacheGroupSignature(entries, group_layout(RESP_GROUP)))
        The cache's dynamic group :data:`RESP_GROUP`, owned by this stage.
    mr_addr : Out(range(mr.entries)), mr_data : In(MR_LAYOUT)
        The MR table (a combinational read). With the table in host memory no
        ``mr_addr``: ``mr_data`` is the MR cache's ``mr`` for ``mr_key``.
    mr_key : Out(32), mr_look : Out(1), mr_take : Out(1), mr_hit : In(1)
        Only with the table in host memory: to the responder's MR cache, the head
        job's rkey; ``mr_look`` while the head job is a FIRST/ONLY that passed the header
        check (whatever its context, PSN or room downstream); ``mr_take`` when that job
        is decided; ``mr_hit``: its MR is in the cache.
    done_addr : In(range(entries)), done_data : Out(inflight_bits(jobs))
        The header check's read of this stage's count of frames done per entry.
    selective : In(1)
        Selective repeat (run-time, held from reset; 0: go-back-N, as the rules below).
    held_addr : In(range(entries)), held : Out(1)
        Has entry ``held_addr`` frames placed out of order (bits set) or its "discarded
        ahead" bit set? Its context must not be evicted (the responder ORs this into
        the cache's ``victim_busy``).
    frames_ok, unknown_qp, duplicates, psn_nak, out_of_order, access_nak, qp_err,
    sr_placed : Out(32)

    Timing
    ------
    A job at the head of ``i`` is decided in the first cycle in which ``w`` and ``ack``
    both have room and, for a frame that passed the header check, its entry is filled
    (``filled.ready``; a miss holds the job here until the fill data has been written). In
    that cycle the job is popped, its write job (and ACK/NAK) written, the group written
    (seen from the next cycle, so the next frame of the same QP can follow directly) and
    the entry's done count incremented (seen by the header check from the next cycle).

    With the table in host memory a FIRST/ONLY job that passed the header check is decided only in
    a cycle where also ``mr_hit``: a miss holds it (and every frame behind it, of every
    QP) until its MR's read returns, which keeps the frames in order at no cost in
    state; a hit costs nothing. Its decision is then the one below, from the MR the
    cache holds (the table's entry ``rkey % mr.entries``, as without the cache).

    Decisions, as today's responder: context not ``valid``: ``unknown_qp``, silent.
    Context ``state`` ERR (set by the host in the context; the stage never writes it):
    ``qp_err``, silent, nothing of the context changes (IBTA Vol 1 table 91: in
    Error, queue processing is stopped).
    PSN behind ``expected_psn`` (within 2**23, modulo 2**24): ``duplicates``, ACK with
    its own PSN and the current MSN if it has AckReq. PSN ahead: without ``nak_sent`` a
    NAK PSN sequence error carrying ``expected_psn`` (``psn_nak``) and ``nak_sent`` set;
    with it, ``out_of_order``, silent. Expected PSN but a FIRST/ONLY whose MR entry is
    not valid, has another key or no remote write right, or whose VA is not 64-byte
    aligned, or whose ``[va, va + dma_len)`` is not inside the MR, or whose payload is
    longer than ``dma_len``, or a MIDDLE/LAST longer than ``resp_left``: NAK remote
    access error with its PSN (``access_nak``), ``expected_psn + 1``, ``nak_sent``
    cleared. Otherwise ``frames_ok``: write ``plen`` bytes at ``va`` (FIRST/ONLY) or
    ``resp_va``, ACK if AckReq with MSN + 1 on a LAST/ONLY; ``expected_psn + 1``,
    ``nak_sent`` cleared, ``msn`` + 1 on a LAST/ONLY, ``resp_va`` after the payload,
    ``resp_left`` = (``dma_len`` on FIRST/ONLY, else ``resp_left``) - ``plen``. Every
    ACK/NAK carries the context's MACs, IPs and ``dest_qp``, and the frame's QPN as its
    source QP.

    Selective repeat (``selective`` = 1; docs/recovery.md, "Selective repeat"): per entry
    a bitmap of the :data:`~spec.rdma_responder.SR_WINDOW` PSNs ``expected_psn + 1 ..
    expected_psn + SR_WINDOW`` placed out of order (a memory) and a valid bit (a
    register, cleared by reset; a clear bit reads as an empty bitmap). A PSN ahead
    within the window whose bit is set: ``duplicates``, silent. A PSN ahead within the
    window, an ONLY (a whole message: it carries its RETH and ends its message) that
    passes the access checks: ``sr_placed``, written at its VA as an accepted frame
    (``mark`` set), its bit set; without ``nak_sent`` it sends the NAK PSN sequence
    error and sets ``nak_sent`` as above. Every other PSN ahead as above. A frame at
    ``expected_psn`` accepted (``frames_ok``) consumes the ``k`` set bits that follow it
    without a gap: ``expected_psn + 1 + k``, ``msn`` + ``last`` + ``k`` (the MSN counts
    messages, IBTA Vol 1 9.7.5: each placed PSN is an ONLY, one whole message, so the
    ``k`` PSNs are ``k`` messages; a multi-frame message is never placed), the bitmap
    shifted by ``1 + k``, and, when ``k`` > 0, an ACK whatever its AckReq, of PSN
    ``expected_psn + k`` with the new MSN; when bits remain set after the shift or the
    entry's "discarded ahead" bit is set, and the frame or the run ended a message, the
    new expected PSN is known lost: instead a NAK PSN sequence error of it (with the
    new MSN; like every NAK it acknowledges the PSNs before it), ``nak_sent`` set, and
    "discarded ahead" cleared. "Discarded ahead" (per entry, a register cleared by
    reset) is set by every frame ahead not placed (``psn_nak``, ``out_of_order``),
    except while a NAK after consuming is pending (a second bit per entry, set by that
    NAK and cleared by the next frame accepted at ``expected_psn`` or an
    ``access_nak``): the requester goes back N on that NAK, which resends those frames
    too, so a mark would only NAK a PSN already on its way. Without the mark, once the
    gap is filled and no bit follows, nothing would name the next missing message but
    the requester's timer. One bit suffices because the requester goes back N on a NAK
    up to ``SR_WINDOW`` after a message it resent alone (docs/recovery.md): every frame
    from the NAKed PSN on is sent again, the discarded ones among them. A duplicate
    behind ``expected_psn`` with AckReq is ACKed cumulatively (PSN ``expected_psn -
    1``). An ``access_nak`` forgets the bitmap and both bits (the requester moves the
    QP to ERR). The decisions take the same cycle as above.

    RDMA READ (``reads``; a job with ``read``; IBTA Vol 1 9.7.4.1.3, 9.7.5.1.1): checked
    as a FIRST/ONLY against the MR's ``remote_read`` right, no payload. At
    ``expected_psn`` and allowed: ``frames_ok``, ``read_reqs``, a READ job to the ACK
    FIFO (``read``, ``va``, ``length`` the DMA length, the context's ``pmtu_log2``, the
    request's ``psn``, ``msn`` + 1), ``expected_psn`` + ``n`` (its ``n`` response packets,
    :func:`spec.rdma_responder.read_packets`), ``msn`` + 1, ``nak_sent`` cleared, no
    write; selective repeat also consumes the ``k`` set bits that follow its last PSN
    without a gap (``expected_psn + n + k``, ``msn`` + 1 + ``k``: ``k`` ONLYs, ``k``
    messages; the bitmap shifted by ``n + k``; no ACK of them and no NAK after
    consuming: the requester goes back N while a READ is in its window, and ACKs the
    resent ones cumulatively), so no placed WRITE is accepted, and written, again. An
    atomic at ``expected_psn`` consumes its set bits the same way (``n`` = 1). Not
    allowed: ``access_nak`` as a WRITE. Behind ``expected_psn`` (retried):
    ``duplicates``; read again if allowed (``read_reqs``, a READ job with its own PSN and
    the current ``msn``, the context unchanged: a READ has no side effect), else NAK
    remote access error with its PSN. Ahead: as any frame (never placed).

    Atomics (``reads``; a job with ``atomic``, ``cmp`` for COMPARE & SWAP; IBTA Vol 1
    9.4.5, 9.7.5.1.1): checked against the MR's ``remote_atomic`` right with the 8 bytes
    at ``va`` inside the MR (else ``access_nak``, NAK remote access error), then an
    8-byte aligned ``va`` (else ``access_nak`` with a NAK invalid request, as Linux rxe
    answers a misaligned atomic). Allowed at ``expected_psn``: ``frames_ok``,
    ``atomics``, an atomic job to the ACK FIFO (``atomic``, ``cmp``, ``va``, ``swap``
    and ``compare`` from the AtomicETH, big endian on the wire), ``expected_psn`` + 1,
    ``msn`` + 1, and the *fence*: no job is decided until the response sender has
    executed it (``save_valid``), so that nothing after it overtakes it and a repeat
    finds its result. Behind ``expected_psn`` (a repeat after a lost ATOMIC
    ACKNOWLEDGE): ``duplicates``; if its QP's saved results (the last
    :data:`~spec.rdma_responder.IRD` that QP executed, in row ``qpn %``
    :data:`~spec.rdma_responder.ATOMIC_QPS` of a memory, written from the ``save_*``
    ports in turn, each with its QPN bits above the row) hold its QPN and PSN, an atomic
    job with ``replay`` and the saved value of the newest that matches
    (``atomic_replays``): answered, never executed again; else dropped.
    """

    def __init__(self, entries, jobs, depth, mr=None, head_bytes=HEAD_BYTES, reads=False):
        check_int(self, "QP-context cache entries", entries, 16, 256)
        if entries & (entries - 1):
            reject(self, f"QP-context cache entries must be a power of two, not {entries!r}")
        check_int(self, "verify jobs (jobs)", jobs, *SIZE_LIMITS["jobs"])
        try:
            mr = check_mr_table(mr)
        except ValueError as error:
            reject(self, str(error))
        self.entries, self.jobs, self.depth, self.mr_entries = entries, jobs, depth, mr.entries
        self.reads, self.mr_in_host = bool(reads), mr.in_host
        group = group_layout(RESP_GROUP)
        ports = {
            "i": In(stream.Signature(verify_job_layout(head_bytes, self.reads))),
            "w": Out(stream.Signature(write_job_layout(depth, head_bytes))),
            "ack": Out(stream.Signature(ack_layout(self.reads))),
            "filled": Out(FillQuerySignature(entries)),
            "cache_log2": In(CACHE_LOG2_BITS, init=(entries - 1).bit_length()),
            "ctx": Out(CacheReadSignature(entries)),
            "group": Out(CacheGroupSignature(entries, group)),
            "mr_data": In(MR_LAYOUT_RA if self.reads else MR_LAYOUT),
            "done_addr": In(range(entries)), "done_data": Out(inflight_bits(jobs)),
            "selective": In(1), "held_addr": In(range(entries)), "held": Out(1),
        }
        if mr.in_host:
            ports.update({"mr_key": Out(32), "mr_look": Out(1), "mr_take": Out(1),
                          "mr_hit": In(1)})
        else:
            ports["mr_addr"] = Out(range(mr.entries))
        ports.update({name: Out(32) for name in VERIFY_COUNTERS})
        if self.reads:
            ports.update(read_reqs=Out(32), atomics=Out(32), atomic_replays=Out(32),
                         save_valid=In(1), save_qpn=In(QPN_BITS), save_psn=In(PSN_BITS),
                         save_orig=In(64))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        j = self.i.payload
        entry = j.entry[:(self.entries - 1).bit_length()]
        ctx, g, mr = self.ctx.data, self.group.data, self.mr_data
        m.d.comb += [self.filled.entry.eq(entry), self.ctx.addr.eq(entry),
                     self.group.addr.eq(entry)]
        if self.mr_in_host:
            need, mr_ok = Signal(), Signal()     # mr_ok: the job's MR is at hand
            m.d.comb += [need.eq(j.check & j.reth), self.mr_key.eq(j.rkey),
                         self.mr_look.eq(self.i.valid & need), mr_ok.eq(~need | self.mr_hit)]
        else:
            m.d.comb += self.mr_addr.eq(j.rkey[:len(self.mr_addr)])

        m.submodules.done = done = memory.Memory(
            shape=inflight_bits(self.jobs), depth=self.entries, init=[])
        own, other, wr = (done.read_port(domain="comb"), done.read_port(domain="comb"),
                          done.write_port())
        m.d.comb += [own.addr.eq(entry), wr.addr.eq(entry), wr.data.eq(own.data + 1),
                     other.addr.eq(self.done_addr), self.done_data.eq(other.data)]

        # Selective repeat: per entry a bitmap (a memory) and its valid bit (a register).
        m.submodules.sr_bits = sr_mem = memory.Memory(shape=SR_WINDOW, depth=self.entries,
                                                      init=[])
        sr_rd, sr_wr = sr_mem.read_port(domain="comb"), sr_mem.write_port()
        sr_valid = Signal(self.entries)
        bits = Signal(SR_WINDOW)
        # "Discarded ahead" per entry (a register): set when a frame ahead is discarded.
        dah = Signal(self.entries)
        dah_we, dah_new, dah_e = Signal(), Signal(), Signal()
        # "NAK after consuming pending" per entry (a register): discards do not set dah.
        nac = Signal(self.entries)
        nac_we, nac_new, nac_e = Signal(), Signal(), Signal()
        m.d.comb += nac_e.eq(nac.bit_select(entry, 1))
        m.d.comb += [sr_rd.addr.eq(entry), sr_wr.addr.eq(entry),
                     bits.eq(Mux(sr_valid.bit_select(entry, 1), sr_rd.data, 0)),
                     dah_e.eq(dah.bit_select(entry, 1)),
                     self.held.eq(sr_valid.bit_select(self.held_addr, 1)
                                  | dah.bit_select(self.held_addr, 1))]
        new_bits = Signal(SR_WINDOW)
        sr_we = Signal()
        ahead = Signal(PSN_BITS)                 # PSN - expected (a PSN ahead: 1 ..)
        m.d.comb += ahead.eq(j.psn - g.expected_psn)
        sbits = (SR_WINDOW - 1).bit_length()
        slot = Signal(PSN_BITS)                  # its bit (valid when in_window)
        m.d.comb += slot.eq(ahead - 1)
        in_window = Signal()
        m.d.comb += in_window.eq(slot < SR_WINDOW)
        bit_set = Signal()
        m.d.comb += bit_set.eq(in_window & bits.bit_select(slot[:sbits], 1))
        run = Signal(range(SR_WINDOW + 1))       # set bits after the expected PSN, no gap
        m.d.comb += run.eq(SR_WINDOW)
        for k in reversed(range(SR_WINDOW)):
            with m.If(~bits[k]):
                m.d.comb += run.eq(k)
        shifted = Signal(SR_WINDOW)
        m.d.comb += shifted.eq((bits >> run) >> 1)
        gap_nak = Signal()          # bits remain or a frame ahead was discarded, after a
        m.d.comb += gap_nak.eq(((shifted != 0) | dah_e) & (j.last | (run != 0)))  # message end

        behind = Signal()
        m.d.comb += behind.eq((j.psn - g.expected_psn)[23])
        end = Signal(66)
        m.d.comb += end.eq(j.va + j.dma_len)
        access_ok = Signal()
        right = Mux(j.read, mr.remote_read, mr.remote_write) if self.reads else mr.remote_write
        m.d.comb += access_ok.eq(Mux(
            j.reth,
            mr.valid & (mr.key == j.rkey) & right & (j.va >= mr.base)
            & (end <= mr.base + mr.length) & (j.va[:6] == 0) & (j.plen <= j.dma_len),
            j.plen <= g.resp_left))
        # An atomic: its MR (the remote-atomic right, its 8 bytes inside), then its
        # alignment (a misaligned one is NAKed invalid request).
        allowed = access_ok         # every check passed
        nak_access = Syndrome.NAK_REMOTE_ACCESS.value
        if self.reads:
            allowed, misaligned = Signal(), Signal()
            m.d.comb += allowed.eq(access_ok)
            nak_access = Mux(misaligned, Syndrome.NAK_INVALID_REQUEST.value,
                             Syndrome.NAK_REMOTE_ACCESS.value)
            atomic_ok = Signal()
            m.d.comb += [
                atomic_ok.eq(mr.valid & (mr.key == j.rkey) & mr.remote_atomic
                             & (j.va >= mr.base) & (j.va + 8 <= mr.base + mr.length)),
                misaligned.eq(j.atomic & atomic_ok & (j.va[:3] != 0)),
            ]
            with m.If(j.atomic):
                m.d.comb += [access_ok.eq(atomic_ok), allowed.eq(atomic_ok & ~misaligned)]
        base = Signal(64)
        m.d.comb += base.eq(Mux(j.reth, j.va, g.resp_va))

        # A frame ahead that selective repeat may place: a whole WRITE message (never a
        # READ or an atomic).
        placeable = self.selective & in_window & j.reth & j.last & access_ok
        if self.reads:
            placeable = placeable & ~j.read
        ack, w, new = self.ack.payload, self.w.payload, self.group.wdata
        ack_due = Signal()
        read_job = Signal()         # the ACK job is a READ to answer
        not_read = Signal(init=1)   # the job is not a READ request
        executed, replayed = Signal(), Signal()     # an atomic executed / replayed
        fence = Signal()            # an atomic decided and not executed yet
        saved_hit, saved_orig = Signal(), Signal(64)
        if self.reads:
            # Saved results: row qpn % ATOMIC_QPS (a memory), IRD slots of (valid, the
            # QPN bits above the row, PSN, original value); its next slot (a memory).
            qbits = (ATOMIC_QPS - 1).bit_length()
            tbits = QPN_BITS - qbits
            sw = 1 + tbits + PSN_BITS + 64
            m.submodules.saved = saved = memory.Memory(shape=IRD * sw, depth=ATOMIC_QPS,
                                                       init=[])
            s_rd, s_wr = saved.read_port(domain="comb"), saved.write_port(granularity=sw)
            m.submodules.saved_next = nxt = memory.Memory(shape=range(IRD),
                                                          depth=ATOMIC_QPS, init=[])
            n_rd, n_wr = nxt.read_port(domain="comb"), nxt.write_port()
            row = self.save_qpn[:qbits]
            m.d.comb += [
                s_rd.addr.eq(j.qpn[:qbits]), s_wr.addr.eq(row), n_rd.addr.eq(row),
                n_wr.addr.eq(row), n_wr.data.eq(n_rd.data + 1), n_wr.en.eq(self.save_valid),
                s_wr.data.eq(Cat(Const(1, 1), self.save_qpn[qbits:], self.save_psn,
                                 self.save_orig).replicate(IRD)),
                s_wr.en.eq(Mux(self.save_valid, Const(1, IRD) << n_rd.data, 0)),
            ]
            # The newest slot that matches: a QP may hold two results of one PSN (an
            # atomic 2**24 PSNs after another with at most IRD atomics between, or a QPN
            # used again), and a repeat can only be of the newer. Slot k's age is
            # (k - next) % IRD (next: the slot written next, the oldest), so the match
            # bits shifted right by ``next`` are in age order; the last match wins.
            n_job = nxt.read_port(domain="comb")
            m.d.comb += n_job.addr.eq(j.qpn[:qbits])
            match = Signal(IRD)
            for k in range(IRD):
                sl = s_rd.data[k * sw:(k + 1) * sw]
                m.d.comb += match[k].eq(sl[0] & (sl[1:1 + tbits] == j.qpn[qbits:])
                                        & (sl[1 + tbits:1 + tbits + PSN_BITS] == j.psn))
            by_age = (Cat(match, match) >> n_job.data)[:IRD]
            newest = Signal(range(IRD))
            for age in range(IRD):
                with m.If(by_age[age]):
                    m.d.comb += newest.eq(n_job.data + age)     # mod IRD (a power of 2)
            origs = Array(s_rd.data[(k + 1) * sw - 64:(k + 1) * sw] for k in range(IRD))
            m.d.comb += [saved_hit.eq(match.any()), saved_orig.eq(origs[newest])]
        if self.reads:
            m.d.comb += not_read.eq(~j.read)
        npk = Signal(33)            # PSNs (response packets) of a READ
        if self.reads:
            m.d.comb += [
                npk.eq(Mux(j.dma_len == 0, 1, ((j.dma_len - 1) >> ctx.pmtu_log2) + 1)),
                ack.read.eq(read_job),
            ]
            with m.If(read_job):
                m.d.comb += [ack.va.eq(j.va), ack.length.eq(j.dma_len),
                             ack.pmtu_log2.eq(ctx.pmtu_log2)]
        # A READ or atomic at the expected PSN consumes the placed PSNs after its last
        # (its response PSNs, or its one PSN) without a gap: ``run_op`` of them.
        run_op = Signal(range(SR_WINDOW + 1))
        if self.reads:
            first = Signal(33)               # the bit of the PSN after its last
            after = Signal(SR_WINDOW)
            m.d.comb += [first.eq(Mux(j.atomic, 0, npk - 1)),
                         after.eq(Mux(first >= SR_WINDOW, 0, bits >> first[:sbits + 1])),
                         run_op.eq(SR_WINDOW)]
            for k in reversed(range(SR_WINDOW)):
                with m.If(~after[k]):
                    m.d.comb += run_op.eq(k)
        verdict = Signal(len(VERIFY_COUNTERS))       # one-hot, in VERIFY_COUNTERS order
        m.d.comb += [
            ack.dmac.eq(ctx.dmac), ack.smac.eq(ctx.smac), ack.sip.eq(ctx.sip),
            ack.dip.eq(ctx.dip), ack.src_qp.eq(j.qpn), ack.dest_qp.eq(ctx.dest_qp),
            ack.msn.eq(g.msn), ack.psn.eq(j.psn), ack.syndrome.eq(Syndrome.ACK.value),
            new.eq(g), w.rest.eq(j.rest),
        ]
        with m.If(~j.check):
            pass
        with m.Elif(~ctx.valid):
            m.d.comb += verdict.eq(1 << 1)
        with m.Elif(ctx.state == QpState.ERR.value):
            m.d.comb += verdict.eq(1 << 6)
        with m.Elif(j.psn != g.expected_psn):
            with m.If(behind):
                m.d.comb += [verdict.eq(1 << 2), ack_due.eq(j.ack_req)]
                with m.If(self.selective):       # a cumulative ACK
                    m.d.comb += ack.psn.eq(g.expected_psn - 1)
                if self.reads:
                    with m.If(j.atomic):     # answered from its saved result, or dropped
                        m.d.comb += [ack_due.eq(saved_hit), ack.psn.eq(j.psn),
                                     ack.atomic.eq(1), ack.replay.eq(1),
                                     ack.swap.eq(saved_orig), replayed.eq(saved_hit)]
                    with m.If(j.read):               # answered again, or NAKed
                        m.d.comb += [ack_due.eq(1), ack.psn.eq(j.psn)]
                        with m.If(access_ok):
                            m.d.comb += [read_job.eq(1), ack.msn.eq(g.msn)]
                        with m.Else():
                            m.d.comb += ack.syndrome.eq(Syndrome.NAK_REMOTE_ACCESS.value)
            with m.Elif(self.selective & bit_set):
                m.d.comb += verdict.eq(1 << 2)
            with m.Elif(placeable):
                m.d.comb += [
                    verdict.eq(1 << 7), sr_we.eq(1),
                    new_bits.eq(bits | (Const(1, SR_WINDOW) << slot[:sbits])),
                    w.write.eq(1), w.reth.eq(1), w.addr.eq(j.va[6:]), w.plen.eq(j.plen),
                    w.mark.eq(1), w.qpn.eq(j.qpn), w.data.eq(j.data),
                ]
                with m.If(~g.nak_sent):
                    m.d.comb += [ack_due.eq(1), self.group.we.eq(1),
                                 ack.psn.eq(g.expected_psn),
                                 ack.syndrome.eq(Syndrome.NAK_PSN_SEQUENCE.value),
                                 new.nak_sent.eq(1)]
            with m.Elif(~g.nak_sent):
                m.d.comb += [verdict.eq(1 << 3), ack_due.eq(1), self.group.we.eq(1),
                             ack.psn.eq(g.expected_psn),
                             ack.syndrome.eq(Syndrome.NAK_PSN_SEQUENCE.value),
                             new.nak_sent.eq(1), dah_we.eq(self.selective & ~nac_e),
                             dah_new.eq(1)]
            with m.Else():
                m.d.comb += [verdict.eq(1 << 4), dah_we.eq(self.selective & ~nac_e),
                             dah_new.eq(1)]
        with m.Elif(~allowed):
            m.d.comb += [verdict.eq(1 << 5), ack_due.eq(1), self.group.we.eq(1),
                         ack.syndrome.eq(nak_access),
                         new.expected_psn.eq(g.expected_psn + 1), new.nak_sent.eq(0),
                         sr_we.eq(bits != 0), new_bits.eq(0), dah_we.eq(dah_e),
                         nac_we.eq(nac_e)]
        with m.Else():
            m.d.comb += [
                verdict.eq(1 << 0), self.group.we.eq(1),
                ack_due.eq(j.ack_req | (run != 0) | gap_nak),
                ack.msn.eq(g.msn + j.last + run),
                ack.psn.eq(Mux(gap_nak, j.psn + run + 1, j.psn + run)),
                ack.syndrome.eq(Mux(gap_nak, Syndrome.NAK_PSN_SEQUENCE.value,
                                    Syndrome.ACK.value)),
                new.expected_psn.eq(g.expected_psn + 1 + run), new.nak_sent.eq(gap_nak),
                new.msn.eq(g.msn + j.last + run), new.resp_va.eq(base + j.plen),
                sr_we.eq(bits != 0), new_bits.eq(shifted), dah_we.eq(dah_e & gap_nak),
                nac_we.eq(nac_e != gap_nak), nac_new.eq(gap_nak),
                new.resp_left.eq(Mux(j.reth, j.dma_len, g.resp_left) - j.plen),
                w.write.eq(1), w.reth.eq(j.reth), w.addr.eq(base[6:]), w.plen.eq(j.plen),
                w.mark.eq(j.last), w.qpn.eq(j.qpn), w.data.eq(j.data),
            ]
            if self.reads:
                with m.If(j.atomic):    # executed by the response sender, fenced
                    m.d.comb += [
                        ack_due.eq(1), ack.psn.eq(j.psn), ack.syndrome.eq(Syndrome.ACK.value),
                        ack.msn.eq(g.msn + 1), ack.atomic.eq(1), ack.cmp.eq(j.cmp),
                        ack.va.eq(j.va), ack.swap.eq(bswap(j.data[96:160], 8)),
                        ack.compare.eq(bswap(j.data[160:224], 8)), executed.eq(1),
                        new.expected_psn.eq(g.expected_psn + 1 + run_op), new.nak_sent.eq(0),
                        new.msn.eq(g.msn + 1 + run_op), new.resp_va.eq(g.resp_va),
                        new.resp_left.eq(g.resp_left), new_bits.eq((bits >> run_op) >> 1),
                        dah_we.eq(0), nac_we.eq(0),
                        w.write.eq(0), w.reth.eq(0), w.addr.eq(0), w.plen.eq(0),
                        w.mark.eq(0), w.qpn.eq(0), w.data.eq(0),
                    ]
                with m.If(j.read):      # its response packets' PSNs, no write
                    m.d.comb += [
                        read_job.eq(1), ack_due.eq(1), ack.psn.eq(j.psn),
                        ack.syndrome.eq(Syndrome.ACK.value), ack.msn.eq(g.msn + 1),
                        new.expected_psn.eq(g.expected_psn + npk + run_op), new.nak_sent.eq(0),
                        new.msn.eq(g.msn + 1 + run_op), new.resp_va.eq(g.resp_va),
                        new.resp_left.eq(g.resp_left),
                        new_bits.eq(Mux(npk >= SR_WINDOW, 0,
                                        (bits >> npk[:sbits + 1]) >> run_op)),
                        dah_we.eq(0), nac_we.eq(0),
                        w.write.eq(0), w.reth.eq(0), w.addr.eq(0), w.plen.eq(0),
                        w.mark.eq(0), w.qpn.eq(0), w.data.eq(0),
                    ]

        go = Signal()
        cond = (self.i.valid & self.w.ready & self.ack.ready
                & (~j.check | self.filled.ready))
        if self.reads:
            cond = cond & ~fence
        m.d.comb += go.eq(cond & mr_ok if self.mr_in_host else cond)
        with m.If(go):
            m.d.comb += [self.i.ready.eq(1), self.w.valid.eq(1), self.ack.valid.eq(ack_due),
                         wr.en.eq(j.check)]
            if self.mr_in_host:
                m.d.comb += self.mr_take.eq(need)
            with m.If(sr_we):
                m.d.comb += [sr_wr.en.eq(1), sr_wr.data.eq(new_bits)]
                m.d.sync += sr_valid.bit_select(entry, 1).eq(new_bits != 0)
            with m.If(dah_we & j.check):
                m.d.sync += dah.bit_select(entry, 1).eq(dah_new)
            with m.If(nac_we & j.check):
                m.d.sync += nac.bit_select(entry, 1).eq(nac_new)
            if self.reads:
                with m.If(read_job):
                    m.d.sync += self.read_reqs.eq(self.read_reqs + 1)
                with m.If(executed):
                    m.d.sync += [self.atomics.eq(self.atomics + 1), fence.eq(1)]
                with m.If(replayed):
                    m.d.sync += self.atomic_replays.eq(self.atomic_replays + 1)
            ports = ports_by_name(self)
            for k, name in enumerate(VERIFY_COUNTERS):
                counter = ports[name]
                with m.If(verdict[k]):
                    m.d.sync += counter.eq(counter + 1)
        with m.Else():
            m.d.comb += self.group.we.eq(0)
        if self.reads:
            with m.If(self.save_valid):
                m.d.sync += fence.eq(0)
        return m
