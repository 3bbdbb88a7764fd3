"""cocotb test of RdmaTop: a group of RDMA soak chunks in one simulation, one after another.

The parameters are ``top`` (RdmaTop's) and ``chunks``: a list of run parameters of
:mod:`tb.rdma.cocotb_rdma` (without ``top``; each with its own ``out_json``, a file name
in the run folder), checked by :func:`tb.soak.rdma.check_group_params`. Each chunk is
one :func:`tb.rdma.run_one.run_one` on the same testbench: the scenario and the model's
run are built, the design is held in reset while the chunk's memories, players and
run-time ports (its link faults among them) are loaded and the last chunk's host words
and cache tags are cleared, then it is reset, run, snapshotted and compared with the
model exactly as a run alone in its simulation, and writes its ``out_json``.

After each chunk, ``<stem>.status.json`` (``stem``: ``out_json`` without its suffix)
says it is finished: ``{"token", "failed"}``, ``failed`` None, or why the chunk fails
(its mismatches, also listed in ``<stem>.mismatches.txt``, or the exception that stopped
it, e.g. the model's ``NoProgress``). A failed chunk does not stop the next ones: a
chunk that raised has the host memories read back (so that the next chunk clears what
it left). The test fails at the end if any chunk failed.
"""

import json
import time
import traceback
from pathlib import Path

import cocotb

from tb.cosim import cosim_params
from tb.rdma.run_inputs import config
from tb.rdma.run_one import run_one, testbench_of
from tb.rdma.testbench import MEMORIES
from tb.soak.rdma import chunk_stem


@cocotb.test()
async def rdma_soak_chunks(dut):
    p = cosim_params()
    runs = [dict(chunk, top=p["top"]) for chunk in p["chunks"]]
    tb = testbench_of(dut, config(p["top"], runs[0])[0])
    failed = []
    for k, run in enumerate(runs):
        stem, t0 = chunk_stem(run), time.perf_counter()
        try:
            sb = await run_one(dut, run, tb)
            problem = None
            try:
                sb.check()
            except AssertionError:      # as the single run's test fails
                problem = f"{len(sb.mismatches)} mismatches with the model"
                if sb.mismatches:
                    Path(f"{stem}.mismatches.txt").write_text("\n".join(sb.mismatches) + "\n")
                else:
                    problem = "the scoreboard checked nothing"
        except Exception as exc:        # the next chunks still run
            problem = "".join(traceback.format_exception_only(exc)).strip()
            dut._log.error("chunk %d of the group stopped: %s\n%s", k, problem,
                           traceback.format_exc())
            for name in MEMORIES:       # what the next chunk must clear
                try:
                    tb.memory(name)
                except Exception as again:      # the state is broken: the test fails
                    dut._log.error("host memory %s unreadable: %s", name, again)
                    raise
        if problem:
            failed.append(f"{stem}: {problem}")
        Path(f"{stem}.status.json").write_text(json.dumps(
            {"token": run.get("token"), "failed": problem}))
        dut._log.info("chunk %d of the group (%s): %s in %.2f s", k, stem,
                      problem or "equal to the model", time.perf_counter() - t0)
    assert not failed, "; ".join(failed)
