"""Sweeps of one knob at a time: context length, KV block size, prefill and decode TP, links
per accelerator.

Each function returns a list of dicts, one per value of the knob, with both designs (the
NIC and the RDMA engine) attached as the grid's pairing says
(:data:`~analysis.workloads.grid.PAIRINGS`):

:func:`context_rows`
    A decode step of one deployment at each context length (tokens per sequence): the
    grid's roofline (:func:`~analysis.workloads.grid.run_grid`, with its calibration),
    the NIC and the fastest covered RDMA rung (named). The KV read grows with the
    context; communication does not (decode messages carry hidden states, not cache).
:func:`block_rows`
    One request's KV transfer at each KV block size (tokens per block): descriptors per
    prefill GPU, bytes each, and the transfer time of each design over one port (RDMA:
    the grid's :data:`~analysis.workloads.grid.KV_RUNG`, posted by
    :data:`~analysis.workloads.grid.LEVER_KV_ISSUER`).
:func:`kv_tp_rows`
    The same transfer from a prefill instance of TP ``a`` to a decode instance of TP
    ``b``, for every pair of the two lists (:func:`~analysis.workloads.generate.kv_transfer`,
    ``decode_tp``): descriptors per prefill GPU and the most arriving at one decode GPU.
:func:`link_rows`
    A decode step with each number of links (ports) per accelerator
    (:func:`~analysis.workloads.timing.comm_time`'s ``ports``; one port is one 64-byte
    per cycle link, 512 Gb/s): DeepSeek-V3 EP32 by default, DeepEP's one 400 Gb/s NIC
    per GPU being 1.

A bad value raises :class:`SweepError`, a ``ValueError`` whose ``param`` names the
function parameter it came from (the CLI's option of the same name).
"""

import numpy as np

from analysis.workloads.carriers import Carrier
from analysis.workloads.generate import check_kv_tp, kv_transfer
from analysis.workloads.grid import (
    ACCELERATOR,
    CALIBRATION,
    KV_RUNG,
    LEVER_KV_ISSUER,
    LEVER_PROMPT,
    PAIRING,
    PAIRINGS,
    Scenario,
    fastest_rdma,
    run_grid,
)
from analysis.workloads.timing import comm_time
from analysis.workloads.trace import KINDS

__all__ = ["SweepError", "context_rows", "block_rows", "kv_tp_rows", "link_rows",
           "CONTEXTS", "BLOCK_SIZES", "PREFILL_TP", "DECODE_TP", "LINKS"]

#: Context lengths of the context sweep (tokens): 512 to 32k, as users ask.
CONTEXTS = (512, 2048, 8192, 32768)
#: KV block sizes (tokens): vLLM's default 16 up to 256 (FlashMLA's pages are 64).
BLOCK_SIZES = (16, 32, 64, 128, 256)
#: Prefill and decode TP degrees of the KV-TP sweep.
PREFILL_TP = (1, 2, 4, 8)
DECODE_TP = (8,)
#: Links per accelerator of the link sweep.
LINKS = (1, 2, 4, 8)


class SweepError(ValueError):
    """A bad sweep value; ``param`` names the parameter."""

    def __init__(self, param, message):
        super().__init__(f"{param}: {message}")
        self.param, self.detail = param, message


def _ints(param, values, low=1):
    vals = tuple(values)
    if not vals:
        raise SweepError(param, "give at least one value")
    for v in vals:
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise SweepError(param, f"every value must be an integer >= {low}, not {v!r}")
    return vals


def _pairing(pairing):
    if pairing not in PAIRINGS:
        raise SweepError("pairing", f"must be one of {sorted(PAIRINGS)}, not {pairing!r}")
    return PAIRINGS[pairing]


def _step_row(rows, label, pairing, **extra):
    """NIC and fastest-RDMA figures of one grid point (``extra`` names it)."""
    batch = extra["batch"]
    nic = next(r for r in rows if r["design"] == "nic")
    if not nic.get("covered", True):
        raise SweepError("model", nic["error"])
    rd = fastest_rdma(rows, label, batch, pairing)
    out = dict(extra, pairing=pairing, kv_gb=nic["kv_bytes"] / 1e9,
               memory_ms=nic["memory_s"] * 1e3, compute_ms=nic["compute_s"] * 1e3,
               nic_comm_us=nic["coordination_s"] * 1e6, nic_step_ms=nic["step_s"] * 1e3,
               nic_bound=nic["bottleneck"], fits=nic["fits"],
               overlapped=nic["overlapped"], calibration=nic["calibration"])
    if rd is None:
        out.update(rdma_rung="n/c", rdma_comm_us=None, rdma_step_ms=None, rdma_bound=None)
    else:
        out.update(rdma_rung=rd["design"][len("rdma "):], rdma_comm_us=rd["coordination_s"]
                   * 1e6, rdma_step_ms=rd["step_s"] * 1e3, rdma_bound=rd["bottleneck"])
    return out


