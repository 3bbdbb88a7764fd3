"""The RDMA headline of ``make sim``: the optimisation ladder at 128 bytes and 1 QP over
PCIe, then the best rung at 4096 QPs over 16 and over 256 cache entries, and the best
rung with the engine on the accelerator's die, each in co-simulation against the model.

A row is two runs on the same top, as perftest measures an RNIC: one with ``messages``
messages back to back after a warm-up message (``ii_cycles``, wire and host bytes, TLPs,
control operations, in-flight state) and one with ``latency_messages`` messages posted
one at a time after the warm-up, each into an idle engine (``latency_cycles``,
``completion_cycles``). ``run_headline`` returns rows in the SPEC.md results format and
writes the wire traffic of the back-to-back runs to ``out_dir / "rdma.pcap"``.

Two topologies (:data:`TOPOLOGIES`): ``direct-link`` (the headline's rows), the two
nodes of :class:`rtl.tops.rdma_top.RdmaTop` on one link that stands for the whole path;
``switch`` (the gap table's rows, :mod:`tb.gap_table`), the NIC's fabric: two nodes of
:class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`, link, switch, link, the profile's
latencies, credit-based flow control into the switch by the NIC's rule, link retry as
the NIC's (:func:`spec.fabric_profiles.rdma_fabric_top`), run by the fabric test's
``writes`` kind (:mod:`tb.rdma.cocotb_fabric`).
"""

import dataclasses
import json
import pathlib

from analysis.rdma.point import knobs_of, latency_knobs, latency_spacing, reduce_run
from pymodel.pcap import write_pcapng
from pymodel.throughput import isolated_median
from spec.fabric_profiles import (
    fabric_profile,
    one_way,
    rdma_records,
    rdma_timeout,
)
from spec.metrics import row_metrics
from spec.rdma_engine import LADDER, TOP_DEFAULTS
from tb.rdma.cocotb_rdma import COMMON_PARAMS, KIND_PARAMS, check_params
from tb.rdma.point_params import (
    SWITCH_FIELDS,
    off_default,
    rdma_point,
    row_tags,
    run_params,
    top_params,
)
from tb.rdma.row_keys import PER_MESSAGE as _PER_MESSAGE
from tb.rdma.row_keys import (
    TOPOLOGIES,
    TOPOLOGY,
    comparison_keys,
    ii_messages,
    state_kinds,
)
from tb.rdma.runner import run_rdma

__all__ = ["run_headline", "run_point", "ii_messages", "model_point", "headline_jobs",
           "finish_headline", "HEADLINE_ROWS", "comparison_keys", "state_kinds", "TOPOLOGY",
           "TOPOLOGIES"]

#: The parameters of a ``writes`` run (those the point's port and run fields set).
_WRITES = COMMON_PARAMS + KIND_PARAMS["writes"]
#: The rows of the headline: (label, rung, QPs, cache entries, host profile).
HEADLINE_ROWS = tuple((name, name, 1, 16, "pcie") for name, _ in LADDER) + (
    ("best, 4096 QPs / 16 entries", LADDER[-1][0], 4096, 16, "pcie"),
    ("best, 4096 QPs / 256 entries", LADDER[-1][0], 4096, 256, "pcie"),
    ("best, on die", LADDER[-1][0], 1, 16, "on_die"),
)


def _top(host, link_latency=None, fabric="board", link_retry=False, header="roce"):
    """The top's parameters that differ from :data:`spec.rdma_engine.TOP_DEFAULTS` (one
    build serves every point that keeps the defaults). A ``fabric`` profile other than
    ``board`` sets the link to its one-way path (:func:`spec.fabric_profiles.one_way`),
    the window records and the transport timeout by its rules
    (:func:`~spec.fabric_profiles.rdma_records`, :func:`~spec.fabric_profiles.
    rdma_timeout`); ``link_latency`` may then be only that path's. ``link_retry``: both
    links reliable (:class:`rtl.tops.rdma_top.RdmaTop`); ``header``: ``"roce"`` or
    ``"scaleup"`` (:mod:`spec.formats.scaleup`). ``ValueError`` names a bad
    ``fabric`` or a ``link_latency`` it contradicts."""
    profile = fabric_profile(fabric)
    top = {}
    if host != TOP_DEFAULTS["host"]:
        top["host"] = host
    if profile.name != "board":
        if link_latency is not None and link_latency != one_way(profile):
            raise ValueError(f"link_latency {link_latency!r}: fabric {profile.name!r} sets "
                             f"the link latency ({one_way(profile)} cycles, its path one "
                             f"way); leave link_latency out")
        link_latency = one_way(profile)
        for key, value in (("records", rdma_records(profile)),
                           ("timeout", rdma_timeout(profile))):
            if value != TOP_DEFAULTS[key]:
                top[key] = value
    if link_latency is not None and link_latency != TOP_DEFAULTS["link_latency"]:
        top["link_latency"] = link_latency
    if link_retry is not False:
        top["link_retry"] = link_retry      # RdmaTop checks it is a bool
    if header != TOP_DEFAULTS["header"]:
        top["header"] = header              # check_params checks it
    return top


