"""tb/rdma/point_params.py: an RDMA design point mapped by its fields' kinds to the top's
build parameters, the run's parameters, the row's keys and the run's name, and the
simulator side's point of a run's parameters. Expected values are the RdmaTop parameters
and run parameters the headline's points had before the mapping (written out here)."""

import pytest

import tb.rdma.headline as headline
from spec.rdma_engine import TOP_DEFAULTS
from tb.rdma.cocotb_rdma import COMMON_PARAMS, KIND_PARAMS, check_params
from tb.rdma.point_params import params_point, rdma_point, row_tags, run_params, top_params

WRITES = COMMON_PARAMS + KIND_PARAMS["writes"]


def test_defaults_map_to_the_default_top_and_run():
    point = rdma_point()
    assert top_params(point, {}) == {}
    assert run_params(point, WRITES) == dict(qps=1, cache_entries=16, qpc_bytes=256, selective=0,
                                     mrs=1)
    assert row_tags(point) == ({}, "")


def test_off_default_fields_reach_the_top_run_row_and_name():
    point = rdma_point(cache_ways=2, miss_queue=4, mr_cache=8, selective=1, mrs=3,
                       qpc_bytes=512, qps=64, cache_entries=32, rung="pipelined")
    assert top_params(point, {"host": "on_die"}) == dict(host="on_die", cache_ways=2,
                                                         miss_queue=4, mr_cache=8)
    assert run_params(point, WRITES) == dict(qps=64, cache_entries=32, qpc_bytes=512, selective=1,
                                     mrs=3)
    keys, suffix = row_tags(point)
    assert keys == dict(cache_ways=2, qpc_bytes=512, mr_cache=8, mrs=3, miss_queue=4,
                        selective=1)
    assert suffix == "_cache_ways2_qpc_bytes512_mr_cache8_mrs3_miss_queue4_selective1"


@pytest.mark.parametrize("kw,name,option", [
    (dict(miss_queue=65), "miss_queue", "--miss-queue"),
    (dict(cache_ways=3), "cache_ways", "--cache-ways"),
    (dict(qps=0), "qps", "--qps"),
    (dict(qpc_bytes=100), "qpc_bytes", "--qpc-bytes"),
    (dict(mr_cache=3), "mr_cache", "--mr-cache"),
])
def test_bad_field_names_keyword_and_option(kw, name, option):
    with pytest.raises(ValueError) as err:
        rdma_point(**kw)
    assert name in str(err.value) and str(err.value).endswith(f"({option})")


def test_run_point_builds_the_mapped_top(monkeypatch):
    """run_point hands run_rdma the top and runs of its point (no simulator: the build is
    replaced by a recorder that stops the run)."""
    seen = []

    class Built(Exception):
        pass

    def record(top, params, sim, test_id):
        seen.append((top, params, test_id))
        raise Built
    monkeypatch.setattr(headline, "run_rdma", record)
    with pytest.raises(Built):
        headline.run_point("icarus", 128, 20, rung="pipelined", cache_ways=2, miss_queue=4,
                           selective=1, mrs=2, host="on_die")
    top, params, test_id = seen[0]
    assert top == dict(host="on_die", cache_ways=2, miss_queue=4)
    assert (params["selective"], params["mrs"], params["qps"]) == (1, 2, 1)
    assert test_id.startswith("icarus_pipelined_q1_c16_on_die_n20_b128")
    assert test_id.endswith("_cache_ways2_mrs2_miss_queue4_selective1_bw")


def test_run_point_refuses_bad_fields_before_building():
    kw = dict(sim="icarus", msg_bytes=128, messages=20, check_only=True)
    assert headline.run_point(miss_queue=4, **kw) is None
    with pytest.raises(ValueError, match=r"miss_queue .*\(--miss-queue\)"):
        headline.run_point(miss_queue=65, **kw)
    with pytest.raises(ValueError, match="op 'read'"):
        headline.run_point(op="read", **kw)
    with pytest.raises(TypeError):
        headline.run_point(miss_queu=4, **kw)
    with pytest.raises(ValueError, match="miss_queue must be left at its default"):
        headline.run_point(topology="switch", miss_queue=4, **kw)


def test_simulator_side_point_of_run_parameters():
    """The point the cocotb test builds from what it receives: build fields from the top,
    port and run fields from the parameters; a bad one named with its option."""
    top = dict(cache_ways=4, miss_queue=8, host="on_die", cache_entries=256)
    point = params_point(top, dict(qps=9, cache_entries=32, selective=1, rung="best"))
    assert (point.cache_ways, point.miss_queue, point.host) == (4, 8, "on_die")
    assert (point.qps, point.cache_entries, point.selective) == (9, 32, 1)
    with pytest.raises(ValueError, match=r"mrs .*\(--mrs\)"):
        params_point({}, dict(mrs=TOP_DEFAULTS["mr_entries"] + 1))
    run = dict(kind="writes", messages=4, sizes=[128], qps=1, selective=2)
    with pytest.raises(ValueError, match="selective"):
        check_params(run)