def _run(model, tp, ep, batch, context, ports, allreduce, pairing, calibration,
         micro_batches):
    sc = Scenario(f"{model} tp{tp} ep{ep}", model, tp=tp, ep=ep, allreduce=allreduce,
                  ports=ports)
    try:
        rows = run_grid((sc,), (batch,), context=context, accelerator=ACCELERATOR,
                        pairings=(pairing,), calibration=calibration,
                        micro_batches=micro_batches)
    except ValueError as exc:
        raise SweepError(str(exc).split(" ")[0], str(exc)) from None
    return sc.label, rows


def context_rows(model="llama-3-70b", tp=8, ep=1, batch=16, contexts=CONTEXTS, ports=8,
                 allreduce="rsag", pairing=PAIRING, calibration=CALIBRATION,
                 micro_batches=1):
    """One decode step of ``model`` at each of ``contexts`` (module doc)."""
    _pairing(pairing)
    out = []
    for ctx in _ints("contexts", contexts):
        label, rows = _run(model, tp, ep, batch, ctx, ports, allreduce, pairing,
                           calibration, micro_batches)
        out.append(_step_row(rows, label, pairing, context=ctx, model=model, tp=tp,
                             ep=ep, batch=batch, ports=ports))
    return out


def link_rows(model="deepseek-v3", tp=1, ep=32, batch=128, links=LINKS, context=2048,
              allreduce="oneshot", pairing=PAIRING, calibration=CALIBRATION,
              micro_batches=1):
    """One decode step of ``model`` with each of ``links`` ports per accelerator."""
    _pairing(pairing)
    out = []
    for n in _ints("links", links):
        label, rows = _run(model, tp, ep, batch, context, n, allreduce, pairing,
                           calibration, micro_batches)
        out.append(_step_row(rows, label, pairing, links=n, model=model, tp=tp,
                             ep=ep, batch=batch, context=context))
    return out


def _transfer_row(tr, pairing, **extra):
    knobs = _pairing(pairing)
    nic = Carrier("nic", framing="compact", knobs=knobs["nic"])
    rdma = Carrier("rdma", rung=KV_RUNG, issuer=LEVER_KV_ISSUER, knobs=knobs["rdma"])
    prefill = tr.deployment["tp"]
    sizes = tr.sizes("data", src=0)
    c = tr.columns
    data = c["kind"] == KINDS.index("data")
    arriving = int(np.bincount(c["dst"][data], weights=c["count"][data]).max())
    r = comm_time(tr, rdma)
    return dict(extra, pairing=pairing, descriptors=tr.count("data", src=0),
                descriptors_in=arriving,
                bytes_each="/".join(f"{s:,}" for s in sorted(sizes)),
                bytes=sum(s * n for s, n in sizes.items()),
                nic_us=comm_time(tr, nic).cycles / 1e3, rdma_us=r.cycles / 1e3,
                rdma_post_us=r.issuer_cycles / prefill / 1e3)


def _kv(names, **kw):
    """:func:`kv_transfer` with its ``ValueError`` turned into a :class:`SweepError` of
    the sweep parameter the bad field came from (``names`` maps a field to it; other
    fields name themselves)."""
    try:
        return kv_transfer(**kw)
    except ValueError as exc:
        field = str(exc).split(" ")[0]
        raise SweepError(names.get(field, field), str(exc)) from None


def block_rows(model="llama-3-70b", tp=8, prompt_tokens=LEVER_PROMPT, block_sizes=BLOCK_SIZES,
               coalesce="none", pairing=PAIRING):
    """One request's KV transfer at each of ``block_sizes`` tokens per block."""
    return [_transfer_row(_kv({"block_tokens": "block_sizes"}, model=model,
                              prompt_tokens=prompt_tokens, tp=tp, block_tokens=bt,
                              coalesce=coalesce), pairing,
                          block_tokens=bt, model=model, tp=tp, coalesce=coalesce,
                          prompt_tokens=prompt_tokens)
            for bt in _ints("block_sizes", block_sizes)]


def kv_tp_rows(model="llama-3-70b", prefill_tp=PREFILL_TP, decode_tp=DECODE_TP,
               prompt_tokens=LEVER_PROMPT, block_tokens=16, coalesce="none",
               pairing=PAIRING):
    """One request's KV transfer from TP ``a`` to TP ``b`` for every ``a`` of
    ``prefill_tp`` and ``b`` of ``decode_tp``."""
    a_s, b_s = _ints("prefill_tp", prefill_tp), _ints("decode_tp", decode_tp)
    for name, vals in (("prefill_tp", a_s), ("decode_tp", b_s)):
        for v in vals:
            try:
                check_kv_tp(model, name, v)
            except ValueError as exc:
                raise SweepError(name, str(exc)) from None
    return [_transfer_row(_kv({}, model=model, prompt_tokens=prompt_tokens, tp=a,
                              decode_tp=b, block_tokens=block_tokens, coalesce=coalesce),
                          pairing, prefill_tp=a, decode_tp=b, model=model,
                          block_tokens=block_tokens, coalesce=coalesce,
                          prompt_tokens=prompt_tokens)
            for a in a_s for b in b_s]
