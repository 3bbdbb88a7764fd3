"""The markdown of the "Inference" section (:mod:`scripts.reporting.inference`): its
tables of the grid, the lever table, the KV tables and the NIM calibration."""

from analysis.workloads.calibration import HBM_EFFICIENCY, NIM, NIM_CHECK, NIM_FIT, nim_calibration
from analysis.workloads.config import load_model
from analysis.workloads.grid import (
    ACCELERATOR,
    CONTEXT,
    ISSUER,
    KV_CASE,
    KV_RUNG,
    LEVER_KV_BATCH,
    LEVER_KV_ISSUER,
    LEVER_PROMPT,
    NIC_ISSUER,
    PAIRING,
    PAIRINGS,
)
from analysis.workloads.roofline import ACCELERATORS, REMEDY

from .inference_calibration import _CAL_HERE, _calibration_words
from .inference_rows import SHOWN, _pick, _table, _v

_LEVERS_HERE = "<!-- levers -->"


def lever_markdown(rows):
    """The lever table (:func:`analysis.workloads.grid.lever_rows`) as markdown."""
    out = ["### Levers: what each does to coordination density", "",
           f"Pairing `{PAIRING}`. RDMA: the fastest covered rung (named); decode steps "
           f"posted by the `{ISSUER}` issuer (GPU warps), KV transfers (one request of "
           f"{LEVER_PROMPT:,} "
           f"prompt tokens) by a `{LEVER_KV_ISSUER}` issuer. Control per useful KiB: the "
           "RDMA engine's per-message actions, the NIC's link credits (one per 64-byte "
           "beat). Descriptors (WQEs) per MiB of useful bytes. State bits in flight: "
           "each design's high-water mark times ports and GPUs (the whole deployment). "
           "Time: the step (decode "
           "rows, roofline max(compute, memory) + communication + the calibration's "
           "overhead, as the grid) or the transfer over one "
           f"port (KV rows); the attention rows add the KV read of a step at batch "
           f"{LEVER_KV_BATCH}, context {CONTEXT}, on {ACCELERATOR} at the calibrated HBM "
           "efficiency (what MHA -> GQA -> MQA "
           "-> MLA buys, a memory term).", ""]
    body = []
    for r in rows:
        t_nic = r.get("nic_step_ms", r["nic_us"] / 1e3)
        t_rdma = r.get("rdma_step_ms", r["rdma_us"] / 1e3)
        body.append([r["lever"], r["setting"], r["workload"], r["messages"],
                     r["nic_credits_per_kib"], r["rdma_ctrl_per_kib"], r["rdma_wqes_per_mib"],
                     r["rdma_rung"], r["rdma_host_per_useful"],
                     f"{r['nic_inflight_bits']:,.0f} / {r['rdma_inflight_bits']:,.0f}",
                     t_nic, t_rdma,
                     "step" if "nic_step_ms" in r else "transfer",
                     r.get("kv_read_ms", "-")])
    out += [_table(["lever", "setting", "workload", "messages", "NIC credits / useful KiB",
                    "RDMA control / useful KiB", "RDMA descriptors / MiB", "RDMA rung",
                    "RDMA host B / useful B", "state bits in flight NIC / RDMA", "NIC ms",
                    "RDMA ms", "time is", "KV read ms"], body), ""]
    return "\n".join(out)



def serving_markdown(rows):
    """The deployments at the latency target (:func:`analysis.workloads.serving.serving_rows`)."""
    if not rows:
        return ""
    from analysis.workloads.serving import TPOT_TARGET_S
    t = TPOT_TARGET_S * 1e3
    out = [f"### Deployments at TPOT <= {t:.0f} ms", "",
           f"Per deployment and design, the largest batch (per attention group, of "
           f"1, 2, 4, ..., 256) whose calibrated decode step is at most {t:.0f} ms and "
           "whose weights and KV cache fit; tokens/s per GPU at that batch and the time "
           "per output token (TPOT). Pairing "
           f"`{PAIRING}` (the NIC integrated, the RDMA engine on die; the attachment "
           "column names each). In one scale-up domain the design is the domain's fabric "
           "and carries every message (8 ports of 64 B/cycle a GPU). Across nodes the "
           "design is the scale-out NIC: it carries the messages between nodes on one "
           "400 Gb/s port a GPU (a ConnectX-7 a GPU, as in a DGX H100), while NVLink "
           "carries those inside a node at the same time (timed as the NIC's model on 8 "
           "ports with SM-issued stores, the same in both designs' rows); a phase lasts "
           "the longer of the two. Every path crosses one switch hop of the fabric "
           "profile named (`rack`: 75 ns links, a 250 ns switch). 'limit': what stopped the "
           "batch. DeepSeek-V3: 32 redundant experts placed as DeepSeek's load balancer "
           "does, each step's routing drawn at random (the busiest GPU sets the step). TP "
           "all-reduces as vLLM chooses: TP16 goes to NCCL's ring (30 dependent steps, one "
           "channel per port, or per GPU of a node across nodes).", ""]
    body = [[r["deployment"], r["design"], r["attachment"], r["fabric"],
             f"{r['link_gbps']:g}", r["issue"], r["rung"], r["batch"],
             "-" if r["tpot_ms"] is None else r["tpot_ms"],
             r["tok_s_gpu"], "-" if r["comm_ms"] is None else r["comm_ms"], r["limit"]]
            for r in rows]
    out += [_table(["deployment", "design", "attachment", "fabric",
                    "design's port Gb/s", "issue cost", "RDMA rung",
                    "batch", "TPOT ms", "tokens/s per GPU", "communication ms",
                    "limit"], body), ""]
    return "\n".join(out)


