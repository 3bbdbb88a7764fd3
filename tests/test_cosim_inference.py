"""LLM inference traces replayed through the RDMA engine's RTL against the golden model.

Three traces of analysis.workloads (a TP8 all-reduce step with reduce-scatter and
all-gather, a DeepEP dispatch/combine step, a coalesced KV transfer): the messages that
GPU 0 sends to its first destination, in order, as RDMA WRITEs over two QPs on the
pipelined engine. The co-simulation compares every beat, mark, counter and both host
memories with the model (tb/rdma/cocotb_rdma.py) and checks the landed bytes and CQEs
on its own. The dependencies between phases wait for compute the top does not model,
so the messages go back to back.
"""

import pytest

from analysis.workloads.generate import Deployment, decode_step, kv_transfer
from analysis.workloads.replay import pair_messages
from tb.rdma.runner import run_rdma

TRACES = {
    "llama70b_tp8_rsag": lambda: decode_step("llama-3-70b", Deployment(batch=1, tp=8),
                                             allreduce="rsag"),
    "deepseek_v3_ep32": lambda: decode_step("deepseek-v3", Deployment(batch=1, ep=32)),
    "kv_llama70b_layer": lambda: kv_transfer("llama-3-70b", prompt_tokens=118 * 16, tp=8,
                                             coalesce="layer", run_blocks=8),
}


@pytest.mark.slow_variants("icarus-*", reason=(
    "Verilator replays every trace on the RdmaTop that Icarus runs in test_cosim_rdma.py"))
@pytest.mark.parametrize("name", list(TRACES))
def test_trace_replay_matches_model(sim, test_id, name):
    if sim == "icarus" and name != "llama70b_tp8_rsag":
        pytest.skip("Icarus replays the all-reduce trace")
    _, sizes = pair_messages(TRACES[name](), src=0, limit=12)
    assert len(sizes) == 12
    run_rdma({}, params=dict(kind="writes", messages=len(sizes), sizes=sizes, qps=2,
                             expect_min={"req_frames": len(sizes)}),
             sim=sim, test_id=test_id)


def test_pair_messages_in_order_and_bad_arguments():
    tr = TRACES["llama70b_tp8_rsag"]()
    dst, sizes = pair_messages(tr, src=0, limit=4)
    # Reduce-scatter chunks of batch x hidden x 2 bytes / TP = 8192 x 2 / 8 = 2,048 bytes,
    # each followed by its 8-byte flag.
    assert (dst, sizes) == (1, [2048, 8, 2048, 8])
    for kw, name in ((dict(src=99), "src"), (dict(limit=0), "limit"),
                     (dict(dst=0), "dst")):
        with pytest.raises(ValueError, match=name):
            pair_messages(tr, **kw)
