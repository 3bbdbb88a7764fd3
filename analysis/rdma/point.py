"""One RDMA design point on the golden model: the scenario, the two runs, the metrics.

A point is measured as the perftest tools measure an RNIC: the per-message rate and
costs with messages posted back to back (``ib_write_bw``: ``ii_cycles``, wire and host
bytes, TLPs, control operations, in-flight state), and the latency and completion with
messages posted one at a time, each into an idle engine (``ib_write_lat``), so that
queueing behind earlier messages is not counted as latency. Latency under load is the
subject of the load sweeps.

:func:`reduce_run` turns a run (the model's or the RTL's records, same shapes) into
metrics; the co-simulation uses it on the RTL's records.
"""

import dataclasses

from analysis.scenarios.rdma import writes_scenario
from pymodel.host.metrics import host_util
from pymodel.rdma.metrics import (
    message_starts,
    per_message,
    steady_ii,
    summarize,
)
from pymodel.rdma.point_fields import MODEL_FIELDS, check_fields, model_defaults
from pymodel.rdma.system import Config, simulate
from spec.host import PROFILES
from spec.rdma_engine import HOST_DEPTH, LADDER, REQUESTER_DEFAULTS, RUNG_KNOBS

__all__ = ["knobs_of", "build", "reduce_run", "rdma_point", "latency_spacing",
           "ENGINE_KNOBS", "POINT_FIELDS"]

#: The knobs that are the engine's run-time ports (the rest are the host's).
ENGINE_KNOBS = ("serial", "ack_every", "ack_frames")
#: The design point's fields :func:`rdma_point` takes as keywords (its ``rung`` is a
#: keyword of its own), and their defaults: the point's, the link latency the top's.
POINT_FIELDS = tuple(n for n in MODEL_FIELDS if n != "rung")
_FIELD_DEFAULTS = model_defaults(POINT_FIELDS, link_latency=6)


def knobs_of(rung=None, knobs=None):
    """The knobs of a ladder rung (by name) with ``knobs`` on top."""
    out = dict(RUNG_KNOBS)
    if rung is not None:
        names = dict(LADDER)
        if rung not in names:
            raise ValueError(f"rung must be one of {list(names)}, not {rung!r}")
        out.update(names[rung])
    unknown = set(knobs or {}) - set(RUNG_KNOBS)
    if unknown:
        raise ValueError(f"unknown optimisation knob(s): {sorted(unknown)}")
    out.update(knobs or {})
    return out


def latency_spacing(host):
    """Cycles between messages posted one at a time: enough for one to finish (two host
    round trips, a context miss at each end, the frame, the ACK and the CQE) before the
    next is posted."""
    return 6 * PROFILES[host].read_latency + 600


def build(msg_bytes, messages, qps=1, cache_entries=16, host="pcie", knobs=None,
          pmtu_log2=12, seed=1, spacing=0, link_latency=6, warmup=True, depth=HOST_DEPTH,
          mrs=1, popularity="round_robin", **sizes):
    """``(cfg, verbs)`` of a run; with ``warmup`` the first message goes alone and the
    others follow once it is done (:func:`latency_spacing`). ``depth``: host-memory
    words of each node (the co-simulation's by default; a model-only run may use more);
    ``mrs``: MRs the messages take in turn; ``popularity``: the QP of each message
    (:func:`analysis.scenarios.rdma.writes_scenario`); ``sizes``: fields of the model's
    :class:`~pymodel.rdma.config.Config` (the scenario lays the contexts out at its
    size)."""
    k = knobs_of(None, knobs)
    cfg = Config(cache_entries=cache_entries, host=host, link_latency=link_latency,
                 depth=depth, **{n: k[n] for n in ENGINE_KNOBS}, **sizes)
    verbs = writes_scenario(messages, [msg_bytes], qps, pmtu_log2=pmtu_log2, seed=seed,
                            spacing=spacing, depth=depth,
                            warmup=latency_spacing(host) if warmup else 0,
                            cache_entries=cache_entries, qpc_words=cfg.qpc_words, mrs=mrs,
                            popularity=popularity, **k)
    return dataclasses.replace(cfg, cq_base=verbs.cq_base, cq_log2=verbs.cq_log2), verbs


