"""Scenarios of the RDMA co-simulation, built with the verbs model (shared by the cocotb
module, the pytest tests and the headline run)."""

import random
import zlib
from collections import Counter

from analysis.load.traffic import qp_sequence
from pymodel.fabric.faulty_link import FaultPattern, FaultSettings
from pymodel.rdma.frames import Endpoint, write_frame
from pymodel.rdma.verbs import IP_A, IP_B, MAC_A, MAC_B, Verbs, cq_log2_for, inline_limit
from spec.formats.roce import PSN_BITS, CqeStatus, OpCode, QpState
from spec.load import check_count
from spec.rdma_engine import HOST_DEPTH, RUNG_KNOBS, SIM_TIMEOUT
from spec.rdma_stages import ACK_FRAMES_BITS, ACK_MSGS_BITS

__all__ = ["writes_scenario", "coalesced_ack_requests", "qp_order", "ACK_SPAN_BEATS",
           "qp_error_scenario", "bad_frames_scenario", "overflow_scenario", "fault_settings",
           "seed_dropping_only"]

_PSN_MASK = (1 << PSN_BITS) - 1
_ACK_MSGS_MASK, _ACK_FRAMES_MASK = (1 << ACK_MSGS_BITS) - 1, (1 << ACK_FRAMES_BITS) - 1


#: The most wire beats the host lets the engine send after a QP's oldest message that
#: has not asked for an ACK before a message of that QP asks for one (ACK coalescing's
#: guard against the transport timer, :func:`coalesced_ack_requests`): a quarter of the
#: transport timeout of simulated runs (:data:`spec.rdma_engine.SIM_TIMEOUT`). Each beat takes at
#: least a cycle on the link, and with the contexts cached the engine sends at most
#: about 2.3 cycles per beat (8-byte WRITEs: ii 4.66 cycles for 2 beats; 128 B: 5.57
#: for 4; 4,096 B: 96 for 66, pipelined, pcie), so 1,024 beats take at most about
#: 2,400 cycles, which with the window's head (the payload read, about 565 cycles over
#: PCIe, the WQE read before it, another 565) and the ACK's round trip stays below the
#: 4,096-cycle timer.
ACK_SPAN_BEATS = SIM_TIMEOUT // 4


