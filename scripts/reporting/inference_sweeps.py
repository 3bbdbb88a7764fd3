"""The tables of ``scripts/inference.py --sweep`` (:mod:`analysis.workloads.sweeps`) as
markdown."""

from .inference_rows import _table

#: The columns of each sweep's table (:mod:`analysis.workloads.sweeps`): ``(key, head)``.
_STEP_COLS = (("kv_gb", "KV GB / GPU"), ("memory_ms", "memory ms"),
              ("compute_ms", "compute ms"), ("nic_comm_us", "NIC comm us"),
              ("rdma_comm_us", "RDMA comm us"), ("rdma_rung", "RDMA rung"),
              ("nic_step_ms", "NIC step ms"), ("rdma_step_ms", "RDMA step ms"),
              ("nic_bound", "bound NIC"), ("rdma_bound", "bound RDMA"), ("fits", "fits HBM"))
_KV_COLS = (("descriptors", "descriptors / prefill GPU"),
            ("descriptors_in", "most descriptors into one decode GPU"),
            ("bytes_each", "bytes each"), ("nic_us", "NIC us"), ("rdma_post_us", "RDMA post us"),
            ("rdma_us", "RDMA us"))
SWEEP_COLUMNS = {
    "context": (("context", "context"),) + _STEP_COLS,
    "links": (("links", "links / GPU"),) + _STEP_COLS,
    "block": (("block_tokens", "block tokens"),) + _KV_COLS,
    "kv-tp": (("prefill_tp", "prefill TP"), ("decode_tp", "decode TP")) + _KV_COLS,
}


def sweep_markdown(kind, rows):
    """A sweep's rows (a key of :data:`SWEEP_COLUMNS`) as a markdown table, with a line
    naming what was held fixed."""
    cols = SWEEP_COLUMNS[kind]
    vary = {k for k, _ in cols}
    fixed = ", ".join(f"{k} {v}" for k, v in rows[0].items()
                      if k not in vary and k not in {c for c, _ in _STEP_COLS + _KV_COLS}
                      and k not in ("bytes",))
    body = [["-" if r[k] is None else ("yes" if r[k] is True else "no" if r[k] is False
                                        else r[k]) for k, _ in cols] for r in rows]
    return f"Fixed: {fixed}.\n\n" + _table([h for _, h in cols], body)
