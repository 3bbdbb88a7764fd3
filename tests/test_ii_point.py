"""Where ``ii_cycles`` is taken (SPEC.md, "What every run measures"): the same point for
both designs, the messages' first wire beats. The model's points (analysis.points, the
fast path) take the NIC's at its stores' first beats on the sender's uplink; at the
stores' accepts the figure is the same, the accept being a fixed number of beats after
the first wire beat at every point of the report's grid (integrated and PCIe)."""

import pytest

from analysis.fastpath import fast_point
from analysis.points import cycle_run, whole
from pymodel.throughput import steady_ii

POINTS = [dict(framing=f, msg_bytes=s, peers=p) for f in ("compact", "l2")
          for s in (8, 128, 4096) for p in (1, 4)]
POINTS += [dict(framing="l2", msg_bytes=s, peers=1, attachment="pcie") for s in (8, 128, 1024)]


@pytest.mark.parametrize("knobs", POINTS, ids=lambda k: "-".join(map(str, k.values())))
def test_nic_ii_at_first_wire_beats_equals_ii_at_accepts(knobs):
    point, per = cycle_run("nic", messages=200, **knobs)
    assert point["ii_cycles"] > 0
    assert point["ii_cycles"] == whole(steady_ii(per["accept"].tolist()))
    if knobs.get("attachment", "integrated") == "integrated":
        assert fast_point("nic", messages=200, **knobs)["ii_cycles"] == point["ii_cycles"]


@pytest.mark.parametrize("width,max_payload,msg_bytes", [(64, None, 128), (8, 16, 100)])
def test_wire_starts_come_before_the_accepts(width, max_payload, msg_bytes):
    """The first wire beats the NIC's ii is taken at precede its accepts by the header's
    beats (the accept is the first command beat after them), store by store: none at the
    headline's 64-byte datapath, some on a narrow one."""
    from analysis.points import nic_stores
    from pymodel.nic.frames import wire_starts
    from pymodel.nic.system import NicSystemModel
    from spec.formats.nic import header_bytes
    from spec.nic import HEADLINE_TOP

    framing, n, words = "l2", 30, HEADLINE_TOP["mem_words"]
    max_payload = max_payload or HEADLINE_TOP["max_payload"]
    model = NicSystemModel(width, framing, 2, HEADLINE_TOP["link_latency"], words,
                           max_payload, None)
    stores = nic_stores(msg_bytes, n, 1, width, words * width, max_payload)
    res = model.run({0: stores}, [0, 1])
    starts = wire_starts(res["tx"][0], stores, width, framing, max_payload)
    accepts = [s["accept"] for s in res["stores"]]
    assert len(starts) == len(accepts) == n
    assert {a - s for a, s in zip(accepts, starts, strict=True)} == {
        header_bytes(framing) // width}
