"""One open-loop RDMA point in co-simulation (RdmaTop, the ``load`` scenario of
:mod:`tb.rdma.cocotb_rdma`): RTL against the model, every record compared cycle for
cycle by the cocotb test; returns both sides' load rows.

The co-simulation loads the issuer's MMIO writes into the top's timed MMIO player (each
doorbell released at the cycle :mod:`analysis.load.rdma` says), so RTL and model see the
same arrivals. The row of each side comes from its own records through the same
reduction (:func:`analysis.load.rdma.load_row`).
"""

import json

import numpy as np

from analysis.load.rdma import load_row
from tb.rdma.runner import run_rdma

__all__ = ["run_rdma_load"]

TOP = {}          # the defaults: one build per simulator, shared with tests/test_cosim_rdma.py


def run_rdma_load(sim, test_id, *, msg_bytes, messages, load, service_cycles, seed=1,
                  cache_entries=16, knobs=None, **load_knobs):
    """Run the point; return ``{"rtl": row, "model": row, "mismatches": n, ...}`` (the
    cocotb test fails on any mismatch, so a returned result has none unless the caller
    reads a failed run's folder)."""
    params = dict(kind="load", msg_bytes=msg_bytes, messages=messages, load=load,
                  service_cycles=service_cycles, seed=seed, cache_entries=cache_entries,
                  knobs=knobs or {}, out_json="m.json", **load_knobs)
    folder = run_rdma(TOP, params=params, sim=sim, test_id=test_id)
    got = json.loads((folder / "m.json").read_text())
    out = {"mismatches": got["mismatches"], "cycles": got["cycles"]}
    for side in ("rtl", "model"):
        per = got.get(f"per_{side}")
        out[side] = None if per is None else load_row(
            {k: np.asarray(v, dtype=np.int64) for k, v in per.items()}, load,
            service_cycles)
        out[f"per_{side}"] = per
    return out
