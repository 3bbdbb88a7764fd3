"""RDMA READ runs of RdmaTop (kind ``reads``): the scenario, the counter names and the
checks independent of the model."""

from analysis.scenarios.mix import parse_mix
from analysis.scenarios.rdma_mixed import mixed_scenario
from analysis.scenarios.rdma_read import (
    posted_reads_scenario,
    read_point_scenario,
    read_requests_scenario,
)
from spec.formats.roce import CqeStatus, OpCode, WqeOpcode
from spec.rdma_read_req import REQUESTER_READ_COUNTERS
from tb.rdma.wirecheck import wire_problems

__all__ = ["read_scenario", "read_checks", "requester_read_counters",
           "sender_checks", "posted_read_scenario", "posted_read_checks", "op_times",
           "mixed_checks", "mixed_run_scenario", "kind_checks"]

_OPCODES = {"read": WqeOpcode.RDMA_READ.value, "cas": WqeOpcode.ATOMIC_CMP_AND_SWP.value,
            "faa": WqeOpcode.ATOMIC_FETCH_AND_ADD.value}

#: The BTH opcodes of the READ RESPONSE frames and ATOMIC ACKNOWLEDGE (IBTA Vol 1 table
#: 38: 0x0D to 0x10, 0x12).
_RESPONSES = (0x0D, 0x0E, 0x0F, 0x10, 0x12)


def read_scenario(cfg, seed, host):
    """``(verbs, frames, reasons)`` of kind ``reads``
    (:func:`analysis.scenarios.rdma_read.read_requests_scenario`); ``ValueError`` unless
    the top has ``read_words`` and the RoCEv2 framing."""
    if not cfg.read_words or cfg.header != "roce":
        raise ValueError("kind 'reads' needs a top with read_words > 0 and the roce header")
    return read_requests_scenario(seed=seed, **host)


