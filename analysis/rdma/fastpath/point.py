"""The run driver: a point's metrics dict from the parts of the fast path.

:func:`rdma_fast_point` sets up the point, lays out its run, counts it exactly, takes
latency and completion from the one-at-a-time run (:func:`_latency`), picks the
regime's rate (serial, pinned, the short run's flow, or the largest bound; the flow
also where entries are shared and windows are per QP, and node B's resources enter it
not at all: :func:`~analysis.rdma.fastpath.checks._check_backlog`), refuses
what the fast path does not cover, and estimates the state in flight.
"""

import dataclasses
import statistics

from analysis.rdma.fastpath.bounds import rdma_bounds
from analysis.rdma.fastpath.chain import _chain, _isolated
from analysis.rdma.fastpath.checks import _check_acks, _check_backlog, _check_receive
from analysis.rdma.fastpath.flow import (
    _FLOW_BOUNDS,
    _RESPONDER_BOUNDS,
    FLOW_MAX_MESSAGES,
    _flow,
)
from analysis.rdma.fastpath.host_timing import _Host
from analysis.rdma.fastpath.inflight import _inflight
from analysis.rdma.fastpath.params import _W, _not_covered, _setup
from analysis.rdma.fastpath.regimes import _pinned, _serial
from analysis.rdma.fastpath.scenario import _scenario
from analysis.rdma.fastpath.totals import _ctrl_bytes, _totals

#: Metrics the fast path gives exactly (equal to the cycle model's on the test grid).
EXACT_KEYS = ("wire_bytes", "ctrl_ops", "ctrl_bytes", "host_bytes", "host_tlps")
#: The largest relative deviation from the cycle model allowed for the timing figures,
#: above the worst measured on a 25-point grid at 600 messages (every rung; 8, 128 and
#: 1024 B; pcie and on_die; 1, 16, 64 and 256 QPs over 16 and 256 entries): ii 0.054
#: (64 QPs over 256 entries), and at 200 messages where the messages are at least the
#: QPs 0.036 (8 B with doorbell batching); in-flight state 0.49 at 600 messages
#: (high-water marks that depend on the order of arrivals); host_util as ii (busy cycles
#: over ii); latency and completion equal on every point. WRITEs of 4 to 64 KiB (1 and
#: 248 QPs, on_die and pcie): ii within 0.5 %, in-flight state within 0.18, latency and
#: completion equal; over 248 QPs in the pinned regime (4,096 and 7,408 B at 600
#: messages, 4,096 B at 2,000): ii within 1.7 %, in-flight state within 0.13 (also
#: 7,408 B at 2,000).
#: tests/test_fastpath.py asserts these on a subset,
#: tests/test_fastpath_report.py on the points the report co-simulates, and the report's
#: Inference section at its message sizes (scripts/reporting/inference_fastpath.py).
TOLERANCES = {"ii_cycles": 0.25, "inflight_bits": 0.5, "host_util": 0.25,
              "latency_cycles": 0.0, "completion_cycles": 0.0}


#: Fewest back-to-back messages a fast-path point accepts (see :mod:`analysis.rdma.fastpath`).
MIN_MESSAGES = 8


def _latency(s, n_lat):
    """Median latency and completion of the one-at-a-time run (analysis.rdma.point):
    ``n_lat`` messages after a warm-up, a doorbell (or WQE by MMIO) and a CQE each,
    posted :func:`analysis.rdma.point.latency_spacing` cycles apart into an idle
    engine; the chain of each (:func:`_chain`) with its own context hits and misses."""
    sl = dataclasses.replace(s, ring_every=1, signal_every=1)
    run = _scenario(sl, n_lat + 1)
    spacing = 6 * s.prof.read_latency + 600
    mrrs = s.prof.max_read_request // _W
    wqe_of = {first: a for a, _, first in reversed(run.wqe_reads)}
    ha, hb = _Host(s.prof), _Host(s.prof)
    lat, comp, memo = [], [], {}
    for j in run.order:
        # Messages that meet the same contexts, buffer alignment and interface state
        # (the kinds of TLP that started last) take the same times.
        state = (ha.up.last, ha.dn.last, hb.up.last, hb.dn.last)
        key = (run.miss_a[j], run.wb_a[j], run.miss_b[j], run.wb_b[j],
               (run.pay_base + j * s.words) % mrrs, wqe_of.get(j, 0) % mrrs, state)
        if key not in memo:
            la, co, _ = _isolated(sl, run, j, ha, hb, t0=j * spacing)
            memo[key] = (la, co, (ha.up.last, ha.dn.last, hb.up.last, hb.dn.last))
        la, co, after = memo[key]
        ha.up.last, ha.dn.last, hb.up.last, hb.dn.last = after
        lat.append(la)
        comp.append(co)
    return statistics.median(lat[1:]), statistics.median(comp[1:]), run