def _check_topology(topology, **off_defaults):
    """``ValueError`` naming a bad ``topology`` or a parameter given with ``switch`` that
    only the direct link's top has (``off_defaults``: name -> True when not default)."""
    if topology not in TOPOLOGIES:
        raise ValueError(f"topology must be one of {list(TOPOLOGIES)}, not {topology!r}")
    bad = sorted(k for k, v in off_defaults.items() if v)
    if topology == "switch" and bad:
        raise ValueError(f"{bad[0]} must be left at its default with topology 'switch' "
                         f"(an option of the direct link's top)")


def run_point(sim, msg_bytes, messages, rung=None, knobs=None, latency_messages=16,
              test_id=None, label=None, check_only=False, **fields):
    """Co-simulate one point (two runs, see the module docstring): ``fields`` are the
    point's (:class:`spec.design_point.RdmaPoint`, by keyword; each left out at its
    default: one QP, 16 cache entries in use, host ``pcie``, the top's link latency on
    the ``board`` profile, the ``direct-link`` topology), mapped by their kind to the
    top's build parameters, the runs' parameters and run-time ports, the row's keys and
    the run's name (:mod:`tb.rdma.point_params`; the path, window records and timeout of
    a ``fabric`` profile by :func:`_top`); ``rung`` (a ladder rung's name) or ``knobs``
    (the engine's knobs, :func:`analysis.rdma.point.knobs_of`). Returns the results row
    with ``_rtl`` and ``_model`` values, ``mismatches`` (of both runs), ``cycles`` and
    ``frames`` (``(cycle, bytes)`` of the back-to-back run, both links), and the
    comparison keys (:func:`comparison_keys`); a field the row has no key of its own
    for (not in :data:`tb.rdma.point_params.ROW_ELSEWHERE`) is a key of the row, and
    adds ``_<name><value>`` to the run's name, when off its default. ``topology``
    (:data:`TOPOLOGIES`): ``switch`` runs the point on the NIC's fabric
    (:mod:`tb.rdma.headline_switch`; ``header`` ``roce`` and the defaults of the fields
    not in :data:`tb.rdma.point_params.SWITCH_FIELDS` only), the row's
    ``fabric_buffer_bits`` from the sender's credits in use and its ``inflight_bits``
    the engine's plus them (as the NIC's). Every field and parameter is checked before
    anything is built (``ValueError`` naming its keyword, and a field's option after
    it; an unknown keyword: ``TypeError``); ``check_only``: only that, then return
    ``None``.

    ``ii_cycles`` and ``host_util`` are ``None`` when the back-to-back run is too short
    for its steady window (:data:`spec.metrics.STEADY_WINDOW`) to leave out the warm-up
    message (fewer than :func:`ii_messages` messages): they are not measured then."""
    point = rdma_point(rung=rung, **fields)
    if point.op != "write":
        raise ValueError(f"op {point.op!r}: this point runs WRITEs; READs and atomics are "
                         f"tb.rdma.read_point's")
    qps, cache_entries, host, fabric = point.qps, point.cache_entries, point.host, point.fabric
    link_retry, header, topology = point.link_retry, point.header, point.topology
    k = knobs_of(rung, knobs)
    _check_topology(topology, **{f.name: off_default(point, f.name)
                                 for f in dataclasses.fields(point)
                                 if f.name not in SWITCH_FIELDS})
    switch = topology == "switch"
    if switch:
        from tb.rdma.headline_switch import run_switch_point

        return run_switch_point(sim, msg_bytes, messages, point, rung, k, latency_messages,
                                test_id, label, check_only)
    top = top_params(point, _top(host, point.link_latency, fabric, link_retry, header))
    fabric = fabric_profile(fabric).name
    tags, suffix = row_tags(point)
    tag = test_id or f"{sim}_{(rung or 'knobs').replace(' ', '_').replace('+', 'p')}" \
        f"_q{qps}_c{cache_entries}_{host}_n{messages}_b{msg_bytes}" \
        + (f"_l{top['link_latency']}" if "link_latency" in top else "") \
        + (f"_{fabric}" if fabric != "board" else "") + ("_retry" if link_retry else "") \
        + (f"_{header}" if header != "roce" else "") + suffix
    tag = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in tag)
    warm = latency_spacing(host)
    common = dict(kind="writes", sizes=[msg_bytes], out_json="m.json", warmup=warm,
                  **run_params(point, _WRITES))
    bw_params = dict(common, messages=messages + 1, knobs=k)
    lat_params = dict(common, messages=latency_messages + 1, knobs=latency_knobs(k),
                      spacing=warm)
    for params in (bw_params, lat_params):     # both runs' before either is built
        check_params(dict(params, top=top))
    if check_only:
        return None
    bw_dir = run_rdma(top, params=bw_params, sim=sim, test_id=f"{tag}_bw")
    lat_dir = run_rdma(top, params=lat_params, sim=sim, test_id=f"{tag}_lat")
    bw = json.loads((bw_dir / "m.json").read_text())
    lat = json.loads((lat_dir / "m.json").read_text())
    row = {"design": "rdma", "framing": "rocev2" if header == "roce" else header,
           "simulator": sim, "msg_bytes": msg_bytes,
           "messages": messages, "qps": qps, "cache_entries": cache_entries, "host": host,
           "rung": label or rung, **comparison_keys(host, fabric, link_retry, header)}
    if "link_latency" in top:
        row["link_latency"] = top["link_latency"]
    row.update(tags)
    for side in ("rtl", "model"):
        b, t = bw[side] or {}, lat[side] or {}
        for key in _PER_MESSAGE:
            row[f"{key}_{side}"] = b.get(key)
        row[f"latency_cycles_{side}"] = isolated_median(t.get("latency"))
        row[f"completion_cycles_{side}"] = isolated_median(t.get("completion"))
        if row[f"inflight_bits_{side}"] is not None:
            row.update({f"{k}_{side}": v for k, v in state_kinds(
                row[f"inflight_bits_{side}"], fabric, link_retry).items()})
    row["mismatches"] = bw["mismatches"] + lat["mismatches"]
    if messages < ii_messages():            # the steady window would hold the warm-up
        for side in ("rtl", "model"):
            row[f"ii_cycles_{side}"] = row[f"host_util_{side}"] = None
    row["cycles"] = bw.get("cycles")
    row["frames"] = [(cycle, bytes.fromhex(hexa)) for cycle, hexa in bw["frames"]]
    missing = [key for key in row_metrics("rdma") if f"{key}_rtl" not in row]
    if missing:
        raise AssertionError(f"metrics missing from the RDMA row: {missing}")
    return row


