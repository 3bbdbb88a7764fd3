"""One `make sim` point of the RDMA engine's READs or atomics (``--op read`` or ``--op
atomic``): node A's requester posts ``messages`` RDMA READs of ``msg_bytes`` (or 8-byte
FETCH & ADDs) on one QP, announced by one doorbell, to node B's responder, on the NIC's
fabric: two nodes of :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop` with
:data:`READ_TOP`, the fabric profile's links, switch hop and credits
(:func:`spec.fabric_profiles.rdma_fabric_top`, no link retry) and the host profile
``host`` (default :data:`READ_HOST`, on the accelerator's die: the attachment of the
NIC's load rows, :class:`rtl.tops.nic_mem_top.NicMemTop`); kind ``reads`` of
:mod:`tb.rdma.cocotb_fabric`: RTL = model on every beat, counter and memory word, and
IBTA's outcome checked. Returns the results row.

Row keys: the RDMA comparison keys (:func:`tb.rdma.row_keys.comparison_keys`, topology
``switch``; ``completion_at`` ``answer-landed``, :data:`spec.metrics.COMPLETION_AT`) and
``op``, ``msg_bytes`` (8 for atomics), ``messages``, ``qps`` (1); the requester's state
per outstanding operation, ``read_op_bits`` (:func:`spec.rdma_read_req.slot_bits`: a
slot of the response intake's table and its age-matrix row), with ``read_slots`` and
``ord``; per side (``_rtl``, ``_model``): ``latency_cycles`` (from the cycle the
requester's host interface took the doorbell to the first CQE in its host memory: the
first operation meets an idle engine), ``ii_cycles`` (cycles per operation between the
first and the last CQE), ``ops_per_s`` (at the 1 GHz clock of SPEC.md, Units) and
``inflight_bits`` (``read_op_bits`` times the operations a QP may have outstanding, its
ORD: the table's share a QP can hold); and ``mismatches`` (the co-simulation's, and each
metric whose RTL and model values differ); ``frames``, the ``(cycle, bytes)`` of every
frame on both uplinks of the RTL's run (READ or atomic requests and their responses),
which `make sim` writes to ``point.pcap``.
"""

import json

from pymodel.rdma.fabric_system import simulate_fabric
from spec.fabric_profiles import fabric_profile, rdma_fabric_top
from spec.host import PROFILES
from spec.rdma_engine import TOP_DEFAULTS
from spec.rdma_read_req import ORD_DEFAULT, READ_MAX_BYTES, slot_bits
from tb.rdma.fabric_reads import check_reads_params, reads_images, reads_pair, reads_setup
from tb.rdma.fabric_runner import run_fabric
from tb.rdma.row_keys import comparison_keys

__all__ = ["READ_TOP", "READ_OPS", "READ_HOST", "READ_DEPTH", "read_top", "run_read_point",
           "model_read_rate"]

#: The READ parameters of the points' top and of tests/test_cosim_rdma_posted_read.py:
#: the requester's 16 outstanding READ/atomic slots (ORD 16, mlx5's ``max_qp_rd_atom``,
#: :data:`spec.rdma_read_req.ORD_DEFAULT`) and the responder's READ data FIFO of two
#: packets of the largest MTU (:data:`spec.rdma_responder.READ_WORDS_RANGE`).
READ_TOP = {"reads": 16, "read_words": 128}
#: Host-memory words of every node of the points' top: RdmaTop's
#: (:data:`spec.rdma_engine.TOP_DEFAULTS`), room for 1,024 READs of up to 256 bytes each
#: into a buffer of its own, and the address width of the requester's slots.
READ_DEPTH = TOP_DEFAULTS["depth"]
#: Recorder depths of the points' top: a completion mark per operation
#: (:data:`MAX_OPS`) and every uplink beat of the responder's node, 1,024 operations of
#: up to 8 response beats each (READs of up to 446 bytes, :func:`response_beats`).
READ_EVENTS, READ_WIRE_BEATS = 1024, 1 << 13
#: Bytes of a READ RESPONSE frame besides its payload: Ethernet 14, IPv4 20, UDP 8, BTH
#: 12, AETH 4, ICRC 4, FCS 4 (IBTA Vol 1 table 38 and 9.3; RoCEv2, Annex A17).
RESPONSE_OVERHEAD = 14 + 20 + 8 + 12 + 4 + 4 + 4
#: The points' path MTU (the scenario's, 4,096 bytes).
READ_PMTU = 4096
#: The host profile of the points: ``on_die``, the integrated attachment of the NIC's
#: load and atomic rows (NicMemTop has no host interface), so that both designs' read
#: rows stand on the same attachment (spec.metrics.level_keys).
READ_HOST = "on_die"
#: The operations of a point (``--op``; ``write`` is the WRITE points').
READ_OPS = ("read", "atomic")
#: Most operations of a point: the send queue's slots the scenario gives one QP.
MAX_OPS = 1024