def reduce_run(verbs, run, messages):
    """Metrics of a run (see :func:`pymodel.rdma.metrics.summarize`), plus ``ii_cycles``
    and ``host_util``, and the per-message ``latency``/``completion`` lists."""
    starts = verbs.write_starts()
    qpn_b = {q.qpn_a: q.qpn_b for q in verbs.qps.values()}
    lat, comp = per_message(verbs.messages, starts, run["mmio_stamps"], run["written"],
                            run["completed"], qpn_b)
    out = summarize(messages, lat, comp, [f for _, f in run["wire_ab"]],
                    [f for _, f in run["wire_ba"]], run["req"], run["resp"],
                    run["host_a"], run["host_b"], verbs.qpc_words)
    ii = steady_ii(message_starts(run["wire_ab"]))
    out["ii_cycles"] = ii
    out["host_util"] = host_util((run["host_a"], run["host_b"]), messages, ii)
    out["latency"], out["completion"] = lat, comp
    return out


def run_model(cfg, verbs, **kw):
    items, release = verbs.mmio_items()
    return simulate(cfg, verbs.mem_a, verbs.mem_b, verbs.mr_table, items, release, **kw)


def latency_knobs(knobs):
    """The knobs of the one-at-a-time run: a message per doorbell (or WQE by MMIO) and a
    CQE per message, as ``ib_write_lat`` posts; the rest as the rung says."""
    return dict(knobs, ring_every=1, signal_every=1)


def rdma_point(msg_bytes, messages, rung=None, knobs=None, pmtu_log2=12, seed=1,
               latency_messages=16, per_message=False, depth=1 << 22,
               windows=REQUESTER_DEFAULTS["windows"], popularity="round_robin", **fields):
    """The model's metrics of one point: a back-to-back run of ``messages`` messages
    after a warm-up message, and a one-at-a-time run of ``latency_messages`` (after one
    warm-up message, not counted: the contexts are cached as in the steady state).
    ``fields``: fields of the design point (:data:`POINT_FIELDS`, each with the help
    ``make sim --help`` gives it), the point's default where not given (the link
    latency: 6, the top's), checked by the point's own rule first
    (:func:`pymodel.rdma.point_fields.check_fields`: ``ValueError`` naming the keyword,
    then its option; ``TypeError`` for a keyword that is none of them).
    ``windows``: the requester's window slots (:class:`pymodel.rdma.config.Config`; 0
    pins a QP's context in the cache until its messages are acknowledged). ``popularity``
    (:data:`spec.load.POPULARITY`): the QP each message of both runs uses, round robin by
    default, ``zipf`` (0.99) as the NIC's destinations
    (:func:`analysis.scenarios.rdma.qp_order`; ``ValueError`` naming ``popularity``
    otherwise).

    With ``per_message``, returns ``(row, per)``: ``per`` holds the back-to-back run's
    per-message ``accept``, ``remote_write``, ``completion`` (absolute cycles, -1 where
    not reached) and ``wire_bytes``, and its ``cycles``."""
    unknown = sorted(set(fields) - set(POINT_FIELDS))
    if unknown:
        raise TypeError(f"rdma_point() got unexpected keyword argument(s) {unknown}")
    fields = _FIELD_DEFAULTS | fields
    check_fields(fields)
    host = fields["host"]
    k = knobs_of(rung, knobs)
    common = dict(fields, pmtu_log2=pmtu_log2, seed=seed, depth=depth, windows=windows,
                  popularity=popularity)
    cfg, verbs = build(msg_bytes, messages + 1, knobs=k, **common)
    run = run_model(cfg, verbs)
    bw = reduce_run(verbs, run, messages + 1)
    cfg2, verbs2 = build(msg_bytes, latency_messages + 1, knobs=latency_knobs(k),
                         spacing=latency_spacing(host), **common)
    lat = reduce_run(verbs2, run_model(cfg2, verbs2), latency_messages + 1)
    row = {key: bw[key] for key in bw if key not in ("latency", "completion")}
    row["latency_cycles"], row["completion_cycles"] = isolated(lat)
    if not per_message:
        return row
    starts = verbs.write_starts()
    accept = [run["mmio_stamps"][starts[m.announce]] for m in verbs.messages[1:]]
    wire = row["wire_bytes"]
    per = {"accept": accept,
           "remote_write": [a + x if x is not None else -1
                            for a, x in zip(accept, bw["latency"][1:], strict=True)],
           "completion": [a + x if x is not None else -1
                          for a, x in zip(accept, bw["completion"][1:], strict=True)],
           "wire_bytes": [round(wire)] * len(accept), "cycles": run["cycles"]}
    return row, per


def isolated(run):
    """Median latency and completion of a one-at-a-time run, without its warm-up."""
    import statistics
    lat = [x for x in run["latency"][1:] if x is not None]
    comp = [x for x in run["completion"][1:] if x is not None]
    return (statistics.median(lat) if lat else None,
            statistics.median(comp) if comp else None)