def attention_markdown(rows):
    """The like-for-like attention table (:func:`analysis.workloads.attention.attention_rows`)."""
    if not rows:
        return ""
    r0 = rows[0]
    out = ["### Attention like for like: cached bytes, sequences that fit, the batch", "",
           f"One model ({r0['model'].rsplit(' ', 1)[0]}: same layers, width and heads) at "
           f"four ways of caching K and V, TP{r0['tp']} (RS+AG, 8 ports), context "
           f"{r0['context']:,}, on {ACCELERATOR} with the grid's calibration; pairing "
           f"`{PAIRING}`, RDMA the fastest covered rung. 'fit' is the most sequences "
           "whose KV cache fits next to the weights (one more would not). MQA's single KV "
           "head is replicated on every TP rank, so at TP8 it caches per GPU what GQA's "
           "one-of-8 heads do; the MLA latent is held whole by every rank.", ""]
    body = [[r["attention"], f"{r['kv_bytes_per_token']:,}", r["fit_batch"],
             r["b64_nic_step_ms"], r["b64_rdma_step_ms"], r["b64_rdma_ctrl_per_kib"],
             r.get("fit_nic_step_ms", "-"), r.get("fit_rdma_step_ms", "-"),
             r.get("fit_nic_tok_s_gpu", "-"), r.get("fit_rdma_tok_s_gpu", "-"),
             r.get("fit_rdma_ctrl_per_kib", "-")] for r in rows]
    out += [_table(["attention", "KV B / token", "sequences that fit",
                    "step ms at 64 NIC", "step ms at 64 RDMA", "RDMA control / KiB at 64",
                    "step ms at fit NIC", "step ms at fit RDMA", "tokens/s/GPU at fit NIC",
                    "tokens/s/GPU at fit RDMA", "RDMA control / KiB at fit"], body), ""]
    return "\n".join(out)


