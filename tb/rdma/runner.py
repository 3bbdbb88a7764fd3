"""Run the RDMA co-simulation on :class:`RdmaTop` through :func:`tb.cosim.run_cosim`.

Exporting RdmaTop (eight CRC-32 networks) takes minutes; ``run_cosim`` keeps the Verilog
text in ``build/verilog/``, keyed by the RTL sources and the top's parameters, so each
parameter set is exported once per code change.
"""

from pathlib import Path

from rtl.tops.rdma_top import RdmaTop
from spec.design_point.rdma import BEST_CACHE
from tb.cosim import run_cosim
from tb.rdma.point_params import top_params

__all__ = ["run_rdma", "FEATURES_TOP"]

#: One RdmaTop build for three features that each need a build parameter: the context
#: cache of the engine's best cache (its build fields,
#: :data:`spec.design_point.rdma.BEST_CACHE`: 4 ways), the shortest link
#: (``link_latency`` 1) and the responder's READ data FIFO (``read_words``, two packets
#: of the largest MTU). The co-simulations of the three (test_cosim_rdma_ways.py,
#: test_cosim_rdma_link_latency.py, test_cosim_rdma_read.py) share it, so that
#: ``make test`` exports and compiles one top for them, not three (an RdmaTop export is
#: about 30 s of CPU); the golden model runs the same three settings.
FEATURES_TOP = {**top_params(BEST_CACHE, {}), "link_latency": 1, "read_words": 128}


def run_rdma(top_params, *, name="rdma_top", test_module="tb.rdma.cocotb_rdma", params,
             sim=None, test_id="run", opt=None):
    """Build (cached) and run ``test_module`` on ``RdmaTop(**top_params)``."""
    return Path(run_cosim(RdmaTop(**top_params), name=name, test_module=test_module,
                          params=dict(params, top=top_params), sim=sim, test_id=test_id,
                          opt=opt))