def model_point(msg_bytes, messages, rung=None, latency_messages=16,
                popularity="round_robin", **fields):
    """The golden model's side of :func:`run_point` alone (no simulator), for the same
    point (``fields``, ``rung``: as :func:`run_point`'s): the row with ``_model`` values
    only, from the same top, runs and reduction as the co-simulation's model side
    (:func:`tb.rdma.cocotb_rdma.config`, :func:`~tb.rdma.cocotb_rdma.scenario`,
    :func:`~tb.rdma.cocotb_rdma.run_model`, :func:`analysis.rdma.point.reduce_run`), and
    the comparison keys. ``popularity``: the QP of each message of both runs
    (:func:`analysis.scenarios.rdma.qp_order`: round robin by default, ``zipf`` 0.99 as
    the NIC's destinations; the row's ``popularity`` when not round robin): the model's
    alone, :func:`run_point` co-simulates round robin only."""
    from tb.rdma.cocotb_rdma import config, run_model, scenario

    point = rdma_point(rung=rung, **fields)
    qps, cache_entries, host, header = point.qps, point.cache_entries, point.host, point.header
    fabric, link_retry, topology = point.fabric, point.link_retry, point.topology
    _check_topology(topology, **{f.name: off_default(point, f.name)
                                 for f in dataclasses.fields(point)
                                 if f.name not in SWITCH_FIELDS})
    if topology == "switch":
        from tb.rdma.headline_switch import model_switch_point

        return model_switch_point(msg_bytes, messages, point, rung, latency_messages,
                                  popularity)
    k = knobs_of(rung, None)
    top = top_params(point, _top(host, point.link_latency, fabric, link_retry, header))
    warm = latency_spacing(host)
    common = dict(kind="writes", sizes=[msg_bytes], warmup=warm, popularity=popularity,
                  **run_params(point, _WRITES))
    runs = []
    for params in (dict(common, messages=messages + 1, knobs=k),
                   dict(common, messages=latency_messages + 1, knobs=latency_knobs(k),
                        spacing=warm)):
        check_params(dict(params, top=top))
        cfg, knobs = config(top, params)
        v, inject, _ = scenario(params, cfg, knobs)
        runs.append(reduce_run(v, run_model(cfg, v, inject, (1, 0)),
                               max(len(v.messages), 1)))
    bw, lat = runs
    fabric = fabric_profile(fabric).name
    row = {"design": "rdma", "framing": "rocev2" if header == "roce" else header,
           "msg_bytes": msg_bytes, "messages": messages, "qps": qps,
           "cache_entries": cache_entries, "host": host, "rung": rung,
           **comparison_keys(host, fabric, link_retry, header), **row_tags(point)[0]}
    if popularity != "round_robin":
        row["popularity"] = popularity
    row.update({f"{key}_model": bw.get(key) for key in _PER_MESSAGE})
    row["latency_cycles_model"] = isolated_median(lat["latency"])
    row["completion_cycles_model"] = isolated_median(lat["completion"])
    row.update({f"{key}_model": v for key, v in state_kinds(
        row["inflight_bits_model"], fabric, link_retry).items()})
    return row


