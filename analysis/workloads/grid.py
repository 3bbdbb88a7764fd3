"""The inference grid: every scenario at every batch, carried by every design.

:func:`run_grid` runs every scenario of :data:`SCENARIOS` at every batch of
:data:`BATCHES` through the roofline with each carrier of :func:`carriers` (the NIC and
each rung of the RDMA ladder); :func:`kv_rows` and :func:`kv_transfer_rows` give the
KV-cache bytes per token and the KV transfers plain and coalesced. Everything comes from
the fast path of the golden model (through :class:`~analysis.workloads.carriers.Carrier`)
and the formulas of :mod:`analysis.workloads.roofline`; docs/inference.md gives each
formula and source. The report section that presents them (tables, plots) is
``scripts/reporting/inference.py``.
"""

from dataclasses import asdict, dataclass

from analysis.workloads.calibration import NIM_FIT, PURE, StepCalibration
from analysis.workloads.carriers import RUNGS, Carrier
from analysis.workloads.config import (
    attention_variants,
    kv_bytes_per_token,
    load_model,
    param_counts,
)
from analysis.workloads.generate import Deployment, decode_step, kv_transfer
from analysis.workloads.roofline import decode_roofline
from analysis.workloads.timing import comm_time

__all__ = ["Scenario", "SCENARIOS", "BATCHES", "CONTEXT", "ACCELERATOR", "KV_MODELS",
           "KV_CASE", "KV_RUNG", "KV_ISSUERS", "ISSUER", "PAIRINGS", "PAIRING", "run_grid",
           "kv_rows", "kv_transfer_rows", "carriers", "design_key", "fastest_rdma",
           "lever_rows", "LEVERS", "LEVER_PROMPT", "LEVER_KV_ISSUER", "LEVER_KV_BATCH",
           "CALIBRATION", "CALIBRATIONS", "step_calibration"]


@dataclass(frozen=True)
class Scenario:
    """One deployment shape of the grid (the batch varies)."""

    label: str
    model: str
    tp: int = 1
    ep: int = 1
    allreduce: str = "oneshot"
    ports: int = 1
    why: str = ""


#: Scale-up TP runs get 8 ports (8 x 512 Gb/s = 512 GB/s per direction, an NVLink-class
#: GPU: H100 SXM has 900 GB/s of NVLink, both directions); scale-out EP runs one port per
#: GPU (DeepEP's nodes have one 400 Gb/s RDMA NIC per GPU).
SCENARIOS = (
    Scenario("Llama-3-8B, 1 GPU", "llama-3-8b", why="GQA, no communication"),
    Scenario("Falcon-7B, 1 GPU", "falcon-7b", why="MQA (71 heads: TP must be 1 or 71)"),
    Scenario("Llama-2-7B, TP4", "llama-2-7b", tp=4, ports=8, why="MHA, one-shot all-reduce"),
    Scenario("Llama-3-70B, TP8 one/two-shot", "llama-3-70b", tp=8, allreduce="auto",
             ports=8, why="GQA, vLLM's custom all-reduce: one-shot below 256 KiB, "
                          "reduce-scatter + all-gather above"),
    Scenario("Llama-3-70B, TP8 RS+AG", "llama-3-70b", tp=8, allreduce="rsag", ports=8,
             why="GQA, reduce-scatter + all-gather"),
    Scenario("DeepSeek-V3, EP32", "deepseek-v3", ep=32, why="MLA + MoE, DeepEP low latency"),
    Scenario("DeepSeek-V3, EP64", "deepseek-v3", ep=64, why="MLA + MoE, DeepEP low latency"),
)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Context tokens per sequence during the grid's decode steps.
CONTEXT = 2048
ACCELERATOR = "h100-sxm"
KV_MODELS = ("llama-2-7b", "llama-3-8b", "llama-3-70b", "falcon-7b", "deepseek-v3")
#: The KV transfer of NIXL issue 1514: Llama-70B, TP8, 118 blocks of 16 tokens.
KV_CASE = dict(model="llama-3-70b", tp=8, prompt_tokens=118 * 16)


