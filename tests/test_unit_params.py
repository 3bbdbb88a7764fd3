"""The typed parameters of the NIC and host-interface twins: defaults from the spec,
every bad field rejected with an error naming it."""

import dataclasses

import pytest

from pymodel.host.host_interface import HostInterfaceModel, HostInterfaceParams
from pymodel.nic.params import NicParams
from pymodel.nic.system import NicSystemModel
from spec.formats.nic import Framing
from spec.host import PROFILES
from spec.nic import HEADLINE_TOP
from spec.rdma_engine import HOST_DEPTH


def test_nic_defaults_come_from_the_spec():
    p = NicParams("l2")
    for name in ("width", "nodes", "link_latency", "mem_words", "max_payload"):
        assert getattr(p, name) == HEADLINE_TOP[name], name
    # The switch's ingress buffer (spec.nic.link_credits), by hand for the headline:
    # 2 * ceil((1024 + 28) / 64) = 2 * 17 beats.
    assert p.credits == 34
    assert p.retry is False and p.attachment == "integrated"
    assert NicParams(Framing.COMPACT).framing == "compact"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.width = 8


@pytest.mark.parametrize("field,value", [
    ("framing", "ethernet"), ("width", 12), ("width", "64"), ("nodes", 1), ("nodes", 256),
    ("link_latency", 0), ("link_latency", 1025), ("mem_words", 1), ("mem_words", 1 << 21),
    ("max_payload", 32), ("max_payload", 8192), ("max_payload", 100), ("credits", 0),
    ("credits", 1 << 16), ("retry", 1), ("attachment", "cxl"), ("nodes", True),
])
def test_nic_bad_field_is_named(field, value):
    kw = {"framing": "l2", field: value}
    with pytest.raises(ValueError, match=rf"NicParams\.{field} must be"):
        NicParams(**kw)


def test_nic_model_checks_its_parameters_and_takes_params():
    with pytest.raises(ValueError, match=r"NicParams\.width"):
        NicSystemModel(12, "l2", 2, 2, 256, 512, 8)
    with pytest.raises(ValueError, match=r"NicParams\.framing"):
        NicSystemModel(64, "l3", 2, 2, 256, 512, 8)
    p = NicParams("compact", width=16, nodes=2, mem_words=256, max_payload=512, retry=True)
    m = NicSystemModel.of(p)
    assert m.params == p and (m.w, m.framing, m.credits, m.retry) == (16, "compact",
                                                                       p.credits, True)
    with pytest.raises(ValueError, match="must be a NicParams"):
        NicSystemModel.of({"framing": "l2"})


def test_host_interface_params():
    p = HostInterfaceParams()
    assert p.profile is PROFILES["pcie"] and p.depth == HOST_DEPTH
    with pytest.raises(ValueError, match=r"HostInterfaceParams\.depth"):
        HostInterfaceParams(depth=1000)
    with pytest.raises(ValueError, match=r"HostInterfaceParams\.depth"):
        HostInterfaceParams(depth=True)
    with pytest.raises(ValueError, match=r"HostInterfaceParams\.profile"):
        HostInterfaceParams(profile="pcie")
    with pytest.raises(ValueError, match="host profile field 'tags'"):
        HostInterfaceParams(profile=dataclasses.replace(PROFILES["on_die"], tags=0))
    hi = HostInterfaceModel.of(HostInterfaceParams(PROFILES["on_die"], 1024))
    assert hi.params.profile is PROFILES["on_die"] and hi.depth == 1024
    with pytest.raises(ValueError, match="must be a HostInterfaceParams"):
        HostInterfaceModel.of(PROFILES["pcie"])
