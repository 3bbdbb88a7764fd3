"""RDMA READ runs of RdmaTop (kind ``reads``): the scenario, the counter names and the
checks independent of the model."""

from pymodel.scenarios.rdma_read import (
    posted_reads_scenario,
    read_point_scenario,
    read_requests_scenario,
)
from spec.formats.roce import CqeStatus, WqeOpcode
from spec.rdma_read_req import INTAKE_COUNTERS
from spec.rdma_responder import READ_COUNTERS
from tb.rdma.wirecheck import wire_problems

__all__ = ["read_counters", "read_scenario", "read_checks", "requester_read_counters",
           "posted_read_scenario", "posted_read_checks", "op_times"]

_OPCODES = {"read": WqeOpcode.RDMA_READ.value, "cas": WqeOpcode.ATOMIC_CMP_AND_SWP.value,
            "faa": WqeOpcode.ATOMIC_FETCH_AND_ADD.value}

#: The BTH opcodes of the READ RESPONSE frames and ATOMIC ACKNOWLEDGE (IBTA Vol 1 table
#: 38: 0x0D to 0x10, 0x12).
_RESPONSES = (0x0D, 0x0E, 0x0F, 0x10, 0x12)


def read_counters(top):
    """The READ counter names a top of parameters ``top`` has (in its ``resp``
    counters): none without ``read_words``."""
    return READ_COUNTERS if isinstance(top, dict) and top.get("read_words") else ()


def read_scenario(cfg, seed, host):
    """``(verbs, frames, reasons)`` of kind ``reads``
    (:func:`pymodel.scenarios.rdma_read.read_requests_scenario`); ``ValueError`` unless
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
    """The response intake's counter names (in the ``req`` counters, ``read_<name>``) a
    top of parameters ``top`` has: none without ``reads``."""
    if isinstance(top, dict) and top.get("reads"):
        return tuple(f"read_{n}" for n in INTAKE_COUNTERS)
    return ()


def posted_read_scenario(cfg, p, host):
    """The verbs of kind ``posted_reads`` (run parameters ``p``): with ``op``, a `make
    sim` point (:func:`pymodel.scenarios.rdma_read.read_point_scenario`, ``op``,
    ``msg_bytes``, ``messages``), else :func:`~pymodel.scenarios.rdma_read.
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
