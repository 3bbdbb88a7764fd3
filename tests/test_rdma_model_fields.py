"""pymodel/rdma/point_fields.py: the design point's fields as the model's knobs. The
model's point (analysis.points), the load knobs (analysis.load.rdma_knobs) take their
defaults and checks from spec.design_point.RdmaPoint; the defaults are the values they
had as their own lists (written out here)."""

import pytest

from analysis.load.rdma_knobs import RDMA_LOAD_DEFAULTS, check_load_knobs
from analysis.points import RDMA_DEFAULTS, resolve
from pymodel.rdma.point_fields import MODEL_FIELDS, NOT_MODEL, check_fields


def test_model_defaults_are_the_points():
    assert {k: RDMA_DEFAULTS[k] for k in MODEL_FIELDS} == dict(
        header="roce", qps=1, cache_entries=16, cache_ways=1, qpc_bytes=256, mr_cache=0,
        mrs=1, host="pcie", miss_queue=0, link_latency=6, rung="pipelined")
    assert not set(NOT_MODEL) & set(RDMA_DEFAULTS)
    load = {k: RDMA_LOAD_DEFAULTS[k] for k in ("qps", "cache_entries", "host",
                                               "link_latency", "cache_ways", "miss_queue",
                                               "qpc_bytes")}
    assert load == dict(qps=1, cache_entries=16, host="pcie", link_latency=6, cache_ways=1,
                        miss_queue=0, qpc_bytes=256)


@pytest.mark.parametrize("knob,value,option", [
    ("miss_queue", 65, "--miss-queue"), ("cache_ways", 3, "--cache-ways"),
    ("qps", 4097, "--qps"), ("mrs", 17, "--mrs"), ("host", "cxl", "--host"),
])
def test_model_and_load_checks_name_keyword_and_option(knob, value, option):
    for check in (lambda: resolve("rdma", 128, 10, {knob: value}),
                  lambda: check_load_knobs(128, 10, {knob: value})
                  if knob in RDMA_LOAD_DEFAULTS else check_fields({knob: value})):
        with pytest.raises(ValueError) as err:
            check()
        text = str(err.value)
        assert text.startswith(knob) and text.endswith(f"({option})"), text


def test_model_only_knobs_keep_their_checks():
    with pytest.raises(ValueError, match="pmtu_log2 must be an integer from 8 to 12"):
        resolve("rdma", 128, 10, {"pmtu_log2": 7})
    with pytest.raises(ValueError, match="needs windows > 0"):
        resolve("rdma", 128, 10, {"cache_ways": 2, "windows": 0})
    with pytest.raises(ValueError, match="unknown knob"):
        resolve("rdma", 128, 10, {"topology": "switch"})
