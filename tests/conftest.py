"""Shared fixtures: the simulator matrix of the co-simulation tests.

Every co-simulation test takes the ``sim`` fixture and so runs on Verilator and Icarus;
``COSIM_SIMS=icarus`` (comma separated) narrows the matrix. Tests that need the same
export or build share it: :func:`tb.cosim.run_cosim` locks the export and the build
folder, so pytest workers may run any tests at once (the first builds, the others wait).

Tests that ``make test`` leaves out (``make test-all`` runs them) are marked ``slow``
beside the test, each with what still covers its block in ``make test`` (the budget is
10 minutes on 2 cores): :func:`_slow_reason`.
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


def pytest_configure(config):
    toolchain_path()


#: The longest tests of ``make test`` (node-id patterns below tests/, ``*`` matching
#: anything): started first, so that
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


def _slow_reason(item):
    """Why ``item`` is slow, from the marks declared beside its test, or ``None``.

    ``@pytest.mark.slow(reason=...)`` marks every variant of a test;
    ``@pytest.mark.slow_variants(pattern, ..., reason=...)`` (on a test, or as a module's
    ``pytestmark``) the variants whose parameter id (the part of the node id in brackets,
    ``*`` matching anything) matches a pattern. Each says what covers the test's block in
    ``make test``; a mark without a reason is an error."""
    variant = item.callspec.id if hasattr(item, "callspec") else ""
    for mark in item.iter_markers():
        if mark.name not in ("slow", "slow_variants"):
            continue
        why = mark.kwargs.get("reason")
        if not why:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{mark.name} needs a reason "
                                    f"(what covers the test's block in make test)")
        if mark.name == "slow" or any(fnmatch.fnmatchcase(variant, p.replace("[", "[[]"))
                                      for p in mark.args):
            return why
    return None


def pytest_collection_modifyitems(config, items):
    items[:] = [i for i in items if _long(i)] + _spread([i for i in items if not _long(i)])
    for item in items:
        why = _slow_reason(item)
        if why and not any(m.name == "slow" for m in item.iter_markers()):
            item.add_marker(pytest.mark.slow(reason=why))


def pytest_generate_tests(metafunc):
    if "sim" in metafunc.fixturenames:
        metafunc.parametrize(
            "sim", [pytest.param(s, marks=[pytest.mark.cosim]) for s in _sims()])


@pytest.fixture
def test_id(request):
    """A folder name unique to this test (and its parameters)."""
    return request.node.name
