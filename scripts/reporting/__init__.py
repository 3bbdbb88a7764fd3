"""The parts of ``make report`` (scripts/report.py).

- :mod:`.grid`: the golden-model grid (every point, fast path or cycle model).
- :mod:`.rtl_subset`: the co-simulated points, RTL against the cycle-level model.
- :mod:`.tables`: results.csv and report.md.
- :mod:`.plots`: the PNG plots.
- :mod:`.progress`: the progress line of long runs.
"""
