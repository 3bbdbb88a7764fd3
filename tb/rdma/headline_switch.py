"""The RDMA points on the NIC's fabric (:func:`tb.rdma.headline.run_point` and
:func:`~tb.rdma.headline.model_point` with ``topology`` ``switch``): two nodes of
:class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`, link, switch, link with the profile's
latencies, credits by the NIC's rule and link retry as the NIC's
(:func:`spec.fabric_profiles.rdma_fabric_top`), the same two runs as on RdmaTop, run by
the ``writes`` kind of the fabric test (:mod:`tb.rdma.fabric_writes`)."""

import json

from analysis.rdma.point import knobs_of, latency_knobs, latency_spacing, reduce_run
from pymodel.throughput import isolated_median
from spec.fabric_profiles import fabric_profile, rdma_fabric_top, rdma_records, rdma_timeout
from spec.metrics import row_metrics
from spec.rdma_engine import TOP_DEFAULTS
from tb.rdma.point_params import row_tags, top_params
from tb.rdma.row_keys import PER_MESSAGE as _PER_MESSAGE
from tb.rdma.row_keys import comparison_keys, ii_messages, state_kinds

__all__ = ["fabric_top", "run_switch_point", "model_switch_point", "reads_host"]


def fabric_top(host, fabric="board", link_retry=False, header="roce", cache_entries=16,
               reads=True, **build):
    """The parameters of the two-node :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop` of a
    ``switch`` point: RdmaTop's host-memory depth and player and recorder depths, the
    context caches of ``cache_entries``, the point's other build fields ``build`` that
    are off the top's defaults (:func:`tb.rdma.point_params.top_params`; the top and
    the model's configuration check them), the fabric of
    :func:`spec.fabric_profiles.rdma_fabric_top` and, off ``board``, the window records
    and transport timeout of RdmaTop's (:func:`tb.rdma.headline._top`), the records
    sized to the rung (``reads``: whether it reads its WQE and payload from host memory,
    :func:`spec.fabric_profiles.rdma_records`). ``ValueError``
    names a ``header`` other than ``"roce"`` (the switch routes by the Ethernet header)
    or a bad ``fabric``."""
    if header != "roce":
        raise ValueError(f"header {header!r}: topology 'switch' routes the engine's RoCEv2 "
                         f"frames by their Ethernet header; use header 'roce'")
    profile = fabric_profile(fabric)
    top = dict(nodes=2, host=host, depth=TOP_DEFAULTS["depth"], cache_entries=cache_entries,
               mmio=TOP_DEFAULTS["mmio"], wire_beats=TOP_DEFAULTS["wire_beats"],
               events=TOP_DEFAULTS["events"], **rdma_fabric_top(profile, link_retry))
    top.update(build)
    if profile.name != "board":
        top.update(records=rdma_records(profile, reads=reads),
                   timeout=rdma_timeout(profile))
    return top


def reads_host(knobs):
    """Whether a rung of ``knobs`` reads its WQE and payload from host memory (all but
    WQE by MMIO with inline data, ``bf`` and ``inline``)."""
    return not (knobs.get("bf") and knobs.get("inline"))


def _switch_params(msg_bytes, qps, cache_entries, host, k, messages, latency_messages,
                   popularity="round_robin"):
    """Both runs' parameters of a ``switch`` point (the ``writes`` kind of
    :mod:`tb.rdma.cocotb_fabric`), as :func:`run_point`'s on RdmaTop; ``popularity``
    (the model's alone) only when not round robin."""
    warm = latency_spacing(host)
    common = dict(kind="writes", sizes=[msg_bytes], qps=qps, warmup=warm,
                  cache_entries=cache_entries)
    if popularity != "round_robin":
        common["popularity"] = popularity
    return (dict(common, messages=messages + 1, knobs=k),
            dict(common, messages=latency_messages + 1, knobs=latency_knobs(k),
                 spacing=warm))


def _switch_sides(row, bw, lat, fabric, link_retry):
    """The ``_rtl`` and ``_model`` figures of a ``switch`` point from its two runs'
    reductions (``{"rtl": ..., "model": ...}`` each)."""
    for side in ("rtl", "model"):
        b, t = bw[side] or {}, lat[side] or {}
        for key in _PER_MESSAGE:
            row[f"{key}_{side}"] = b.get(key)
        row[f"latency_cycles_{side}"] = isolated_median(t.get("latency"))
        row[f"completion_cycles_{side}"] = isolated_median(t.get("completion"))
        if row[f"inflight_bits_{side}"] is not None:
            kinds = state_kinds(row[f"inflight_bits_{side}"], fabric, link_retry,
                                b["fabric_beats"])
            row.update({f"{k}_{side}": v for k, v in kinds.items()})
            row[f"inflight_bits_{side}"] += kinds["fabric_buffer_bits"]


