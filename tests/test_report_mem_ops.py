"""The report's "Loads and atomics" section (scripts/reporting/mem_ops.py): its points
are the `make sim` points of both designs at both profiles and the issue's sizes, on a
level field, checked before any build, and its table shows each row's figures and
whether each pair of rows is level."""

from scripts.reporting.mem_ops import PROFILES, SIZES, mem_ops_jobs, mem_ops_section
from spec.metrics import level_keys
from spec.nic_mem import default_tags


def test_jobs_are_both_designs_ops_sizes_and_profiles_and_pass_their_checks():
    jobs = mem_ops_jobs("verilator", 1000)
    got = sorted((kw["fabric"], fn.__module__, kw["op"], kw["msg_bytes"])
                 for _, fn, kw in jobs)
    want = [(f, "tb.nic.mem_point", "load", b) for f in PROFILES for b in SIZES]
    want += [(f, "tb.rdma.read_point", "read", b) for f in PROFILES for b in SIZES]
    want += [(f, m, "atomic", 8) for f in PROFILES
             for m in ("tb.nic.mem_point", "tb.rdma.read_point")]
    assert got == sorted(want)
    # Pairs: each NIC job is followed by the engine's of the same op kind, size, profile.
    for (_, fa, ka), (_, fb, kb) in zip(jobs[::2], jobs[1::2], strict=True):
        assert (fa.__module__, fb.__module__) == ("tb.nic.mem_point", "tb.rdma.read_point")
        assert (ka["msg_bytes"], ka["fabric"]) == (kb["msg_bytes"], kb["fabric"])
    for _, fn, kw in jobs:
        assert fn(**kw, check_only=True) is None


def _keys(design, fabric):
    """A row's comparison keys as each point writes them (tb.nic.mem_point with L2
    framing, tb.rdma.read_point on the on_die host), written out here."""
    if design == "nic":
        return dict(topology="switch", fabric=fabric, attachment="integrated",
                    completion="e2e", completion_at="answer-landed", reliability="none",
                    header="l2")
    return dict(topology="switch", fabric=fabric, attachment="on_die", completion="e2e",
                completion_at="answer-landed", reliability="go-back-N", header="roce")


def test_the_points_rows_are_level():
    """The keys both points write make a level pair (same fabric, topology, attachment
    class, completion, link reliability and header class)."""
    assert level_keys(_keys("nic", "pod")) == level_keys(_keys("rdma", "pod"))


def test_section_shows_each_rows_figures_and_level():
    rows = [dict(design="nic", op="load", msg_bytes=128, latency_cycles_rtl=1234,
                 ii_cycles_rtl=3.0, ops_per_s_rtl=1e9 / 3, tag_entry_bits=34, mismatches=0,
                 **_keys("nic", "pod")),
            dict(design="rdma", op="read", msg_bytes=128, latency_cycles_rtl=4321,
                 ii_cycles_rtl=250.0, ops_per_s_rtl=4e6, read_op_bits=133, mismatches=2,
                 **_keys("rdma", "pod")),
            dict(design="nic", op="atomic", msg_bytes=8, latency_cycles_rtl=10,
                 ii_cycles_rtl=2.0, ops_per_s_rtl=5e8, tag_entry_bits=34, mismatches=0,
                 **_keys("nic", "board")),
            dict(design="rdma", op="atomic", msg_bytes=8, latency_cycles_rtl=20,
                 ii_cycles_rtl=4.0, ops_per_s_rtl=2.5e8, read_op_bits=133, mismatches=0,
                 **_keys("rdma", "pod"))]
    md = mem_ops_section(rows, 1000, "verilator")
    assert md.startswith("## Loads and atomics")
    # In flight by Little's law: latency / ii (1,234 / 3, 4,321 / 250), times the bits.
    assert ("| nic | load | 128 | pod | 1,234 | 3.0 | 333.33 M | 34 | 411.3 | 13,985 | yes "
            "| 0 |") in md
    assert ("| rdma | read | 128 | pod | 4,321 | 250.0 | 4.00 M | 133 | 17.3 | 2,299 | yes "
            "| 2 |") in md
    # A pair on different fabrics is said not to be level, naming the key.
    assert ("| nic | atomic | 8 | board | 10 | 2.0 | 500.00 M | 34 | 5.0 | 170 | no: fabric "
            "| 0 |") in md
    assert "Not a level-field comparison" not in md


