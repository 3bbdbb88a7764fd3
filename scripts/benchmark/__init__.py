"""The measurements of ``make bench`` (scripts/bench.py), one module each.

- :mod:`.models`: golden-model messages per second (cycle-level model and fast path).
- :mod:`.cosim`: co-simulation cycles and messages per second on Verilator and Icarus,
  with and without waveforms.
- :mod:`.make_test`: the wall time of ``make test`` (recorded by ``make test`` itself,
  or measured here).
- :mod:`.output`: bench.json and the printed tables.
- :mod:`.alone` (run on its own, not by ``make bench``): the Verilated model of a
  co-simulation build, built around a C++ clock loop and measured without cocotb.

docs/bench.md says what each figure covers.
"""

import argparse
from pathlib import Path

__all__ = ["positive_int", "ROOT", "BENCH_DIR", "MAKE_TEST_RECORD", "MAKE_SIM_RECORD", "DESIGNS",
           "SIMULATORS", "SIM_KEYS", "OPT_LEVELS", "MSG_BYTES", "MODEL_KNOBS", "WARMUP_MESSAGES",
           "CLOCK_ONLY_CYCLES"]

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "build" / "bench"
MAKE_TEST_RECORD = BENCH_DIR / "make_test_wall_s.json"
#: The wall time of the last headline ``make sim`` (no ARGS), written by the Makefile.
MAKE_SIM_RECORD = BENCH_DIR / "make_sim_wall_s.json"
DESIGNS = ("nic", "rdma")
SIMULATORS = ("verilator", "icarus")
SIM_KEYS = ("verilator", "icarus", "verilator_waves", "icarus_waves")
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os")
MSG_BYTES = 128
#: Knobs of the headline point of each design on the golden models.
MODEL_KNOBS = {"nic": {"framing": "compact", "peers": 1}, "rdma": {"qps": 1}}
#: Messages of the throw-away run that builds a top before it is measured.
WARMUP_MESSAGES = 2
#: Cycles of the clock-only run of each top (:func:`.cosim.measure_clock_only`), per
#: simulator: about a second of wall time on each.
CLOCK_ONLY_CYCLES = {"verilator": 200_000, "icarus": 5_000}


def positive_int(text):
    """An argparse type: a whole number of at least 1 (the error names what was given)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value
