"""The report's "Loads and atomics" section (scripts/reporting/mem_ops.py): its points
are the `make sim` points of both designs at both profiles, checked before any build,
and its table shows each row's figures."""

from scripts.reporting.mem_ops import PROFILES, mem_ops_jobs, mem_ops_section


def test_jobs_are_both_designs_ops_and_profiles_and_pass_their_checks():
    jobs = mem_ops_jobs("verilator", 1000)
    got = sorted((kw["fabric"], fn.__module__, kw["op"]) for _, fn, kw in jobs)
    assert got == sorted((f, m, op) for f in PROFILES
                         for m, op in (("tb.nic.mem_point", "load"),
                                       ("tb.nic.mem_point", "atomic"),
                                       ("tb.rdma.read_point", "read"),
                                       ("tb.rdma.read_point", "atomic")))
    for _, fn, kw in jobs:
        assert fn(**kw, check_only=True) is None


def test_section_shows_each_rows_figures():
    rows = [dict(design="nic", op="load", fabric="pod", latency_cycles_rtl=1234,
                 ii_cycles_rtl=3.0, ops_per_s_rtl=1e9 / 3, tag_entry_bits=34, mismatches=0),
            dict(design="rdma", op="read", fabric="board", latency_cycles_rtl=4321,
                 ii_cycles_rtl=250.0, ops_per_s_rtl=4e6, read_op_bits=133, mismatches=2)]
    md = mem_ops_section(rows, 1000, "verilator")
    assert md.startswith("## Loads and atomics")
    assert "| nic | load | pod | 1,234 | 3.0 | 333.33 M | 34 | 0 |" in md
    assert "| rdma | read | board | 4,321 | 250.0 | 4.00 M | 133 | 2 |" in md


def test_section_says_the_rows_are_not_level_yet():
    """The two designs' rows differ in attachment and fabric: the section says so, so that
    no reader takes the gap between them for the state tax."""
    md = mem_ops_section([], 1000, "verilator")
    assert "Not a level-field comparison" in md and "direct link" in md
