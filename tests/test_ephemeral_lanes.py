"""The ephemeral design's lanes in co-simulation: :class:`rtl.tops.ephemeral_lanes_top.
EphemeralLanesTop` (several senders side by side in one simulation) with each lane
compared with its own twin (:mod:`tb.cocotb_ephemeral_lanes`), and ``make sim --design
ephemeral --lanes N`` (:mod:`tb.ephemeral.lanes_point`): its figures those of the model's
point at ``lanes=N``, its rate the lanes' summed and capped by the attachment."""

import json

import pytest

from tb.cosim import run_cosim


@pytest.mark.parametrize("lanes", [0, 65, 2.0, True])
def test_lanes_top_refuses_a_bad_count(lanes):
    """The top's lane count is checked first, the error naming ``lanes``."""
    from rtl.tops.ephemeral_lanes_top import EphemeralLanesTop

    with pytest.raises(ValueError, match="lanes must be an integer from 1 to 64"):
        EphemeralLanesTop(lanes, 8, 16, 512)


@pytest.mark.slow_variants("verilator", reason=(
    "Icarus runs the same top and messages in make test; the sender's RTL = twin runs in "
    "the Amaranth simulator (tests/test_unit_ephemeral_sender.py)"))
def test_lanes_cosim(sim, test_id):
    """Four lanes on Icarus and Verilator: 300 messages over 24 peers (uniform) split
    ``d % 4``, each lane a pool of 8 with ACK requests and CLOSEs; every lane's sends,
    CLOSEs and counters equal its twin's (the run raises on a mismatch), and each lane
    sent exactly its share."""
    from analysis.load.traffic import qp_sequence
    from rtl.tops.ephemeral_lanes_top import EphemeralLanesTop
    from tb.ephemeral.point import lane_shares

    params = dict(entries=8, ack_slots=16, idle=12, ack_every=6, ii=2, completion=40,
                  lookahead=8, popularity="uniform", peers=24, messages=300, seed=3,
                  lanes=4)
    # The top of test_make_sim_lanes_point's 4-lane point (one build for both).
    run_dir = run_cosim(EphemeralLanesTop(4, 8, 16, 1024), name="ephemeral_lanes_4_8_16_1024",
                        test_module="tb.cocotb_ephemeral_lanes", sim=sim, test_id=test_id,
                        params=params)
    res = json.loads((run_dir / "ephemeral_lanes.json").read_text())
    shares = lane_shares(qp_sequence("uniform", 24, 300, 3), 24, 4)
    assert res["mismatches"] == 0
    assert [len(lane["sends"]) for lane in res["lanes"]] == [len(s) for s in shares]
    assert all(lane["closes"] and lane["mismatches"] == 0 for lane in res["lanes"])


@pytest.mark.slow_variants("2-lanes", reason=(
    "a further top of make sim's lanes point; the 4-lane variant runs the same path "
    "(summed rates, the cap) in make test, the lanes' RTL = twin test_lanes_cosim"))
@pytest.mark.parametrize("lanes,limit", [(2, "lanes"), (4, "host interface")])
def test_make_sim_lanes_point(lanes, limit, tmp_path):
    """`make sim --design ephemeral --lanes N` on Icarus, 64 peers and a pool of 8 a lane:
    exit 0, no mismatch, every co-simulated figure equal to the model's point at
    ``lanes=N``; the rate is the sum of the lanes' rates below the attachment's cap
    (2 lanes) and the cap above it (4 lanes), as the model says."""
    from scripts import sim
    from tb.ephemeral.point import attachment_cap, datapath_row

    rc = sim.main(["--sim", "icarus", "--design", "ephemeral", "--lanes", str(lanes),
                   "--peers", "64", "--pool-entries", "8", "--lookahead", "4",
                   "--messages", "300", "--out", str(tmp_path)])
    assert rc == 0
    (row,) = json.loads((tmp_path / "point.json").read_text())
    assert (row["lanes"], row["mismatches"], len(row["lane_msgs_per_s_rtl"])) == \
        (lanes, 0, lanes)
    for key, source in row["sources"].items():
        if "co-simulated" in source:
            assert row[f"{key}_rtl"] == pytest.approx(row[f"{key}_model"]), key
    cap, total = attachment_cap(datapath_row("board")), sum(row["lane_msgs_per_s_rtl"])
    assert row["limit"] == row["limit_rtl"] == limit
    assert row["msgs_per_s_rtl"] == pytest.approx(min(total, cap))
    assert (total > cap) == (limit == "host interface")
