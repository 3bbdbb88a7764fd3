"""Model-only runs of the RDMA fabric under open-loop load: per-message cycles for the
latency distributions (:func:`analysis.load.traffic.distribution`).

:func:`fabric_run` builds the scenario (:func:`analysis.scenarios.rdma_fabric.
fabric_scenario`), runs the cycle-exact twin of ``RdmaFabricTop``
(:func:`pymodel.rdma.fabric_system.simulate_fabric`; co-simulated on Verilator and
Icarus by ``tests/test_cosim_rdma_fabric.py``) and reads each measured message's cycles
off the twin's records: the cycle its doorbell was released (``arrival``), taken by the
host interface (``accept``), its last payload word written in the destination's host
memory (``remote_write``, the ``written`` mark), its CQE written in the sender's host
memory (``completion``, the ``completed`` mark). Marks are matched to messages per QP
in posting order (RC: a QP's WRITEs land and complete in order).

:func:`fabric_load_row` turns those arrays into a load row (the offered and achieved
rates and the latency distributions), one definition for the model-only runs, the
co-simulation's rows and the report.
"""

import numpy as np

from analysis.load.rdma import load_row
from analysis.load.traffic import senders
from analysis.scenarios.rdma_fabric import fabric_scenario, service_cycles
from pymodel.rdma.fabric_system import FabricConfig, simulate_fabric
from spec.rdma_fabric import FABRIC_DEFAULTS

__all__ = ["fabric_run", "fabric_arrays", "fabric_load_row", "MODEL_DEPTH"]

#: Host-memory words per host function of a model-only run: the twin's memories are
#: sparse, so a run of thousands of messages need not fit the RTL top's 4096 words.
MODEL_DEPTH = 1 << 20


def _match(marks, messages, key):
    """``{id(message): cycle}``: the ``(cycle, tag)`` marks of one node given to its
    messages per tag (QPN) in posting order."""
    per_tag = {}
    for m in messages:
        per_tag.setdefault(key(m), []).append(m)
    out = {}
    seen = {}
    for cycle, tag in marks:
        k = seen.get(tag, 0)
        seen[tag] = k + 1
        if tag not in per_tag or k >= len(per_tag[tag]):
            raise ValueError(f"a mark of tag {tag} with no message left to match")
        out[id(per_tag[tag][k])] = cycle
    return out


def fabric_arrays(sc, r, nodes):
    """The measured messages' arrays (``src``, ``dst``, ``arrival``, ``accept``,
    ``remote_write``, ``completion``) of a run ``r`` of scenario ``sc`` (the twin's
    records or the RTL's, same shapes: per node ``written``, ``completed``,
    ``mmio_stamps``). ``RuntimeError`` if a message never landed or completed."""
    written, completed = {}, {}
    for p in range(nodes):
        written.update(_match(r["written"][p], [m for m in sc.messages if m.dst == p],
                              lambda m: m.qpn_b))
        completed.update(_match(r["completed"][p], [m for m in sc.messages if m.src == p],
                                lambda m: m.qpn_a))
    measured = [m for m in sc.messages if not m.warm]
    missing = [m for m in sc.messages if id(m) not in written or id(m) not in completed]
    if missing:
        raise RuntimeError(f"{len(missing)} messages never landed or completed")
    col = {
        "src": [m.src for m in measured], "dst": [m.dst for m in measured],
        "arrival": [m.arrival for m in measured],
        "accept": [r["mmio_stamps"][m.src][m.mmio] for m in measured],
        "remote_write": [written[id(m)] for m in measured],
        "completion": [completed[id(m)] for m in measured],
    }
    return {k: np.asarray(v, dtype=np.int64) for k, v in col.items()}


