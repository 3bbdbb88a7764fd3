"""The "Inference" section of the report: the inference grid's tables and plots.

:func:`inference_section` runs the grid of :mod:`analysis.workloads.grid` (every scenario
at every batch, carried by the NIC and by the RDMA engine on each rung of its
optimisation ladder; KV bytes per token; KV transfers plain and coalesced; the NIM
calibration), writes its PNG plots and ``inference.json`` into a folder and returns the
section's markdown. Both designs are attached alike in every row (the pairings of
:data:`analysis.workloads.grid.PAIRINGS`: the NIC integrated against the RDMA engine on
die, both behind PCIe; each row names its pairing). The tables and plots show the NIC
against two RDMA rungs: the pipelined engine and, per row, the fastest rung the fast
path covers (:data:`SHOWN`, named in each row); ``inference.json`` holds every rung.
docs/inference.md gives each formula and source. matplotlib is imported only in
:mod:`.inference_plots`, when plotting.

The section is split by concern: the shared row picks and table format
(:mod:`.inference_rows`), the plots (:mod:`.inference_plots`), the calibration tables
(:mod:`.inference_calibration`), the markdown (:mod:`.inference_markdown`) and the sweep
tables (:mod:`.inference_sweeps`); this module runs them and re-exports their public names.
"""

import json
import time
from dataclasses import asdict
from pathlib import Path

from analysis.workloads.attention import attention_rows
from analysis.workloads.calibration import nim_calibration
from analysis.workloads.grid import (
    BATCHES,
    CALIBRATION,
    LEVERS,
    PAIRINGS,
    SCENARIOS,
    kv_rows,
    kv_transfer_rows,
    lever_rows,
    run_grid,
    step_calibration,
)

# FASTEST, calibration_markdown, lever_markdown: re-exported for callers of this module.
from .inference_calibration import _CAL_HERE, _more_calibrations, calibration_markdown
from .inference_fastpath import (
    FASTPATH_LONG,
    FASTPATH_SIZES,
    fastpath_check_rows,
    fastpath_markdown,
)
from .inference_markdown import (
    _LEVERS_HERE,
    _markdown,
    attention_markdown,
    lever_markdown,
    serving_markdown,
)
from .inference_plots import _plots
from .inference_rows import FASTEST, SHOWN, _fastest_rows  # noqa: F401
from .inference_sweeps import SWEEP_COLUMNS, sweep_markdown

__all__ = ["inference_section", "SHOWN", "sweep_markdown", "SWEEP_COLUMNS"]


def inference_section(out_dir, *, plots=True, scenarios=SCENARIOS, batches=BATCHES,
                      levers=LEVERS, calibration=CALIBRATION, micro_batches=1,
                      fastpath_sizes=FASTPATH_SIZES, fastpath_long=FASTPATH_LONG,
                      servings=None):
    """Run the inference grid, write plots and ``inference.json`` into ``out_dir``
    (created if missing) and return the markdown of the "Inference" section.

    ``plots=False`` skips matplotlib (the tables and JSON are still written); ``levers``
    picks the rows of the lever table (:data:`analysis.workloads.grid.LEVERS`);
    ``calibration`` (:data:`analysis.workloads.grid.CALIBRATIONS`, default the NIM fit) and
    ``micro_batches`` (2: dual micro-batch overlap) go to the grid. ``fastpath_sizes``:
    the WRITE sizes at which the fast path is checked against the cycle-level model
    (:mod:`.inference_fastpath`; ``inference.json``'s ``fastpath_check``, each row's
    ``within`` says whether it is within tolerance; empty: no check), ``fastpath_long``
    its longer runs ((bytes, QPs, messages); empty: none). ``servings``: the
    deployments of the TPOT table (:data:`analysis.workloads.serving.SERVING` when
    ``None``; empty: no table). The markdown says how long the grid took (wall time,
    seconds).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    grid = run_grid(scenarios, batches, pairings=tuple(PAIRINGS), calibration=calibration,
                    micro_batches=micro_batches)
    grid += _fastest_rows(grid, scenarios, batches)
    t_grid = time.perf_counter() - t_start
    kv = kv_rows()
    kvt = kv_transfer_rows()
    cal, t0 = nim_calibration()
    attention = attention_rows(calibration=calibration) if "attention" in levers else []
    levers = lever_rows(levers=levers, calibration=calibration)
    step_cal = step_calibration(calibration)
    cal2 = _more_calibrations(grid, scenarios, step_cal)
    check = (fastpath_check_rows(sizes=fastpath_sizes, long=fastpath_long)
             if fastpath_sizes or fastpath_long else [])
    from analysis.workloads.serving import SERVING, serving_rows
    servings = SERVING if servings is None else servings
    serving = serving_rows(servings, calibration=calibration) if servings else []
    elapsed = time.perf_counter() - t_start
    pngs = _plots(out, grid, kv, kvt, cal, t0, scenarios, batches) if plots else []
    with open(out / "inference.json", "w") as f:
        json.dump({"grid": grid, "kv_bytes_per_token": kv, "kv_transfer": kvt,
                   "nim_calibration": [dict(asdict(r), residual=r.residual,
                                            calibrated_residual=r.calibrated_residual)
                                       for r in cal], "nim_overhead_ms": t0,
                   "levers": levers, "deepep_calibration": cal2["deepep"],
                   "gpu_sync": cal2["sync"], "fastpath_check": check,
                   "attention_like_for_like": attention, "serving": serving,
                   "grid_seconds": t_grid, "seconds": elapsed}, f, indent=1)
    md = _markdown(grid, kv, kvt, cal, t0, pngs, t_grid, elapsed, scenarios, batches,
                   step_cal, micro_batches)
    md = md.replace(_CAL_HERE, calibration_markdown(cal2))
    md = md.replace(_LEVERS_HERE, lever_markdown(levers) + "\n" + attention_markdown(attention)
                    + "\n" + serving_markdown(serving))
    return md + ("\n\n" + fastpath_markdown(check) if check else "")
