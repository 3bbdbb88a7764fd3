"""The fast path against the cycle-level model at the inference section's message sizes.

Every engine point of the section comes from the RDMA engine's fast path
(:mod:`analysis.rdma.fastpath`); the report's co-simulated subset checks it at 8 to
4,096 bytes only. :func:`fastpath_check_rows` runs both models at the WRITE sizes the
section's KV transfers and DeepEP's messages use (KV blocks of 16 to 256 tokens of
Llama-3-70B's K or V at TP8, 4 to 64 KiB; DeepEP's 7,408-byte FP8 dispatch and 14,336-byte
BF16 combine), at 1 QP and at 248 QPs (EP32: 31 peers x 8 QPs, more than the 16
context-cache entries), on the section's ``on_die`` host profile and the pipelined rung,
and says whether every timing figure is within :data:`analysis.rdma.fastpath.TOLERANCES`
(the counts must be exact). The runs are short (16 messages at 1 QP, 24 at 248 QPs, 2
one-at-a-time messages) to keep the cycle model to seconds, and :data:`FASTPATH_LONG`
adds runs of 600 messages over 248 QPs, long enough for the entries' recurrence (the
pinned regime) to set the rate, as in the section's carriers (2,000 messages a point);
``make report`` fails where a point is outside.
"""

from analysis.rdma.fastpath import EXACT_KEYS, TOLERANCES

__all__ = ["FASTPATH_SIZES", "FASTPATH_QPS", "FASTPATH_LONG", "fastpath_check_rows",
           "fastpath_markdown"]

#: WRITE sizes checked (bytes): KV blocks of 16, 32, 48, 64, 128 and 256 tokens
#: (4,096 B each 16 tokens of one KV head), DeepEP's FP8 dispatch message of DeepSeek-V3
#: (a 16-byte header, 7,168 values of 1 byte and 56 float scales:
#: :func:`analysis.workloads.decode_trace.dispatch_bytes`) and its BF16 combine message
#: (7,168 values of 2 bytes).
FASTPATH_SIZES = (4096, 7408, 8192, 12288, 14336, 16384, 32768, 65536)
#: QP counts checked: one, and DeepEP's EP32 (31 peers x 8 QPs each).
FASTPATH_QPS = (1, 248)
#: Longer runs, (WRITE bytes, QPs, messages): over 248 QPs the entries' recurrence (the
#: pinned regime of :mod:`analysis.rdma.fastpath`) sets the rate from a few hundred
#: messages on; about 15 s of the cycle model each.
FASTPATH_LONG = ((4096, 248, 600), (7408, 248, 600))


def _dev(fast, model):
    if fast is None or model is None:
        return 0.0 if fast == model else float("inf")
    return abs(fast - model) / abs(model) if model else abs(fast)


def _counts_equal(fast, model):
    for key in EXACT_KEYS:
        a, b = fast[key], model[key]
        if isinstance(b, dict):
            if any(abs(a.get(k, 0) - v) > 1e-12 * max(1, abs(v)) for k, v in b.items()):
                return False
        elif abs(a - b) > 1e-12 * max(1, abs(b)):
            return False
    return True


def fastpath_check_rows(sizes=FASTPATH_SIZES, qps=FASTPATH_QPS, host="on_die",
                        long=FASTPATH_LONG):
    """One dict per (QPs, size), then one per run of ``long`` ((bytes, QPs, messages)):
    both models' ii, the largest deviation of a timing
    figure relative to its tolerance (``worst``: deviation / tolerance, over
    ``ii_cycles``, ``host_util`` and ``inflight_bits``; ``latency`` and ``completion``
    must be equal) and ``within`` (every timing figure within tolerance and every count
    exact)."""
    from analysis.fastpath import fast_point
    from analysis.points import cycle_point
    rows = []
    runs = [(b, q, 24 if q > 1 else 16) for q in qps for b in sizes] + list(long)
    for b, q, n in runs:
        kw = dict(msg_bytes=b, messages=n, qps=q, host=host, rung="pipelined",
                  latency_messages=2)
        fast, model = fast_point("rdma", **kw), cycle_point("rdma", **kw)
        devs = {k: _dev(fast[k], model[k]) for k in TOLERANCES}
        within = (_counts_equal(fast, model)
                  and all(devs[k] <= tol + 1e-12 for k, tol in TOLERANCES.items()))
        worst = max(devs[k] / tol for k, tol in TOLERANCES.items() if tol)
        rows.append({"msg_bytes": b, "qps": q, "host": host,
                     "messages": kw["messages"], "fast_ii": fast["ii_cycles"],
                     "model_ii": model["ii_cycles"], "ii_dev": devs["ii_cycles"],
                     "fast_latency": fast["latency_cycles"],
                     "model_latency": model["latency_cycles"],
                     "fast_completion": fast["completion_cycles"],
                     "model_completion": model["completion_cycles"],
                     "worst": worst, "within": within})
    return rows


def fastpath_markdown(rows):
    """The check's table (one line per point) with the tolerances it uses."""
    from .inference_rows import _table
    tol = ", ".join(f"{k} {v:g}" for k, v in TOLERANCES.items())
    bad = sum(not r["within"] for r in rows)
    head = ["WRITE bytes", "QPs", "messages", "ii fast", "ii cycle model", "ii deviation",
            "latency fast / model", "completion fast / model", "worst / tolerance",
            "within"]
    body = [[f"{r['msg_bytes']:,}", r["qps"], r["messages"], f"{r['fast_ii']:.2f}",
             f"{r['model_ii']:.2f}", f"{100 * r['ii_dev']:.2f} %",
             f"{r['fast_latency']:,.0f} / {r['model_latency']:,.0f}",
             f"{r['fast_completion']:,.0f} / {r['model_completion']:,.0f}",
             f"{r['worst']:.2f}", "yes" if r["within"] else "**no**"] for r in rows]
    host = rows[0]["host"] if rows else "on_die"
    return "\n".join([
        "### The fast path at the inference message sizes", "",
        "Every engine point of this section comes from the RDMA engine's fast path; here "
        f"it is run against the cycle-level model at the section's WRITE sizes ({host} "
        "host profile, pipelined rung; runs of 16 and 24 messages to keep the cycle model "
        "to seconds, and of 600 over 248 QPs, where the context cache's entries set the "
        "rate as in the section's carriers). "
        f"Stated tolerances (relative): {tol}; counts exact. Points outside: {bad} "
        "(`make report` fails on any).", "", _table(head, body), ""])
