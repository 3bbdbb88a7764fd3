"""tb/nic/headline.run_point checks its point as spec.design_point.NicPoint too (each
field by its own rule, after the top's own checks), before anything is built."""

import pytest

import tb.nic.headline as headline
from spec.design_point import NicPoint


def test_run_point_builds_the_nic_point(monkeypatch):
    seen = []

    def record(**fields):
        seen.append(fields)
        return NicPoint(**fields)
    monkeypatch.setattr(headline, "NicPoint", record)
    kw = dict(sim="icarus", framing="l2", msg_bytes=128, messages=8, check_only=True)
    assert headline.run_point(peers=3, completion="e2e", top={"link_latency": 5}, **kw) is None
    assert seen == [dict(framing="l2", peers=3, attachment="integrated", fabric="board",
                         link_retry=False, completion="e2e", link_latency=5)]


def test_bad_nic_point_refused_before_building(monkeypatch):
    def built(*args, **kwargs):
        raise AssertionError("built before the point was checked")
    monkeypatch.setattr(headline, "run_cosim", built)
    with pytest.raises(ValueError, match="peers must be 1 to 15"):
        headline.run_point("icarus", "compact", 128, 8, peers=16)
    with pytest.raises(ValueError, match="max_payload"):
        headline.run_point("icarus", "compact", 128, 8, top={"max_payload": 100})
