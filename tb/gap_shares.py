"""Each factor's share of the gap in any order: Shapley values over the table's factors.

The table (:mod:`tb.gap_table`) walks from the NIC to the RDMA engine in one order; the
difference a factor makes depends on the factors already applied (link retry costs more
cycles of completion once the fabric is long, the QP engine's step depends on the
header). So the factors are also taken in every order on the golden model (no simulator;
the model's figures of a point equal its co-simulation's, 0 mismatches on every
co-simulated row): each of the 2**k subsets of the k factors is one point, the NIC's
row 0 with the factors of the subset applied:

==========================  =================================================================
factor                      when in the subset
==========================  =================================================================
same attachment             behind PCIe (otherwise the NIC integrated, the engine on die)
end-to-end completion       the NIC's end-to-end completion, complete when its record is
                            in host memory (the engine always completes end to end, its
                            ACK and CQE: no effect once the engine is in)
link-level reliability      link retry on every link
fabric profile              the table's profile (otherwise ``board``)
Ethernet header             the Ethernet header class (NIC: L2; engine: RoCEv2), otherwise
                            the scale-up class (NIC: compact; engine: scale-up header)
QP engine, 1 QP             the RDMA engine, best rung, 1 QP, 16 cache entries
4096 QPs                    4096 QPs round robin (the NIC's row has one destination: no
                            effect without the engine)
==========================  =================================================================

The engine's points run on the NIC's switch (``topology`` ``switch``,
:func:`tb.gap_table.rdma_topology`) with RoCEv2 headers; with the scale-up header (the
engine's subsets without the Ethernet header) on RdmaTop's direct link, whose one link
stands for the path (:func:`spec.fabric_profiles.one_way`): in those subsets the
Ethernet header's share also carries the switch's.

Two games: the whole walk (every factor, to the engine at 4096 QPs) and the walk to the
engine at 1 QP (every factor but the QPs, which stay at 1): at 4096 QPs the engine's
context misses interact with the engine itself (the QPs do nothing without it), and the
Shapley value splits that interaction evenly between the two.

Two more, the whole walk with the NIC at 4,096 destinations (side row 9's factor,
:data:`tb.gap_table.SIDE_ROWS`), one per popularity of :data:`DEST_POPULARITIES`: there
``4096 QPs`` stands for 4,096 peers of either design, the engine's QPs or the NIC's
destinations, both chosen by the popularity (round robin as rows 7 and 9; Zipf 0.99 by
the same law and seed rule, :func:`analysis.scenarios.rdma.qp_order`), each with its own
end-to-end completion state. The NIC carries destination ids in its L2 header only and keeps
per-destination state with end-to-end completion only (:func:`spec.nic.
check_destinations`), so its 4,096 destinations are applied where the subset holds both
the Ethernet header and the end-to-end completion, and do nothing elsewhere; the subset
of the first five factors and the QPs is row 9 (at round robin). The points at 4,096
peers by Zipf are the golden model's only, as in the other games (rows 7 and 9 are
co-simulated at round robin only).

For each factor and metric: the Shapley value (the mean of its marginal difference over
all k! orders; the shares of all factors add up to the whole gap, the last row minus
row 0, in the Zipf game the engine at 4096 QPs by Zipf minus row 0), the least and the
most it adds in any order (every subset of the other factors comes first in some
order), and what it adds in the table's order. A factor whose range spans zero, or whose
table figure is far from its share, makes a conclusion that holds in one order only.
"""

import math
from itertools import combinations

from tb.gap_table import GAP_FACTORS, SIDE_ROWS, WIDE_SETTING, gap_settings

__all__ = ["FACTORS", "SHARE_METRICS", "DEST_POPULARITIES", "GAMES", "subset_point",
           "share_jobs", "game_jobs", "shapley", "factor_shares", "metric_value"]

#: The factors, in the table's order (rows 1 to the last).
FACTORS = tuple(name for name, _, _ in GAP_FACTORS[1:])

