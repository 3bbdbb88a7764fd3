"""Shared fixtures: the simulator matrix of the co-simulation tests.

Every co-simulation test takes the ``sim`` fixture and so runs on Verilator and Icarus;
``COSIM_SIMS=icarus`` (comma separated) narrows the matrix. Tests that need the same
export or build share it: :func:`tb.cosim.run_cosim` locks the export and the build
folder, so pytest workers may run any tests at once (the first builds, the others wait).
"""

import fnmatch
import os

import pytest

from tb.cosim import SIMULATORS, toolchain_path


def _sims():
    raw = os.environ.get("COSIM_SIMS", ",".join(SIMULATORS))
    sims = [s.strip() for s in raw.split(",") if s.strip()]
    bad = [s for s in sims if s not in SIMULATORS]
    if bad:
        raise pytest.UsageError(f"COSIM_SIMS: unknown simulator(s) {bad}; use {SIMULATORS}")
    return sims


#: Why most recovery scenarios run on Verilator only in make test.
_RECOVERY = (
    "Verilator runs every recovery scenario on the same top; Icarus runs the drop and "
    "corrupt ones (make test-all: all of them on both simulators)")

#: Tests that ``make test`` leaves out (marked ``slow``; ``make test-all`` runs them), each
#: with what still covers its block in ``make test``: the budget is 10 minutes on 2 cores.
#: Keys are node ids below tests/, ``*`` matching anything.
SLOW = {
    "test_cosim_nic_mem.py::test_l2_loads_and_atomics_match_model[verilator]":
        "Icarus runs the same L2 point against the model; the compact loads, atomics "
        "and hostile frames run on both simulators",
    "test_run_dirs.py::test_long_point_tag_reports_its_own_figures[icarus]":
        "Verilator runs the same two points; the folder names do not depend on the "
        "simulator",
    "test_fastpath.py::test_rdma_fast_path_large_writes[64KiB-*]":
        "the Inference section of make report checks the fast path against the cycle "
        "model at the same sizes and QP counts (scripts/reporting/inference_fastpath.py); "
        "make test runs 4 to 32 KiB at 1 QP and 4 to 16 KiB at 248 QPs",
    "test_fastpath.py::test_rdma_fast_path_large_writes[32KiB-248qp-on_die]":
        "the Inference section of make report checks the fast path against the cycle "
        "model at the same sizes and QP counts (scripts/reporting/inference_fastpath.py)",
    "test_workloads_roofline.py::test_whole_grid_runs":
        "test_section_small_grid runs the same section code on a small grid and "
        "test_workloads_sweeps.py the calibration, overlap and sweeps on single points "
        "(the whole section, both pairings, is about 60 s of model runs)",
    "test_cosim_fcs.py::test_fcs_every_length_with_and_without_stalls[verilator-8]":
        "Icarus runs every width (make test-all: every width on Verilator too)",
    "test_cosim_fcs.py::test_fcs_every_length_with_and_without_stalls[verilator-32]":
        "Icarus runs every width (make test-all: every width on Verilator too)",
    "test_cosim_faulty_link.py::test_faulty_link_at_five_percent[verilator-8]":
        "Verilator builds the 64-bit faulty link; Icarus runs both widths",
    "test_cosim_host_interface.py::test_host_interface_against_model[verilator-small]":
        "Verilator runs the pcie profile; Icarus runs both",
    "test_unit_resp_responder.py::test_back_to_back_128_byte_writes_keep_up[*]":
        "RdmaTop's co-simulations run the responder back to back behind the pcie host "
        "interface (test_cosim_rdma.py: the headline rows and the ladder rungs)",
    "test_unit_requester.py::test_requester_matches_model[batched]":
        "co-simulated by the ladder rungs (test_cosim_rdma.py)",
    "test_unit_requester.py::test_requester_matches_model[bf_inline]":
        "co-simulated by the ladder rungs (test_cosim_rdma.py)",
    "test_unit_requester.py::test_requester_matches_model[multi_qp]":
        "co-simulated by test_rdma_many_qps",
    "test_unit_requester.py::test_requester_recovery_matches_model[retry_limit]":
        "co-simulated by test_cosim_rdma_recovery.py",
    "test_unit_requester.py::test_requester_recovery_matches_model[window]":
        "co-simulated by test_cosim_rdma_recovery.py",
    "test_unit_requester.py::test_requester_recovery_matches_model[serial]":
        "co-simulated by the sequential rung",
    "test_cosim_rdma.py::test_rdma_many_qps[verilator-256]":
        "16 and 4096 QPs run",
    "test_cosim_rdma_unpinned.py::test_rdma_4096_qps_over_16_entries_evict_in_flight"
    "[verilator]":
        "Icarus runs the same scenario on the same top; test_rdma_many_qps[verilator-4096] "
        "runs 4096 QPs over 16 entries on the default top",
    "test_cosim_rdma_ways.py::test_rdma_ways_4_recovery_drop[icarus]":
        "16 s of Icarus (make test was at 10 minutes): the 4-way top co-simulates its "
        "colliding sets on Icarus, test_unit_completion_ways.py holds the completion unit "
        "with ways against its twin, and the recovery co-simulations run on the default top",
    "test_unit_req_stages.py::test_completion_matches_twin[18-0.5-0]":
        "the other two seeds run the same unit against its twin (at full rate, with and "
        "without window slots)",
    "test_cosim_rdma_ways.py::test_rdma_ways_4_*[verilator]":
        "Icarus runs the same scenario on the same 4-way top (one more Verilator build of "
        "about a minute); test_unit_context_cache.py checks the cache against its twin",
    "test_cosim_rdma_mr_cache.py::test_rdma_mr_cache_conflicts[*]":
        "an RdmaTop of its own with mr_cache (one more build per simulator; make test was "
        "at 10 minutes): test_unit_resp_responder.py checks the responder with the MR "
        "cache against its twin cycle for cycle and test_rdma_fabric_model.py runs the "
        "fabric model with and without it",
    "test_cosim_rdma_mr_cache.py::test_rdma_fabric_mr_cache_incast[*]":
        "a fabric top of its own with mr_cache (44 s of Icarus besides its builds; make "
        "test was at 10 minutes): test_unit_resp_responder.py checks the responder with "
        "the MR cache against its twin and test_rdma_fabric_model.py checks the fabric "
        "model's decisions with and without the MR cache",
    "test_unit_resp_responder.py::test_mr_cache_matches_model_and_store_and_forward[4-4]":
        "the 2-line cache runs the same random traffic against the twin",
    "test_unit_resp_responder.py::test_mr_cache_matches_model_and_store_and_forward[32-5]":
        "the 2-line cache runs the same random traffic against the twin",
    "test_cosim_nic_retry.py::test_nic_retry[verilator-l2-*]":
        "a Verilator build of the L2 retry top for two tests (make test was over 10 "
        "minutes): Icarus runs the same two cases on the same top, and the compact retry "
        "top runs on both",
    "test_cosim_nic_pcie.py::test_nic_pcie[verilator-*]":
        "a Verilator build of the PCIe-attached NIC for two tests (make test was over 10 "
        "minutes): Icarus runs both sizes on the same top",
    "test_cosim_rdma_distance.py::test_rdma_best_rung_at_rack_distance[verilator]":
        "a Verilator build of its own (the 400-cycle link) for one test, 27 s besides the "
        "build; make test was at 10 minutes: Icarus runs the same scenario on the same top",
    "test_cosim_rdma_link_retry.py::test_rdma_link_retry_*[verilator]":
        "Icarus runs both cases (RdmaTop with link_retry is one more Verilator build of "
        "about a minute); the model's reliable link is checked against ReliableLinkModel "
        "in test_rdma_link_retry.py",
    "test_cosim_rdma_link_latency.py::test_rdma_link_latency_1[verilator-*]":
        "Icarus runs both cases (RdmaTop at link latency 1 is one more Verilator build of "
        "about a minute)",
    # Verilator builds take about a minute each: make test builds one Verilator top per
    # design family and runs the parameter variants (and the stand-alone tops of blocks
    # that the big tops contain) on Icarus, which builds in seconds.
    "test_cosim_nic.py::test_nic_scenarios[verilator-*-l2]":
        "Verilator runs the compact NIC top; Icarus runs both framings",
    "test_cosim_nic_e2e.py::test_nic_e2e[verilator-*-l2]":
        "Verilator runs the compact e2e top; Icarus runs both framings",
    "test_cosim_nic_e2e.py::test_nic_e2e_headline[*-credit-*]":
        "the credit rows are the make sim headline's (test_cosim_nic.py and the headline "
        "runs cover that top); make test-all measures them beside the e2e rows",
    "test_cosim_nic_e2e.py::test_nic_e2e_headline[verilator-e2e-*]":
        "Icarus runs both e2e headline points (two more Verilator builds of about a "
        "minute); Verilator runs the e2e blocks in the compact e2e top",
    "test_cosim_nic_retry.py::test_nic_retry[verilator-compact-*]":
        "Verilator runs the L2 retry top; Icarus runs both framings",
    "test_cosim_faulty_link.py::test_faulty_link_at_five_percent[verilator-64]":
        "the faulty link runs on Verilator inside the L2 retry top; Icarus runs it alone",
    "test_cosim_host_interface.py::test_host_interface_against_model[verilator-*]":
        "the host interface runs on Verilator inside RdmaTop; Icarus runs it alone",
    "test_cosim_mem_credit.py::test_memory_and_credit_counter[verilator-*]":
        "memory and credit counter run on Verilator inside the NIC tops; Icarus alone",
    "test_uvm_rdma.py::test_uvm_rdma[icarus-*]":
        "Verilator runs it here (14 s against Icarus's 29 s on RdmaTop); make regress "
        "runs it on both simulators",
    "test_regress_cli.py::test_one_real_run_through_a_dask_local_cluster":
        "its simulation is test_uvm_rdma[icarus-1]; the regression's options, scheduler "
        "errors and failed jobs are tested without a simulator (about 50 s saved)",
    "test_uvm_nic.py::test_uvm_nic[verilator-l2-*]":
        "Verilator runs the compact environment (make test-all: both on both)",
    "test_cosim_nic_load.py::test_nic_load[*-incast-8-*]":
        "incast 3->1 runs on both simulators (the 8-node top is one more build each)",
    "test_cosim_nic_load.py::test_nic_load[icarus-all_to_all-*]":
        "Verilator runs all_to_all (with and without bursts); Icarus runs incast 3->1",
    "test_cosim_nic_load.py::test_nic_load[icarus-permutation-*]":
        "Verilator runs permutation; Icarus runs incast 3->1",
    "test_cosim_nic_load.py::test_nic_load_pcie[icarus]":
        "the pcie attachment's releases are model-tested (tests/test_load_nic.py); "
        "make test-all co-simulates it on both simulators",
    "test_cosim_nic_load.py::test_nic_load_pcie[verilator]":
        "Icarus runs the pcie load case (the Verilator build takes about 100 s); "
        "Verilator runs the integrated load cases",
    "test_cosim_nic_retry_pod.py::test_nic_retry_at_pod_*[verilator]":
        "Icarus runs both pod retry cases (each is one more Verilator build); Verilator "
        "runs the retry top at board (test_cosim_nic_retry.py) and the elastic hop's unit "
        "tests run in the Amaranth simulator",
    "test_cosim_nic_e2e_combos.py::*[verilator-*]":
        "Icarus runs every case (each combination of e2e with pcie, retry or pod is one "
        "more Verilator build, six in all); Verilator runs the e2e top at board "
        "(test_cosim_nic_e2e.py) and the pcie and retry tops with credit completion, and "
        "NicTx's completion merge under link backpressure is unit-tested against its twin "
        "in the Amaranth simulator (test_unit_nic_e2e.py)",
    "test_cosim_nic_e2e_combos.py::test_e2e_point[icarus-pcie-True-pod]":
        "the longest point of the combinations (a 5.6 MB top, 35 s of simulation): make sim "
        "co-simulates the same point (the pod gap table's rows 4 and 5, 1000 stores, "
        "Verilator); make test runs e2e with pcie and retry at board and the pod retry tops "
        "(test_cosim_nic_retry_pod.py)",
    "test_cosim_rdma_unpinned.py::test_rdma_4096_qps_over_16_entries_pinned[icarus]":
        "the windows 0 top is an export and compile of its own: the pinned engine is "
        "model-tested (test_fastpath.py's windows 0 points against the cycle model, "
        "test_uvm_rdma.py) and unit-tested in the Amaranth simulator "
        "(test_unit_requester.py runs windows 0)",
    "test_cosim_rdma_recovery.py::test_recovery_many_qps_both_links_pinned[icarus]":
        "the windows 0 top is an export and compile of its own (see "
        "test_rdma_4096_qps_over_16_entries_pinned); test_recovery_many_qps_both_links "
        "runs the scenario on the default top",
    "test_cosim_nic_e2e_combos.py::test_e2e_point_latency_is_one_store_at_a_time"
    "[verilator]":
        "on Verilator the compact e2e headline point's top is one more build: make sim "
        "runs the one-at-a-time run of every NIC row on Verilator with RTL = model "
        "checked (make test-all: this test on both simulators)",
    "test_cosim_nic_fabric.py::test_nic_at_pod_keeps_the_wire_rate[verilator]":
        "Icarus runs the NIC top at pod (its Verilator build, about 35 s, is one more top); "
        "Verilator runs the board NIC tops",
    # RdmaFabricTop (4 RDMA nodes: eight engines) builds in about 5 minutes on Verilator
    # (docs/rdma_fabric.md): make test runs its moderate cases on Icarus only.
    "test_cosim_rdma_fabric.py::test_fabric_incast_7_to_1_is_lossless[*]":
        "its 8-node top (17 MB of Verilog) is an export and an Icarus compile of about "
        "2 minutes and a Verilator build of several: make test-all co-simulates it; in "
        "make test test_unit_frame_merge.py holds a FrameSender-timed source with the "
        "merge's room against its twin (no overflow at the least depth, the rule tight), "
        "and test_rdma_fabric_model.py runs the 7->1 1 KiB incast at 90 % on the model",
    "test_cosim_rdma_fabric.py::test_fabric_incast_paused[*]":
        "the paused 4-node top is one more export (a 4-node fabric) and build on each "
        "simulator, and make test reached 10 minutes with it: make test-all co-simulates "
        "it; in make test test_unit_pause.py holds PauseGen against its twin and "
        "test_rdma_fabric_model.py runs the paused incasts on the model",
    "test_cosim_rdma_fabric.py::test_fabric_*[verilator]":
        "Icarus runs the incast and all-to-all cases of the same top",
    # The soak's NIC top (4 nodes, retry, W = 64, 16k-deep players and recorders) is one
    # more Verilator build of about 4 minutes; make soak runs it.
    "test_soak.py::test_short_soak_compares_every_chunk":
        "tests/test_soak.py checks the chunk bookkeeping and the NIC model's carried "
        "memories without a simulator; make test-all co-simulates the short soak",
    "test_soak.py::test_broken_model_is_caught_in_a_later_chunk":
        "make test-all: a broken model caught in chunk 2 of both designs",
    "test_soak.py::test_soak_on_a_local_dask_cluster":
        "test_sweep.py and test_regress_cli.py run the executor on a LocalCluster",
    "test_soak.py::test_rdma_jobs_give_the_figures_of_one":
        "test_soak.py::test_jobs_and_merge checks the split and the sum without a simulator",
    "test_cosim_rdma_fabric.py::test_fabric_all_to_all[icarus]":
        "Icarus runs the fabric's incast (the all-to-all and saturated cases share its "
        "top; make test-all runs them on both simulators)",
    "test_cosim_rdma_load.py::test_rdma_open_loop_matches_model[icarus-uniform_gpu_burst]":
        "Verilator runs both load cases; Icarus the Zipf one",
    "test_cosim_rdma_scaleup.py::test_scaleup_*[verilator]":
        "Icarus runs both (RdmaTop with header='scaleup' is one more Verilator build of "
        "about a minute); test_unit_rdma_scaleup.py checks the scale-up blocks against "
        "the model in the Amaranth simulator",
    "test_cosim_rdma_recovery.py::test_recovery_timer_restarts_when_resends_leave[*]":
        "the windows-0 top is one more export and build on each simulator (make test "
        "went to 10 minutes with it): make test-all co-simulates it; in make test "
        "test_unit_requester.py holds the held timer against its twin in the Amaranth "
        "simulator (a rewind's resends behind 400-cycle reads, one rewind, no timeout)",
    "test_cosim_rdma_fabric.py::test_fabric_incast_saturated[icarus]":
        "Icarus runs the moderate incast and all-to-all; make test-all adds this one",
    "test_cosim_rdma_miss_queue.py::test_rdma_miss_queue_matches_model[*]":
        "a top of its own (miss_queue 8, off by default: one more export and build on "
        "each simulator; make test reached 10 minutes with it): make test-all "
        "co-simulates it; in make test test_unit_miss_queue.py holds the miss queue "
        "against its twin and the requester's model runs with one",
    # These repeat a top's case on the second simulator, or a parameter, that make test
    # already runs elsewhere; make test-all runs them all.
    "test_cosim_fcs.py::test_fcs_every_length_with_and_without_stalls[verilator-64]":
        "Icarus runs every length at W = 8, 32 and 64 on the same tops; the 64-bit FCS "
        "blocks run on Verilator inside every NIC top",
    "test_unit_elastic_delay.py::test_elastic_delay_cosim[verilator-*]":
        "Icarus runs both latencies on the same tops (each a Verilator build of its own); "
        "the delay's twin comparisons run in the Amaranth simulator",
    "test_uvm_nic.py::test_uvm_nic[icarus-compact-1]":
        "the pyuvm NIC bench runs compact framing on Verilator and L2 framing on Icarus",
    "test_sim_cli_entry.py::test_rdma_point_at_link_latency_1_on_icarus":
        "test_cosim_rdma_link_latency.py co-simulates the same one-cycle-link point on "
        "Icarus, and test_sim_cli.py::test_user_point_on_icarus runs the CLI on Icarus",
    "test_cosim_nic_e2e_combos.py::test_e2e_point[icarus-integrated-False-board]":
        "the same top and point as test_cosim_nic_e2e.py::test_nic_e2e_headline"
        "[icarus-e2e-l2]; the combinations with pcie and retry stay",
    "test_uvm_nic.py::test_uvm_nic[icarus-l2-1]":
        "make test runs the pyuvm NIC bench on Verilator (compact framing); make regress "
        "runs it on both simulators for every seed, and the L2 NIC top runs its directed "
        "scenarios on Icarus",
    "test_cosim_nic_e2e_combos.py::test_e2e_point_latency_is_one_store_at_a_time[icarus]":
        "make sim runs the one-at-a-time run of every NIC row (Verilator, RTL = model); "
        "the compact e2e headline point's top runs on Icarus in test_cosim_nic_e2e.py",
    "test_unit_requester.py::test_requester_evicts_in_flight_and_recovers[32]":
        "the 64-QP case runs the same eviction and recovery over more contexts",
    "test_cosim_nic.py::test_nic_scenarios[icarus-*-compact]":
        "Verilator runs every scenario with compact framing, Icarus with L2 framing",
    "test_cosim_nic_e2e.py::test_nic_e2e[icarus-*-compact]":
        "Verilator runs every e2e scenario with compact framing, Icarus with L2 framing "
        "(and the compact e2e headline point)",
    "test_cosim_rdma_recovery.py::test_recovery_duplicate[icarus]": _RECOVERY,
    "test_cosim_rdma_recovery.py::test_recovery_bursts[icarus]": _RECOVERY,
    "test_cosim_rdma_recovery.py::test_recovery_ack_link[icarus]": _RECOVERY,
    "test_cosim_rdma_recovery.py::test_recovery_many_qps_both_links[icarus]": _RECOVERY,
    "test_cosim_rdma_recovery.py::test_recovery_timeout_only[icarus]": _RECOVERY,
    "test_cosim_rdma_recovery.py::test_recovery_loss_on_one_qp[icarus]": _RECOVERY,
    "test_cosim_rdma_recovery.py::test_recovery_retry_limit[icarus]": _RECOVERY,
    "test_cosim_rdma_recovery.py::test_recovery_selective_repeat[icarus]": _RECOVERY,
    "test_cosim_rdma_recovery.py::test_recovery_nak_storm[icarus]": _RECOVERY,
}


