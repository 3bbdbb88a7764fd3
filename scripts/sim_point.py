"""One design point of `make sim` (:mod:`scripts.sim`, ``--design``): its options
(:data:`POINT_OPTIONS`, the rung names of :data:`RUNG_ALIASES`), their checks
(:func:`check_point`, :func:`gap_profiles`) and its co-simulation
(:func:`run_design_point`)."""

import dataclasses

from spec.design_point import (
    RUNG_ALIASES,
    EphemeralPoint,
    RdmaPoint,
    point_of,
    rung_name,
    sim_options,
)

#: Options of a design point: (option, knob of analysis.points, design ("nic", "rdma",
#: "ephemeral" or "both", the NIC and RDMA), type, help), one per field of the design
#: points (spec/design_point, :func:`spec.design_point.sim_options`): a new knob is a
#: field there. The ephemeral design also takes the options of :data:`EPHEMERAL_SHARED`.
POINT_OPTIONS = sim_options()

#: Options of other designs that ``--design ephemeral`` takes too: the fields of
#: :class:`spec.design_point.EphemeralPoint` whose option another design declares.
EPHEMERAL_SHARED = tuple(f.name for f in EphemeralPoint.knobs()
                         if any(k == f.name and d != "ephemeral"
                                for _, k, d, _, _ in POINT_OPTIONS))

__all__ = ["RUNG_ALIASES", "rung_name", "POINT_OPTIONS", "EPHEMERAL_SHARED", "takes",
           "LANES_NOT_BUILT", "check_lanes",
           "gap_profiles", "check_point", "point_call", "run_design_point"]


#: Why ``--lanes`` above 1 is refused for a design that builds one lane, by design.
LANES_NOT_BUILT = {
    "nic": "the NIC's co-simulated tops are one endpoint (one link into the switch); the "
           "model's sizing table (make report) has its lanes",
    "rdma": "engines must partition their QP contexts; the model's sizing table (make "
            "report) has them",
}


def check_lanes(design, lanes):
    """``ValueError`` naming ``--lanes`` unless ``design`` builds ``lanes`` lanes (a
    design of :data:`LANES_NOT_BUILT` builds one)."""
    if design in LANES_NOT_BUILT and lanes != 1:
        raise ValueError(f"--lanes is not built for the {design.upper()} design: "
                         f"{LANES_NOT_BUILT[design]} (not {lanes})")


def takes(design, knob, owner):
    """Whether ``--design design`` takes the option of ``knob`` (whose design in
    :data:`POINT_OPTIONS` is ``owner``)."""
    if design == "ephemeral":
        return owner == "ephemeral" or knob in EPHEMERAL_SHARED
    return owner in (design, "both")


def gap_profiles(text, ap):
    """The profiles of ``--gap``: ``()`` for ``none``; a name that is no profile of
    :data:`spec.fabric_profiles.FABRIC_PROFILES` stops with an error naming ``--gap``."""
    from spec.fabric_profiles import FABRIC_PROFILES

    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["none"]:
        return ()
    bad = [n for n in names if n not in FABRIC_PROFILES]
    if bad or not names:
        ap.error(f"--gap: {', '.join(bad) or repr(text)} is not a fabric profile; use "
                 f"'none' or some of {', '.join(FABRIC_PROFILES)}, comma separated")
    return tuple(dict.fromkeys(names))