def _message_beats(nbytes, pmtu_log2):
    """Wire beats of a WRITE of ``nbytes`` (its frames, headers, ICRC and FCS)."""
    mtu = 1 << pmtu_log2
    segs = [min(mtu, nbytes - k) for k in range(0, max(nbytes, 1), mtu)] or [0]
    # Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 (+ RETH 16 on the first) + payload padded
    # to 4 bytes + ICRC 4 + FCS 4, in 64-byte beats.
    return sum(-(-(58 + (16 if i == 0 else 0) + -(-n // 4) * 4 + 4) // 64)
               for i, n in enumerate(segs))


def qp_order(messages, qps, popularity="round_robin", seed=1):
    """The QP (0 .. ``qps`` - 1) of each of ``messages`` messages of
    :func:`writes_scenario`: ``round_robin`` ``j % qps``; otherwise the QP drawn by
    :func:`analysis.load.traffic.qp_sequence` with ``popularity`` and the scenario's
    ``seed``, the law and seed rule of the NIC's destinations (``zipf``: skew 0.99;
    :mod:`analysis.scenarios.nic`, scenario ``destinations``). ``ValueError`` names a
    ``popularity`` not in :data:`spec.load.POPULARITY`."""
    if popularity == "round_robin":
        return [j % qps for j in range(messages)]
    return qp_sequence(popularity, qps, messages, seed)


def _plan(qp, k, warmup):
    """The host's posting plan of :func:`writes_scenario`: per message ``j`` (QP
    ``qp[j]``), whether it is signalled (the QP's last message, or every
    ``signal_every``-th of the QP's) and whether the host announces its QP (rings or
    writes the WQE by MMIO) right after posting it; and the order in which the engine
    takes the messages (announcement order, a QP's announced messages in order)."""
    posted, pending, nth, later = {}, {}, {}, set()
    last = [False] * len(qp)
    for j in reversed(range(len(qp))):
        last[j] = qp[j] not in later
        later.add(qp[j])
    signalled, announce, order = [], [], []
    for j, q in enumerate(qp):
        alone = bool(warmup) and j == 0
        n = nth[q] = nth.get(q, -1) + 1
        signalled.append(alone or last[j] or n % k["signal_every"] == k["signal_every"] - 1)
        posted[q] = posted.get(q, 0) + 1
        pending.setdefault(q, []).append(j)
        now = alone or bool(k["bf"]) or posted[q] % k["ring_every"] == 0 or last[j]
        if alone:
            posted[q] = 0
        announce.append(now)
        if now:
            order += pending[q]
            pending[q] = []
    return signalled, announce, order


def writes_scenario(messages, sizes, qps, pmtu_log2=12, seed=1, depth=HOST_DEPTH,
                    mr_entries=16, spacing=0, warmup=0, cache_entries=16, qpc_words=None,
                    mrs=1, popularity="round_robin", **knobs):
    """``messages`` RDMA WRITEs over ``qps`` QPs, sizes cycling ``sizes``; message ``j``
    on QP ``qp_order(messages, qps, popularity, seed)[j]`` (:func:`qp_order`: round
    robin by default, ``zipf`` as the NIC's destinations). Each QP's send queue holds
    the most of the round robin's share (``messages / qps`` rounded up) and its own
    messages.

    ``knobs`` are :data:`spec.rdma_engine.RUNG_KNOBS` (the host's side of them: doorbell
    batching ``ring_every``, WQEs by MMIO ``bf``, ``inline`` payloads, one signalled WQE
    per ``signal_every``; the engine's side, ``serial`` and ACK coalescing, are run-time
    ports the caller sets). A QP's doorbell rings after every ``ring_every`` of its WQEs
    and after its last one; with ``bf`` each WQE is written by MMIO. ``spacing``: each
    MMIO write is released that many cycles after the previous one (0: all at once, the
    host as fast as the engine takes them). ``warmup`` (cycles, 0: none): the first
    message is posted alone, signalled, and the others from cycle ``warmup`` on, so that
    they find its QP's context cached at both ends. ``cache_entries``: the entries in
    use of the engines' context caches (default 16, the smallest the points use), which
    decides the WQEs that ask for an ACK under ACK coalescing
    (:func:`coalesced_ack_requests`). ``qpc_words``: host words of a QP context
    (:class:`~pymodel.rdma.verbs.Verbs`; None: the default). ``mrs``: MRs over the one
    destination buffer, at MR-table indices ``3 + 5 k`` (modulo ``mr_entries``; 5 is
    odd, so they are distinct and, in a direct-mapped MR cache smaller than the table,
    some share a line); message ``j`` uses MR ``j % mrs`` (1, the default: every message
    MR index 3). QP ``q`` is QPN ``q`` at node A and ``(7 q + 3) mod m`` at node B, ``m``
    the smaller of 4096 and the contexts the table holds (``7`` is odd and ``m`` a power
    of two, so the QPNs are distinct); ``qps`` above the table's contexts raises
    ``ValueError`` naming both (:meth:`Verbs.check_qps`). Returns the :class:`Verbs`.
    """
    if not isinstance(mrs, int) or isinstance(mrs, bool) or not 1 <= mrs <= mr_entries:
        raise ValueError(f"mrs must be an integer from 1 to mr_entries ({mr_entries}), "
                         f"not {mrs!r}")
    k = dict(RUNG_KNOBS, **knobs)
    unknown = set(knobs) - set(RUNG_KNOBS)
    if unknown:
        raise ValueError(f"unknown optimisation knob(s): {sorted(unknown)}")
    if k["inline"] and max(sizes) > inline_limit():
        raise ValueError(f"sizes: an inline WRITE carries at most {inline_limit()} bytes "
                         f"in its WQE, not {max(sizes)} (use a rung without inline data)")
    qp_of = qp_order(messages, qps, popularity, seed)
    rng = random.Random(seed)
    share, taken = -(-messages // qps), Counter(qp_of)
    sq_log2 = [max(0, (max(share, taken[q]) - 1).bit_length()) for q in range(qps)]
    stride = 2 if k["inline"] else 0
    v = Verbs(depth=depth, mr_entries=mr_entries, cq_log2=cq_log2_for(messages),
              qpc_words=qpc_words)
    v.check_qps(qps)
    slots = min(4096, v.max_qps)
    pairs = [v.create_qp(q, (q * 7 + 3) % slots, sq_log2=sq_log2[q], pmtu_log2=pmtu_log2,
                         psn_a=(q * 977) & _PSN_MASK, psn_b=(q * 977) & _PSN_MASK,
                         stride_log2=stride)
             for q in range(qps)]
    total = sum(sizes[j % len(sizes)] for j in range(messages))
    raddr, rkey = v.reg_mr(total + 64 * messages, index=3)
    rkeys = [rkey] + [v.reg_mr(total + 64 * messages, index=(3 + 5 * k) % mr_entries,
                               base=raddr)[1] for k in range(1, mrs)]
    cursor = raddr
    release = 0
    signalled, announce, _ = _plan(qp_of, k, warmup)
    ack_req = coalesced_ack_requests(messages, sizes, qps, pmtu_log2=pmtu_log2,
                                     warmup=warmup, cache_entries=cache_entries,
                                     popularity=popularity, seed=seed, **k)
    for j in range(messages):
        n = sizes[j % len(sizes)]
        qp = pairs[qp_of[j]]
        v.post_write(qp, rng.randbytes(n), cursor, rkeys[j % mrs], wr_id=0x1000_0000 + j,
                     signalled=signalled[j], inline=bool(k["inline"]), ack_req=ack_req[j])
        if announce[j]:
            if k["bf"]:
                v.blueflame(qp, release)
            else:
                v.ring(qp, release)
            release += spacing
            if warmup and j == 0:
                release = max(release, warmup)
        cursor += -(-n // 64) * 64
    return v


def coalesced_ack_requests(messages, sizes, qps, pmtu_log2=12, warmup=0, cache_entries=16,
                           popularity="round_robin", seed=1, **knobs):
    """Per message of :func:`writes_scenario` (same arguments): whether the host sets
    ``WQE_ACK_REQ`` on its WQE.

    Without ACK coalescing (``ack_every`` 0 or 1 and ``ack_frames`` 0) never: the engine
    asks on every message. With it, the engine counts per QP (the ``ack_msgs`` and
    ``ack_frames`` fields of the QP's context) and asks on the message that ends every
    ``ack_every`` messages (or ``ack_frames`` frames) of that QP since its last request,
    and on signalled ones, however the QPs interleave. A message that asks for no ACK
    stays in its QP's window, which keeps the QP's cache entry pinned and its transport
    timer running, until a later message of the QP asks. So the host asks too:

    - on each QP's last message (its tail is acknowledged at once and its entry freed);
    - when QPs share cache entries (``qps > cache_entries``; below that QP ``q`` and the
      responder's QP ``7q + 3`` have entries of their own at both ends), on every
      message: a pinned entry would hold up the other QPs that map to it;
    - on a message after which the engine would send more than :data:`ACK_SPAN_BEATS`
      wire beats (all QPs, in the order the engine takes the messages) between the QP's
      oldest message that has not asked and the QP's next message: the transport
      timer's guard.

    ``cache_entries`` outside 1..65536: ``ValueError`` naming it.
    """
    k = dict(RUNG_KNOBS, **knobs)
    check_count("cache_entries", cache_entries, 1, 1 << 16)
    if not (k["ack_every"] > 1 or k["ack_frames"] > 0):
        return [False] * messages
    if qps > cache_entries:
        return [True] * messages
    qp = qp_order(messages, qps, popularity, seed)
    signalled, _, order = _plan(qp, k, warmup)
    pmtu = 1 << pmtu_log2
    beats = [_message_beats(sizes[j % len(sizes)], pmtu_log2) for j in range(messages)]
    frames = [max(1, -(-sizes[j % len(sizes)] // pmtu)) for j in range(messages)]
    # Wire beats sent before each message, in the engine's order, and each message's
    # next one on its QP.
    before, nxt, seen, total = {}, {}, {}, 0
    for j in order:
        before[j] = total
        total += beats[j]
        q = qp[j]
        if q in seen:
            nxt[seen[q]] = j
        seen[q] = j
    out = [False] * messages
    start, msgs, fsum = {}, [0] * qps, [0] * qps
    for j in order:
        q = qp[j]
        start.setdefault(q, before[j])
        m, f = msgs[q] + 1, fsum[q] + frames[j]
        engine = (signalled[j] or k["ack_every"] <= 1 or m >= k["ack_every"]
                  or (k["ack_frames"] != 0 and f >= k["ack_frames"]))
        n = nxt.get(j)
        out[j] = n is None or before[n] + beats[n] - start[q] > ACK_SPAN_BEATS
        if engine or out[j]:
            del start[q]
            msgs[q], fsum[q] = 0, 0
        else:
            msgs[q], fsum[q] = m & _ACK_MSGS_MASK, f & _ACK_FRAMES_MASK
    return out


def qp_error_scenario(seed=4, size=200, later=3000, reset=3500, resume=4000,
                      depth=HOST_DEPTH, mr_entries=16, qpc_words=None):
    """Two QPs; the second WRITE of QP 0 carries a wrong rkey. Returns the
    :class:`Verbs` with the intent of the IBTA rules (Vol 1 table 91, Any State to Error) in
    ``v.expect_status`` (posting index -> ibv_wc_status) and ``v.no_frames`` (posting
    indices that must not reach the wire):

    - from cycle 0, each WRITE rung on its own: QP 0's first (SUCCESS) and its bad one
      (REM_ACCESS_ERR: the responder NAKs it, QP 0 enters ERR), QP 1's first two;
    - from cycle ``later`` (long after the error's CQE over PCIe), one doorbell for two
      more WRITEs of QP 0: flushed (WR_FLUSH_ERR), no frame; and one of QP 1;
    - at cycle ``reset`` the host moves QP 0 back to RTS (the modify command);
    - from cycle ``resume``, two more WRITEs of QP 0 (SUCCESS: the QP kept its PSN,
      which the responder expects, the NAKed one having consumed its PSN) and one of
      QP 1.

    Every WRITE is signalled and targets its own bytes.
    """
    rng = random.Random(seed)
    v = Verbs(depth=depth, mr_entries=mr_entries, qpc_words=qpc_words)
    qp0 = v.create_qp(0, 3, sq_log2=3, psn_a=500, psn_b=500)
    qp1 = v.create_qp(1, 4, sq_log2=3, psn_a=7000, psn_b=7000)
    raddr, rkey = v.reg_mr(16 * size + 64 * 16, index=3)
    v.expect_status, v.no_frames = {}, set()
    cursor = raddr

    def post(qp, status=CqeStatus.SUCCESS, key=rkey, sent=True):
        nonlocal cursor
        v.expect_status[len(v.messages)] = status.value
        if not sent:
            v.no_frames.add(len(v.messages))
        v.post_write(qp, rng.randbytes(size), cursor, key, wr_id=0x2000 + len(v.messages))
        cursor += -(-size // 64) * 64

    post(qp0)
    v.ring(qp0)
    post(qp1)
    v.ring(qp1)
    post(qp0, CqeStatus.REM_ACCESS_ERR, key=rkey ^ 0x100)
    v.ring(qp0)
    post(qp1)
    v.ring(qp1)
    post(qp0, CqeStatus.WR_FLUSH_ERR, sent=False)
    post(qp0, CqeStatus.WR_FLUSH_ERR, sent=False)
    v.ring(qp0, later)
    post(qp1)
    v.ring(qp1, later)
    v.modify_qp_rts(qp0, reset)
    post(qp0)
    post(qp0)
    v.ring(qp0, resume)
    post(qp1)
    v.ring(qp1, resume)
    return v


def bad_frames_scenario(seed=2, depth=HOST_DEPTH, mr_entries=16, qpc_words=None):
    """Good and bad frames played straight onto the A->B link: returns ``(verbs, frames,
    reasons)``, the expected responder counter per frame."""
    rng = random.Random(seed)
    v = Verbs(depth=depth, mr_entries=mr_entries, qpc_words=qpc_words)
    v.create_qp(1, 5, psn_a=100, psn_b=100)
    v.create_qp(2, 6, psn_a=101, psn_b=101, state_b=QpState.ERR)   # node B's QP 6 in ERR
    raddr, rkey = v.reg_mr(4096, index=2)
    ro_addr, ro_key = v.reg_mr(256, index=4, remote_write=False)
    a, b = Endpoint(MAC_A, IP_A), Endpoint(MAC_B, IP_B)
    only = OpCode.RC_RDMA_WRITE_ONLY

    def w(psn, payload, va=raddr, key=rkey, dma=None, qpn=5):
        return write_frame(only, a, b, 1, qpn, psn, True, payload, va=va, rkey=key,
                           dma_length=len(payload) if dma is None else dma)

    frames, reasons = [], []

    def add(frame, reason):
        frames.append(frame)
        reasons.append(reason)

    add(w(100, rng.randbytes(100)), "frames_ok")
    bad = bytearray(w(101, rng.randbytes(64), va=raddr + 128))
    bad[-6] ^= 0x40                                   # ICRC, FCS recomputed below
    add(_refcs(bad), "icrc_bad")
    bad = bytearray(w(101, rng.randbytes(64), va=raddr + 128))
    bad[-1] ^= 1
    add(bytes(bad), "fcs_bad")
    add(w(101, rng.randbytes(64), va=raddr + 128, qpn=9), "unknown_qp")
    add(w(101, rng.randbytes(64), va=raddr + 128, qpn=6), "qp_err")  # QP in ERR: silent
    add(w(105, rng.randbytes(64), va=raddr + 128), "psn_nak")        # ahead: out of order
    add(w(99, rng.randbytes(64), va=raddr + 128), "duplicates")      # behind: ACKed again
    # A remote access error consumes the PSN (no QP error state): the next one follows.
    add(w(101, rng.randbytes(64), va=raddr + 128, key=rkey ^ 0x100), "access_nak")
    add(w(102, rng.randbytes(64), va=raddr + 4096 - 32), "access_nak")   # out of bounds
    add(w(103, rng.randbytes(64), va=ro_addr, key=ro_key), "access_nak")  # no right
    full = w(104, rng.randbytes(200), va=raddr + 256)
    add(_refcs(full[:120]), "truncated")
    add(w(104, rng.randbytes(129), va=raddr + 512), "frames_ok")
    return v, frames, reasons


def overflow_scenario(seed=3, small=8, large=48, qps=2, tail=4, depth=HOST_DEPTH,
                      mr_entries=16, qpc_words=None):
    """Frames played back to back onto the A->B link, faster than the responder takes
    them: ``(verbs, frames, None)``.

    First ``small`` 64-byte WRITE ONLYs on one QP, whose context miss (a host read,
    hundreds of cycles over PCIe) holds up the responder's verify stage; then ``large``
    1024-byte WRITE ONLYs (18 beats, 16 of them into the payload FIFO) round robin over
    ``qps`` other QPs, which fill the payload FIFO (``rx_beats``) while the miss lasts,
    so that later ones are dropped as ``overflow``; then ``tail`` small ones on the
    first QP, ahead of its expected PSN if some of its frames were dropped (one NAK,
    then silence). Every frame has its own target bytes, so a dropped frame leaves them
    zero.
    """
    rng = random.Random(seed)
    v = Verbs(depth=depth, mr_entries=mr_entries, qpc_words=qpc_words)
    a, b = Endpoint(MAC_A, IP_A), Endpoint(MAC_B, IP_B)
    only = OpCode.RC_RDMA_WRITE_ONLY
    v.create_qp(1, 5, psn_a=100, psn_b=100)
    for q in range(qps):
        v.create_qp(2 + q, 6 + q, psn_a=q * 1000, psn_b=q * 1000)
    raddr, rkey = v.reg_mr(64 * (small + tail) + 1024 * large, index=2)
    frames = []

    def small_frame(k):
        return write_frame(only, a, b, 1, 5, 100 + k, True, rng.randbytes(64),
                           va=raddr + 64 * k, rkey=rkey, dma_length=64)

    frames += [small_frame(k) for k in range(small)]
    for k in range(large):
        q = k % qps
        frames.append(write_frame(only, a, b, 2 + q, 6 + q, q * 1000 + k // qps, True,
                                  rng.randbytes(1024),
                                  va=raddr + 64 * (small + tail) + 1024 * k, rkey=rkey,
                                  dma_length=1024))
    frames += [small_frame(small + k) for k in range(tail)]
    return v, frames, None


def _refcs(frame_with_fcs):
    body = bytes(frame_with_fcs[:-4])
    return body + zlib.crc32(body).to_bytes(4, "little")


def fault_settings(params):
    """A :class:`FaultSettings` from a dict of its fields (None or empty: no faults)."""
    return FaultSettings(**(params or {}))


def seed_dropping_only(frame, rate=3277, clean_after=8, start=1):
    """The first link seed (from ``start``) whose pattern, at drop ``rate``, drops frame
    number ``frame`` and no other among frames ``0 .. frame + clean_after``: used to lose
    exactly the last frame of a scenario, so that only the transport timer recovers."""
    for seed in range(start, 1 << 16):
        pattern = FaultPattern(FaultSettings(seed=seed, drop_rate=rate))
        hits = [pattern.next()[0]["drop"] for _ in range(frame + clean_after + 1)]
        if hits[frame] and sum(hits) == 1:
            return seed
    raise ValueError(f"no seed drops only frame {frame} at rate {rate}")