def rdma_fast_point(msg_bytes, messages, p):
    """The metrics dict of :func:`analysis.points.cycle_point` for ``"rdma"`` from the
    closed forms of this package (``p``: :func:`analysis.points.resolve`'s params).

    Raises ``ValueError`` for a point the verbs model refuses (inline data that does
    not fit, a full host memory) and for the regimes the fast path does not cover
    (package doc): fewer than :data:`MIN_MESSAGES` messages, ACK coalescing that would
    meet transport timeouts, a responder receive buffer that would overflow, QPs taken
    other than round robin (``popularity``).
    """
    if p.get("popularity", "round_robin") != "round_robin":
        raise _not_covered(f"QPs by popularity {p['popularity']!r} (round robin only)")
    if messages < MIN_MESSAGES:
        raise _not_covered(f"{messages} messages: the steady state needs at least "
                           f"{MIN_MESSAGES}")
    s = _setup(msg_bytes, p)
    n = messages + 1
    run = _scenario(s, n)
    t = _totals(s, run)
    lat, comp, lrun = _latency(s, p["latency_messages"])
    # A message's times on an idle engine (hit, and all-miss) for the holds below.
    hit = _chain(s, 0, _Host(s.prof), _Host(s.prof), False, False, False, False, 0, 0,
                 True, True, [0] * (1 + s.n_inline))
    rtt = hit["retire"] - hit["frames"][-1]["take"]
    miss = _chain(s, 0, _Host(s.prof), _Host(s.prof), False, False, True, True, 0, 0,
                  True, True, [0] * (1 + s.n_inline))
    rtt_b = miss["frames"][0]["verify"] - hit["frames"][0]["verify"] + 2
    if s.serial:
        ii, regime = _serial(s, run), "serial"
    else:
        bounds = rdma_bounds(s, run)
        ii0 = max(bounds.values())
        _check_acks(s, run, ii0, rtt)
        ii = _pinned(s, run, ii0)
        regime = "pinned" if ii > ii0 * (1 + 1e-9) else "free"
        if (regime == "free" or s.windows) and messages <= FLOW_MAX_MESSAGES:
            # The requester's own stages pace the flow; node B's only through the
            # responder's receive buffers, refused where they would overflow.
            gap = max(v for k, v in bounds.items()
                      if k not in _FLOW_BOUNDS + _RESPONDER_BOUNDS)
            cqe_after = (None if hit["cqe"] is None
                         else hit["cqe"] - hit["frames"][-1]["first"])
            flow = _flow(s, run, gap, cqe_after)
            if flow is not None:
                _check_backlog(s, run, rdma_bounds(s, run, run.order[1:]), flow)
            ii = ii if flow is None else flow
        _check_receive(s, run, bounds, rtt_b, regime)
    bits, _ = _inflight(s, run, ii, regime, rtt, rtt_b)
    busiest = max(t.busy.values())
    start = 6 * s.prof.read_latency + 600
    cycles = start + (hit["cqe"] - 0) + (n - 2) * ii + 1
    return {
        "latency_cycles": lat, "completion_cycles": comp, "ii_cycles": ii,
        "wire_bytes": t.wire / n, "ctrl_ops": {k: v / n for k, v in t.ops.items()},
        "ctrl_bytes": _ctrl_bytes(t, s.qpc_words) / n, "host_bytes": t.bytes / n,
        "host_tlps": {k: v / n for k, v in t.tlps.items()},
        "host_util": min(1.0, busiest / n / ii) if ii else None,
        "inflight_bits": bits, "messages": messages, "cycles": round(cycles),
    }
