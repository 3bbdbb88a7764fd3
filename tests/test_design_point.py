"""The typed design points of spec/design_point: every field declares its kind, default,
help and source; construction checks each field by the spec's own rule and names the
option users type; ``make sim``'s point options are the fields'."""

import dataclasses

import pytest

from spec.design_point import (
    KINDS,
    POINTS,
    EphemeralPoint,
    FabricPoint,
    NicPoint,
    RdmaPoint,
    point_of,
    sim_options,
)


@pytest.mark.parametrize("design", sorted(POINTS))
def test_every_field_declares_itself(design):
    """Each field has a kind of KINDS, a help text, a source and a default (a point of
    defaults only is valid)."""
    point = POINTS[design]()
    for f in dataclasses.fields(point):
        m = f.metadata
        assert m["kind"] in KINDS, f.name
        assert m["help"].strip() and m["source"].strip(), f.name
        assert f.default is not dataclasses.MISSING, f.name


def test_every_point_option_is_a_field():
    """Every option of ``make sim`` a point takes (scripts/sim_point.py POINT_OPTIONS)
    maps to a field of the design it names, with that field's help."""
    from scripts.sim_point import POINT_OPTIONS

    assert POINT_OPTIONS == sim_options()
    for opt, knob, design, _, text in POINT_OPTIONS:
        f = {f.name: f for f in dataclasses.fields(POINTS[design])}[knob]
        assert opt == "--" + knob.replace("_", "-")
        assert f.metadata["option"] and f.metadata["help"] == text


def test_shared_fields_are_declared_once():
    """The NIC's and the engine's points are fabric points: the shared fields are
    FabricPoint's, not declared again."""
    shared = {f.name for f in dataclasses.fields(FabricPoint)}
    assert {"op", "fabric", "link_latency", "link_retry"} <= shared
    for cls in (NicPoint, RdmaPoint):
        assert issubclass(cls, FabricPoint)
        own = set(cls.__dataclass_fields__) - shared
        assert not own & shared


@pytest.mark.parametrize("cls,knobs,option", [
    (RdmaPoint, dict(qps=0), "--qps"),
    (RdmaPoint, dict(qps=4097), "--qps"),
    (RdmaPoint, dict(cache_entries=48), "--cache-entries"),
    (RdmaPoint, dict(cache_ways=3), "--cache-ways"),
    (RdmaPoint, dict(qpc_bytes=96), "--qpc-bytes"),
    (RdmaPoint, dict(mr_cache=3), "--mr-cache"),
    (RdmaPoint, dict(mrs=17), "--mrs"),
    (RdmaPoint, dict(host="cxl"), "--host"),
    (RdmaPoint, dict(header="ib"), "--header"),
    (RdmaPoint, dict(topology="ring"), "--topology"),
    (RdmaPoint, dict(rung="fastest"), "--rung"),
    (RdmaPoint, dict(op="load"), "--op"),
    (RdmaPoint, dict(selective=2), "--selective"),
    (NicPoint, dict(op="read"), "--op"),
    (NicPoint, dict(peers=16), "--peers"),
    (NicPoint, dict(framing="eth"), "--framing"),
    (NicPoint, dict(max_payload=100), "--max-payload"),
    (NicPoint, dict(completion="ack"), "--completion"),
    (NicPoint, dict(attachment="cxl"), "--attachment"),
    (NicPoint, dict(target_reads=0), "--target-reads"),
    (NicPoint, dict(link_latency=0), "--link-latency"),
    (NicPoint, dict(fabric="lan"), "--fabric"),
    (NicPoint, dict(link_retry=1), "--link-retry"),
    (EphemeralPoint, dict(pool_entries=3), "--pool-entries"),
    (EphemeralPoint, dict(lookahead=257), "--lookahead"),
    (EphemeralPoint, dict(idle=0), "--idle"),
    (EphemeralPoint, dict(popularity="hot"), "--popularity"),
    (EphemeralPoint, dict(lanes=0), "--lanes"),
    (EphemeralPoint, dict(lanes=65), "--lanes"),
])
def test_bad_field_names_its_option(cls, knobs, option):
    """A value outside the field's rule is refused with ``ValueError`` naming the
    option."""
    with pytest.raises(ValueError, match=option):
        cls(**knobs)


def test_ranges_at_their_ends():
    """The ends of the ranges the help texts state are accepted."""
    RdmaPoint(qps=4096, cache_entries=256, cache_ways=8, qpc_bytes=1024, mr_cache=256,
              mrs=16, miss_queue=64, link_latency=1024, rung="sequential")
    NicPoint(peers=15, max_payload=64, target_latency=4096, target_reads=16,
             framing="l2", attachment="pcie", completion="e2e", op="atomic")
    EphemeralPoint(peers=1, pool_entries=2, lookahead=2, idle=61439, ack_every=31, lanes=64)


def test_points_are_frozen():
    """A point is a value: another run is another point."""
    p = RdmaPoint(qps=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.qps = 3
    assert dataclasses.replace(p, qps=3).qps == 3


def test_point_of_takes_a_design_s_knobs():
    """:func:`point_of` builds the design's point from the knobs that are its fields."""
    p = point_of("rdma", {"qps": 8, "not_a_field": 1})
    assert p.qps == 8 and p.cache_entries == 16
    with pytest.raises(ValueError, match="--qps"):
        point_of("rdma", {"qps": 0})


def test_point_options_are_the_fields_options():
    """``make sim``'s options and the ephemeral design's shared ones come from the
    points: a field with an option is an option of ``--help``, none besides."""
    from scripts.sim_point import EPHEMERAL_SHARED, POINT_OPTIONS

    fields = {f.name for p in POINTS.values() for f in dataclasses.fields(p)
              if f.metadata["option"]}
    assert {knob for _, knob, *_ in POINT_OPTIONS} == fields
    assert EPHEMERAL_SHARED == ("peers", "fabric")


def test_changes_and_tags_are_the_fields_off_their_defaults():
    """A point's ``changes()`` are its fields off their defaults (the default point has
    none), and its ``tags()`` those of them with a ``tag``, named by it."""
    from spec.design_point.rdma import BEST_CACHE, BEST_WAYS

    assert RdmaPoint().changes() == {} and RdmaPoint().tags() == []
    assert BEST_CACHE.changes() == dict(cache_entries=256, cache_ways=BEST_WAYS)
    assert RdmaPoint(**BEST_CACHE.changes()) == BEST_CACHE
    assert RdmaPoint(cache_ways=8, qps=4).tags() == ["w8"]