def fabric_load_row(arrays, pattern, nodes, msg_bytes, load, pmtu_log2=12):
    """The load row of a fabric run from its measured messages' ``arrays``
    (:func:`fabric_arrays`, the model's or the RTL's). Both rates are in messages per
    cycle of the whole fabric (every sender together):

    - ``offered_per_cycle``: the arrivals per cycle of the schedule,
      ``senders * load / service_cycles``. Each sender's arrivals are drawn with a mean
      gap of ``service_cycles / load`` cycles (:func:`analysis.load.traffic.
      arrival_cycles`, ``service_cycles`` of :func:`analysis.scenarios.rdma_fabric.
      service_cycles`: one sender's cycles per message that fill the busiest
      destination's downlink), and ``senders`` of ``pattern`` send at once.
    - ``achieved_per_cycle``: the measured messages delivered per cycle over their
      steady-state span, ``(n - 1) / (last - first)`` of their remote writes (last
      payload word in the destination's host memory; ``n`` messages, every sender's;
      None for one message). The warm-up messages (:func:`fabric_scenario`'s
      ``warmup``) are not measured: with no warm-up the cold context fills fall inside
      the span and it is not a steady state.

    Also ``senders``, ``service_cycles`` (per sender), ``load``, ``messages`` (``n``)
    and the ``latency`` and ``completion`` distributions from arrival
    (:func:`analysis.load.rdma.load_row`).
    """
    svc = service_cycles(pattern, nodes, msg_bytes, pmtu_log2)
    who = len(senders(pattern, nodes))
    row = load_row({k: arrays[k] for k in ("arrival", "remote_write", "completion")},
                   load, svc)
    n = len(arrays["remote_write"])
    span = int(arrays["remote_write"].max() - arrays["remote_write"].min()) if n else 0
    row.update(senders=who, offered_per_cycle=who * load / svc,
               achieved_per_cycle=(n - 1) / span if n > 1 and span else None)
    return row


def fabric_run(pattern, nodes, msg_bytes, messages, load, seed=1, qps=1, warmup=3000,
               host=FABRIC_DEFAULTS["host"], link_latency=FABRIC_DEFAULTS["link_latency"],
               credits=FABRIC_DEFAULTS["credits"],
               merge_depth=FABRIC_DEFAULTS["merge_depth"], cache_entries=16,
               depth=MODEL_DEPTH, pause=FABRIC_DEFAULTS["pause"],
               pause_headroom=FABRIC_DEFAULTS["pause_headroom"],
               pause_hysteresis=FABRIC_DEFAULTS["pause_hysteresis"]):
    """One open-loop run of ``pattern`` over ``nodes`` nodes, ``messages`` WRITEs of
    ``msg_bytes`` per sender at ``load`` (see
    :func:`analysis.scenarios.rdma_fabric.service_cycles`), ``qps`` QPs per (sender,
    destination); ``warmup`` cycles of warm-up (one unmeasured message per QP first);
    ``pause``, ``pause_headroom``, ``pause_hysteresis``: the downlinks' PFC-like pause
    (:class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`; off by default).

    Returns a dict of numpy int64 arrays over the measured messages, in posting order
    per sender (senders in order): ``src``, ``dst``, ``arrival``, ``accept``,
    ``remote_write``, ``completion`` (absolute cycles), and ``cycles`` (the run's
    length), ``merge_level_max`` (per node), ``counters`` (the twin's ``req``/``resp``
    per node; ``pause``: its ``xoffs`` per node, with ``pause``) and ``row``
    (:func:`fabric_load_row`: offered and achieved rates, latency distributions).
    """
    sc = fabric_scenario(pattern, nodes, messages, msg_bytes, load, seed=seed, qps=qps,
                         depth=depth, warmup=warmup)
    cfg = FabricConfig(nodes=nodes, cache_entries=cache_entries,
                       cache_capacity=max(cache_entries, FABRIC_DEFAULTS["cache_entries"]),
                       depth=depth, host=host, link_latency=link_latency, credits=credits,
                       merge_depth=merge_depth, cq_base=sc.cq_base, cq_log2=sc.cq_log2,
                       pause=pause, pause_headroom=pause_headroom,
                       pause_hysteresis=pause_hysteresis)
    r = simulate_fabric(cfg, sc.images())
    out = fabric_arrays(sc, r, nodes)
    out.update(cycles=r["cycles"], merge_level_max=[m["level_max"] for m in r["merge"]],
               counters={"req": r["req"], "resp": r["resp"], "pause": r["pause"]})
    out["row"] = fabric_load_row(out, pattern, nodes, msg_bytes, load)
    return out
