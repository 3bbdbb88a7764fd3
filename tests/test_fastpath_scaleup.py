"""The RDMA fast path with ``header="scaleup"`` against the cycle-level model, compared
as the report compares its co-simulated points (scripts.reporting.rtl_subset's
``fast_path_differs``: counts exact, timing within the fast path's TOLERANCES), on
the report's RDMA points with the scale-up header and on the rungs where the framing
decides the rate."""

import pytest

from analysis.fastpath import fast_point
from analysis.points import cycle_point
from scripts.reporting.rtl_subset import RTL_POINTS, fast_path_differs
from spec.formats.roce import BTH_BYTES, ICRC_BYTES, RETH_BYTES
from spec.formats.scaleup import SCALEUP_BYTES

MESSAGES = 200
POINTS = ([dict(p, header="scaleup") for d, p in RTL_POINTS
           if d == "rdma"]
          + [dict(msg_bytes=128, qps=1, cache_entries=16, header="scaleup", rung=r, host=h)
             for r, h in (("+doorbell batching 16", "pcie"), ("+ACK coalescing", "on_die"),
                          ("+WQE by MMIO, inline", "pcie"))])


@pytest.mark.parametrize("point", POINTS, ids=lambda p: "-".join(
    str(v) for k, v in p.items() if k != "header"))
def test_fast_path_agrees_with_the_cycle_model(point):
    knobs = {k: v for k, v in point.items() if k != "msg_bytes"}
    model = cycle_point("rdma", msg_bytes=point["msg_bytes"], messages=MESSAGES, **knobs)
    assert fast_path_differs("rdma", point, MESSAGES, model) == []


def test_scaleup_wire_bytes_and_rate_from_the_layout():
    """At 128 bytes with the wire as the bottleneck (on die, every rung's optimisation):
    a WRITE ONLY of 10 + 12 + 16 + 128 + 4 + 4 = 174 bytes is 3 beats, so ii is 3 on
    both models (RoCEv2: 206 bytes, 4 beats, ii 4); wire bytes per message are the
    frames with 20 bytes of preamble and gap each, as the ACKs go."""
    write = SCALEUP_BYTES + BTH_BYTES + RETH_BYTES + 128 + ICRC_BYTES + 4
    assert (write, -(-write // 64)) == (174, 3)
    for header, beats in (("scaleup", 3), ("roce", 4)):
        kw = dict(msg_bytes=128, messages=MESSAGES, rung="+ACK coalescing", host="on_die",
                  header=header)
        c, f = cycle_point("rdma", **kw), fast_point("rdma", **kw)
        assert c["ii_cycles"] == f["ii_cycles"] == beats
        assert c["wire_bytes"] == f["wire_bytes"]
    c = cycle_point("rdma", msg_bytes=128, messages=MESSAGES, header="scaleup")
    ack = SCALEUP_BYTES + BTH_BYTES + 4 + ICRC_BYTES + 4
    acks = c["ctrl_ops"]["acks_sent"]
    assert c["wire_bytes"] == pytest.approx(write + 20 + acks * (ack + 20))


def test_bad_header_knob_names_it():
    with pytest.raises(ValueError, match="header"):
        cycle_point("rdma", msg_bytes=128, messages=MESSAGES, header="ipv6")
    with pytest.raises(ValueError, match="header"):
        fast_point("rdma", msg_bytes=128, messages=MESSAGES, header="ipv6")
