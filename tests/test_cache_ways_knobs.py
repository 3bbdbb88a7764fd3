"""The ``cache_ways`` knob of the RDMA points, load points and fabric model: checked with
an error naming it, and refused by the fast path (whose formulas place QP ``q`` in entry
``q % cache_entries``), so that callers fall back to the cycle model."""

import pytest

from analysis.fastpath import fast_point
from analysis.load.rdma_knobs import check_load_knobs
from analysis.points import resolve
from pymodel.rdma.fabric_system import FabricConfig


@pytest.mark.parametrize("ways", [0, 3, 16, True])
def test_bad_ways_named(ways):
    with pytest.raises(ValueError, match="cache_ways"):
        resolve("rdma", 128, 10, {"cache_ways": ways})
    with pytest.raises(ValueError, match="cache_ways"):
        check_load_knobs(128, 10, {"cache_ways": ways})
    with pytest.raises(ValueError, match="cache_ways"):
        FabricConfig(cache_ways=ways)


def test_ways_need_window_slots():
    with pytest.raises(ValueError, match="cache_ways 4 needs windows > 0"):
        resolve("rdma", 128, 10, {"cache_ways": 4, "windows": 0})


def test_fast_path_refuses_ways():
    assert resolve("rdma", 128, 10, {"cache_ways": 4})[1]["cache_ways"] == 4
    assert check_load_knobs(128, 10, {"cache_ways": 8})["cache_ways"] == 8
    with pytest.raises(ValueError, match="outside the RDMA fast path .*cache_ways"):
        fast_point("rdma", msg_bytes=128, messages=1000, qps=64, cache_ways=4)


@pytest.mark.parametrize("depth", [-1, 65, True])
def test_fabric_refuses_a_bad_miss_queue(depth):
    with pytest.raises(ValueError, match="miss_queue"):
        FabricConfig(miss_queue=depth)
    assert FabricConfig().miss_queue == 0
