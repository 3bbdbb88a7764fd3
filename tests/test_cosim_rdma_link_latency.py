"""RdmaTop at the shortest link it accepts (``link_latency=1``) in co-simulation against
the golden model: every beat, stamp, counter and memory word equal (the comparison of
``tb.rdma.cocotb_rdma``).

On a one-cycle link a two-beat ACK frame's first beat arrives in the cycle after it
leaves node B, before the model knows the frame has ended; these runs check that the
model delivers such frames as the RTL does, and that the runs end.
"""

import pytest

from tb.rdma.runner import FEATURES_TOP, run_rdma

#: The shared feature top: a one-cycle link (and 4 ways, the READ FIFO: tb.rdma.runner).
TOP = FEATURES_TOP


@pytest.mark.slow_variants("verilator-*", reason=(
    "Icarus runs both cases (RdmaTop at link latency 1 is one more Verilator build of about a "
    "minute)"))
@pytest.mark.parametrize("messages", [1, 200], ids=["one_write", "200_writes"])
def test_rdma_link_latency_1(sim, test_id, messages):
    """One 64-byte WRITE on one QP; then 200 WRITEs of 64, 128 and 200 bytes over three
    QPs back to back (ACKs of two beats behind each other)."""
    sizes, qps = ([64], 1) if messages == 1 else ([64, 128, 200], 3)
    run_rdma(TOP, params=dict(kind="writes", messages=messages, sizes=sizes, qps=qps),
             sim=sim, test_id=test_id)
