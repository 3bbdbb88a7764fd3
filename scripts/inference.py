"""LLM inference traffic through both designs: the "Inference" report section, or one trace.

Report (default): runs the inference grid (analysis/workloads/grid.py; the section in
scripts/reporting/inference.py) from the golden model's fast path and writes
build/inference/ (inference.md, inference.json, PNG plots).
Trace: ``--trace MODEL`` writes one decode step (or, with ``--kv``, one KV transfer) in
the replay format of analysis/workloads/trace.py.
Sweep: ``--sweep KIND`` varies one knob (analysis/workloads/sweeps.py) and prints a
markdown table (``--json FILE``: the rows): ``context`` (``--contexts``), ``block`` (KV
block size, ``--block-sizes``), ``kv-tp`` (prefill TP against decode TP, ``--prefill-tp``
and ``--decode-tp``), ``links`` (links per accelerator, ``--links``). A bad value exits
with status 2 and a message naming its option. docs/inference.md explains every number.

Examples::

    .venv/bin/python scripts/inference.py                      # the section
    .venv/bin/python scripts/inference.py --trace llama-3-70b --tp 8 --batch 4 \\
        --json build/inference/llama70b_tp8_b4.json
    .venv/bin/python scripts/inference.py --trace llama-3-70b --kv --tp 8 \\
        --prompt-tokens 1888 --coalesce layer --json kv.json
    .venv/bin/python scripts/inference.py --sweep context --contexts 512,2048,8192,32768
    .venv/bin/python scripts/inference.py --sweep kv-tp --prefill-tp 1,2,4,8 --decode-tp 8
    .venv/bin/python scripts/inference.py --sweep links --links 1,2,4,8 --batch 128
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.workloads import sweeps  # noqa: E402
from analysis.workloads.config import model_names  # noqa: E402
from analysis.workloads.generate import (  # noqa: E402
    ALLREDUCE,
    COALESCE,
    Deployment,
    decode_step,
    kv_transfer,
)
from analysis.workloads.grid import CALIBRATION, CALIBRATIONS, PAIRING, PAIRINGS  # noqa: E402
from scripts.reporting.inference import inference_section, sweep_markdown  # noqa: E402

#: What each sweep varies, its option and the sweep function's defaults of the knobs it
#: takes from the shared options (``--model``, ``--tp``, ...).
SWEEPS = {
    "context": ("contexts", sweeps.context_rows),
    "block": ("block_sizes", sweeps.block_rows),
    "kv-tp": ("prefill_tp", sweeps.kv_tp_rows),
    "links": ("links", sweeps.link_rows),
}
#: The list options and the sweeps they apply to.
_LIST_OPTS = {"contexts": ("context",), "block_sizes": ("block",),
              "prefill_tp": ("kv-tp",), "decode_tp": ("kv-tp",), "links": ("links",)}
#: Which shared options each sweep takes (the rest are refused, named).
_SHARED = {"context": ("model", "tp", "ep", "batch", "ports", "allreduce", "pairing",
                       "calibration", "overlap"),
           "links": ("model", "tp", "ep", "batch", "allreduce", "pairing", "calibration",
                     "overlap"),
           "block": ("model", "tp", "prompt_tokens", "coalesce", "pairing"),
           "kv-tp": ("model", "prompt_tokens", "block_tokens", "coalesce", "pairing")}


def _int_list(text):
    """``"512,2048"`` -> ``(512, 2048)``: integers >= 1, comma separated."""
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a comma-separated list of integers, not {text!r}") from None
    if any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"every value must be >= 1, not {text!r}")
    return vals


def parse(argv):
    p = argparse.ArgumentParser(
        description="LLM inference traffic through the NIC and the RDMA engine: the "
                    "'Inference' report section (default) or one trace as JSON.")
    p.add_argument("--out", default=str(ROOT / "build" / "inference"),
                   help="folder for inference.md, inference.json and the PNG plots "
                        "(default build/inference)")
    p.add_argument("--no-plots", action="store_true",
                   help="tables and JSON only (no matplotlib)")
    p.add_argument("--calibration", choices=sorted(CALIBRATIONS), default=None,
                   help=f"decode-step calibration (default {CALIBRATION}: NIM's per-step "
                        "overhead and FlashMLA's HBM efficiency; pure: the bare roofline)")
    p.add_argument("--overlap", action="store_true",
                   help="overlap two micro-batches (DeepSeek's dual micro-batch overlap: "
                        "one computes while the other communicates)")
    p.add_argument("--pairing", choices=sorted(PAIRINGS), default=None,
                   help=f"how both designs attach (sweeps; default {PAIRING})")
    t = p.add_argument_group("one trace instead of the report")
    t.add_argument("--trace", metavar="MODEL",
                   help=f"write one trace of MODEL ({', '.join(model_names())})")
    t.add_argument("--json", metavar="FILE",
                   help="where to write the trace or the sweep's rows (default: standard "
                        "output for a trace, none for a sweep)")
    t.add_argument("--kv", action="store_true",
                   help="a KV transfer (prefill -> decode) instead of a decode step")
    t.add_argument("--batch", type=int, default=None,
                   help="sequences per attention group (default 1; sweeps: their own)")
    t.add_argument("--tp", type=int, default=None,
                   help="tensor-parallel degree (of the prefill side for --kv; default 1; "
                        "sweeps: their own)")
    t.add_argument("--decode-tp", type=_int_list, default=None, metavar="LIST",
                   help="--kv: TP of the decode side (one value; default --tp); "
                        "--sweep kv-tp: the decode TPs (default 8)")
    t.add_argument("--ep", type=int, default=None,
                   help="expert-parallel degree (MoE; default 1; sweeps: their own)")
    t.add_argument("--dtype", default="bf16", help="activations on the wire (bf16, fp8)")
    t.add_argument("--allreduce", choices=ALLREDUCE, default=None,
                   help="TP all-reduce: one-shot push, reduce-scatter + all-gather, or auto "
                        "(one-shot below vLLM's custom all-reduce threshold, else RS+AG) "
                        "(default oneshot; sweep context: rsag)")
    t.add_argument("--prompt-tokens", type=int, default=None,
                   help="tokens whose KV cache moves (--kv; default 1888 = 118 blocks)")
    t.add_argument("--block-tokens", type=int, default=None,
                   help="tokens per KV block (--kv, --sweep kv-tp; default 16, vLLM's)")
    t.add_argument("--coalesce", choices=COALESCE, default=None,
                   help="KV descriptors per (layer, block, K/V), per layer run, per page "
                        "(default none)")
    t.add_argument("--run-blocks", type=int, default=None,
                   help="contiguous blocks per allocation run (--kv; default: all)")
    t.add_argument("--expand", action="store_true",
                   help="one JSON entry per message (count 1) for a message-by-message "
                        "replay; refused above 1,000,000 messages")
    w = p.add_argument_group("a sweep of one knob instead of the report")
    w.add_argument("--sweep", choices=sorted(SWEEPS),
                   help="context: context length; block: KV block size; kv-tp: prefill "
                        "TP against decode TP; links: links per accelerator")
    w.add_argument("--model", choices=model_names(), default=None,
                   help="the sweep's model (default: context, block, kv-tp llama-3-70b; "
                        "links deepseek-v3)")
    w.add_argument("--ports", type=int, default=None,
                   help="--sweep context: links per GPU (default 8, NVLink-class)")
    w.add_argument("--contexts", type=_int_list, metavar="LIST",
                   help="--sweep context: context lengths in tokens (default "
                        f"{','.join(map(str, sweeps.CONTEXTS))})")
    w.add_argument("--block-sizes", type=_int_list, metavar="LIST",
                   help="--sweep block: tokens per KV block (default "
                        f"{','.join(map(str, sweeps.BLOCK_SIZES))})")
    w.add_argument("--prefill-tp", type=_int_list, metavar="LIST",
                   help="--sweep kv-tp: prefill TPs (default "
                        f"{','.join(map(str, sweeps.PREFILL_TP))})")
    w.add_argument("--links", type=_int_list, metavar="LIST",
                   help="--sweep links: links per accelerator (default "
                        f"{','.join(map(str, sweeps.LINKS))})")
    return p, p.parse_args(argv)


def _given(args, name):
    v = getattr(args, name)
    return v is not None and v is not False


def _sweep(parser, args):
    """Run ``--sweep``: check that every option given applies to it (naming the first that
    does not), call its function with the options given and print its table."""
    kind = args.sweep
    if args.trace or args.kv:
        parser.error(f"--sweep {kind}: --trace and --kv do not apply to a sweep")
    for name, kinds in _LIST_OPTS.items():
        if kind not in kinds and _given(args, name):
            parser.error(f"--{name.replace('_', '-')} applies to --sweep "
                         f"{' or '.join(kinds)}, not --sweep {kind}")
    shared = _SHARED[kind]
    for name in ("model", "tp", "ep", "batch", "ports", "allreduce", "pairing",
                 "calibration", "overlap", "prompt_tokens", "block_tokens", "coalesce"):
        if name not in shared and _given(args, name):
            parser.error(f"--{name.replace('_', '-')} does not apply to --sweep {kind}")
    kw = {n: getattr(args, n) for n in shared if n != "overlap" and _given(args, n)}
    if args.overlap:
        kw["micro_batches"] = 2
    for name, kinds in _LIST_OPTS.items():
        if kind in kinds and _given(args, name):
            kw[name] = getattr(args, name)
    _, fn = SWEEPS[kind]
    try:
        rows = fn(**kw)
    except sweeps.SweepError as exc:
        parser.error(f"--{exc.param.replace('_', '-')}: {exc.detail}")
    print(sweep_markdown(kind, rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
        print(f"{args.json}: {len(rows)} rows")
    return 0


def main(argv=None):
    parser, args = parse(argv)
    try:
        if args.sweep:
            return _sweep(parser, args)
        for name in ("contexts", "block_sizes", "prefill_tp", "links", "model", "ports",
                     "pairing"):
            if _given(args, name):
                parser.error(f"--{name.replace('_', '-')} applies to --sweep only")

        def arg(name, default):
            v = getattr(args, name)
            return default if v is None else v

        if args.decode_tp is not None and not args.trace:
            parser.error("--decode-tp applies to --trace MODEL --kv or --sweep kv-tp")
        if args.trace:
            if args.decode_tp is not None and (not args.kv or len(args.decode_tp) != 1):
                parser.error("--decode-tp: one value, with --kv (or use --sweep kv-tp)")
            if args.kv:
                tr = kv_transfer(args.trace, prompt_tokens=arg("prompt_tokens", 1888),
                                 tp=arg("tp", 1), coalesce=arg("coalesce", "none"),
                                 run_blocks=args.run_blocks,
                                 block_tokens=arg("block_tokens", 16),
                                 decode_tp=args.decode_tp[0] if args.decode_tp else None)
            else:
                tr = decode_step(args.trace, Deployment(batch=arg("batch", 1),
                                                        tp=arg("tp", 1), ep=arg("ep", 1),
                                                        dtype=args.dtype),
                                 allreduce=arg("allreduce", "oneshot"))
            text = tr.to_json(args.json, expand=args.expand, limit=1_000_000)
            if args.json:
                print(f"{args.json}: {tr.messages:,} messages in {len(tr):,} rows, "
                      f"{len(tr.phases)} phases, {tr.gpus} GPUs")
            else:
                print(text)
            return 0
        t0 = time.perf_counter()
        md = inference_section(args.out, plots=not args.no_plots,
                               calibration=arg("calibration", CALIBRATION),
                               micro_batches=2 if args.overlap else 1)
        out = Path(args.out)
        (out / "inference.md").write_text(md + "\n")
        print(f"{out / 'inference.md'}: the Inference section "
              f"({time.perf_counter() - t0:.1f} s)")
        return 0
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    sys.exit(main())