def headline_jobs(sim, messages=1000, msg_bytes=128, latency_messages=16,
                  rows=HEADLINE_ROWS):
    """The co-simulations of ``rows`` as ``[(label, function, kwargs)]``: independent of
    each other (run them in any order, or in parallel), then :func:`finish_headline`.
    The sequential rung sends ``max(4, messages // 20)`` messages (it is 20 times slower
    per message)."""
    jobs = []
    for label, rung, qps, entries, host in rows:
        n = max(4, messages // 20) if rung == "sequential" else messages
        jobs.append((f"rdma {label}", run_point,
                     dict(sim=sim, msg_bytes=msg_bytes, messages=n, qps=qps,
                          cache_entries=entries, host=host, rung=rung,
                          latency_messages=latency_messages, label=label)))
    return jobs


def finish_headline(rows, out_dir):
    """The results rows of :func:`headline_jobs`' results (in their order); writes the
    back-to-back runs' frames, one row after the other, to ``out_dir / "rdma.pcap"``."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out, pcap, offset = [], [], 0
    for row in rows:
        row = dict(row)
        frames = [(cycle + offset, fr) for cycle, fr in row.pop("frames")]
        row.pop("cycles")
        out.append(row)
        pcap += frames
        if frames:
            offset = frames[-1][0] + 1000
    write_pcapng(out_dir / "rdma.pcap", pcap)
    return out


def run_headline(sim, out_dir, messages=1000, msg_bytes=128, latency_messages=16,
                 rows=HEADLINE_ROWS, progress=None):
    """Run the headline rows on ``sim``, one after the other; return one results row
    each (:func:`headline_jobs`, :func:`finish_headline`)."""
    jobs = headline_jobs(sim, messages, msg_bytes, latency_messages, rows)
    done = []
    for k, (label, fn, kw) in enumerate(jobs):
        if progress:
            progress(k, len(jobs), label)
        done.append(fn(**kw))
    return finish_headline(done, out_dir)