#: Who posts the RDMA work in the grid: GPU warps as DeepEP/NVSHMEM's IBGDA does, priced
#: from its instruction sequence (a doorbell per 4 WQEs, every WQE signalled, unless the
#: rung sets its own; :func:`analysis.workloads.issuers.ibgda_posting_cycles`). ``cpu``
#: (a CPU proxy posting for the GPU) and ``gpu`` (the CPU's per-WQE figure with the
#: GPU's parallel posters) remain as options.
ISSUER = "ibgda"
#: How the NIC's stores are issued in the grid: by the SMs, their store instructions and
#: a system-scope fence before each flag
#: (:data:`~analysis.workloads.issuers.NIC_ISSUERS`), as the RDMA engine is posted by the
#: GPU's warps.
NIC_ISSUER = "sm"
#: The rung of the KV-transfer rows (the pipelined engine, posting as each issuer does).
KV_RUNG = "pipelined"


#: The step calibrations the grid knows: the NIM fit (FlashMLA's HBM efficiency, NIM's
#: per-step overhead; :data:`analysis.workloads.calibration.NIM_FIT`) and the pure
#: roofline (all of the bandwidth, no overhead).
CALIBRATIONS = {"nim": NIM_FIT, "pure": PURE}
#: The grid's default: decode steps as a served model runs them (NVIDIA NIM's measured
#: inter-token latencies), not the bare roofline.
CALIBRATION = "nim"


def step_calibration(name):
    """The :class:`~analysis.workloads.calibration.StepCalibration` called ``name`` (a key
    of :data:`CALIBRATIONS`, or one passed through); ``ValueError`` naming
    ``calibration`` otherwise."""
    if isinstance(name, StepCalibration):
        return name
    if name not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {sorted(CALIBRATIONS)}, not {name!r}")
    return CALIBRATIONS[name]


#: Attachment pairings: both designs meet their host the same way. ``integrated``: the
#: NIC inside the accelerator (its stores from the accelerator's fabric) against the RDMA
#: engine on the ``on_die`` host-interface profile; ``pcie``: the NIC's stores as PCIe
#: posted writes against the RDMA engine behind the ``pcie`` profile
#: (:data:`spec.host.PROFILES`). Each value gives the carrier knobs of each design.
PAIRINGS = {
    "integrated": {"nic": {"attachment": "integrated"}, "rdma": {"host": "on_die"}},
    "pcie": {"nic": {"attachment": "pcie"}, "rdma": {"host": "pcie"}},
}
#: The pairing of the grid's headline tables (the report's other sections compare the
#: designs on die too); every row names its pairing.
PAIRING = "integrated"


def design_key(carrier):
    """The grid's name of a carrier: ``"nic"`` or ``"rdma <rung>"``."""
    return "nic" if carrier.design == "nic" else f"rdma {carrier.rung.name}"


def carriers(issuer=ISSUER, pairing=PAIRING, nic_issuer=NIC_ISSUER):
    """The designs of the grid, by :func:`design_key`: the NIC (compact header, its stores
    issued as ``nic_issuer`` says: a key of
    :data:`~analysis.workloads.issuers.NIC_ISSUERS`) and the
    RDMA engine on each rung of the ladder (:data:`~analysis.workloads.carriers.RUNGS`),
    posted by ``issuer``, both attached as ``pairing`` says (a key of :data:`PAIRINGS`;
    ``ValueError`` naming ``pairing`` otherwise)."""
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {sorted(PAIRINGS)}, not {pairing!r}")
    knobs = PAIRINGS[pairing]
    out = [Carrier("nic", framing="compact", issuer=nic_issuer, knobs=knobs["nic"])]
    out += [Carrier("rdma", rung=name, issuer=issuer, knobs=knobs["rdma"]) for name in RUNGS]
    return {design_key(c): c for c in out}