def read_top(fabric="board", host=READ_HOST):
    """The parameters of the points' :class:`~rtl.tops.rdma_fabric_top.RdmaFabricTop`:
    two nodes on ``fabric``'s links, hop and credits without link retry, ``host``,
    :data:`READ_DEPTH` and :data:`READ_TOP`. ``ValueError`` names a bad profile."""
    profile = fabric_profile(fabric)
    if host not in PROFILES:
        raise ValueError(f"host must be one of {sorted(PROFILES)}, not {host!r}")
    return dict(nodes=2, host=host, depth=READ_DEPTH, events=READ_EVENTS,
                wire_beats=READ_WIRE_BEATS, **rdma_fabric_top(profile.name, retry=False),
                **READ_TOP)


def response_beats(op, msg_bytes):
    """Uplink beats of one operation's responses (an ATOMIC ACKNOWLEDGE: 2; a READ: its
    packets of at most :data:`READ_PMTU` bytes, each with :data:`RESPONSE_OVERHEAD`; a
    MIDDLE packet has no AETH, counted as if it had: an upper bound)."""
    if op != "read":
        return 2
    full, rest = divmod(msg_bytes, READ_PMTU)
    sizes = [READ_PMTU] * full + ([rest] if rest or not full else [])
    return sum(-(-(RESPONSE_OVERHEAD + n) // 64) for n in sizes)


def run_read_point(sim, op, msg_bytes, messages, fabric="board", host=READ_HOST,
                   test_id=None, check_only=False):
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
    if messages * response_beats(op, msg_bytes) > READ_WIRE_BEATS:
        raise ValueError(f"messages ({messages}) of {msg_bytes} bytes: their responses, "
                         f"{response_beats(op, msg_bytes)} beats each, exceed the top's "
                         f"wire recorder of {READ_WIRE_BEATS} beats; use fewer messages")
    top = read_top(fabric, host)
    name = fabric_profile(fabric).name
    params = dict(kind="reads", op=op, msg_bytes=msg_bytes, messages=messages,
                  out_json="m.json")
    check_reads_params(dict(params, top=top))
    if check_only:
        return None
    d = run_fabric(top, params=params, sim=sim, test_module="tb.rdma.cocotb_fabric_reads",
                   test_id=test_id or f"{sim}_{op}_{name}_{host}_n{messages}_b{msg_bytes}")
    res = json.loads((d / "m.json").read_text())
    bits = slot_bits(READ_DEPTH, READ_TOP["reads"])
    ord_ = min(ORD_DEFAULT, READ_TOP["reads"])
    row = {"design": "rdma", "op": op, "framing": "rocev2", "simulator": sim,
           "msg_bytes": msg_bytes if op == "read" else 8, "messages": messages, "qps": 1,
           **comparison_keys(host, name, topology="switch"), "completion_at": "answer-landed",
           "read_slots": READ_TOP["reads"], "ord": ord_, "read_op_bits": bits,
           "target_latency": PROFILES[host].read_latency}
    for side in ("rtl", "model"):
        t = res[side] or {"mmio": [None], "completed": []}
        done = t["completed"]
        ok = len(done) == messages and t["mmio"][0] is not None
        ii = (done[-1] - done[0]) / (len(done) - 1) if ok else None
        row[f"latency_cycles_{side}"] = done[0] - t["mmio"][0] if ok else None
        row[f"ii_cycles_{side}"] = ii
        row[f"ops_per_s_{side}"] = 1e9 / ii if ii else None
        row[f"inflight_bits_{side}"] = bits * ord_
    row["frames"] = [(cycle, bytes.fromhex(hexa)) for cycle, hexa in res["frames"]]
    row["mismatches"] = res["mismatches"] + sum(
        row[f"{k}_rtl"] != row[f"{k}_model"] for k in ("latency_cycles", "ii_cycles"))
    return row


def model_read_rate(op, msg_bytes, messages, qps, fabric="pod", host=READ_HOST):
    """The golden model alone on the points' top: ``messages`` operations round robin over
    ``qps`` QPs (:func:`analysis.scenarios.rdma_read.read_point_scenario`), all posted
    before their doorbells. Returns ``{"qps", "messages", "msg_bytes", "fabric",
    "ii_cycles", "ops_per_s", "cycles"}``: cycles per operation between the first and the
    last CQE, its rate at 1 GHz, the run's cycles.
    ``ValueError`` names a bad parameter; ``AssertionError`` if a CQE is missing."""
    top = read_top(fabric, host)
    cfg, v = reads_setup(top, dict(kind="reads", op=op, msg_bytes=msg_bytes,
                                   messages=messages, qps=qps))
    run = simulate_fabric(cfg, reads_images(v))
    done = sorted(c for c, _ in reads_pair(run, cfg.depth)["completed"])
    if len(done) != messages:
        raise AssertionError(f"{len(done)} CQEs of {messages} operations")
    ii = (done[-1] - done[0]) / (messages - 1)
    return {"qps": qps, "messages": messages, "msg_bytes": msg_bytes, "fabric": fabric,
            "ii_cycles": ii, "ops_per_s": 1e9 / ii, "cycles": run["cycles"]}
