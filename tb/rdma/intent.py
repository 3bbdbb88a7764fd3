"""What a run of the RDMA top must complete, from the posted work requests alone.

Independent of the golden model: the host's intent (each WRITE's status, from the
scenario or the IBTA rules it states) and the ordering rule of the reliable-connected
transport, which orders completions within a QP and not across QPs (rdma-core,
ibv_poll_cq(3): a work completion says that its WR and every earlier unsignalled WR
of its work queue are done; error completions are written whatever the signalled
flag). With doorbells batched (``ring_every`` > 1) over several QPs the CQ order
differs from the posting order, and only the per-QP order is a rule.
"""

from spec.formats.roce import CqeStatus, OpCode
from spec.rdma_engine import RESPONDER_COUNTERS, TOP_DEFAULTS
from spec.rdma_responder import MrTableShape, build_counters

__all__ = ["intended_statuses", "cqes_per_qp", "responder_counters",
           "mr_lookup_check"]


def intended_statuses(messages, expect_status=None, cqe_status="SUCCESS"):
    """``{posting index: ibv_wc_status value}``: ``expect_status`` (the scenario's) if
    given, else ``cqe_status`` (a status name for every WRITE, or a list of names in
    posting order)."""
    if expect_status is not None:
        return dict(expect_status)
    names = cqe_status
    if isinstance(names, str):
        names = [names] * len(messages)
    if len(names) != len(messages):
        raise ValueError(f"{len(names)} CQE statuses for {len(messages)} WRITEs")
    return {k: CqeStatus[name].value for k, name in enumerate(names)}


def cqes_per_qp(messages, status_of, cqes):
    """``(got, want)``: per QP, the ``(sq_index, status)`` of each CQE in CQ order, and
    of each WRITE that must complete (signalled, or failed: error completions are
    written whatever the signalled flag) in posting order. Equal when every QP
    completed its WRITEs in order with the intended statuses."""
    got, want = {}, {}
    for c in cqes:
        got.setdefault(c["qpn"], []).append((c["sq_index"], c["status"]))
    for k, m in enumerate(messages):
        if m.signalled or status_of[k] != CqeStatus.SUCCESS.value:
            want.setdefault(m.qpn, []).append((m.sq_index, status_of[k]))
    return got, want



def responder_counters(top):
    """The counter names a top of parameters ``top`` has in its ``resp`` counters:
    :data:`spec.rdma_engine.RESPONDER_COUNTERS` and those its MR table and READ data FIFO
    add (:func:`spec.rdma_responder.build_counters`, on the top's parameters with the
    defaults where ``top`` leaves them); the plain responder's for a top that is not a
    mapping of parameters. ``ValueError`` naming a bad parameter."""
    if not isinstance(top, dict):
        return RESPONDER_COUNTERS
    p = {**TOP_DEFAULTS, **top}
    extra = build_counters(MrTableShape.of(p), p["read_words"])
    return RESPONDER_COUNTERS + sum(extra.values(), ())


def mr_lookup_check(sb, cfg, resp, frames, bth_at):
    """With the responders' MR table in host memory (``cfg.mr_shape``, a
    :class:`spec.rdma_responder.MrTableShape`), check the responder's counters ``resp``
    against a direct-mapped cache of the shape's ``cache`` lines (MR ``x = rkey %
    entries`` in line ``x % cache``) run over the rkeys of the FIRST/ONLY frames in
    ``frames`` (bytes, the BTH at byte ``bth_at``, the RETH's rkey 20 bytes further), in
    order: independent of the model, for runs where every frame is verified once in
    arrival order (skipped when the responder dropped a frame before its lookup, e.g.
    for ``overflow``, or the A->B link has faults: the wire, recorded at the link's
    input, then differs from what was verified)."""
    unseen = ("overflow", "fcs_bad", "truncated", "malformed", "icrc_bad")
    mr = cfg.mr_shape
    if (not mr.in_host or any(resp[r] for r in unseen)
            or cfg.faults_ab != type(cfg.faults_ab)()):
        return
    held, lookups, misses = {}, 0, 0
    for frame in frames:
        if frame[bth_at] in (OpCode.RC_RDMA_WRITE_FIRST.value,
                             OpCode.RC_RDMA_WRITE_ONLY.value):
            x = int.from_bytes(frame[bth_at + 20:bth_at + 24], "big") % mr.entries
            lookups += 1
            if held.get(x % mr.cache) != x:
                held[x % mr.cache] = x
                misses += 1
    sb.equal("MR lookups (FIRST/ONLY frames on the wire)", resp["mr_lookups"], lookups)
    sb.equal("MR misses (a direct-mapped cache over the wire's rkeys)", resp["mr_misses"],
             misses)