def run_grid(scenarios=SCENARIOS, batches=BATCHES, context=CONTEXT, accelerator=ACCELERATOR,
             designs=None, pairings=(PAIRING,), calibration=CALIBRATION, micro_batches=1):
    """Roofline rows of every (pairing, scenario, batch, design): a list of dicts (the
    fields of :class:`~analysis.workloads.roofline.StepResult` plus ``calibration``,
    ``pairing``,
    ``scenario``, ``design`` (a key of ``designs``, default :func:`carriers` of each
    pairing), ``covered``, ``bottleneck``, ``organising_s`` and the densities
    ``ctrl_per_token``, ``ctrl_per_useful_kb``, ``host_bytes_per_useful_byte``). Each row
    names the attachment of its design (``attachment``). Where the engine's fast path
    does not cover a message of the step (it raises ``ValueError``: e.g. the responder's
    buffers would overflow behind context misses), the row has ``covered`` False, the
    reason in ``error`` and no figures. ``calibration``: a key of :data:`CALIBRATIONS`
    (default the NIM fit: HBM efficiency and per-step overhead) or a
    :class:`~analysis.workloads.calibration.StepCalibration`; ``micro_batches=2``
    overlaps two micro-batches (DeepSeek's dual micro-batch overlap;
    :func:`~analysis.workloads.roofline.decode_roofline`), default 1 (no overlap: the
    designs' communication shows in full)."""
    cal = step_calibration(calibration)
    rows = []
    for pairing in pairings:
        rows += _grid(scenarios, batches, context, accelerator,
                      designs or carriers(pairing=pairing), pairing, cal, micro_batches)
    return rows


def _grid(scenarios, batches, context, accelerator, designs, pairing, cal, micro_batches):
    rows = []
    for sc in scenarios:
        for b in batches:
            dep = Deployment(batch=b, tp=sc.tp, ep=sc.ep, context=context)
            tr = decode_step(sc.model, dep, allreduce=sc.allreduce)
            for dname, car in designs.items():
                base = dict(pairing=pairing, scenario=sc.label, design=dname, batch=b,
                            attachment=car.attachment, calibration=cal.name,
                            context=context)
                try:
                    r = decode_roofline(sc.model, dep, accelerator=accelerator,
                                        carrier=car, allreduce=sc.allreduce,
                                        ports=sc.ports, trace=tr,
                                        hbm_efficiency=cal.hbm_efficiency,
                                        overhead_s=cal.overhead_s,
                                        micro_batches=micro_batches)
                except ValueError as exc:
                    rows.append(dict(base, covered=False, error=str(exc)))
                    continue
                rows.append(dict(asdict(r), **base, covered=True,
                                 bottleneck=r.bottleneck, organising_s=r.organising_s,
                                 ctrl_per_token=r.ctrl_per_token,
                                 ctrl_per_useful_kb=r.ctrl_per_useful_kb,
                                 host_bytes_per_useful_byte=r.host_bytes_per_useful_byte))
    return rows


def fastest_rdma(rows, scenario, batch, pairing=PAIRING):
    """The covered RDMA row of (``scenario``, ``batch``, ``pairing``) with the least
    communication time (ties: the lower rung of the ladder), or ``None`` when no rung
    covers it. Its ``design`` names the rung."""
    cands = [r for r in rows if r["scenario"] == scenario and r["batch"] == batch
             and r.get("pairing", PAIRING) == pairing and r["design"] != "nic"
             and r.get("covered", True)]
    return min(cands, key=lambda r: r["coordination_s"]) if cands else None


def kv_rows(models=KV_MODELS):
    """KV-cache bytes per token of each model, BF16 and FP8 (MLA in FP8: FlashMLA's
    layout), and its parameters by the formula of
    :func:`~analysis.workloads.config.param_counts` and by its model card (list of dicts)."""
    out = []
    for name in models:
        m = load_model(name)
        out.append({"model": m.title, "attention": m.attention.upper(),
                    "bf16": kv_bytes_per_token(m, "bf16"), "fp8": kv_bytes_per_token(m, "fp8"),
                    "params": param_counts(m)["total"], "params_card": m.params_card})
    return out


#: The issuers of the KV-transfer rows.
KV_ISSUERS = ("cpu", "cpu_framework", "gpu", "controller")


