"""The NIC's loads and atomics over link-level retry (NicMemTop's ``link_retry``) on the
golden model alone (no simulator): the option is checked by name, the reliable links add
their delivery latency and nothing else when the wires are clean, and over faulty wires
every command is answered once with the right bytes. The RTL = model comparison is
tests/test_cosim_nic_mem.py's ``test_link_retry_loads_and_atomics_match_model``."""

import random

import pytest

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.nic.mem_system import NicMemSystemModel
from rtl.tops.nic_mem_top import NicMemTop
from spec.fabric_profiles import retry_delivery_extra
from spec.formats.nic_mem import MemOp, mem_frame_beats
from tb.soak.nic_mem import chunk_checks, chunk_commands, chunk_memories


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_link_retry_option_is_named(bad):
    with pytest.raises(ValueError, match="link_retry"):
        NicMemTop(link_retry=bad)
    with pytest.raises(ValueError, match="link_retry"):
        NicMemSystemModel(link_retry=bad)


@pytest.mark.parametrize("length", [1, 64, 256])
def test_clean_reliable_links_add_their_delivery_latency(length):
    """One load on an idle 2-node top: the request (one beat) crosses the uplink and the
    downlink, the response (``mem_frame_beats`` of its data) the same way back; each
    reliable link delivers a frame of ``n`` beats ``n + 1`` cycles later than a plain
    link (ReliableLink's Timing), and the switch's backpressure changes nothing while
    every egress is ready. So the landing comes ``2 (1 + 1) + 2 (n + 1)`` cycles later,
    and the beats sent and the memory are the same."""
    mem = {1: [random.Random(5).getrandbits(512) for _ in range(256)]}
    cmds = {0: [dict(op=MemOp.LOAD, dst=1, addr=64 * 3, length=length, laddr=64 * 40,
                     a=0, b=0)]}
    runs = [NicMemSystemModel(nodes=2, link_retry=r).run(cmds, mem=mem) for r in (False, True)]
    n = mem_frame_beats("compact", length)
    extra = 2 * retry_delivery_extra(1) + 2 * retry_delivery_extra(n)
    (plain,), (retry,) = runs[0]["rsp"][0], runs[1]["rsp"][0]
    assert retry[0] - plain[0] == extra
    assert retry[1:] == plain[1:]
    assert [b for _, b in runs[0]["tx"][1]] == [b for _, b in runs[1]["tx"][1]]
    assert runs[0]["mem"] == runs[1]["mem"]
    assert not runs[0]["links"] and all(
        v["tx_resent_frames"] == 0 for v in runs[1]["links"].values())


def test_faulty_links_answer_every_command_once():
    """The soak's layout (tb/soak/nic_mem.py): 96 loads and atomics per node over wires
    that damage about 3% of frames, tags and ACK/NAKs each; every load lands the
    target's bytes, every atomic runs once, no other byte changes, no tag stays busy,
    and the wires did damage frames that the links then replayed."""
    words = 2048
    mem = chunk_memories(4, words, 9, 0)
    cmds, expect = chunk_commands(random.Random(9), (2, 1), 4, words, 96, mem)
    model = NicMemSystemModel(nodes=4, mem_words=words, link_retry=True)
    faults = FaultSettings(seed=11, drop_rate=2000, corrupt_rate=2000, dup_rate=2000,
                           tag_rate=2000, ack_drop_rate=2000, ack_corrupt_rate=2000)
    res = model.run(cmds, mem={q: list(v) for q, v in mem.items()}, link_settings=faults)
    fig, bad = chunk_checks(cmds, expect, mem, res["mem"],
                            {q: len(res["rsp"][q]) for q in range(4)},
                            {q: [s for _, _, s, _ in res["rsp"][q]] for q in range(4)},
                            res["outstanding"])
    assert bad == []
    assert fig["lost"] == fig["corrupted_bytes"] == 0
    assert fig["loads"] + fig["atomics"] == 4 * 96 == fig["loads_ok"] + fig["atomics_ok"]
    links = res["links"].values()
    assert sum(v["link_dropped"] + v["link_corrupted"] + v["link_duplicated"]
               for v in links) > 0
    assert sum(v["tx_resent_frames"] for v in links) > 0
    assert not res["credit_errors"]
