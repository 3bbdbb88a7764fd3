"""The completion unit's ERR mark with a set-associative cache (``ways`` > 1).

A QP that entered ERR is remembered at its cache entry so that the records it sent
before the sequencer learned of the ERR complete with WR_FLUSH_ERR. With more than one
way a QP moves between the entries of its set: here QP ``A`` enters ERR in way 0 of its
set, another QP ``C`` of the set takes that entry, ``A`` comes back in way 1, is modified
to RTS there and sends, then comes back in way 0 and sends again. By the unit's contract
(a modify command returns the QP to RTS: ``spec.rdma_stages``) only ``A``'s records
sent before its ERR complete in error; ``C``'s and ``A``'s after the modify
complete with SUCCESS when ACKed. The RTL and its twin are compared cycle by cycle too.
"""

import pytest

from pymodel.fields import unpack
from pymodel.rdma.req.completion import CompletionUnitModel
from rtl.rdma.req.completion import CompletionUnit
from spec.formats.roce import CqeStatus, Syndrome
from spec.rdma_engine import COMPLETION_COUNTERS, ContextCacheShape
from spec.rdma_stages import cqe_req_layout
from tb.stage_harness import compare_stage

ENTRIES, LOG2, WINDOWS = 16, 4, 64
# With 2 (4) ways, sets of 2 (4) adjacent entries, QP q in set q % 8 (q % 4): A and C
# share set 3; B (set 0) only sends null records that space the others out.
A, C, B = 0x1003, 0x100B, 0x1000
SPACERS = 30                     # null records between the steps of the scenario
TIMEOUT = 1 << 30                # no timer expires in the run


def _rec(qpn, entry, psn, wr_id, kind="msg"):
    return dict(entry=entry, qpn=qpn, first_psn=psn, last_psn=psn, wr_id=wr_id,
                sq_index=wr_id & 0xFFFF, msg_length=64, signalled=1, resend=0,
                last_of_item=1, null=int(kind != "msg"), flush=int(kind == "flush"),
                modify=int(kind == "modify"))


def _spacers():
    return [_rec(B, 0, 0, 0, "null") for _ in range(SPACERS)]


def _scenario(way0, way1):
    """The records, the events, and the wr_ids of the records named in the checks."""
    ids = dict(a_err=0xA1, a_inflight=0xA2, c_way0=0xC1, a_flushed=0xA3, a_way1=0xA4,
               a_way0=0xA5)
    recs = ([_rec(A, way0, 100, ids["a_err"]), _rec(A, way0, 101, ids["a_inflight"])]
            + _spacers()
            + [_rec(C, way0, 500, ids["c_way0"]),                  # C took A's entry
               _rec(A, way1, 0, ids["a_flushed"], "flush"),        # A, still ERR, way 1
               _rec(A, way1, 0, 0, "modify")]                      # A to RTS in way 1
            + _spacers()
            + [_rec(A, way1, 102, ids["a_way1"]),
               _rec(A, way0, 103, ids["a_way0"])]                  # A back in way 0
            + _spacers())
    # Events are served only in cycles without a record to append; unrelated ACKs
    # (dropped) let A's first records in before the NAK that fails its first message,
    # and let the records go by before the ACKs of C's and A's last messages.
    unrelated = [dict(qpn=B + 16 * k, psn=k, syndrome=Syndrome.ACK.value, msn=0)
                 for k in range(1, 4 * len(recs))]
    evs = (unrelated[:8]
           + [dict(qpn=A, psn=100, syndrome=Syndrome.NAK_REMOTE_ACCESS.value, msn=0)]
           + unrelated[8:]
           + [dict(qpn=C, psn=500, syndrome=Syndrome.ACK.value, msn=0),
              dict(qpn=A, psn=103, syndrome=Syndrome.ACK.value, msn=0)])
    return recs, evs, ids


