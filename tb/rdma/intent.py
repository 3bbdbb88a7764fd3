"""What a run of the RDMA top must complete, from the posted work requests alone.

Independent of the golden model: the host's intent (each WRITE's status, from the
scenario or the IBTA rules it states) and the ordering rule of the reliable-connected
transport, which orders completions within a QP and not across QPs (rdma-core,
ibv_poll_cq(3): a work completion says that its WR and every earlier unsignalled WR
of its work queue are done; error completions are written whatever the signalled
flag). With doorbells batched (``ring_every`` > 1) over several QPs the CQ order
differs from the posting order, and only the per-QP order is a rule.
"""

from spec.formats.roce import CqeStatus

__all__ = ["intended_statuses", "cqes_per_qp"]


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