def pytest_configure(config):
    toolchain_path()


#: The longest tests of ``make test`` (node-id patterns, as SLOW): started first, so that
#: the two workers do not end with one long test running while the other idles.
LONG_FIRST = ("test_uvm_rdma.py::test_uvm_rdma[*]", "test_cosim_rdma_fabric.py::*",
              "test_cosim_rdma.py::test_rdma_headline_rows_and_pcap[*]",
              "test_uvm_nic.py::test_uvm_nic[*]")


def _long(item):
    key = item.nodeid.split("/")[-1]
    return any(fnmatch.fnmatchcase(key, p.replace("[", "[[]")) for p in LONG_FIRST)


def _spread(items):
    """``items`` round robin over their test functions (in first-seen order): the first
    test of every function, then the second of each, and so on. The tests of one
    function mostly share a top, so neighbours in this order mostly need different
    builds: the two workers export and build different tops at once instead of one
    waiting on the other's lock (:func:`tb.verilog_export.locked`), and every top's
    first build comes early in the run."""
    queues = {}
    for item in items:
        queues.setdefault((str(item.path), item.originalname), []).append(item)
    out, rest = [], list(queues.values())
    while rest:
        out += [q.pop(0) for q in rest]
        rest = [q for q in rest if q]
    return out


def pytest_collection_modifyitems(config, items):
    items[:] = [i for i in items if _long(i)] + _spread([i for i in items if not _long(i)])
    for item in items:
        key = item.nodeid.split("/")[-1]
        for pattern, why in SLOW.items():
            if fnmatch.fnmatchcase(key, pattern.replace("[", "[[]")):
                item.add_marker(pytest.mark.slow(reason=why))
                break


def pytest_generate_tests(metafunc):
    if "sim" in metafunc.fixturenames:
        metafunc.parametrize(
            "sim", [pytest.param(s, marks=[pytest.mark.cosim]) for s in _sims()])


@pytest.fixture
def test_id(request):
    """A folder name unique to this test (and its parameters)."""
    return request.node.name
