"""The RDMA READ/atomic points of `make sim` (``--design rdma --op read|atomic``) and the
``reads`` parameter of RdmaTop and of the model's Config: every check runs before any
build, and a bad value is refused by name."""

import pytest

from pymodel.rdma.config import Config
from rtl.tops.rdma_top import RdmaTop
from scripts import sim
from tb.rdma.read_point import run_read_point


def _sim_error(argv, capsys):
    with pytest.raises(SystemExit):
        sim.parse_args(argv)
    return capsys.readouterr().err


def test_rdma_op_options_are_checked_before_any_build(capsys):
    assert "--op" in _sim_error(["--design", "rdma", "--op", "store"], capsys)
    assert "--qps" in _sim_error(["--design", "rdma", "--op", "read", "--qps", "4"], capsys)
    assert "--rung" in _sim_error(["--design", "rdma", "--op", "atomic", "--rung", "seq"],
                                  capsys)
    assert "--link-retry" in _sim_error(["--design", "rdma", "--op", "read", "--link-retry"],
                                        capsys)
    assert "--messages" in _sim_error(["--design", "rdma", "--op", "read", "--messages",
                                       "1"], capsys)
    args = sim.parse_args(["--design", "rdma", "--op", "atomic", "--fabric", "pod"])
    assert args.knobs == {"op": "atomic", "fabric": "pod"}
    args = sim.parse_args(["--design", "rdma", "--op", "read", "--host", "pcie"])
    assert args.knobs == {"op": "read", "host": "pcie"}
    assert "host" in _sim_error(["--design", "rdma", "--op", "read", "--host", "usb"], capsys)


def test_read_point_checks_without_building():
    assert run_read_point("verilator", "read", 128, 100, check_only=True) is None
    with pytest.raises(ValueError, match="msg_bytes"):
        run_read_point("verilator", "read", 0, 100, check_only=True)
    with pytest.raises(ValueError, match="op"):
        run_read_point("verilator", "write", 128, 100, check_only=True)
    with pytest.raises(ValueError, match="host"):
        run_read_point("verilator", "read", 128, 100, host="usb", check_only=True)
    # 1,024 READs of 1,000 bytes (17 beats each) do not fit the wire recorder.
    with pytest.raises(ValueError, match="wire recorder"):
        run_read_point("verilator", "read", 1000, 1024, check_only=True)
    assert run_read_point("verilator", "read", 256, 1024, check_only=True) is None
    with pytest.raises(ValueError, match="fabric"):
        run_read_point("verilator", "read", 128, 100, fabric="moon", check_only=True)


def test_reads_parameter_is_named():
    with pytest.raises(ValueError, match="reads"):
        RdmaTop(reads=65)
    with pytest.raises(ValueError, match="reads"):
        RdmaTop(reads=16, header="scaleup")
    with pytest.raises(ValueError, match="reads"):
        Config(reads=65)
    with pytest.raises(ValueError, match="reads"):
        Config(reads=4, header="scaleup")