#: The side row's change that puts the NIC at many destinations (row 9's).
_WIDE = next(dict(change) for _, _, change in SIDE_ROWS if WIDE_SETTING in change)

#: The popularities of the NIC's destinations in the games with them (:data:`spec.load.
#: POPULARITY`): row 9's round robin, and Zipf with skew 0.99.
DEST_POPULARITIES = ("round_robin", "zipf")

#: The games over all orders: (suffix of the rows' keys in gap.json, title, factors,
#: popularity of the NIC's destinations or None: the NIC at one destination).
GAMES = (("", "the walk to 4096 QPs", FACTORS, None),
         ("_1qp", "the walk to 1 QP", FACTORS[:-1], None),
         *((f"_dest_{pop}", f"the walk to 4096 peers, the NIC at 4,096 destinations "
            f"({pop.replace('_', ' ')})", FACTORS, pop) for pop in DEST_POPULARITIES))

#: The metrics shared out: (key of the model's row, title).
SHARE_METRICS = (("latency_cycles", "latency"), ("completion_cycles", "completion"),
                 ("ii_cycles", "ii"), ("wire_bytes", "wire B"), ("host_bytes", "host B"),
                 ("endpoint_state_bits", "endpoint state bits"))


def subset_point(profile, subset, destinations=None):
    """``(design, settings)`` of the point with the factors of ``subset`` (names of
    :data:`FACTORS`) applied to row 0 at fabric ``profile``: settings as
    :func:`tb.gap_table.gap_settings` gives them (so that :func:`tb.gap_table.point_of`
    turns them into a point), the table's rows for the subsets that are its prefixes.
    ``destinations`` (None or one of :data:`DEST_POPULARITIES`): ``4096 QPs`` also puts
    the NIC at row 9's destinations by that popularity where it has the Ethernet header
    and the end-to-end completion, and the engine's 4096 QPs by it (the module doc; the
    engine's ``popularity`` only off round robin, so that round robin's points are the
    other games'). ``ValueError`` names an unknown
    factor or popularity."""
    unknown = sorted(set(subset) - set(FACTORS))
    if unknown:
        raise ValueError(f"unknown factor(s) {unknown}; the factors: {list(FACTORS)}")
    if destinations is not None and destinations not in DEST_POPULARITIES:
        raise ValueError(f"destinations must be None or one of {list(DEST_POPULARITIES)}, "
                         f"not {destinations!r}")
    rows = gap_settings(profile)
    first = dict(rows[0][2])
    on = set(subset)
    engine = "QP engine, 1 QP" in on
    s = {"attachment": "pcie" if "same attachment" in on else "integrated",
         "fabric": profile if "fabric profile" in on else "board",
         "reliability": "link-retry" if "link-level reliability" in on else "none"}
    ethernet = "Ethernet header" in on
    if not engine:
        s.update(completion="e2e" if "end-to-end completion" in on else first["completion"],
                 header="l2" if ethernet else first["header"])
        if destinations and "4096 QPs" in on and ethernet and s["completion"] == "e2e":
            s.update(_WIDE, popularity=destinations)
        return "nic", s
    s.update(completion="e2e", header="roce" if ethernet else "scaleup",
             qps=4096 if "4096 QPs" in on else 1, cache_entries=16,
             rung=dict(rows[-2][2])["rung"])
    if destinations not in (None, "round_robin") and s["qps"] > 1:
        s["popularity"] = destinations   # the engine's QPs by the NIC's law
    if s["attachment"] == "integrated":
        s["attachment"] = "on_die"       # the engine on the accelerator's die
    return "rdma", s


def _key(design, s):
    return design, tuple(sorted(s.items()))


