"""`make sim ARGS=...` over its option space, on the checks alone (nothing is exported or
built): every combination either is accepted or stops with an argparse error (exit 2)
that names an option; none ends in a traceback.

The walk: each option of :data:`scripts.sim_point.POINT_OPTIONS` (and the flags,
``--messages`` and ``--msg-bytes``) at the ends of its range and just outside them, alone;
then 36 pairs of range ends of two options of one design per design, drawn by a seeded
generator. The values below are the ranges ``--help`` states, written here independently
of the checks under test.
"""

import itertools
import random

import pytest

from scripts import sim
from scripts.sim_point import POINT_OPTIONS

#: Per option: (values inside its stated range, values outside it).
RANGES = {
    "--op": (["write", "atomic"], ["store"]),     # per design: test_op_of_the_other_design
    "--framing": (["compact", "l2"], ["eth"]),
    "--target-latency": (["0", "4096"], ["-1", "4097"]),   # with --op load|atomic only
    "--target-reads": (["1", "16"], ["0", "17"]),          # with a --target-latency only
    "--peers": (["1", "15"], ["0", "16"]),
    "--attachment": (["integrated", "pcie"], ["cxl"]),
    "--link-latency": (["1", "1024"], ["0", "1025"]),
    "--completion": (["credit", "e2e"], ["ack"]),
    "--header": (["roce", "scaleup"], ["ib"]),
    "--fabric": (["board", "rack", "pod"], ["lan"]),
    "--max-payload": (["64", "8128"], ["63", "100", "8192"]),
    "--peer-retry": (["0", "2", "32768"], ["1", "3", "65536"]),  # needs --completion e2e
    "--qps": (["1", "4096"], ["0", "4097"]),
    "--cache-entries": (["16", "256"], ["8", "48", "512"]),
    "--cache-ways": (["1", "8"], ["3", "16"]),
    "--qpc-bytes": (["64", "1024"], ["96", "2048"]),
    "--mr-cache": (["2", "256"], ["3", "512"]),
    "--mrs": (["1", "16"], ["0", "17"]),
    "--host": (["pcie", "on_die", "ideal64"], ["cxl"]),
    "--miss-queue": (["0", "64"], ["-1", "65"]),
    "--topology": (["direct-link", "switch"], ["ring"]),
    "--rung": (["seq", "db-batch", "best", "sequential"], ["fastest"]),
    "--popularity": (["round_robin", "uniform", "zipf"], ["hot"]),
    "--pool-entries": (["16", "256"], ["1", "3", "512"]),      # with --lookahead 16
    "--idle": (["1", "61439"], ["0", "61440"]),
    "--ack-every": (["1", "31"], ["0", "32"]),
    "--lookahead": (["0", "256"], ["-1", "257"]),              # with --pool-entries 256
    "--lanes": (["1", "8"], ["0", "65"]),       # 64: test_lanes_beyond_one (more messages)
}
#: The ephemeral design's ranges of the options it shares with the NIC.
EPHEMERAL_RANGES = {"--peers": (["1", "4096"], ["0", "4097"]),
                    "--fabric": RANGES["--fabric"]}
FLAGS = {"--link-retry": "both", "--selective": "rdma"}
COMMON = {"--messages": (["1", "3", "1000"], ["0"]), "--msg-bytes": (["1", "4096"],
                                                                   ["0", "4097"])}


def _design_of(option):
    return {opt: design for opt, _, design, *_ in POINT_OPTIONS}.get(option) or \
        FLAGS.get(option, "both")


def _outcome(argv, capsys):
    """``None`` if ``argv`` is accepted, else the error text (an argparse exit 2)."""
    try:
        sim.parse_args(argv)
    except SystemExit as exc:
        assert exc.code == 2, (argv, exc.code)
        err = capsys.readouterr().err
        assert "error: " in err, (argv, err)
        return err.split("error: ", 1)[1]
    return None


def test_ranges_cover_every_option():
    """The walk knows every option of a design point (a new one must be added here)."""
    assert set(RANGES) == {opt for opt, *_ in POINT_OPTIONS}


