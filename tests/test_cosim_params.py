"""Parameters of the co-simulation entry points are checked before anything is exported
or built: an unknown key or a value the model or a format refuses stops with a
``ValueError`` naming it (:func:`tb.cosim.check_params`, :data:`tb.cosim.ACCEPTED_PARAMS`)."""

import pathlib
import re

import pytest

import tb.cosim
from pymodel.rdma.verbs import Verbs, inline_limit
from rtl.tops.fcs_top import FcsTop
from spec.checks import silence
from spec.rdma_engine import MAX_INLINE_WORDS
from tb.cosim import ACCEPTED_PARAMS, check_params, run_cosim

WRITES = dict(kind="writes", messages=2, sizes=[64], qps=1)


@pytest.fixture
def no_export(monkeypatch):
    """Fail the test if anything is exported (the check must come first). The top that
    reaches the sentinel is silenced: never elaborated, it would warn when collected."""
    def exported(top, *args, **kwargs):
        silence(top)
        raise AssertionError("exported before the parameters were checked")
    monkeypatch.setattr(tb.cosim, "cached_verilog", exported)
    monkeypatch.setattr(tb.cosim, "export_verilog", exported)


def _run_rdma(params, top=None):
    from tb.rdma.runner import run_rdma
    return run_rdma(top or {}, params=params, sim="icarus", test_id="params")


@pytest.mark.parametrize("params,needle", [
    (dict(WRITES, ring_every=4), "unknown parameter(s) of an RDMA run of kind 'writes': "
                                 "['ring_every']"),
    (dict(WRITES, knobs=dict(ring_evry=4)), "unknown optimisation knob(s): ['ring_evry']"),
    (dict(WRITES, kind="write"), "kind must be one of"),
    (dict(WRITES, cache_entries=24), "cache_entries must be a power of two"),
    (dict(WRITES, rung="fast"), "rung must be one of"),
    (dict(WRITES, faults_ab=dict(drop=5)), "faults_ab: unknown link setting(s) ['drop']"),
    (dict(WRITES, inject_stall=[1]), "inject_stall must be [seed, rate]"),
    (dict(WRITES, messages="2"), "RDMA run of kind 'writes': TypeError"),
    (dict(WRITES, sizes=[200], knobs=dict(bf=1, inline=1)),
     f"at most {MAX_INLINE_WORDS * 64} bytes"),
    (dict(kind="bad", messages=3), "unknown parameter(s) of an RDMA run of kind 'bad'"),
    (dict(WRITES, expect_min=dict(req_frame=1)), "expect_min: unknown counter(s) "
                                                 "['req_frame']"),
    (dict(WRITES, expect=dict(ab_droped=0)), "expect: unknown counter(s) ['ab_droped']"),
])
def test_rdma_run_refused_before_export(params, needle, no_export):
    with pytest.raises(ValueError) as err:
        _run_rdma(params)
    assert needle in str(err.value)


def test_rdma_unknown_top_parameter_refused_before_export(no_export):
    with pytest.raises(ValueError, match=re.escape("['link_latncy']")):
        check_params("tb.rdma.cocotb_rdma", dict(WRITES, top={"link_latncy": 1}))


def test_rdma_good_parameters_reach_the_export(no_export):
    """The check lets a valid run through: the export (failing here) is reached."""
    with pytest.raises(AssertionError, match="exported before"):
        _run_rdma(dict(WRITES, knobs=dict(ring_every=2), cache_entries=32))


def test_headline_point_refused_before_export(monkeypatch, no_export):
    """``tb.rdma.headline.run_point`` checks both of its runs before building either: an
    inline rung with a payload over the inline limit is refused, naming the limit."""
    import tb.rdma.headline as headline

    def built(*args, **kwargs):
        raise AssertionError("built before the parameters were checked")
    monkeypatch.setattr(headline, "run_rdma", built)
    with pytest.raises(ValueError, match=f"at most {inline_limit()} bytes"):
        headline.run_point("icarus", 200, 4, rung="+WQE by MMIO, inline")