def share_jobs(profile, messages=1000, msg_bytes=128):
    """The model points of every subset at ``profile``, distinct ones once:
    ``(jobs, index)``, ``jobs`` as ``[(label, function, kwargs)]`` (``model_point`` of
    :mod:`tb.nic.headline` or :mod:`tb.rdma.headline`; independent, any order) and
    ``index`` mapping each subset (a frozenset) to its job's position: the games with
    the NIC at one destination (:func:`game_jobs` with no popularities)."""
    jobs, indexes = game_jobs(profile, messages, msg_bytes, ())
    return jobs, indexes[None]


def game_jobs(profile, messages=1000, msg_bytes=128, popularities=DEST_POPULARITIES):
    """As :func:`share_jobs`, for the NIC at one destination (``None``) and at 4,096 by
    each of ``popularities`` (:func:`subset_point`'s ``destinations``), a point shared
    by several games run once: ``(jobs, {popularity or None: index})``."""
    from tb.gap_table import point_of
    from tb.nic.headline import model_point as nic_point
    from tb.rdma.headline import model_point as rdma_point

    jobs, seen, indexes = [], {}, {}
    for pop in (None, *popularities):
        index = indexes[pop] = {}
        for n in range(len(FACTORS) + 1):
            for subset in combinations(FACTORS, n):
                design, s = subset_point(profile, subset, pop)
                key = _key(design, s)
                if key not in seen:
                    seen[key] = len(jobs)
                    fn = nic_point if design == "nic" else rdma_point
                    wide = f" at {s[WIDE_SETTING]} ({s['popularity']})" \
                        if WIDE_SETTING in s else ""
                    if design == "rdma" and "popularity" in s:
                        wide = f" ({s['popularity']})"
                    jobs.append((f"model {profile} {design}{wide} "
                                 f"{'+'.join(subset) or 'row 0'}", fn,
                                 dict(msg_bytes=msg_bytes, messages=messages,
                                      **point_of(design, s))))
                index[frozenset(subset)] = seen[key]
    return jobs, indexes


def metric_value(row, metric):
    """A model row's figure of ``metric`` (a key of :data:`SHARE_METRICS`): ``host_bytes``
    is 0 for the integrated NIC (no host interface; its row has none)."""
    value = row.get(f"{metric}_model")
    if value is None and metric == "host_bytes" and row.get("design") == "nic":
        return 0
    if value is None:
        raise ValueError(f"the model's row has no {metric!r}")
    return value


def shapley(value, factors):
    """``{factor: (shapley, least, most)}`` of the game ``value`` (a function of a
    frozenset of ``factors``): the Shapley value (the marginal difference
    ``value(S | {f}) - value(S)`` weighted by ``|S|! (k - |S| - 1)! / k!`` over the
    subsets ``S`` of the other factors: its mean over all orders) and the least and the
    most of those differences (each subset comes before ``f`` in some order)."""
    k = len(factors)
    out = {}
    for f in factors:
        others = [g for g in factors if g != f]
        total, marg = 0.0, []
        for n in range(k):
            weight = math.factorial(n) * math.factorial(k - n - 1) / math.factorial(k)
            for subset in combinations(others, n):
                s = frozenset(subset)
                d = value(s | {f}) - value(s)
                marg.append(d)
                total += weight * d
        out[f] = (total, min(marg), max(marg))
    return out


def factor_shares(rows, index, factors=FACTORS, on=()):
    """``{factor: {metric: {"shapley", "range", "table"}}}`` from the model rows of
    :func:`share_jobs` (``rows`` in the jobs' order, ``index`` its map) over the game of
    ``factors`` (names of :data:`FACTORS`), with the factors of ``on`` applied
    throughout and the others off (``FACTORS[:-1]``: the walk to the engine at 1 QP):
    the Shapley value, ``[least, most]`` over all orders, and the factor's difference in
    the table's order (the game's factors before it in the table applied first).
    ``ValueError`` names an unknown factor or one both in ``factors`` and ``on``."""
    factors = tuple(f for f in FACTORS if f in set(factors))
    on = frozenset(on)
    bad = sorted((set(factors) | on) - set(FACTORS)) or sorted(on & set(factors))
    if bad or not factors:
        raise ValueError(f"factors must be some of {list(FACTORS)}, on others of them: "
                         f"{bad or 'no factors'}")
    out = {f: {} for f in factors}
    for metric, _ in SHARE_METRICS:
        def value(subset, metric=metric):
            return metric_value(rows[index[frozenset(subset) | on]], metric)
        for f, (phi, lo, hi) in shapley(value, factors).items():
            before = frozenset(factors[:factors.index(f)])
            out[f][metric] = {"shapley": round(phi, 3), "range": [lo, hi],
                              "table": value(before | {f}) - value(before)}
    return out