def _markdown(grid, kv, kvt, cal, t0, pngs, t_grid, elapsed, scenarios, batches, step_cal,
              micro_batches):
    acc = ACCELERATORS[ACCELERATOR]
    md = ["## Inference", "",
          "One decode step of real models, carried by both designs (per-message costs "
          "from the golden model's fast path; the NIC behind PCIe from its cycle-level "
          "model), and a decode roofline on "
          f"{acc.title} (HBM {acc.hbm_bytes_per_s / 1e12:.2f} TB/s, dense BF16 "
          f"{acc.bf16_flops / 1e12:.0f} TFLOP/s, FP8 {acc.fp8_flops / 1e12:.0f}). "
          f"Context {CONTEXT} tokens, KV cache BF16; NIC = compact header; RDMA = the "
          "pipelined engine and, per row, the fastest rung of its ladder that the fast "
          "path covers (named; every rung is in inference.json), posted by "
          f"`{ISSUER}` (GPU warps as DeepEP's IBGDA code posts: a poster and a doorbell per "
          "QP, posting in parallel; a doorbell per 4 WQEs, every WQE signalled, where the "
          "rung does not set its own; each WQE and doorbell priced from its atomics, "
          "fences and stores, docs/inference.md section 5); the NIC's stores issued by "
          "the SMs (`"
          f"{NIC_ISSUER}`: ceil(B / 512) warp-wide 16-byte stores at one a cycle, 1.98 "
          "GHz, and a system-scope fence before each flag that waits for the last data "
          "store's completion, a warp per peer). Both designs are attached alike in every "
          "row: pairing `integrated` = the NIC inside the accelerator against the RDMA "
          "engine on the `on_die` host profile; `pcie` = both behind the PCIe profile "
          f"(plots: `{PAIRING}`). "
          + _calibration_words(step_cal, micro_batches) + " "
          "Formulas and sources: docs/inference.md. The whole grid "
          f"({len(grid)} rows) ran in {t_grid:.1f} s, the section in {elapsed:.1f} s.", ""]
    md += ["### Communication per decode step", "",
           "Per-step communication time (critical path over the phases' dependencies) and "
           "the share of it that is not payload on the links (organising). `ports`: copies "
           "of the design per GPU (8 for scale-up TP, NVLink-class; 1 for scale-out EP).",
           ""]
    show = [b for b in (1, 16, 64, 256) if b in batches]
    comm = [sc for sc in scenarios if sc.tp > 1 or sc.ep > 1]
    rows = []
    (_, _), (pipe, _), (best, _) = SHOWN
    for pairing, knobs in PAIRINGS.items():
        att = f"{knobs['nic']['attachment']} / {knobs['rdma']['host']}"
        for sc in comm:
            for b in show:
                n = _pick(grid, sc.label, b, "nic", pairing)
                rp = _pick(grid, sc.label, b, pipe, pairing)
                rb = _pick(grid, sc.label, b, best, pairing)
                rows.append([pairing, att, sc.label, b, sc.ports, n["messages"],
                             n["coordination_s"] * 1e6, _v(rp, "coordination_s", 1e6),
                             _v(rb, "coordination_s", 1e6),
                             "n/c" if rb is None else rb["rung"],
                             "n/c" if rb is None else rb["coordination_s"]
                             / n["coordination_s"],
                             100 * n["organising_s"] / n["coordination_s"],
                             "n/c" if rb is None else 100 * rb["organising_s"]
                             / rb["coordination_s"]])
    md += [_table(["pairing", "attachment NIC / RDMA", "scenario", "batch", "ports",
                   "messages / step", "NIC us", "RDMA pipelined us", "RDMA fastest us",
                   "fastest rung", "fastest / NIC", "NIC organising %",
                   "RDMA fastest organising %"], rows), ""]
    md += ["### Coordination density per design", "",
           "Per decoded token (all GPUs of the deployment): the RDMA engine's per-message "
           "control actions (doorbells, WQE reads, context lookups, misses and "
           "write-backs, ACKs, CQEs), per token and per KiB of useful bytes (the payload "
           "of data messages; flags and counts are not useful bytes); the NIC's link "
           "credit updates apart (one per 64-byte beat, a counter in the link, no "
           "per-message state: not the same kind of action); the state each design holds "
           "in flight (its high-water mark while streaming the step's heaviest message "
           "class, times ports and GPUs, per token); host-interface bytes per useful byte "
           "(payload, control and TLP overheads at both ends; the integrated NIC has none: "
           "its stores come from the accelerator's fabric).", ""]
    rows = []
    for pairing in PAIRINGS:
        for sc in comm:
            for b in (x for x in (1, 256) if x in batches):
                n = _pick(grid, sc.label, b, "nic", pairing)
                for key, what in SHOWN[1:]:
                    r = _pick(grid, sc.label, b, key, pairing)
                    label = what if key != best or r is None else f"{what} ({r['rung']})"
                    rows.append([pairing, sc.label, b, label, r["attachment"] if r else "n/c",
                                 _v(r, "ctrl_ops_per_token"), _v(r, "ctrl_per_useful_kb"),
                                 _v(r, "inflight_bits_per_token"),
                                 _v(r, "host_bytes_per_useful_byte"),
                                 _v(r, "step_s", 1e3)])
                rows.append([pairing, sc.label, b, "NIC", n["attachment"],
                             f"{n['credits_per_token']:,.0f} credits",
                             f"{n['credits_per_token'] * 1024 / n['useful_bytes_per_token']:.2f}"
                             " credits", n["inflight_bits_per_token"],
                             n["host_bytes_per_useful_byte"] if n["attachment"] == "pcie"
                             else "-", n["step_s"] * 1e3])
    md += [_table(["pairing", "scenario", "batch", "design", "attachment",
                   "control actions / token", "control actions / useful KiB",
                   "state bits in flight / token", "host bytes / useful byte",
                   "step ms"], rows), ""]
    md += [_LEVERS_HERE, ""]
    md += ["### KV cache per token (MHA, GQA, MQA, MLA)", "",
           "FP8 MLA (DeepSeek-V3) as FlashMLA stores it: per layer 512 FP8 latent values, "
           "4 float32 scales and 64 BF16 RoPE values, 656 bytes. Parameters: by the "
           "formula (docs/inference.md, section 1) and as the model card rounds them.", "",
           _table(["model", "attention", "BF16 bytes", "FP8 bytes", "params (formula)",
                   "params (card)"],
                  [[r["model"], r["attention"], r["bf16"], r["fp8"], r["params"],
                    f"{r['params_card'] / 1e9:g} B"] for r in kv]), ""]
    c = KV_CASE
    md += ["### KV transfer, prefill -> decode: descriptors and posting", "",
           f"{load_model(c['model']).title}, TP{c['tp']}, {c['prompt_tokens']:,}-token prompt "
           f"({c['prompt_tokens'] // 16} blocks of 16), per GPU. Posting time = WQEs x the "
           "issuer's cost per WQE and doorbell (docs/inference.md, issuer profiles); "
           f"transfer time over one port; RDMA on the {KV_RUNG} rung; pairing "
           f"`{PAIRING}` (the NIC integrated, the RDMA engine on die).", ""]
    md += [_table(["coalescing", "run (blocks)", "descriptors", "bytes each",
                   "post cpu us", "post cpu_framework us", "post gpu us",
                   "post controller us", "NIC us", "RDMA (cpu) us",
                   "RDMA (cpu_framework) us"],
                  [[r["coalesce"], r["run_blocks"], r["descriptors"], r["bytes_each"],
                    r["post_cpu_us"], r["post_cpu_framework_us"], r["post_gpu_us"],
                    r["post_controller_us"], r["nic_us"], r["rdma_cpu_us"],
                    r["rdma_cpu_framework_us"]] for r in kvt]), ""]
    md += ["### Which bottleneck dominates", "",
           "step = max(compute, memory) + coordination + overhead (memory at the "
           "calibrated HBM efficiency; the fixed overhead is no regime); the largest of "
           "compute, memory and coordination names the regime and the seed's remedy: "
           + "; ".join(f"{k} -> {v}" for k, v in REMEDY.items()) + ".", ""]
    rows = []
    for sc in scenarios:
        for b in show:
            n = _pick(grid, sc.label, b, "nic")
            r = _pick(grid, sc.label, b, best)
            rows.append([sc.label, b, n["compute_s"] * 1e3, n["memory_s"] * 1e3,
                         n["coordination_s"] * 1e3, _v(r, "coordination_s", 1e3),
                         "-" if r is None else r["rung"],
                         n["step_s"] * 1e3, _v(r, "step_s", 1e3), n["tokens_per_s"],
                         _v(r, "tokens_per_s"), n["bottleneck"],
                         "-" if r is None else r["bottleneck"],
                         "yes" if n["fits"] else "no"])
    md += [f"Pairing `{PAIRING}`; a scenario without communication has no RDMA rung (-).",
           "", _table(["scenario", "batch", "compute ms", "memory ms", "comm NIC ms",
                       "comm RDMA fastest ms", "fastest rung", "step NIC ms",
                       "step RDMA fastest ms", "tok/s NIC", "tok/s RDMA fastest",
                       "bound NIC", "bound RDMA fastest", "fits HBM"], rows), ""]
    md += [_CAL_HERE, ""]
    a = NIM["assumed"]
    md += ["### Calibration against NVIDIA NIM (Llama-3.1-8B, H100)", "",
           f"Measured: NIM 1.8.0 table ({NIM['table']['source']}). Assumed (not stated in "
           f"the excerpt we have): {a['gpus']} GPU, {a['weights_dtype'].upper()} weights, "
           f"{a['kv_dtype'].upper()} KV cache, {a['input_tokens']} input / "
           f"{a['output_tokens']} output tokens (mean context "
           f"{a['input_tokens'] + a['output_tokens'] // 2}); docs/inference.md says why. "
           f"Calibrated = roofline + {t0:.2f} ms per step, the one parameter, fitted at "
           "concurrency 1. Grid fit = the roofline at FlashMLA's HBM efficiency "
           f"({100 * HBM_EFFICIENCY:.1f} % of peak, cited, not fitted) + "
           f"{NIM_FIT.overhead_s * 1e3:.2f} ms per step fitted at concurrency 1, checked at "
           f"{NIM_CHECK}: what the grid applies unless asked for the pure roofline.", ""]
    fit, _ = nim_calibration(hbm_efficiency=HBM_EFFICIENCY)
    md += [_table(["concurrency", "measured ITL ms", "roofline ms", "residual",
                   "calibrated ms", "residual", "grid fit ms", "residual", "bound"],
                  [[r.concurrency, r.measured_ms, r.model_ms, f"{100 * r.residual:+.0f} %",
                    r.calibrated_ms, f"{100 * r.calibrated_residual:+.0f} %",
                    f.calibrated_ms, f"{100 * f.calibrated_residual:+.1f} %", r.bottleneck]
                   for r, f in zip(cal, fit, strict=True)]), ""]
    for p in pngs:
        md += [f"![{p}]({p})", ""]
    return "\n".join(md)