@pytest.mark.parametrize("module,params,needle", [
    ("tb.cocotb_fcs", {"width": 64, "lenght": 3}, "unknown parameter(s) ['lenght']"),
    ("tb.nic.cocotb_nic", {"framing": "l2", "ring_every": 4},
     "unknown parameter(s) ['ring_every']"),
    ("tb.rdma.uvm.tests", {"top": {"hosst": "pcie"}}, "unknown parameter(s) ['hosst']"),
    ("tb.nic.uvm.tests", {"widht": 64}, "unknown parameter(s) ['widht']"),
    ("tb.cocotb_undeclared", {}, "no accepted parameters declared"),
    ("tb.cocotb_fcs", {"width": 64, "seed": {1, 2}}, "JSON-serialisable"),
])
def test_other_modules_refused_before_export(module, params, needle, no_export):
    with pytest.raises(ValueError) as err:
        run_cosim(FcsTop(64, depth=16), name="fcs_top", test_module=module, params=params,
                  sim="icarus")
    assert needle in str(err.value)


def test_every_cocotb_module_declares_its_parameters():
    """Every module under tb/ that reads ``cosim_params()`` has its entry, and every key
    it reads by name (``p["key"]`` or ``p.get("key")`` on the variable it assigned) is
    accepted there (modules checked by a function: their declared tuples are in the
    function's module)."""
    root = pathlib.Path(tb.cosim.__file__).parent
    seen = 0
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        names = re.findall(r"(\w+)\s*=\s*cosim_params\(\)", text)
        if not names:
            continue
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        assert module in ACCEPTED_PARAMS, module
        seen += 1
        accepted = ACCEPTED_PARAMS[module]
        if isinstance(accepted, str):
            continue
        for name in names:
            read = set(re.findall(rf"\b{name}\[\"(\w+)\"\]", text))
            read |= set(re.findall(rf"\b{name}\.get\(\"(\w+)\"", text))
            assert read <= set(accepted), (module, sorted(read - set(accepted)))
    assert seen >= 10


def test_rdma_module_reads_only_declared_keys():
    """The RDMA module's function-checked keys: every key its run
    (:func:`tb.rdma.run_one.run_one`) reads from its parameters is a common or a kind's
    parameter."""
    from tb.rdma import cocotb_rdma, run_one

    text = pathlib.Path(run_one.__file__).read_text()
    body = text[text.index("async def run_one"):]
    read = set(re.findall(r"\bp\[\"(\w+)\"\]", body)) | set(
        re.findall(r"\bp\.get\(\"(\w+)\"", body))
    declared = set(cocotb_rdma.COMMON_PARAMS)
    for keys in cocotb_rdma.KIND_PARAMS.values():
        declared |= set(keys)
    assert read and read <= declared, sorted(read - declared)


def test_inline_payload_over_the_limit_names_the_limit():
    """A WQE's slot of 4 words (256 bytes) holds the WQE's own word and at most
    MAX_INLINE_WORDS payload words: 3 x 64 = 192 bytes (spec/rdma_engine.py)."""
    assert inline_limit() == 64 * MAX_INLINE_WORDS == 192
    v = Verbs()
    qp = v.create_qp(0, 1, sq_log2=2, stride_log2=2)
    raddr, rkey = v.reg_mr(4096, index=3)
    v.post_write(qp, bytes(192), raddr, rkey, wr_id=1, inline=True)
    with pytest.raises(ValueError, match="193 bytes is over the 192 bytes"):
        v.post_write(qp, bytes(193), raddr, rkey, wr_id=2, inline=True)


def test_nic_headline_point_refused_before_export(no_export):
    """tb.nic.headline.run_point: an unknown key of the top, a bad peer count, a bad
    ``latency_messages`` and a ``depth`` below the point's beats stop before anything is
    built; the headline's depth holds its 1000 stores of 128 B (2 command beats of 64 B
    and at most 4 wire beats each: 4,000 beats, the next power of two 4,096; 1,025 stores
    need 8,192)."""
    from tb.nic.headline import HEADLINE_DEPTH, point_depth, run_point

    assert HEADLINE_DEPTH == 4096
    assert point_depth(128, 1024, 64, 1024) == 4096 < point_depth(128, 1025, 64, 1024)
    for bad in (8, 4096, 8192.0, True):
        with pytest.raises(ValueError, match="depth must be an int of at least 8192"):
            run_point("icarus", "l2", 128, 1025, depth=bad)

    with pytest.raises(ValueError, match=re.escape("['link_latncy']")):
        run_point("icarus", "l2", 128, 4, top={"link_latncy": 1})
    with pytest.raises(ValueError, match="peers must be 1 to 15"):
        run_point("icarus", "l2", 128, 4, peers=16)
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match="latency_messages"):
            run_point("icarus", "l2", 128, 4, latency_messages=bad)