def check_point(design, msg_bytes, messages, knobs, sim="verilator"):
    """The knobs of a co-simulated point with its defaults filled in, checked by
    :func:`analysis.points.resolve`, by the RTL top's limits and by every check the
    co-simulation makes before it builds (:func:`point_call` with ``check_only``: both
    runs' parameters, the top's, the model's configuration and the scenario's host
    images); ``ValueError`` names the bad option. Nothing is exported or built."""
    from analysis.points import resolve
    from pymodel.rdma.verbs import inline_limit
    from spec.fabric_profiles import fabric_profile, one_way
    from spec.rdma_engine import LADDER, TOP_DEFAULTS

    knobs = dict(knobs)
    if design == "ephemeral":
        return _check_ephemeral_point(msg_bytes, messages, knobs)
    op = knobs.pop("op", None)
    if op is not None and op != "write" and design == "rdma":
        return _check_read_point(msg_bytes, messages, knobs, op)
    if op is not None and op != "write":
        return _check_mem_point(design, msg_bytes, messages, knobs, op)
    for knob in ("target_latency", "target_reads"):
        if knob in knobs:
            raise ValueError(f"{knob} is an option of the NIC's --op load and --op atomic "
                             f"points (the target's memory), not of op "
                             f"{op or 'write'!r}")
    # Each option by its own rule (the design's point, spec/design_point), the option named.
    point_of(design, knobs)
    link_retry = knobs.pop("link_retry", None)
    selective = knobs.pop("selective", None)
    completion = knobs.pop("completion", None)
    peer_retry = knobs.pop("peer_retry", None)
    topology = knobs.pop("topology", None)
    fabric = knobs.pop("fabric", None)
    if fabric is not None:
        profile = fabric_profile(fabric)
        path = profile.link if design == "nic" else one_way(profile)
        if profile.name != "board" and knobs.get("link_latency", path) != path:
            raise ValueError(f"fabric {profile.name!r} sets the link latency ({path} "
                             f"cycles); leave --link-latency out (not "
                             f"{knobs['link_latency']})")
    if design == "nic":
        knobs.setdefault("framing", "compact")
    else:
        knobs.setdefault("rung", LADDER[-1][0])
        if dict(LADDER).get(knobs["rung"], {}).get("inline") and msg_bytes > inline_limit():
            raise ValueError(f"msg_bytes must be at most {inline_limit()} for rung "
                             f"{knobs['rung']!r}, which carries the payload inline in the "
                             f"WQE (not {msg_bytes}); pick a rung without inline data, e.g. "
                             f"--rung db-batch")
    _, p = resolve(design, msg_bytes, messages, knobs)
    if fabric is not None:
        knobs["fabric"] = profile.name
    if link_retry is not None:
        knobs["link_retry"] = link_retry
    if completion is not None:
        knobs["completion"] = completion
    if peer_retry:
        knobs["peer_retry"] = peer_retry
    if topology is not None:
        knobs["topology"] = topology
    if selective is not None:
        if design != "rdma":
            raise ValueError(f"selective is an option of the RDMA design, not of {design!r}")
        if selective not in (0, 1):
            raise ValueError(f"selective must be 0 or 1, not {selective!r}")
        knobs["selective"] = selective
    if design == "rdma":
        room = TOP_DEFAULTS["depth"] * 64 // 4
        if messages * msg_bytes > room:
            raise ValueError(f"messages x msg_bytes ({messages} x {msg_bytes}) must fit in "
                             f"{room} bytes of the top's host memory; use fewer messages")
    fn, kwargs = point_call(design, sim, msg_bytes, messages, knobs)
    fn(**kwargs, check_only=True)
    return knobs


def _check_ephemeral_point(msg_bytes, messages, knobs):
    """:func:`check_point` of a ``--design ephemeral`` point (:func:`tb.ephemeral.sim_point.
    check_sim_point`); options of the other designs are refused by name."""
    from tb.ephemeral.sim_point import check_sim_point

    own = {f.name for f in EphemeralPoint.knobs()}
    other = sorted(k for k in knobs if k not in own)
    if other:
        raise ValueError(f"{other[0]} is not an option of --design ephemeral")
    k = {"peers": 4096, "fabric": "board", "popularity": "round_robin", **knobs}
    pool = {x: k.pop(x) for x in ("pool_entries", "idle", "ack_every", "lookahead")
            if x in k}
    lanes = k.pop("lanes", 1)
    full = check_sim_point(k["peers"], k["fabric"], k["popularity"], messages, msg_bytes,
                           pool, lanes)
    return dict(k, **full, **({"lanes": lanes} if lanes != 1 else {}))


def _check_mem_point(design, msg_bytes, messages, knobs, op):
    """:func:`check_point` of a ``--op load`` or ``--op atomic`` point."""
    from spec.nic_mem import MEM_OPS

    if op not in MEM_OPS:
        raise ValueError(f"op must be one of {', '.join(MEM_OPS)}, not {op!r}")
    if design != "nic":
        raise ValueError(f"op {op!r} is an option of the NIC design")
    for knob, usual in (("attachment", "integrated"), ("completion", "credit"),
                        ("link_latency", None), ("peer_retry", 0)):
        if knob in knobs and knobs[knob] != usual:
            raise ValueError(f"{knob} is not an option of op {op!r} (NicMemTop: "
                             f"integrated attachment, credit completion, no per-peer "
                             f"retry, the fabric profile's link latency), "
                             f"not {knobs[knob]!r}")
    from spec.nic_mem import TARGET_LEVEL_READS, check_target
    check_target(knobs.get("target_latency", 0), knobs.get("target_reads", TARGET_LEVEL_READS))
    if "target_reads" in knobs and not knobs.get("target_latency"):
        raise ValueError(f"target_reads ({knobs['target_reads']}) needs a target_latency "
                         f"above 0 (with none the memory is read in the beat's cycle)")
    mp = knobs.get("max_payload")
    if mp is not None and not (64 <= mp <= 8128 and mp % 64 == 0):
        raise ValueError(f"max_payload must be a multiple of 64 from 64 to 8128, not {mp}")
    if knobs.get("fabric") is not None:
        from spec.fabric_profiles import fabric_profile
        knobs["fabric"] = fabric_profile(knobs["fabric"]).name
    knobs.setdefault("framing", "compact")
    if knobs["framing"] not in ("compact", "l2"):
        raise ValueError(f"framing must be 'compact' or 'l2', not {knobs['framing']!r}")
    knobs["op"] = op
    fn, kwargs = point_call(design, "verilator", msg_bytes, messages, knobs)
    fn(**kwargs, check_only=True)
    return knobs


