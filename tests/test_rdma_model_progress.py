"""The RDMA system model ends at every link latency the top accepts, and a run that can
no longer progress stops in the cycle that is known, naming what holds the work."""

import dataclasses

import pytest

from analysis.rdma.point import build, run_model
from pymodel.fabric.faulty_link import FaultSettings
from pymodel.rdma.req.completion import CompletionUnitModel
from pymodel.rdma.req.doorbell_intake import DoorbellIntakeModel
from pymodel.rdma.system import NoProgress, _Beats, stuck_patience
from spec.host import PROFILES

#: A cycle limit far above any run here (a clean one-WRITE run ends within a few
#: thousand cycles): reaching it would be the old failure, not the detector.
LIMIT = 1 << 18


def _one_write(link_latency, **kw):
    cfg, v = build(64, 1, link_latency=link_latency, warmup=False)
    return run_model(cfg, v, limit=LIMIT, **kw)


@pytest.mark.parametrize("skip", [True, False], ids=["skip", "every_cycle"])
def test_one_write_ends_at_link_latency_1(skip):
    """One 64-byte WRITE on one QP: the WRITE crosses the A->B link once and its ACK the
    B->A link once, and nothing else on the way depends on the latency (one message, no
    contention), so each cycle of link latency less brings the completion two cycles
    earlier: latency 1 ends 2 cycles before latency 2, which ends 2 before latency 3."""
    runs = {lat: _one_write(lat, skip=skip) for lat in (1, 2, 3)}
    done = {lat: run["completed"] for lat, run in runs.items()}
    assert [len(d) for d in done.values()] == [1, 1, 1]
    assert done[2][0][0] - done[1][0][0] == 2
    assert done[3][0][0] - done[2][0][0] == 2
    assert len(runs[1]["wire_ba"]) == 1 and len(runs[1]["wire_ba"][0][0]) == 2


def test_whole_frame_receiver_keeps_only_the_last_beat():
    """A frame handed over after its first beats' arrival cycles have run (an ACK on a
    one-cycle link) is delivered in the cycle of its last beat, and nothing stays
    queued for the cycles already run."""
    q = _Beats(whole=True)
    q.pop(10)                                   # the receiver has run cycle 10
    q.add([10, 11], b"x" * 100)
    assert q.next() == 11
    assert q.pop(11) == (True, b"x" * 100)
    assert not q.pending()


def test_beat_for_a_cycle_already_run_is_refused():
    q = _Beats()
    q.pop(10)
    with pytest.raises(AssertionError, match="already run"):
        q.add([10, 11], b"x" * 100)


def test_timer_never_due_stops_at_once(monkeypatch):
    """Deliberately stuck: every ACK is lost and the transport timer never comes due (a
    test hook), so the WRITE's record stays outstanding with nothing left to happen.
    The model stops in the first cycle that is known, naming the record, long before
    any limit: by then only the WRITE and its lost ACK have happened, well inside the
    clean run's length."""
    clean = _one_write(6)
    monkeypatch.setattr(CompletionUnitModel, "next_timer", lambda self, c: None)
    cfg, v = build(64, 1, warmup=False)
    cfg = dataclasses.replace(cfg, faults_ba=FaultSettings(drop_rate=65535))
    with pytest.raises(NoProgress) as err:
        run_model(cfg, v, limit=LIMIT)
    assert err.value.cycle <= clean["cycles"]
    assert "outstanding record" in str(err.value)


def test_mmio_never_taken_stops_after_patience(monkeypatch):
    """Deliberately stuck: the requester's doorbell intake never takes an MMIO word (a
    test hook), so the doorbell waits in host interface A, which presents it every
    cycle. The model stops once :func:`stuck_patience` inactive cycles have passed,
    naming the waiting words."""
    monkeypatch.setattr(DoorbellIntakeModel, "would_take", lambda self, word: False)
    monkeypatch.setattr(DoorbellIntakeModel, "step",
                        lambda self, c, side: {"mmio.ready": 0} if side.get("mmio") else {})
    cfg, v = build(64, 1, warmup=False)
    _, release = v.mmio_items()
    with pytest.raises(NoProgress) as err:
        run_model(cfg, v, limit=LIMIT)
    assert err.value.cycle <= release[0] + stuck_patience(PROFILES["pcie"]) + 10
    assert "host interface A presents an MMIO word" in str(err.value)