def kv_transfer_rows(case=KV_CASE, variants=None, pairing=PAIRING):
    """Descriptors, posting time and transfer time of one request's KV transfer, for
    each (coalescing, run length) variant (list of dicts, per GPU), both designs
    attached as ``pairing`` says (:data:`PAIRINGS`; each row names it)."""
    variants = variants or [("none", None), ("layer", 8), ("layer", None), ("page", 8),
                            ("page", None)]
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {sorted(PAIRINGS)}, not {pairing!r}")
    knobs = PAIRINGS[pairing]
    nic = Carrier("nic", framing="compact", knobs=knobs["nic"])
    out = []
    for coalesce, run in variants:
        tr = kv_transfer(case["model"], prompt_tokens=case["prompt_tokens"], tp=case["tp"],
                         coalesce=coalesce, run_blocks=run)
        sizes = tr.sizes("data", src=0)
        row = {"pairing": pairing, "coalesce": coalesce, "run_blocks": run or "all",
               "descriptors": tr.count("data", src=0),
               "bytes_each": "/".join(f"{s:,}" for s in sorted(sizes)),
               "bytes": sum(s * n for s, n in sizes.items()),
               "nic_us": comm_time(tr, nic).cycles / 1e3}
        for iss in KV_ISSUERS:
            car = Carrier("rdma", rung=KV_RUNG, issuer=iss, knobs=knobs["rdma"])
            r = comm_time(tr, car)
            senders = tr.gpus // 2
            row[f"post_{iss}_us"] = r.issuer_cycles / senders / 1e3
            row[f"rdma_{iss}_us"] = r.cycles / 1e3
            row[f"wqes_{iss}"] = r.wqes / senders
        out.append(row)
    return out


#: The KV transfers of the lever table: one request of 1,888 prompt tokens (NIXL issue
#: 1514's 118 blocks of 16), posted by a CPU at Kalia's verbs rate.
LEVER_PROMPT = 118 * 16
LEVER_KV_ISSUER = "cpu"
#: Batch and context of the attention lever's KV read (one step, one GPU).
LEVER_KV_BATCH = 64


def _fastest(trace, designs, ports):
    """``(name, CommResult)`` of the covered RDMA design with the least time."""
    best = None
    for name, car in designs.items():
        if car.design != "rdma":
            continue
        try:
            r = comm_time(trace, car, ports=ports)
        except ValueError:
            continue
        if best is None or r.cycles < best[1].cycles:
            best = (name[len("rdma "):], r)
    return best


def _lever_row(lever, setting, workload, trace, designs, ports, step=None):
    """One row of :func:`lever_rows`: both designs on ``trace``; ``step`` maps a
    communication time in seconds to the step time (``None``: the transfer is the
    figure)."""
    nic = comm_time(trace, designs["nic"], ports=ports)
    rung, rd = _fastest(trace, designs, ports)
    useful = trace.total_bytes("data")
    row = {"lever": lever, "setting": setting, "workload": workload,
           "useful_bytes": useful, "messages": trace.messages,
           "nic_credits_per_kib": nic.ctrl_by_kind.get("credit_updates", 0) * 1024 / useful,
           "nic_us": nic.cycles / 1e3, "rdma_rung": rung,
           "rdma_ctrl_per_kib": rd.ctrl_ops * 1024 / useful,
           "rdma_wqes_per_mib": rd.wqes * (1 << 20) / useful, "rdma_us": rd.cycles / 1e3,
           "rdma_host_per_useful": rd.host_bytes / useful,
           "rdma_inflight_bits": rd.inflight_bits * ports * trace.gpus,
           "nic_inflight_bits": nic.inflight_bits * ports * trace.gpus}
    if step is not None:
        row["nic_step_ms"] = step(nic.cycles * 1e-9) * 1e3
        row["rdma_step_ms"] = step(rd.cycles * 1e-9) * 1e3
    return row


#: The levers of :func:`lever_rows`, in order.
LEVERS = ("batch", "attention", "KV block", "coalescing", "EP dispatch")