def _point_top(point, k):
    """The fabric top of a ``switch`` point (:func:`fabric_top`) for the rung's knobs
    ``k``."""
    return fabric_top(point.host, point.fabric, point.link_retry, point.header,
                      point.cache_entries, reads_host(k), **top_params(point, {}))


def run_switch_point(sim, msg_bytes, messages, point, rung, k, latency_messages, test_id,
                     label, check_only):
    """:func:`run_point` with ``topology`` ``switch`` (``point``: its checked
    :class:`spec.design_point.RdmaPoint`)."""
    from tb.rdma.fabric_runner import run_fabric
    from tb.rdma.fabric_writes import check_writes_params

    qps, cache_entries, host = point.qps, point.cache_entries, point.host
    link_retry, header = point.link_retry, point.header
    top = _point_top(point, k)
    tags, suffix = row_tags(point)
    fabric = fabric_profile(point.fabric).name
    runs = _switch_params(msg_bytes, qps, cache_entries, host, k, messages,
                          latency_messages)
    for params in runs:                        # both runs' before either is built
        check_writes_params(dict(params, top=top))
    if check_only:
        return None
    tag = test_id or (f"{sim}_{(rung or 'knobs').replace(' ', '_').replace('+', 'p')}_q{qps}"
                      f"_c{cache_entries}_{host}_n{messages}_b{msg_bytes}_{fabric}"
                      + ("_retry" if link_retry else "") + suffix)
    tag = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in tag) + "_sw"
    out = []
    for params, kind in zip(runs, ("bw", "lat"), strict=True):
        run_dir = run_fabric(top, params=dict(params, out_json="m.json"), sim=sim,
                             test_id=f"{tag}_{kind}", name="rdma_fabric_pair")
        out.append(json.loads((run_dir / "m.json").read_text()))
    bw, lat = out
    row = {"design": "rdma", "framing": "rocev2", "simulator": sim, "msg_bytes": msg_bytes,
           "messages": messages, "qps": qps, "cache_entries": cache_entries, "host": host,
           "rung": label or rung,
           **comparison_keys(host, fabric, link_retry, header, "switch"), **tags}
    _switch_sides(row, bw, lat, fabric, link_retry)
    row["mismatches"] = bw["mismatches"] + lat["mismatches"]
    if messages < ii_messages():
        for side in ("rtl", "model"):
            row[f"ii_cycles_{side}"] = row[f"host_util_{side}"] = None
    row["cycles"] = bw.get("cycles")
    row["frames"] = [(cycle, bytes.fromhex(hexa)) for cycle, hexa in bw["frames"]]
    missing = [key for key in row_metrics("rdma") if f"{key}_rtl" not in row]
    if missing:
        raise AssertionError(f"metrics missing from the RDMA row: {missing}")
    return row


def model_switch_point(msg_bytes, messages, point, rung, latency_messages,
                       popularity="round_robin"):
    """:func:`model_point` with ``topology`` ``switch``: the fabric test's model side
    (``popularity``: the row's when not round robin)."""
    from pymodel.rdma.fabric_system import simulate_fabric
    from tb.rdma.fabric_writes import pair_run, writes_images, writes_setup

    qps, cache_entries, host = point.qps, point.cache_entries, point.host
    fabric, link_retry, header = point.fabric, point.link_retry, point.header
    top = _point_top(point, knobs_of(rung, None))
    runs = []
    for params in _switch_params(msg_bytes, qps, cache_entries, host, knobs_of(rung, None),
                                 messages, latency_messages, popularity):
        cfg, v = writes_setup(top, params)
        run = simulate_fabric(cfg, writes_images(v))
        red = reduce_run(v, pair_run(run), max(len(v.messages), 1))
        red["fabric_beats"] = run["merge"][0]["credits_max"]
        runs.append({"model": red, "rtl": None})
    fabric = fabric_profile(fabric).name
    row = {"design": "rdma", "framing": "rocev2", "msg_bytes": msg_bytes,
           "messages": messages, "qps": qps, "cache_entries": cache_entries, "host": host,
           "rung": rung, **comparison_keys(host, fabric, link_retry, header, "switch"),
           **row_tags(point)[0]}
    if popularity != "round_robin":
        row["popularity"] = popularity
    _switch_sides(row, *runs, fabric, link_retry)
    return {k: v for k, v in row.items() if not k.endswith("_rtl")}
