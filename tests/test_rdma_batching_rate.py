"""Doorbell batching against the pipelined rung (cycle-level model,
analysis.points.cycle_point, 400 messages as the ladder's co-simulations measure).

The batching rung is the pipelined rung with one doorbell and one WQE read per 16 WQEs
of a QP: fewer host transactions per message on both directions of the host interface,
fewer read tags (a read per payload and one per 8 WQEs instead of two per message), the
same frames on the link, so it is never slower. At one-word WRITEs the pipelined
rung is bound by the read tags (two reads a message held about 565 cycles over 256
tags: 4.4 cycles). The batching rung needs one tag a message, and each payload read
also holds a frame descriptor (``segs``) from its read to its frame (about 590
cycles): with as many descriptors as the ``pcie`` profile has read tags (256) that
bound is 590 / 256 = 2.3 cycles, below the link's 3 beats of a one-word WRITE, so the
descriptors never bind before the tags or the link (docs/rdma.md, "Doorbell batching
never costs rate"). Expected: batching's ii at most the pipelined rung's (the
definition, no measured number)."""

import pytest

from analysis.points import cycle_point
from spec.host import PROFILES
from spec.rdma_engine import FIFO_DEPTHS

MESSAGES = 400


def test_segs_cover_the_read_tags():
    assert FIFO_DEPTHS["segs"] >= PROFILES["pcie"].tags


@pytest.mark.parametrize("qps", [1, 2])
@pytest.mark.parametrize("msg_bytes", [8, 64, 128, 1000])
def test_batching_is_never_slower_than_pipelined(msg_bytes, qps):
    ii = {rung: cycle_point("rdma", msg_bytes=msg_bytes, messages=MESSAGES, qps=qps,
                            rung=rung)["ii_cycles"]
          for rung in ("pipelined", "+doorbell batching 16")}
    assert ii["+doorbell batching 16"] <= ii["pipelined"]

