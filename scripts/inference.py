"""LLM inference traffic through both designs: the "Inference" report section, or one trace.

Report (default): runs the inference grid (pymodel/workloads/grid.py; the section in
scripts/reporting/inference.py) from the golden model's fast path and writes
build/inference/ (inference.md, inference.json, PNG plots).
Trace: ``--trace MODEL`` writes one decode step (or, with ``--kv``, one KV transfer) in
the replay format of pymodel/workloads/trace.py. docs/inference.md explains every number.

Examples::

    .venv/bin/python scripts/inference.py                      # the section
    .venv/bin/python scripts/inference.py --trace llama-3-70b --tp 8 --batch 4 \\
        --json build/inference/llama70b_tp8_b4.json
    .venv/bin/python scripts/inference.py --trace llama-3-70b --kv --tp 8 \\
        --prompt-tokens 1888 --coalesce layer --json kv.json
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pymodel.workloads.config import model_names  # noqa: E402
from pymodel.workloads.generate import (  # noqa: E402
    ALLREDUCE,
    COALESCE,
    Deployment,
    decode_step,
    kv_transfer,
)
from scripts.reporting.inference import inference_section  # noqa: E402


def parse(argv):
    p = argparse.ArgumentParser(
        description="LLM inference traffic through the NIC and the RDMA engine: the "
                    "'Inference' report section (default) or one trace as JSON.")
    p.add_argument("--out", default=str(ROOT / "build" / "inference"),
                   help="folder for inference.md, inference.json and the PNG plots "
                        "(default build/inference)")
    p.add_argument("--no-plots", action="store_true",
                   help="tables and JSON only (no matplotlib)")
    t = p.add_argument_group("one trace instead of the report")
    t.add_argument("--trace", metavar="MODEL",
                   help=f"write one trace of MODEL ({', '.join(model_names())})")
    t.add_argument("--json", metavar="FILE",
                   help="where to write the trace (default: standard output)")
    t.add_argument("--kv", action="store_true",
                   help="a KV transfer (prefill -> decode) instead of a decode step")
    t.add_argument("--batch", type=int, default=1, help="sequences per attention group")
    t.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    t.add_argument("--ep", type=int, default=1, help="expert-parallel degree (MoE)")
    t.add_argument("--dtype", default="bf16", help="activations on the wire (bf16, fp8)")
    t.add_argument("--allreduce", choices=ALLREDUCE, default="oneshot",
                   help="TP all-reduce: one-shot push or reduce-scatter + all-gather")
    t.add_argument("--prompt-tokens", type=int, default=1888,
                   help="tokens whose KV cache moves (--kv; default 1888 = 118 blocks)")
    t.add_argument("--coalesce", choices=COALESCE, default="none",
                   help="KV descriptors per (layer, block, K/V), per layer run, per page")
    t.add_argument("--run-blocks", type=int, default=None,
                   help="contiguous blocks per allocation run (--kv; default: all)")
    t.add_argument("--expand", action="store_true",
                   help="one JSON entry per message (count 1) for a message-by-message "
                        "replay; refused above 1,000,000 messages")
    return p, p.parse_args(argv)


def main(argv=None):
    parser, args = parse(argv)
    try:
        if args.trace:
            if args.kv:
                tr = kv_transfer(args.trace, prompt_tokens=args.prompt_tokens, tp=args.tp,
                                 coalesce=args.coalesce, run_blocks=args.run_blocks)
            else:
                tr = decode_step(args.trace, Deployment(batch=args.batch, tp=args.tp,
                                                        ep=args.ep, dtype=args.dtype),
                                 allreduce=args.allreduce)
            text = tr.to_json(args.json, expand=args.expand, limit=1_000_000)
            if args.json:
                print(f"{args.json}: {tr.messages:,} messages in {len(tr):,} rows, "
                      f"{len(tr.phases)} phases, {tr.gpus} GPUs")
            else:
                print(text)
            return 0
        t0 = time.perf_counter()
        md = inference_section(args.out, plots=not args.no_plots)
        out = Path(args.out)
        (out / "inference.md").write_text(md + "\n")
        print(f"{out / 'inference.md'}: the Inference section "
              f"({time.perf_counter() - t0:.1f} s)")
        return 0
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    sys.exit(main())