def test_rate_jobs_and_their_table():
    """The engine's READ rates over 1 to 4,096 QPs and the NIC's load and fetch-and-add
    rates over as many peers at pod (the model alone): one job per count, each with at
    least one operation per QP or peer, and a table line per result, the NIC's bits per
    outstanding op with its node field naming the peers (16-bit word address: 42 bits
    with an 8-bit node field, 47 with the 13 bits that name 4,096 peers)."""
    from scripts.reporting.mem_ops import RATE_QPS, nic_rate_jobs, rate_jobs
    jobs = rate_jobs()
    assert [kw["qps"] for _, _, kw in jobs] == list(RATE_QPS) == [1, 64, 1024, 4096]
    assert all(kw["messages"] >= kw["qps"] and kw["fabric"] == "pod" for _, _, kw in jobs)
    nic = nic_rate_jobs()
    assert [(kw["op"], kw["peers"]) for _, _, kw in nic] == [
        (op, p) for op in ("load", "atomic") for p in RATE_QPS]
    assert all(kw["messages"] >= kw["peers"] and kw["fabric"] == "pod"
               and kw["framing"] == "l2" and fn.__name__ == "model_load_rate"
               for _, fn, kw in nic)
    # Beyond one peer a run is longer than pod's tag table (1,024), so it cannot fit in
    # the tags as a burst (default_tags: the pod profile's tags).
    assert all(kw["messages"] > default_tags("pod")
               for _, _, kw in nic if kw["peers"] > 1)
    md = mem_ops_section([], 1000, "verilator", [
        dict(qps=4096, messages=4096, ii_cycles=200.0, ops_per_s=5e6),
        dict(op="load", peers=4096, messages=4096, ii_cycles=3.0, ops_per_s=1e9 / 3,
             peak_outstanding=1024)])
    lines = md.splitlines()
    nic_at = lines.index("| nic | load | 4,096 | 4,096 | 4,096 | 3.0 | 333.33 M | 47 | 1,024 |")
    assert lines[nic_at + 1] == "| rdma | read | 4,096 | 1 | 4,096 | 200.0 | 5.00 M | 133 | - |"
    assert "the NIC's rates in the model alone" not in md


def test_nic_jobs_read_the_engines_target_memory():
    """The NIC's targets are built with the engine's on_die host read latency, which the
    READ rows carry as their target_latency (the level key)."""
    from scripts.reporting.mem_ops import mem_ops_jobs
    from spec.host import PROFILES
    from tb.rdma.read_point import READ_HOST

    jobs = mem_ops_jobs("verilator", 16)
    nic = [kw for _, fn, kw in jobs if fn.__module__ == "tb.nic.mem_point"]
    assert nic and all(kw["target_latency"] == PROFILES[READ_HOST].read_latency == 300
                       for kw in nic)


def test_responder_saved_atomic_state_is_counted_per_qp():
    """The engine's saved atomic results (rtl/rdma/resp/verify.py): per QP 16 results of
    valid (1), the QPN bits above the 4,096 rows (24 - 12), PSN (24) and the original
    value (64), and a 4-bit next-slot pointer; the section states them per QP and for
    the 4,096 QPs."""
    from spec.rdma_responder import saved_atomic_bits

    assert saved_atomic_bits() == 16 * (1 + 12 + 24 + 64) + 4 == 1620
    md = mem_ops_section([], 1000, "verilator")
    assert "1,620 bits per QP, 6,635,520 for its 4,096 QPs" in md
