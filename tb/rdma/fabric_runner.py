"""Run the RDMA fabric co-simulation on :class:`RdmaFabricTop` through
:func:`tb.cosim.run_cosim` (exported Verilog cached in ``build/verilog/``, the simulator
build in ``build/cosim/<sim>/``)."""

from pathlib import Path

from rtl.tops.rdma_fabric_top import RdmaFabricTop
from tb.cosim import run_cosim

__all__ = ["run_fabric"]


def run_fabric(top_params, *, params, sim=None, test_id="run", name="rdma_fabric_top",
               test_module="tb.rdma.cocotb_fabric"):
    """Build (cached) and run ``test_module`` on ``RdmaFabricTop(**top_params)``."""
    return Path(run_cosim(RdmaFabricTop(**top_params), name=name, test_module=test_module,
                          params=dict(params, top=top_params), sim=sim, test_id=test_id))