def _ways(ways):
    """The first and the last entry of A's set."""
    first = A % (ENTRIES // ways) * ways
    return first, first + ways - 1


@pytest.mark.parametrize("ways", [2, 4])
def test_err_mark_follows_the_qp_across_ways(ways):
    way0, way1 = _ways(ways)
    shape = ContextCacheShape(ENTRIES, ways)
    recs, evs, ids = _scenario(way0, way1)
    assert C % (ENTRIES // ways) == A % (ENTRIES // ways) != B % (ENTRIES // ways)

    def _entry_of(qpn):
        """The probes' entry: A's at its ERR (way 0), C's in way 0, B's."""
        return {A: way0, C: way0}.get(qpn, qpn % ENTRIES)
    box = {}

    def side_in(c, peek):
        t = box["t"]
        return {"issued": t.appended.value, "timeout": TIMEOUT, "cache_log2": LOG2,
                "resent": None, "query.entry": 0, "query.qpn": B, "hold_qpn": B,
                "query.victim_valid": 0, "query.victim_qpn": 0, "need.ready": 1,
                **{f"probe[{k}].present": 1 for k in range(3)},
                **{f"probe[{k}].entry": probe_entry(k) for k in range(5)}}

    def probe_entry(k):
        return lambda peek: _entry_of(int(peek(f"probe[{k}].qpn")))

    class Twin:
        def __init__(self, t):
            self.t = t

        def step(self, c, side):
            t = self.t
            counts = dict(t.count)
            t.step(c, side)
            return dict(counts, hold=int(t.hold(side["hold_qpn"])))

        def commit(self):
            self.t.commit()

        def busy(self):
            """A rewind, walk or LOOK under way, or a window open."""
            return self.t.busy() or self.t.win_total.value != 0

    def make(fifos):
        box["t"] = t = CompletionUnitModel(shape, 16, 2, fifos["rec"], fifos["ev"],
                                           fifos["cqe"], fifos["resend"], 1 << LOG2,
                                           WINDOWS, entry_of=_entry_of)
        return Twin(t)

    out = compare_stage(
        CompletionUnit(shape, 16, 2, WINDOWS), make,
        inputs={"rec": 4, "ev": 4}, outputs={"cqe": 4, "resend": 4},
        stimulus={"rec": recs, "ev": evs}, cycles=2000, seed=5,
        push_rate={"rec": 0.6, "ev": 1.0}, pop_rate=1.0, side_in=side_in,
        side_out=("hold",) + COMPLETION_COUNTERS,
        # No timer expires (TIMEOUT); the longest wait is a scan of every window slot,
        # plus 64.
        quiet=WINDOWS + 64)
    t = box["t"]
    taken_rec, taken_ev = out["taken"]["rec"], out["taken"]["ev"]
    assert len(taken_rec) == len(recs) and len(taken_ev) == len(evs)
    # The scenario happened in this order: A's ERR before its modify was taken, the
    # ACKs after the records they acknowledge.
    err_at = next(c for c, what in t.trace if what == f"qp {A} enters ERR")
    modify_at = taken_rec[next(i for i, r in enumerate(recs) if r["modify"])]
    assert err_at < modify_at
    last_a = next(i for i, r in enumerate(recs) if r["wr_id"] == ids["a_way0"])
    assert taken_rec[last_a] < taken_ev[-1]
    assert taken_rec[recs.index(next(r for r in recs if r["qpn"] == C))] < taken_ev[-2]
    # The rule: A's records before its ERR fail, everything after the modify succeeds.
    got = {}
    for _, bits in out["cqe"]:
        v = unpack(cqe_req_layout(), bits)
        got[v["wr_id"]] = v["status"]
    assert got == {ids["a_err"]: CqeStatus.REM_ACCESS_ERR.value,
                   ids["a_inflight"]: CqeStatus.WR_FLUSH_ERR.value,
                   ids["a_flushed"]: CqeStatus.WR_FLUSH_ERR.value,
                   ids["c_way0"]: CqeStatus.SUCCESS.value,
                   ids["a_way1"]: CqeStatus.SUCCESS.value,
                   ids["a_way0"]: CqeStatus.SUCCESS.value}
    assert t.win_total.value == 0 and t.count["qp_errors"] == 1


def test_ways_checked():
    """The ways are checked where the cache's shape is built; the unit and its twin take
    only a shape."""
    with pytest.raises(ValueError, match="cache_ways"):
        ContextCacheShape(ENTRIES, 3)
    with pytest.raises(ValueError, match="cache_ways"):
        ContextCacheShape(ENTRIES, 32)
    with pytest.raises(ValueError, match="ContextCacheShape"):
        CompletionUnit(ENTRIES, 16, 2, WINDOWS)
    with pytest.raises(ValueError, match="ContextCacheShape"):
        CompletionUnitModel(ENTRIES, 16, 2, None, None, None, None)
