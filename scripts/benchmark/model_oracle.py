"""The RDMA golden model's whole output on many scenarios, recorded and compared.

A speed-up of :func:`pymodel.rdma.system.simulate` must leave every output as it was:
every frame and beat cycle on both links, every stamp and mark, every counter, both
host memories, and the exception a stuck scenario raises. This script holds a tree's
model against a record made on another tree (main, say)::

    python -m scripts.benchmark.model_oracle collect build/oracle/params.jsonl
    python -m scripts.benchmark.model_oracle record build/oracle/params.jsonl build/oracle/main.pkl
    # ... change the model ...
    python -m scripts.benchmark.model_oracle compare build/oracle/params.jsonl build/oracle/main.pkl

``collect`` runs the test suite's tests of RdmaTop (``pytest -k "rdma and not fabric"``,
the slow ones too; about two minutes) with the co-simulation through
:mod:`tb.rdma.runner` replaced by a recorder of its parameters (those tests are then
skipped; the other tests run as usual), and adds chunks of
``make soak`` (WRITEs with faults, selective repeat, READs and atomics): one JSON line
per distinct scenario. ``record`` runs the model on each and pickles the outputs;
``compare`` runs them again and prints each scenario whose output differs, with the
keys that differ, and exits 1 if one does. Both print the model's CPU time in all
(``time.process_time``: the figure to compare speed-ups by on a shared machine).
Parameters a test gives only to see them refused are kept, with the error they raise.
"""

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

__all__ = ["collect", "soak_chunks", "model_output", "differences", "main"]

#: The environment variable that switches the pytest plugin of this module on.
OUT_ENV = "MODEL_ORACLE_OUT"


@pytest.fixture(autouse=True)
def _record_rdma_params(monkeypatch):
    """(pytest plugin, ``-p scripts.benchmark.model_oracle``) With :data:`OUT_ENV` set,
    every RdmaTop co-simulation a test asks for appends its parameters to that file
    and skips the test instead of running."""
    out = os.environ.get(OUT_ENV)
    if out:
        import tb.rdma.runner as runner

        def record(top, *, name, test_module, params=None, **_):
            if test_module == "tb.rdma.cocotb_rdma":
                with open(out, "a") as f:
                    f.write(json.dumps(params, sort_keys=True, default=str) + "\n")
            pytest.skip("model_oracle: parameters recorded")
        monkeypatch.setattr(runner, "run_cosim", record)
    yield


def soak_chunks():
    """Parameters of five chunks of ``make soak``'s RDMA part at its default rates
    (seed 1): WRITE chunks 0, 1 and 305 (heavy recovery), chunk 2 with selective
    repeat, chunk 3 of a mix of WRITEs, READs and atomics (300 operations)."""
    from scripts.soak import _args as soak_args
    from tb.soak import rdma as soak

    out = []
    for index, options in ((0, []), (1, []), (305, []), (2, ["--selective"]),
                           (3, ["--mix", "2:1:1"])):
        args = soak_args(["--seed", "1", *options])     # (the soak's own default rates)
        p = soak.chunk_params(args, index, 300 if soak.mixed(args) else soak.CHUNK, "oracle")
        p["top"] = dict(soak.MIXED_TOP if soak.mixed(args) else soak.TOP)
        out.append(p)
    return out


def collect(path):
    """Write the distinct scenarios of the fast suite's RDMA co-simulations and of
    :func:`soak_chunks` to ``path`` (JSON lines); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = path.with_suffix(".raw")
    raw.unlink(missing_ok=True)
    env = dict(os.environ, **{OUT_ENV: str(raw.resolve())})
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
           "-p", "scripts.benchmark.model_oracle", "-m", "slow or not slow",
           "-k", "rdma and not fabric", "tests/"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    if done.returncode not in (0, 5):
        raise SystemExit(f"model_oracle: the tests failed (exit {done.returncode}): "
                         f"{' '.join(cmd)}")
    lines = raw.read_text().splitlines() if raw.exists() else []
    lines += [json.dumps(p, sort_keys=True) for p in soak_chunks()]
    distinct = list(dict.fromkeys(lines))
    path.write_text("".join(line + "\n" for line in distinct))
    raw.unlink(missing_ok=True)
    return len(distinct)


def model_output(p):
    """The golden model's output of the scenario ``p`` (what
    :func:`tb.rdma.run_inputs.run_model` returns), or ``(what, exception type, message)``
    when its parameters are refused or the model raises."""
    from tb.rdma.run_inputs import config, run_model, scenario, with_cq

    try:
        cfg, knobs = config(p["top"], p)
        v, inject, _ = scenario(p, cfg, knobs)
        cfg = with_cq(cfg, v)
    except (ValueError, TypeError, KeyError) as exc:
        return ("refused", type(exc).__name__, str(exc))
    try:
        return run_model(cfg, v, inject, tuple(p.get("inject_stall", (1, 0))),
                         p.get("model_mmio_delay", 0), p.get("model_limit", 1 << 26))
    except Exception as exc:            # noqa: BLE001 (an exception is an output too)
        return ("raised", type(exc).__name__, str(exc))


def differences(want, got):
    """The top-level keys of two model outputs whose values differ (``["output"]`` when
    either is not a dict of outputs); ``[]`` when they are equal."""
    if want == got:
        return []
    if isinstance(want, dict) and isinstance(got, dict):
        return sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    return ["output"]


def _run_all(params):
    outputs, cpu = [], 0.0
    for k, p in enumerate(params):
        t = time.process_time()
        outputs.append(model_output(p))
        cpu += time.process_time() - t
        print(f"\r{k + 1}/{len(params)} scenarios", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return outputs, cpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("collect", "record", "compare"))
    ap.add_argument("params", help="the scenarios (JSON lines; collect writes them)")
    ap.add_argument("record", nargs="?", help="the pickled outputs (record, compare)")
    args = ap.parse_args(argv)
    if args.action == "collect":
        print(f"{collect(args.params)} scenarios in {args.params}")
        return 0
    if not args.record:
        ap.error(f"{args.action} needs the file of recorded outputs (argument record)")
    params = [json.loads(line) for line in Path(args.params).read_text().splitlines()]
    outputs, cpu = _run_all(params)
    print(f"{len(params)} scenarios, model CPU time {cpu:.2f} s")
    if args.action == "record":
        Path(args.record).write_bytes(pickle.dumps(outputs))
        return 0
    want = pickle.loads(Path(args.record).read_bytes())
    if len(want) != len(outputs):
        raise SystemExit(f"{args.record} holds {len(want)} outputs, {args.params} "
                         f"{len(outputs)} scenarios")
    bad = 0
    for k, (w, g) in enumerate(zip(want, outputs, strict=True)):
        keys = differences(w, g)
        if keys:
            bad += 1
            print(f"scenario {k} ({params[k].get('kind')}): differs in {', '.join(keys)}")
    print(f"{bad} of {len(params)} scenarios differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
