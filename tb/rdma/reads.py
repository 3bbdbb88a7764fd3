"""RDMA READ runs of RdmaTop (kind ``reads``): the scenario, the counter names and the
checks independent of the model."""

from pymodel.scenarios.rdma_read import read_requests_scenario
from spec.rdma_responder import READ_COUNTERS
from tb.rdma.wirecheck import wire_problems

__all__ = ["read_counters", "read_scenario", "read_checks"]

#: The BTH opcodes of the READ RESPONSE frames (IBTA Vol 1 table 38: 0x0D to 0x10).
_RESPONSES = range(0x0D, 0x11)


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
    """Independent of the model: the READ RESPONSE frames on the B->A link are the ones
    IBTA prescribes for the requests (``v.expect_responses``, which the scenario derives
    from node B's memory), every frame there passes the scapy + zlib checks, and the
    responder executed each READ the scenario expects (first time or repeated)."""
    ba = [frame for _, frame in got["wire_ba"]]
    responses = [fr for fr in ba if fr[bth_at] in _RESPONSES]
    sb.equal("READ RESPONSE frames (IBTA)", responses, v.expect_responses)
    for k, problems in wire_problems(ba):
        sb.equal(f"independent check of B->A frame {k}", problems, [])
    sb.equal("READ requests executed", got["resp"]["read_reqs"], v.expect_reads)