def test_cosim_list_mode_records_the_build_and_builds_nothing(no_export, monkeypatch,
                                                              tmp_path):
    """``COSIM_LIST``: each run_cosim appends its simulator, top name and export key to the
    file and skips, with nothing exported; two tops that differ in a parameter get two
    keys, the same top twice one."""
    import json
    import unittest

    out = tmp_path / "builds.jsonl"
    monkeypatch.setenv("COSIM_LIST", str(out))
    for sim, width in (("icarus", 8), ("verilator", 8), ("icarus", 32)):
        with pytest.raises(unittest.SkipTest, match=f"COSIM_LIST: {sim} fcs_top listed"):
            run_cosim(FcsTop(width, depth=64), name="fcs_top", test_module="tb.cocotb_fcs",
                      sim=sim, params={"width": width})
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["sim"], r["name"], r["test_module"]) for r in rows] == [
        ("icarus", "fcs_top", "tb.cocotb_fcs"), ("verilator", "fcs_top", "tb.cocotb_fcs"),
        ("icarus", "fcs_top", "tb.cocotb_fcs")]
    assert rows[0]["key"] == rows[1]["key"] != rows[2]["key"]
    assert "test_cosim_list_mode" in rows[0]["node"]


def test_fabric_module_reads_only_declared_keys_and_names_bad_ones():
    """The fabric module's keys: every key it reads from its parameters is an open-loop
    or a ``writes`` parameter; a bad key, a ``writes`` run on more than two nodes and a
    bad value are named before anything is built."""
    from tb.rdma import cocotb_fabric, fabric_writes

    text = "".join(pathlib.Path(m.__file__).read_text() for m in (cocotb_fabric,
                                                                  fabric_writes))
    read = set(re.findall(r"\bp\[\"(\w+)\"\]", text)) | set(
        re.findall(r"\bp\.get\(\"(\w+)\"", text))
    declared = set(fabric_writes.OPEN_LOOP_PARAMS) | set(fabric_writes.WRITES_PARAMS)
    assert read and read <= declared, sorted(read - declared)
    writes = dict(kind="writes", top=dict(nodes=2), messages=4, sizes=[128], qps=1)
    check_params("tb.rdma.cocotb_fabric", writes)
    with pytest.raises(ValueError, match="'pattern'"):
        check_params("tb.rdma.cocotb_fabric", dict(writes, pattern="incast"))
    with pytest.raises(ValueError, match="2 nodes"):
        check_params("tb.rdma.cocotb_fabric", dict(writes, top=dict(nodes=4)))
    with pytest.raises(ValueError, match="rung"):
        check_params("tb.rdma.cocotb_fabric", dict(writes, rung="warp"))
    with pytest.raises(ValueError, match="'bogus'"):
        check_params("tb.rdma.cocotb_fabric", dict(pattern="incast", bogus=1))


def test_rdma_point_topology_checked():
    """``tb.rdma.headline.run_point``'s topology: a bad one, the scale-up header and a
    direct-link-only parameter on the switch are named before anything is built."""
    import tb.rdma.headline as headline

    kw = dict(sim="icarus", msg_bytes=128, messages=20, check_only=True)
    assert headline.run_point(topology="switch", **kw) is None
    with pytest.raises(ValueError, match="topology must be one of"):
        headline.run_point(topology="ring", **kw)
    with pytest.raises(ValueError, match="header 'scaleup'"):
        headline.run_point(topology="switch", header="scaleup", **kw)
    with pytest.raises(ValueError, match="selective"):
        headline.run_point(topology="switch", selective=1, **kw)
    # the fabric top's context caches take ways (a parameter of the top); a bad one named
    assert headline.run_point(topology="switch", cache_ways=4, cache_entries=256, **kw) is None
    with pytest.raises(ValueError, match="cache_ways"):
        headline.run_point(topology="switch", cache_ways=3, cache_entries=256, **kw)
