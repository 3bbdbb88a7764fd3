"""Run the RDMA co-simulation on :class:`RdmaTop` through :func:`tb.cosim.run_cosim`.

Exporting RdmaTop (eight CRC-32 networks) takes minutes; ``run_cosim`` keeps the Verilog
text in ``build/verilog/``, keyed by the RTL sources and the top's parameters, so each
parameter set is exported once per code change.
"""

from pathlib import Path

from rtl.tops.rdma_top import RdmaTop
from tb.cosim import run_cosim

__all__ = ["run_rdma"]


def run_rdma(top_params, *, name="rdma_top", test_module="tb.rdma.cocotb_rdma", params,
             sim=None, test_id="run", opt=None):
    """Build (cached) and run ``test_module`` on ``RdmaTop(**top_params)``."""
    return Path(run_cosim(RdmaTop(**top_params), name=name, test_module=test_module,
                          params=dict(params, top=top_params), sim=sim, test_id=test_id,
                          opt=opt))
