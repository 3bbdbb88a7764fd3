"""RDMA READ runs of RdmaTop (kind ``reads``): the scenario, the counter names and the
checks independent of the model."""

from pymodel.scenarios.rdma_read import read_requests_scenario
from spec.rdma_responder import READ_COUNTERS
from tb.rdma.wirecheck import wire_problems

__all__ = ["read_counters", "read_scenario", "read_checks"]

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