def read_checks(sb, v, got, reasons, bth_at):
    """Independent of the model: the READ RESPONSE and ATOMIC ACKNOWLEDGE frames on the
    B->A link are the ones IBTA prescribes for the requests (``v.expect_responses``,
    which the scenario derives from node B's memory), every frame there passes the
    scapy + zlib checks, the responder executed each READ the scenario expects (first
    time or repeated), and node B's MR holds what the WRITE and the atomics, each
    executed once, leave."""
    ba = [frame for _, frame in got["wire_ba"]]
    responses = [fr for fr in ba if fr[bth_at] in _RESPONSES]
    sb.equal("READ RESPONSE frames (IBTA)", responses, v.expect_responses)
    for k, problems in wire_problems(ba):
        sb.equal(f"independent check of B->A frame {k}", problems, [])
    sb.equal("READ requests executed", got["resp"]["read_reqs"], v.expect_reads)
    base, image = v.expect_image
    mem_b = got["mem_b"]
    have = b"".join(int(mem_b[base // 64 + k]).to_bytes(64, "little")
                    for k in range(len(image) // 64))
    sb.equal("node B's MR after the WRITE and the atomics (each executed once)", have, image)


def requester_read_counters(top):
    """The response intake's and the frame sender's READ counter names (in the ``req``
    counters, ``read_<name>``, :data:`spec.rdma_read_req.REQUESTER_READ_COUNTERS`) a top
    of parameters ``top`` has: none without ``reads``."""
    if isinstance(top, dict) and top.get("reads"):
        return tuple(f"read_{n}" for n in REQUESTER_READ_COUNTERS)
    return ()


#: The BTH opcodes of READ and atomic requests (IBTA Vol 1 table 38: 0x0C, 0x13, 0x14).
_REQUESTS = (OpCode.RC_RDMA_READ_REQUEST.value, OpCode.RC_CMP_SWAP.value,
             OpCode.RC_FETCH_ADD.value)


def sender_checks(sb, req, frames, bth_at, node=""):
    """Into ``sb``: the requester's frame sender lost no frame at its output mux
    (``read_lost_frames`` 0), and every READ or atomic request frame it started
    (``read_req_frames`` of its counters ``req``) is one on its link: ``frames``, the
    bytes of every frame it sent (a node's uplink may carry its responder's frames too:
    responses, never requests), each BTH at ``bth_at``."""
    sb.equal(f"{node}requester frames lost at the output mux", req["read_lost_frames"], 0)
    sent = sum(len(f) > bth_at and f[bth_at] in _REQUESTS for f in frames)
    sb.equal(f"{node}READ/atomic request frames on the wire = read_req_frames", sent,
             req["read_req_frames"])


def posted_read_scenario(cfg, p, host):
    """The verbs of kind ``posted_reads`` (run parameters ``p``): with ``op``, a `make
    sim` point (:func:`analysis.scenarios.rdma_read.read_point_scenario`, ``op``,
    ``msg_bytes``, ``messages``), else :func:`~analysis.scenarios.rdma_read.
    posted_reads_scenario`; ``ValueError`` unless the top has ``reads``, ``read_words``
    and the RoCEv2 framing."""
    if not (cfg.reads and cfg.read_words) or cfg.header != "roce":
        raise ValueError("kind 'posted_reads' needs a top with reads > 0, read_words > 0 "
                         "and the roce header")
    if "op" in p:
        return read_point_scenario(p["op"], p["msg_bytes"], p["messages"], **host)
    return posted_reads_scenario(seed=p.get("seed", 6), **host)


def op_times(run):
    """What a READ/atomic point keeps of a run (the RTL's or the model's): the cycles the
    MMIO words were taken and the CQEs reached host memory A."""
    return {"mmio": list(run["mmio_stamps"]), "completed": [c for c, _ in run["completed"]]}


def posted_read_checks(sb, v, got):
    """Independent of the model (IBTA's outcome, from the scenario): each READ's local
    bytes are the remote bytes, each atomic's local 8 bytes its original value, node B's
    MR what the atomics leave executed once each, and one successful CQE per operation
    with its opcode and ``wr_id``, per QP in posting order."""
    mem_a = got["mem_a"]
    for laddr, want in v.expect_local.items():
        first, n = laddr // 64, -(-(laddr % 64 + len(want)) // 64)
        have = b"".join(int(mem_a[first + k]).to_bytes(64, "little")
                        for k in range(n))[laddr % 64:laddr % 64 + len(want)]
        sb.equal(f"node A's bytes at {laddr:#x} (the READ's or atomic's answer)", have, want)
    base, image = v.expect_image
    mem_b = got["mem_b"]
    have = b"".join(int(mem_b[base // 64 + k]).to_bytes(64, "little")
                    for k in range(len(image) // 64))
    sb.equal("node B's MR after the atomics (each executed once)", have, image)
    cqes = v.poll_cq(dict(enumerate(mem_a)), len(v.ops))
    sb.equal("CQEs of the READs and atomics",
             sorted((c["wr_id"], c["status"], c["opcode"]) for c in cqes),
             sorted((op[4], CqeStatus.SUCCESS.value, _OPCODES[op[0]]) for op in v.ops))


def mixed_run_scenario(cfg, p, host):
    """The verbs of kind ``mixed`` (run parameters ``p``: ``messages``, ``mix``,
    ``sizes``, ``qps``, ``pmtu_log2``, ``seed``): :func:`analysis.scenarios.rdma_mixed.
    mixed_scenario`; ``ValueError`` unless the top has ``reads``, ``read_words`` and the
    RoCEv2 framing."""
    if not (cfg.reads and cfg.read_words) or cfg.header != "roce":
        raise ValueError("kind 'mixed' needs a top with reads > 0, read_words > 0 and the "
                         "roce header")
    return mixed_scenario(p["messages"], parse_mix(p["mix"]), p["sizes"], p["qps"],
                          pmtu_log2=p.get("pmtu_log2", 10), seed=p.get("seed", 1), **host)


def kind_checks(kind, sb, v, got, reasons, bth_at):
    """The model-free checks of the READ kinds (``reads``, ``posted_reads``, ``mixed``;
    none for the others); returns a mixed run's figures (:func:`mixed_checks`), else
    None."""
    if kind == "reads":
        read_checks(sb, v, got, reasons, bth_at)
    if kind == "posted_reads":
        posted_read_checks(sb, v, got)
    return mixed_checks(sb, v, got) if kind == "mixed" else None


def _mr_bytes(mem, base, n):
    first = base // 64
    return b"".join(int(mem[first + k]).to_bytes(64, "little")
                    for k in range(-(-n // 64)))[:n]


def mixed_checks(sb, v, got):
    """Independent of the model, a mixed chunk (kind ``mixed``,
    :func:`analysis.scenarios.rdma_mixed.mixed_scenario`): one successful CQE per
    operation with its opcode, per QP in posting order; each READ's local bytes are the
    bytes node B held, each atomic's its original value; node B's MR 2 holds what each
    atomic executed once leaves, MR 3 each WRITE's bytes once. Returns the soak's
    figures of the chunk (``messages``: the operations), per op the count (``writes``,
    ``reads``, ``atomics``) and how many passed their check (``*_ok``), ``lost``
    (operations without their successful CQE) and ``corrupted_bytes`` (bytes of node
    B's MRs or of a READ's or atomic's answer that differ)."""
    mem_a, mem_b = got["mem_a"], got["mem_b"]
    wqe_op = {"write": WqeOpcode.RDMA_WRITE.value, "read": _OPCODES["read"]}
    cqes = v.poll_cq(dict(enumerate(mem_a)), len(v.mix_ops))
    ok = {c["wr_id"] for c in cqes if c["status"] == CqeStatus.SUCCESS.value}
    per_qp, want_qp = {}, {}
    for c in cqes:
        per_qp.setdefault(c["qpn"], []).append((c["wr_id"], c["status"], c["opcode"]))
    out = {"messages": len(v.mix_ops), "writes": 0, "reads": 0, "atomics": 0,
           "writes_ok": 0, "reads_ok": 0, "atomics_ok": 0, "corrupted_bytes": 0}
    for op, wr_id, qpn, index in v.mix_ops:
        code = (wqe_op[op] if op in wqe_op else _OPCODES[v.ops[index][0]])
        want_qp.setdefault(qpn, []).append((wr_id, CqeStatus.SUCCESS.value, code))
    sb.equal("CQEs (wr_id, status, opcode) per QP, in posting order", per_qp, want_qp)
    out["lost"] = sum(1 for _, wr_id, _, _ in v.mix_ops if wr_id not in ok)
    waddr, wbytes = v.write_mr
    have_w = _mr_bytes(mem_b, waddr, len(wbytes))
    for op, wr_id, _, index in v.mix_ops:
        key = op + "s"
        out[key] += 1
        if op == "write":
            raddr, payload = v.posted[index]
            at = raddr - waddr
            bad = sum(a != b for a, b in zip(have_w[at:at + len(payload)], payload,
                                              strict=True))
        else:
            laddr = v.ops[index][1]
            want = v.expect_local[laddr]
            have = _mr_bytes(mem_a, laddr - laddr % 64, laddr % 64 + len(want))[laddr % 64:]
            bad = sum(a != b for a, b in zip(have, want, strict=True))
            sb.equal(f"{op} {wr_id:#x}: node A's bytes at {laddr:#x} (its answer)", have,
                     want)
        out["corrupted_bytes"] += bad
        out[key + "_ok"] += int(bad == 0 and wr_id in ok)
    sb.equal("node B's MR 3 after each WRITE landed once (bytes that differ)",
             sum(a != b for a, b in zip(have_w, wbytes, strict=True)), 0)
    base, image = v.expect_image
    have = _mr_bytes(mem_b, base, len(image))
    bad_image = sum(a != b for a, b in zip(have, image, strict=True))
    out["corrupted_bytes"] += bad_image
    sb.equal("node B's MR 2 after each atomic executed once (bytes that differ)",
             bad_image, 0)
    sb.equal("payload words written (each WRITE once)", got["resp"]["words"],
             sum(-(-len(pl) // 64) for _, pl in v.posted))
    return out