def lever_rows(pairing=PAIRING, issuer=ISSUER, batches=(1, 256), levers=LEVERS,
               calibration=CALIBRATION):
    """What each lever does to coordination density, both designs attached as
    ``pairing`` says (list of dicts; docs/inference.md, section 9b):

    - ``batch``: Llama-3-70B TP8 RS+AG and DeepSeek-V3 EP32 at each of ``batches``;
    - ``attention``: one model at MHA, GQA, MQA and an MLA-style latent
      (:func:`analysis.workloads.config.attention_variants`): one request's KV transfer
      at TP1, per-block
      descriptors, and the KV read of a decode step at batch :data:`LEVER_KV_BATCH`,
      context :data:`CONTEXT` (``kv_read_ms``);
    - ``KV block``: Llama-3-70B TP8 at 16, 64 and 256 tokens per block;
    - ``coalescing``: Llama-3-70B TP8, per-block, per layer run, per page;
    - ``EP dispatch``: DeepSeek-V3 EP32, per token (DeepEP low latency) and batched per
      destination GPU, at batch 1 and 128.

    Decode rows carry the step time of each design (``nic_step_ms``, ``rdma_step_ms``;
    with ``calibration``'s HBM efficiency and overhead, as the grid);
    KV rows the transfer time over one port. RDMA: the fastest covered rung (named);
    decode steps posted by ``issuer``, KV transfers by :data:`LEVER_KV_ISSUER`.
    ``levers`` picks some of :data:`LEVERS` (``ValueError`` naming ``levers`` for an
    unknown one).
    """
    unknown = sorted(set(levers) - set(LEVERS))
    if unknown:
        raise ValueError(f"levers must be among {LEVERS}, not {unknown}")
    from analysis.workloads.roofline import ACCELERATORS
    cal = step_calibration(calibration)
    dec = carriers(issuer, pairing)
    kvc = carriers(LEVER_KV_ISSUER, pairing)
    rows = []

    def decode(lever, setting, sc_model, dep, allreduce, ports, label):
        tr = decode_step(sc_model, dep, allreduce=allreduce)
        base = decode_roofline(sc_model, dep, accelerator=ACCELERATOR, trace=tr,
                               hbm_efficiency=cal.hbm_efficiency)
        floor = max(base.compute_s, base.memory_s) + cal.overhead_s
        rows.append(_lever_row(lever, setting, label, tr, dec, ports,
                               step=lambda c: floor + c))

    for b in batches if "batch" in levers else ():
        decode("batch", f"batch {b}", "llama-3-70b", Deployment(batch=b, tp=8), "rsag", 8,
               "Llama-3-70B, TP8 RS+AG")
    for b in batches if "batch" in levers else ():
        decode("batch", f"batch {b}", "deepseek-v3", Deployment(batch=b, ep=32),
               "oneshot", 1, "DeepSeek-V3, EP32")
    hbm = ACCELERATORS[ACCELERATOR].hbm_bytes_per_s
    for label, m in attention_variants().items() if "attention" in levers else ():
        tr = kv_transfer(m, prompt_tokens=LEVER_PROMPT)
        row = _lever_row("attention", label, f"{m.title}, KV transfer TP1", tr, kvc, 1)
        row["kv_read_ms"] = (LEVER_KV_BATCH * CONTEXT * kv_bytes_per_token(m)
                             / (hbm * cal.hbm_efficiency)) * 1e3
        rows.append(row)
    for bt in (16, 64, 256) if "KV block" in levers else ():
        tr = kv_transfer("llama-3-70b", prompt_tokens=LEVER_PROMPT, tp=8, block_tokens=bt)
        rows.append(_lever_row("KV block", f"{bt} tokens", "Llama-3-70B TP8, per block",
                               tr, kvc, 1))
    for co in ("none", "layer", "page") if "coalescing" in levers else ():
        tr = kv_transfer("llama-3-70b", prompt_tokens=LEVER_PROMPT, tp=8, coalesce=co)
        rows.append(_lever_row("coalescing", co, "Llama-3-70B TP8, blocks of 16", tr,
                               kvc, 1))
    for b in (1, 128) if "EP dispatch" in levers else ():
        for disp in ("per_token", "batched"):
            decode("EP dispatch", f"{disp}, batch {b}", "deepseek-v3",
                   Deployment(batch=b, ep=32, dispatch=disp), "oneshot", 1,
                   "DeepSeek-V3, EP32")
    return rows

