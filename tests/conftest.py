"""Shared fixtures: the simulator matrix of the co-simulation tests.

Every co-simulation test takes the ``sim`` fixture and so runs on Verilator and Icarus;
``COSIM_SIMS=icarus`` (comma separated) narrows the matrix. Tests of one simulator share
build folders, so each simulator is an ``xdist_group``: ``pytest -n 2 --dist loadgroup``
keeps them on one worker.
"""

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


def pytest_configure(config):
    toolchain_path()


def pytest_generate_tests(metafunc):
    if "sim" in metafunc.fixturenames:
        metafunc.parametrize(
            "sim", [pytest.param(s, marks=[pytest.mark.xdist_group(s), pytest.mark.cosim])
                    for s in _sims()])


@pytest.fixture
def test_id(request):
    """A folder name unique to this test (and its parameters)."""
    return request.node.name