def _call(job):
    _, fn, kwargs = job
    return fn(**kwargs)


def _run_jobs(jobs, workers):
    """The results of ``jobs`` (``[(label, function, kwargs)]``) in their order,
    ``workers`` processes at a time (1: in this process), with a line per job done."""
    import concurrent.futures
    import sys

    if workers <= 1:
        out = []
        for job in jobs:
            out.append(_call(job))
            print(f"[gap shares] {len(out)}/{len(jobs)}: {job[0]}", file=sys.stderr)
        return out
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        out = []
        for job, row in zip(jobs, pool.map(_call, jobs), strict=True):
            out.append(row)
            print(f"[gap shares] {len(out)}/{len(jobs)}: {job[0]}", file=sys.stderr)
        return out


def main(argv=None):
    """``python -m tb.gap_shares [--messages N] [--jobs N] [--only F+...] [--on F+...]
    PROFILE...``: print each factor's shares at each profile (the golden model alone;
    ``make report`` puts the games of :data:`GAMES` into report.md and gap.json at its
    ``--rtl-messages``). Without ``--only``, every game of :data:`GAMES`; with it, the game of
    those factors (names of :data:`FACTORS` joined by ``+``), the factors of ``--on``
    applied throughout (e.g. ``--only 'same attachment+link-level reliability+fabric
    profile+Ethernet header+QP engine, 1 QP' --on 'end-to-end completion'``: the
    engine's step over a NIC that completes end to end)."""
    import argparse

    from spec.fabric_profiles import FABRIC_PROFILES

    def names(text):
        return tuple(n.strip() for n in text.split("+") if n.strip())
    ap = argparse.ArgumentParser(prog="python -m tb.gap_shares", description=main.__doc__)
    ap.add_argument("profiles", nargs="+", choices=list(FABRIC_PROFILES))
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", type=names, default=())
    ap.add_argument("--on", type=names, default=())
    args = ap.parse_args(argv)
    if args.messages < 20 or args.jobs < 1:
        ap.error(f"--messages must be at least 20 and --jobs at least 1, not "
                 f"{args.messages} and {args.jobs}")
    games = ([(title, factors, (), pop) for _, title, factors, pop in GAMES]
             if not args.only
             else [(f"the game of {', '.join(args.only)}"
                    + (f" with {', '.join(args.on)}" if args.on else ""), args.only,
                    args.on, None)])
    bad = sorted((set(args.only) | set(args.on)) - set(FACTORS))
    if bad:
        ap.error(f"unknown factor(s) {bad}; the factors: {list(FACTORS)}")
    for profile in args.profiles:
        jobs, indexes = game_jobs(profile, args.messages, 128,
                                  () if args.only else DEST_POPULARITIES)
        rows = _run_jobs(jobs, args.jobs)
        for game, factors, on, pop in games:
            got = factor_shares(rows, indexes[pop], factors, on)
            print(f"\nEach factor's share at {profile}, {game}, {args.messages} "
                  f"messages of 128 B: Shapley [least, most] (table's order)")
            for f in got:
                print(f"  {f}: " + "; ".join(
                    f"{title} {v['shapley']:g} [{v['range'][0]:g}, {v['range'][1]:g}] "
                    f"({v['table']:g})" for (metric, title) in SHARE_METRICS
                    for v in [got[f][metric]]))


if __name__ == "__main__":
    main()
