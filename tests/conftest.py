"""Shared fixtures: the simulator matrix of the co-simulation tests.

Every co-simulation test takes the ``sim`` fixture and so runs on Verilator and Icarus;
``COSIM_SIMS=icarus`` (comma separated) narrows the matrix. Tests that need the same
export or build share it: :func:`tb.cosim.run_cosim` locks the export and the build
folder, so pytest workers may run any tests at once (the first builds, the others wait).
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
            "sim", [pytest.param(s, marks=[pytest.mark.cosim]) for s in _sims()])


@pytest.fixture
def test_id(request):
    """A folder name unique to this test (and its parameters)."""
    return request.node.name
