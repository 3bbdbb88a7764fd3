"""Kind ``reads`` of the RDMA fabric co-simulation (a cocotb test module of its own, beside
:mod:`tb.rdma.cocotb_fabric`'s other kinds): the READ/atomic point of `make sim` on two
nodes of RdmaFabricTop with ``reads`` and ``read_words`` (:mod:`tb.rdma.fabric_reads`).
Compared with the model as the other kinds
(:class:`tb.rdma.cocotb_fabric.FabricTestbench`), and the requesters' intake counters
(port ``req_read``) and the responders' READ counters (``resp_read``) too; independently
of the model, every uplink frame (scapy + zlib), the merges' flags and IBTA's outcome
(:func:`tb.rdma.reads.posted_read_checks`: each READ's bytes, each atomic's old value,
node B's MR with each atomic executed once, one CQE per operation); into ``out_json``
each side's :func:`tb.rdma.reads.op_times` and ``frames``, the ``(cycle, hex)`` of every
frame on both uplinks of the RTL (requests, READ responses, atomic acknowledges)."""

import json

import cocotb

from spec.formats.scaleup import framing
from spec.rdma_read_req import REQUESTER_READ_COUNTERS
from spec.rdma_responder import READ_COUNTERS
from tb.cosim import cosim_params
from tb.rdma import reads as read_checks
from tb.rdma.cocotb_fabric import run_and_compare
from tb.rdma.fabric_reads import reads_images, reads_pair, reads_setup
from tb.rdma.testbench import member_port, value_of

__all__ = ["reads_matches_model", "fabric_reads_match_model"]


@cocotb.test()
async def fabric_reads_match_model(dut):
    await reads_matches_model(dut, cosim_params())


async def reads_matches_model(dut, p):
    """The ``reads`` kind: run, compare (the READ counters too), check IBTA's outcome,
    write both sides' operation times and the RTL's uplink frames."""
    cfg, v = reads_setup(p["top"], {k: x for k, x in p.items() if k != "top"})
    images = reads_images(v)
    model, sb, got = await run_and_compare(dut, cfg, images)
    for n in range(cfg.nodes):
        rtl = {f"read_{c}": value_of(getattr(dut, member_port(f"req_read__{n}", c)))
               for c in REQUESTER_READ_COUNTERS}
        for name, value in rtl.items():
            sb.equal(f"node {n} requester READ counter {name}", value, model["req"][n][name])
        read_checks.sender_checks(sb, rtl, [f for _, f in got["wire"][n]],
                                  framing("roce").outer, f"node {n} ")
        for c in READ_COUNTERS:
            sb.equal(f"node {n} responder READ counter {c}",
                     value_of(getattr(dut, member_port(f"resp_read__{n}", c))),
                     model["resp"][n][c])
    # Independent of the model: IBTA's outcome of every READ and atomic.
    read_checks.posted_read_checks(sb, v, reads_pair(got, cfg.depth))
    if p.get("out_json"):
        try:
            rtl = read_checks.op_times(reads_pair(got, cfg.depth))
        except (ValueError, IndexError, KeyError, TypeError):     # see the scoreboard
            rtl = None
        with open(p["out_json"], "w") as f:
            json.dump({"rtl": rtl, "model": read_checks.op_times(reads_pair(model, cfg.depth)),
                       "mismatches": len(sb.mismatches), "cycles": model["cycles"],
                       "frames": sorted([[c[0], fr.hex()] for c, fr in
                                         got["wire"][0] + got["wire"][1]])}, f)
    if sb.mismatches:
        with open("mismatches.txt", "w") as f:
            f.write("\n".join(sb.mismatches) + "\n")
    sb.check()