@pytest.mark.parametrize("design", ["nic", "rdma"])
def test_each_option_alone(design, capsys):
    """Inside its range an option is accepted (alone, where no other option is needed);
    outside it the error names the option."""
    for option, (good, bad) in list(RANGES.items()) + list(COMMON.items()):
        if _design_of(option) not in (design, "both"):
            continue
        for value in good:
            argv = ["--design", design, option, value, "--messages", "16"]
            if option == "--messages":
                argv = ["--design", design, option, value]
            if option == "--msg-bytes" and design == "rdma" and int(value) > 224:
                argv += ["--rung", "db-batch"]          # inline rungs carry <= 224 B
            if option == "--mrs" and value != "1":
                argv += ["--mr-cache", "16"]
            err = _outcome(argv, capsys)
            assert err is None or option in err, (argv, err)
        for value in bad:
            err = _outcome(["--design", design, option, value], capsys)
            assert err is not None and option in err, (option, value, err)


@pytest.mark.parametrize("design,good,bad", [("nic", "load", "read"), ("rdma", "read", "load")])
def test_op_of_the_other_design(design, good, bad, capsys):
    """The NIC loads, the engine READs: each design's own op is accepted, the other's
    refused with an error naming ``--op``."""
    assert _outcome(["--design", design, "--op", good, "--messages", "16"], capsys) is None
    err = _outcome(["--design", design, "--op", bad], capsys)
    assert err is not None and "--op" in err, err


@pytest.mark.parametrize("design", ["nic", "rdma"])
def test_pairs_of_range_ends(design, capsys):
    """Pairs of range ends of two options (and the flags), drawn by a seeded generator:
    accepted, or refused with an error that names an option; never a traceback."""
    options = [o for o in list(RANGES) + list(COMMON) if _design_of(o) in (design, "both")]
    flags = [f for f, d in FLAGS.items() if d in (design, "both")]
    combos = []
    for a, b in itertools.combinations(options, 2):
        pool = RANGES.get(a) or COMMON[a], RANGES.get(b) or COMMON[b]
        for x, y in itertools.product(pool[0][0], pool[1][0]):
            combos.append([a, x, b, y])
    rng = random.Random(40)
    picked = rng.sample(combos, min(len(combos), 36))
    accepted = refused = 0
    for argv in picked:
        argv = ["--design", design, *argv]
        if "--messages" not in argv:
            argv += ["--messages", rng.choice(["1", "3", "200"])]
        argv += [f for f in flags if rng.random() < 0.3]
        err = _outcome(argv, capsys)
        if err is None:
            accepted += 1
        else:
            refused += 1
            assert "--" in err, (argv, err)
    assert accepted and refused, (accepted, refused)


@pytest.mark.parametrize("argv", [
    # A NIC point of a few stores: the top holds the one-at-a-time run's 17 stores too.
    ["--design", "nic", "--messages", "1"],
    ["--design", "nic", "--messages", "8"],
    ["--design", "nic", "--max-payload", "64", "--link-latency", "7"],
    ["--design", "rdma", "--messages", "1"],
    ["--design", "rdma", "--qps", "2048", "--qpc-bytes", "1024", "--messages", "64"],
    ["--design", "rdma", "--fabric", "pod", "--link-retry", "--header", "scaleup",
     "--qps", "4096", "--rung", "db-batch"],
    # The NIC's loads and atomics over reliable links (NicMemTop link_retry).
    ["--design", "nic", "--op", "load", "--link-retry", "--fabric", "pod", "--peers", "15"],
    ["--design", "nic", "--op", "atomic", "--link-retry", "--target-latency", "300"],
])
def test_odd_points_are_accepted(argv, capsys):
    """Odd but valid points users tried are accepted by the checks."""
    assert _outcome(argv, capsys) is None


