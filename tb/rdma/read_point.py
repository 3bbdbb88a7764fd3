"""One `make sim` point of the RDMA engine's READs or atomics (``--op read`` or ``--op
atomic``): node A's requester posts ``messages`` RDMA READs of ``msg_bytes`` (or 8-byte
FETCH & ADDs) on one QP, announced by one doorbell, to node B's responder, on an
:class:`rtl.tops.rdma_top.RdmaTop` with :data:`READ_TOP` (kind ``posted_reads`` of
:mod:`tb.rdma.cocotb_rdma`: RTL = model on every beat, counter and memory word, and
IBTA's outcome checked), and returns the results row.

Row keys: the RDMA comparison keys (:func:`tb.rdma.row_keys.comparison_keys`, host
``pcie``) and ``op``, ``msg_bytes`` (8 for atomics), ``messages``, ``qps`` (1); the
requester's state per outstanding operation, ``read_op_bits``
(:func:`spec.rdma_read_req.slot_bits`: a slot of the response intake's table and its
age-matrix row), with ``read_slots`` and ``ord``; per side (``_rtl``, ``_model``):
``latency_cycles`` (from the cycle host interface A took the doorbell to the first
CQE in host memory A: the first operation meets an idle engine), ``ii_cycles``
(cycles per operation between the first and the last CQE), ``ops_per_s`` (at the 1 GHz
clock of SPEC.md, Units) and ``inflight_bits`` (``read_op_bits`` times the operations
a QP may have outstanding, its ORD: the table's share a QP can hold); and
``mismatches`` (the co-simulation's, and each metric whose RTL and model values
differ).
"""

import json

from spec.fabric_profiles import fabric_profile
from spec.rdma_engine import TOP_DEFAULTS
from spec.rdma_read_req import ORD_DEFAULT, READ_MAX_BYTES, slot_bits
from tb.rdma.cocotb_rdma import check_params
from tb.rdma.headline import _top
from tb.rdma.row_keys import comparison_keys
from tb.rdma.runner import run_rdma

__all__ = ["READ_TOP", "READ_OPS", "run_read_point"]

#: The top of the READ points and of tests/test_cosim_rdma_posted_read.py: the
#: requester's 16 outstanding READ/atomic slots (ORD 16, mlx5's ``max_qp_rd_atom``,
#: :data:`spec.rdma_read_req.ORD_DEFAULT`) and the responder's READ data FIFO of two
#: packets of the largest MTU (:data:`spec.rdma_responder.READ_WORDS_RANGE`).
READ_TOP = {"reads": 16, "read_words": 128}
#: The operations of a point (``--op``; ``write`` is the WRITE points').
READ_OPS = ("read", "atomic")
#: Most operations of a point: the send queue's slots the scenario gives one QP.
MAX_OPS = 1024


def run_read_point(sim, op, msg_bytes, messages, fabric="board", test_id=None,
                   check_only=False):
    """Co-simulate the point; return its row (``check_only``: check, build nothing, return
    None). ``ValueError`` names a bad parameter."""
    if op not in READ_OPS:
        raise ValueError(f"op must be one of {list(READ_OPS)} for the RDMA design (write: "
                         f"the WRITE points), not {op!r}")
    if op == "read" and not 1 <= msg_bytes <= READ_MAX_BYTES:
        raise ValueError(f"msg_bytes must be 1 to {READ_MAX_BYTES} for op 'read' (the "
                         f"engine's longest message), not {msg_bytes}")
    if not 2 <= messages <= MAX_OPS:
        raise ValueError(f"messages must be 2 to {MAX_OPS} for op {op!r} (one QP's send "
                         f"queue), not {messages}")
    profile = fabric_profile(fabric)
    top = dict(_top("pcie", None, profile.name), **READ_TOP)
    params = dict(kind="posted_reads", op=op, msg_bytes=msg_bytes, messages=messages,
                  out_json="m.json")
    check_params(dict(params, top=top))
    if check_only:
        return None
    d = run_rdma(top, params=params, sim=sim,
                 test_id=test_id or f"{sim}_{op}_{profile.name}_n{messages}_b{msg_bytes}")
    res = json.loads((d / "m.json").read_text())
    bits = slot_bits(top.get("depth", TOP_DEFAULTS["depth"]), READ_TOP["reads"])
    ord_ = min(ORD_DEFAULT, READ_TOP["reads"])
    row = {"design": "rdma", "op": op, "framing": "rocev2", "simulator": sim,
           "msg_bytes": msg_bytes if op == "read" else 8, "messages": messages, "qps": 1,
           **comparison_keys("pcie", profile.name), "read_slots": READ_TOP["reads"],
           "ord": ord_, "read_op_bits": bits}
    for side in ("rtl", "model"):
        t = res[side] or {"mmio": [None], "completed": []}
        done = t["completed"]
        ok = len(done) == messages and t["mmio"][0] is not None
        ii = (done[-1] - done[0]) / (len(done) - 1) if ok else None
        row[f"latency_cycles_{side}"] = done[0] - t["mmio"][0] if ok else None
        row[f"ii_cycles_{side}"] = ii
        row[f"ops_per_s_{side}"] = 1e9 / ii if ii else None
        row[f"inflight_bits_{side}"] = bits * ord_
    row["mismatches"] = res["mismatches"] + sum(
        row[f"{k}_rtl"] != row[f"{k}_model"] for k in ("latency_cycles", "ii_cycles"))
    return row