def _check_read_point(msg_bytes, messages, knobs, op):
    """:func:`check_point` of an RDMA ``--op read`` or ``--op atomic`` point: options
    other than ``--fabric`` and ``--host`` are refused by name."""
    from spec.fabric_profiles import fabric_profile
    from tb.rdma.read_point import READ_OPS

    if op not in READ_OPS:
        raise ValueError(f"op must be write or one of {', '.join(READ_OPS)} for the RDMA "
                         f"design, not {op!r}")
    other = sorted(k for k in knobs if k not in ("fabric", "host"))
    if other:
        raise ValueError(f"{other[0]} is not an option of op {op!r} (RDMA READ/atomic "
                         f"points: one QP, RdmaFabricTop with reads; only --fabric and "
                         f"--host)")
    if knobs.get("fabric") is not None:
        knobs["fabric"] = fabric_profile(knobs["fabric"]).name
    knobs["op"] = op
    fn, kwargs = point_call("rdma", "verilator", msg_bytes, messages, knobs)
    fn(**kwargs, check_only=True)
    return knobs


def point_call(design, sim, msg_bytes, messages, knobs):
    """``(function, kwargs)`` that co-simulate the point of ``knobs`` (as
    :func:`check_point` returns them): :func:`tb.nic.headline.run_point`,
    :func:`tb.rdma.headline.run_point`, :func:`tb.ephemeral.sim_point.run_point` or (more
    than one lane) :func:`tb.ephemeral.lanes_point.run_lanes_point`."""
    k = knobs
    if design == "ephemeral" and k.get("lanes", 1) > 1:
        from tb.ephemeral.lanes_point import run_lanes_point
        return run_lanes_point, dict(sim=sim, msg_bytes=msg_bytes, messages=messages,
                                     test_id=f"point-{messages}x{msg_bytes}", **k)
    if design == "ephemeral":
        from tb.ephemeral.sim_point import run_point as run_ephemeral
        return run_ephemeral, dict(sim=sim, msg_bytes=msg_bytes, messages=messages,
                                   test_id=f"point-{messages}x{msg_bytes}", **k)
    if design == "nic" and k.get("op", "write") != "write":
        from tb.nic.mem_point import run_mem_point
        return run_mem_point, dict(sim=sim, op=k["op"], msg_bytes=msg_bytes,
                                   messages=messages, peers=k.get("peers", 1),
                                   framing=k["framing"], fabric=k.get("fabric", "board"),
                                   max_payload=k.get("max_payload"),
                                   target_latency=k.get("target_latency", 0),
                                   target_reads=k.get("target_reads"),
                                   link_retry=k.get("link_retry", False),
                                   test_id=f"point-{k['op']}-{messages}x{msg_bytes}")
    if design == "nic":
        from tb.nic.headline import run_point
        top = {name: k[name] for name in ("link_latency", "max_payload") if name in k}
        return run_point, dict(sim=sim, framing=k["framing"], msg_bytes=msg_bytes,
                               messages=messages, peers=k.get("peers", 1), top=top or None,
                               attachment=k.get("attachment", "integrated"),
                               fabric=k.get("fabric", "board"),
                               retry=k.get("link_retry", False),
                               completion=k.get("completion", "credit"),
                               peer_retry=bool(k.get("peer_retry")),
                               peer_window=k.get("peer_retry") or None,
                               test_id=f"point-{messages}x{msg_bytes}")
    if k.get("op", "write") != "write":
        from tb.rdma.read_point import READ_HOST, run_read_point
        return run_read_point, dict(sim=sim, op=k["op"], msg_bytes=msg_bytes,
                                    messages=messages, fabric=k.get("fabric", "board"),
                                    host=k.get("host", READ_HOST),
                                    test_id=f"point-{k['op']}-{messages}x{msg_bytes}")
    from tb.rdma.headline import run_point
    fields = {f.name for f in dataclasses.fields(RdmaPoint)} - {"rung"}
    return run_point, dict(sim=sim, msg_bytes=msg_bytes, messages=messages, rung=k["rung"],
                           **{n: v for n, v in k.items() if n in fields})


def run_design_point(args):
    """Co-simulate the point of ``args``; return its results row."""
    fn, kwargs = point_call(args.design, args.sim, args.msg_bytes, args.messages, args.knobs)
    row = fn(**kwargs)
    if args.design == "ephemeral":
        return row
    row.setdefault("op", "write")
    return row
