"""The RDMA co-simulation's intent check (tb.rdma.intent), without a simulator: RC orders
completions within a QP, not across QPs."""

import pytest

from analysis.scenarios.rdma import writes_scenario
from spec.formats.roce import CqeStatus
from tb.rdma.intent import cqes_per_qp, intended_statuses


def _cqe(m, status=CqeStatus.SUCCESS.value):
    return dict(qpn=m.qpn, sq_index=m.sq_index, status=status)


def test_batched_doorbells_complete_in_order_per_qp_only():
    """Doorbells of 4 WQEs over 3 QPs (posting round robin): a CQ that holds each QP's
    batch together (all of QP 0, then QP 1, then QP 2) keeps RC's order, though not
    the posting order; the check accepts it, and rejects a swap within a QP."""
    v = writes_scenario(12, [128], 3, ring_every=4)
    status = intended_statuses(v.messages)
    posted = [(m.qpn, m.sq_index) for m in v.messages]
    cqes = [_cqe(m) for m in sorted(v.messages, key=lambda m: (m.qpn, m.sq_index))]
    assert [(c["qpn"], c["sq_index"]) for c in cqes] != posted      # a posting-order
    got, want = cqes_per_qp(v.messages, status, cqes)               # check would fail
    assert got == want and sorted(want) == [0, 1, 2]
    swapped = list(cqes)
    swapped[0], swapped[1] = swapped[1], swapped[0]                  # QP 0's first two
    got, want = cqes_per_qp(v.messages, status, swapped)
    assert got != want


def test_failed_writes_complete_even_unsignalled():
    """One signalled WQE in 4: the unsignalled ones complete only if they fail (an
    error completion is always written); statuses may differ per WRITE."""
    v = writes_scenario(8, [64], 1, signal_every=4)
    names = ["SUCCESS"] * 8
    names[5] = "REM_ACCESS_ERR"
    names[6] = names[7] = "WR_FLUSH_ERR"
    status = intended_statuses(v.messages, cqe_status=names)
    _, want = cqes_per_qp(v.messages, status, [])
    assert want == {0: [(3, 0), (5, 10), (6, 5), (7, 5)]}
    with pytest.raises(ValueError, match="3 CQE statuses for 8 WRITEs"):
        intended_statuses(v.messages, cqe_status=names[:3])


def test_mr_lookup_check_is_a_direct_mapped_cache_over_the_wires_rkeys():
    """The MR cache's independent check: with the table in host memory behind 2 lines,
    FIRST/ONLY frames of rkeys 5, 3, 13, 7 (MRs 5, 3, 5, 7 of 8, all in line 1) are 4
    lookups and 4 misses, a MIDDLE frame none; counters that say otherwise are
    mismatches; with the table on chip nothing is checked. A top has the MR cache's
    counters only with the table in host memory, the READ counters only with RDMA READ."""
    from types import SimpleNamespace

    from pymodel.fabric.faulty_link import FaultSettings
    from spec.formats.roce import OpCode
    from spec.rdma_engine import RESPONDER_COUNTERS
    from spec.rdma_responder import MR_CACHE_COUNTERS, READ_COUNTERS, MrTableShape
    from tb.rdma.intent import mr_lookup_check, responder_counters
    from tb.scoreboard import Scoreboard

    def frame(op, rkey):
        return bytes([op.value]) + bytes(19) + rkey.to_bytes(4, "big")

    frames = [frame(OpCode.RC_RDMA_WRITE_ONLY, 5), frame(OpCode.RC_RDMA_WRITE_FIRST, 3),
              frame(OpCode.RC_RDMA_WRITE_MIDDLE, 3), frame(OpCode.RC_RDMA_WRITE_ONLY, 13),
              frame(OpCode.RC_RDMA_WRITE_ONLY, 7)]
    quiet = dict.fromkeys(("overflow", "fcs_bad", "truncated", "malformed", "icrc_bad"), 0)
    cfg = SimpleNamespace(mr_shape=MrTableShape(8, 2), faults_ab=FaultSettings())
    for lookups, misses, bad in ((4, 4, 0), (4, 3, 1), (5, 4, 1)):
        sb = Scoreboard()
        mr_lookup_check(sb, cfg, dict(quiet, mr_lookups=lookups, mr_misses=misses),
                        frames, 0)
        assert sb.checked == 2 and len(sb.mismatches) == bad, sb.mismatches
    sb = Scoreboard()
    mr_lookup_check(sb, SimpleNamespace(mr_shape=MrTableShape(), faults_ab=FaultSettings()),
                    dict(quiet, mr_lookups=9, mr_misses=9), frames, 0)
    assert sb.checked == 0
    assert responder_counters({}) == responder_counters("top") == RESPONDER_COUNTERS
    assert responder_counters({"mr_cache": 4}) == RESPONDER_COUNTERS + MR_CACHE_COUNTERS
    assert responder_counters({"read_words": 128}) == RESPONDER_COUNTERS + READ_COUNTERS
    with pytest.raises(ValueError, match="read_words"):
        responder_counters({"read_words": 128, "mr_cache": 4})