def test_ephemeral_options(capsys):
    """--design ephemeral: each of its options inside its stated range is accepted, outside
    it refused with an error naming it (nothing is built: the checks alone); every option
    of the other designs is refused by name."""
    own = {o: r for o, r in RANGES.items() if _design_of(o) == "ephemeral"}
    for option, (good, bad) in list(own.items()) + list(EPHEMERAL_RANGES.items()):
        for value in good:
            argv = ["--design", "ephemeral", option, value, "--messages", "16"]
            assert _outcome(argv, capsys) is None, argv
        for value in bad:
            err = _outcome(["--design", "ephemeral", option, value], capsys)
            assert err is not None and option in err, (option, value, err)
    err = _outcome(["--design", "ephemeral", "--pool-entries", "8"], capsys)
    assert err is not None and "--lookahead" in err and "--pool-entries" in err, err
    for option, (good, _) in RANGES.items():
        if option in own or option in EPHEMERAL_RANGES:
            continue
        err = _outcome(["--design", "ephemeral", option, good[0]], capsys)
        assert err is not None and option in err, (option, err)
    for flag in FLAGS:
        err = _outcome(["--design", "ephemeral", flag], capsys)
        assert err is not None and flag in err, (flag, err)
    for option, (good, _) in own.items():
        if option == "--lanes":                 # one lane is every design's
            continue
        for design in ("nic", "rdma"):
            err = _outcome(["--design", design, option, good[0]], capsys)
            assert err is not None and option in err, (design, option, err)
    err = _outcome(["--design", "ephemeral", "--msg-bytes", "225"], capsys)
    assert err is not None and "--msg-bytes" in err, err
    err = _outcome(["--design", "ephemeral", "--messages", "65537"], capsys)
    assert err is not None and "--messages" in err, err


def test_peer_retry_is_a_window_with_e2e_completion(capsys):
    """``--peer-retry N`` turns the NIC's per-peer retry on with a replay window of N
    frames: taken with ``--completion e2e`` (the knob reaches the point as its window),
    on either attachment, with and without ``--link-retry``; refused by name without
    it, with ``--op load`` or ``atomic`` (NicMemTop has no per-peer retry) and for the
    other designs."""
    for extra in ([], ["--attachment", "pcie"], ["--attachment", "pcie", "--link-retry"],
                  ["--link-retry"]):
        args = sim.parse_args(["--design", "nic", "--completion", "e2e", "--peer-retry",
                               "64", "--messages", "16", *extra])
        assert args.knobs["peer_retry"] == 64 and args.knobs["completion"] == "e2e"
        assert args.knobs.get("attachment", "integrated") == (
            "pcie" if "pcie" in extra else "integrated")
    for argv in (["--design", "nic", "--peer-retry", "64"],
                 ["--design", "nic", "--op", "load", "--peer-retry", "64"],
                 ["--design", "nic", "--op", "atomic", "--peer-retry", "64"],
                 ["--design", "rdma", "--peer-retry", "64"],
                 ["--design", "ephemeral", "--peer-retry", "64"]):
        err = _outcome(argv, capsys)
        assert err is not None and "--peer-retry" in err, (argv, err)


@pytest.mark.parametrize("design,name", [("nic", "NIC"), ("rdma", "RDMA")])
def test_lanes_beyond_one_are_the_ephemeral_design_s(design, name, capsys):
    """``--lanes``: the NIC and the RDMA engine build one lane, so ``--lanes 1`` is their
    own point (no knob reaches the run) and more is refused by name with the reason,
    with ``--op`` too; ``--design ephemeral`` takes 2..64 as a knob of its point, with at
    least two messages a lane and at most MAX_LANE_CONTEXTS contexts over the lanes."""
    args = sim.parse_args(["--design", design, "--lanes", "1", "--messages", "16"])
    assert "lanes" not in args.knobs
    for extra in ([], ["--op", "atomic"]):
        err = _outcome(["--design", design, "--lanes", "2", *extra], capsys)
        assert err is not None and err.startswith(f"--lanes is not built for the {name} "
                                                  f"design"), err
    for lanes, pool in ((2, "256"), (8, "256"), (64, "32")):
        args = sim.parse_args(["--design", "ephemeral", "--lanes", str(lanes),
                               "--pool-entries", pool, "--messages", str(2 * lanes)])
        assert args.knobs["lanes"] == lanes
    for lanes, pool in ((9, "256"), (64, "64")):    # more contexts than the lanes top holds
        err = _outcome(["--design", "ephemeral", "--lanes", str(lanes), "--pool-entries",
                        pool, "--messages", "256"], capsys)
        assert err is not None and err.startswith("--lanes") and "pool" in err, err
    err = _outcome(["--design", "ephemeral", "--lanes", "64", "--pool-entries", "32",
                    "--messages", "127"], capsys)
    assert err is not None and err.startswith("--messages"), err
    assert "lanes" not in sim.parse_args(["--design", "ephemeral", "--lanes", "1"]).knobs
