"""Where the gap comes from: the NIC as built, then one factor per row, to the RDMA engine.

Each row is the row above with one thing changed, co-simulated against the golden model
(RTL = model, both runs of a point), so the difference between two consecutive rows is the
cost of that one factor on a level field (SPEC.md, "Comparisons on a level field"):

====  ==========================  ======================================================
row   factor                      what changes (the level-field key, spec.metrics)
====  ==========================  ======================================================
0     NIC as built                integrated, ``board``, credit completion, no retry,
                                  compact header (the headline's compact row)
1     same attachment             ``attachment``: the NIC behind the PCIe host
                                  interface, as the engine
2     end-to-end completion       ``completion``: the receiver's cumulative completion,
                                  per source, complete when the sender's record of it is
                                  in host memory (as the engine's CQE)
3     link-level reliability      ``link_reliability``: link retry on every NIC link
4     fabric profile              ``fabric``: the table's profile (a no-op at ``board``)
5     Ethernet header             ``header_class``: the NIC's L2 framing (20-byte
                                  header) for the compact
6     QP engine, 1 QP             none: the RDMA engine, best rung, 1 QP, over the same
                                  reliable links, in the same header class (RoCEv2:
                                  Ethernet framing); its go-back-N is its own transport
7     4096 QPs                    none: 4096 QPs round robin over 16 cache entries
====  ==========================  ======================================================

Side rows (:data:`SIDE_ROWS`) stand beside a row of the walk, not in it: each is the row
it is compared with (``gap_side_of``, the row's number) with one thing changed, and
changes no level-field key; they are not factors of the walk. Row 9's destinations are
in the games of the shares over all orders that give the NIC 4,096 peers as the engine
(:mod:`tb.gap_shares`), row 8's cache in none. After the walk's rows, numbered on from
its last:

====  ==========================  ======================================================
row   beside row                  what changes
====  ==========================  ======================================================
8     7 (4096 QPs)                the engine's best context cache: 256 entries, 4 ways
                                  (:data:`BEST_CACHE`) for row 7's 16 direct-mapped
                                  entries, its worst case
9     5 (Ethernet header)         the NIC sending round robin to 4,096 destinations
                                  (``destinations``, ``popularity``: spec.load
                                  POPULARITY), each with its own end-to-end
                                  completion state at the sender and its receiver, as
                                  row 7's engine sends to 4,096 QPs (docs/nic.md,
                                  "4,096 destinations"); row 5 sends to one
====  ==========================  ======================================================

Row 9's tops are the table's largest: ``make sim`` runs it only with ``ARGS="--gap-
destinations"`` (:func:`gap_jobs`' ``destinations``), ``make report`` always.

The RDMA rows run on the NIC's fabric (``topology`` ``switch``, as the NIC's rows): the
two-node :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`, link, switch, link with the
profile's latencies, link retry and credit-based flow control into the switch sized by
the NIC's rule for the engine's longest frame (:func:`tb.rdma.headline.run_point` with
``topology="switch"``).

:func:`gap_jobs` gives the co-simulations (independent, any order) and
:func:`finish_gap` the results rows, each with ``gap_row``, ``gap_factor`` and
``gap_profile`` besides the design's metrics and the level-field keys (``fabric``,
``attachment``, ``completion``, ``reliability``, ``header``), and on a side row
``gap_side_of``.
"""

from spec.design_point import RdmaPoint
from spec.design_point.rdma import BEST_CACHE as BEST_CACHE_POINT
from spec.fabric_profiles import FABRIC_PROFILES
from spec.nic import RECORD_SLOTS
from spec.rdma_engine import LADDER

__all__ = ["GAP_FACTORS", "FACTOR_LEVEL", "SIDE_ROWS", "WIDE_SETTING", "BEST_CACHE",
           "gap_settings",
           "side_settings", "gap_jobs", "finish_gap", "gap_table_lines", "point_of",
           "row_keys", "rdma_topology"]

#: The factors in their order: (name, design after the change, the settings it changes).
#: A row's settings are the previous row's updated by its own; ``"{profile}"`` stands for
#: the table's fabric profile.
GAP_FACTORS = (
    ("NIC as built", "nic", dict(attachment="integrated", fabric="board",
                                 completion="credit", reliability="none",
                                 header="compact")),
    ("same attachment", "nic", dict(attachment="pcie")),
    ("end-to-end completion", "nic", dict(completion="e2e")),
    ("link-level reliability", "nic", dict(reliability="link-retry")),
    ("fabric profile", "nic", dict(fabric="{profile}")),
    ("Ethernet header", "nic", dict(header="l2")),
    ("QP engine, 1 QP", "rdma", dict(header="roce", qps=1, cache_entries=16,
                                     rung=LADDER[-1][0])),
    ("4096 QPs", "rdma", dict(qps=4096)),
)

#: The level-field key (:data:`spec.metrics.LEVEL_KEYS`) each factor changes; None for
#: the factors that are the design itself (the engine, its QPs).
FACTOR_LEVEL = {"NIC as built": None, "same attachment": "attachment",
                "end-to-end completion": "completion",
                "link-level reliability": "link_reliability", "fabric profile": "fabric",
                "Ethernet header": "header_class", "QP engine, 1 QP": None,
                "4096 QPs": None}


#: The settings of the engine's best context cache (:data:`spec.design_point.rdma.BEST_CACHE`,
#: the fields it sets over the default point): row 8's change of row 7.
BEST_CACHE = BEST_CACHE_POINT.changes()

#: Rows beside the walk: (name, the factor of the row compared with, the settings changed
#: on that row's). The design is that row's.
SIDE_ROWS = (
    ("4096 QPs, best cache", "4096 QPs", BEST_CACHE),
    ("NIC at 4096 destinations", "Ethernet header",
     dict(destinations=4096, popularity="round_robin")),
)

#: The side rows' setting that makes a row one of the NIC at many destinations: their
#: tops are the largest of the table (4,096 destinations: several MB of Verilog and a
#: cold build of minutes each), so ``make sim`` runs them on request only
#: (:func:`gap_jobs`' ``destinations``; ``make report`` always).
WIDE_SETTING = "destinations"


def gap_settings(profile):
    """The rows' ``(name, design, settings)`` for fabric ``profile`` (a name of
    :data:`spec.fabric_profiles.FABRIC_PROFILES`; ``ValueError`` naming it otherwise)."""
    if profile not in FABRIC_PROFILES:
        raise ValueError(f"profile must be one of {list(FABRIC_PROFILES)}, not {profile!r}")
    rows, settings = [], {}
    for name, design, change in GAP_FACTORS:
        settings = dict(settings, **{k: (profile if v == "{profile}" else v)
                                     for k, v in change.items()})
        rows.append((name, design, dict(settings)))
    return rows


def side_settings(profile):
    """The side rows' ``(name, design, settings, k)`` for fabric ``profile``, ``k`` the
    number of the walk's row each stands beside (:data:`SIDE_ROWS`); ``ValueError`` as
    :func:`gap_settings`."""
    rows = gap_settings(profile)
    names = [name for name, _, _ in rows]
    return [(name, rows[names.index(base)][1], dict(rows[names.index(base)][2], **change),
             names.index(base)) for name, base, change in SIDE_ROWS]


def _all_rows(profile, destinations=True):
    """The walk's rows then the side rows of ``profile``: ``(name, design, settings,
    side_of)``, ``side_of`` None on the walk; without ``destinations`` the side rows
    with :data:`WIDE_SETTING` left out."""
    return ([(name, design, s, None) for name, design, s in gap_settings(profile)]
            + [row for row in side_settings(profile)
               if destinations or WIDE_SETTING not in row[2]])


def point_of(design, s):
    """The keyword arguments of a row's point (``design``, ``settings`` of
    :func:`gap_settings`; an RDMA point's build fields the settings hold besides the
    walk's are passed as they are) common to its co-simulation (``run_point``) and its model
    alone (``model_point``) of :mod:`tb.nic.headline` or :mod:`tb.rdma.headline`."""
    if design == "nic":
        return dict(framing=s["header"], peers=1, attachment=s["attachment"],
                    fabric=s["fabric"], completion=s["completion"],
                    retry=s["reliability"] == "link-retry",
                    records=RECORD_SLOTS if s["completion"] == "e2e" else 0,
                    **{k: s[k] for k in ("destinations", "popularity") if k in s})
    kw = dict(qps=s["qps"], cache_entries=s["cache_entries"], host=s["attachment"],
              rung=s["rung"], fabric=s["fabric"], header=s["header"],
              link_retry=s["reliability"] == "link-retry", topology=rdma_topology(s))
    # The point's other build fields a row sets (a side row's cache), as they are.
    kw.update({k: v for k, v in s.items() if k in RdmaPoint.of_kind("build") and k not in kw})
    return dict(kw, **{k: s[k] for k in ("popularity",) if k in s})


def rdma_topology(s):
    """The topology of an RDMA point of settings ``s``: the NIC's switch
    (:data:`tb.rdma.headline.TOPOLOGIES`) for the engine's RoCEv2 frames, which the
    switch routes by their Ethernet header (every RDMA row of the table); RdmaTop's
    direct link for the scale-up header (a point of the shares' game only,
    :mod:`tb.gap_shares`), whose frames the fabric top's merge and demux do not
    parse."""
    return "switch" if s["header"] == "roce" else "direct-link"


def row_keys(design, s):
    """The comparison keys a row's point carries (``comparison_keys`` of
    :mod:`tb.nic.headline` or :mod:`tb.rdma.headline`, from the same arguments as its
    job), from which :func:`spec.metrics.level_keys` derives the level-field keys."""
    kw = point_of(design, s)
    if design == "nic":
        from tb.nic.headline import comparison_keys

        return comparison_keys(kw["framing"], kw["attachment"], kw["fabric"], kw["retry"],
                               kw["completion"], kw["records"])
    from tb.rdma.headline import comparison_keys

    return comparison_keys(kw["host"], kw["fabric"], kw["link_retry"], kw["header"],
                           kw["topology"])


def _nic_job(sim, s, messages, msg_bytes, tag):
    from tb.nic.headline import run_point

    return run_point, dict(sim=sim, msg_bytes=msg_bytes, messages=messages, test_id=tag,
                           **point_of("nic", s))


def _rdma_job(sim, s, messages, msg_bytes, tag):
    from tb.rdma.headline import run_point

    return run_point, dict(sim=sim, msg_bytes=msg_bytes, messages=messages, test_id=tag,
                           **point_of("rdma", s))


def gap_jobs(sim, profiles=("board", "pod"), messages=1000, msg_bytes=128,
             destinations=True):
    """The co-simulations of the table at each of ``profiles`` (the walk's rows and the
    side rows; without ``destinations`` not those of :data:`WIDE_SETTING`) as
    ``[(label, function, kwargs)]``; the rows that are the same point at two profiles
    (``board`` before row 4) are run once. Then :func:`finish_gap` with the same
    arguments."""
    jobs, seen = [], {}
    for profile in profiles:
        for k, (name, design, s, _) in enumerate(_all_rows(profile, destinations)):
            key = (design, tuple(sorted(s.items())))
            if key in seen:
                continue
            tag = f"gap-{s['fabric']}-{k}-{messages}x{msg_bytes}"
            make = _nic_job if design == "nic" else _rdma_job
            fn, kw = make(sim, s, messages, msg_bytes, tag)
            seen[key] = len(jobs)
            jobs.append((f"gap {profile} {k}: {name}", fn, kw))
    return jobs


def finish_gap(results, profiles=("board", "pod"), messages=1000, msg_bytes=128,
               destinations=True):
    """The table's rows from the results of :func:`gap_jobs` (same arguments, results in
    the jobs' order): one row per factor and profile, in the table's order, then the
    side rows (each with ``gap_side_of``). ``ValueError`` if a result carries a
    comparison key whose value is not the one the row's settings give (:func:`row_keys`):
    the keys the tests check are the rows'."""
    table = [(profile, k, name, (design, tuple(sorted(s.items()))), side_of)
             for profile in profiles
             for k, (name, design, s, side_of) in enumerate(_all_rows(profile,
                                                                     destinations))]
    index = {}
    for *_, key, _ in table:
        index.setdefault(key, len(index))
    if len(index) != len(results):
        raise ValueError(f"{len(results)} results for {len(index)} distinct points of "
                         f"the table")
    out = []
    for profile, k, name, key, side_of in table:
        row = dict(results[index[key]])
        want = row_keys(key[0], dict(key[1]))
        wrong = {n: (row[n], v) for n, v in want.items() if n in row and row[n] != v}
        if wrong:
            raise ValueError(f"gap {profile} row {k} ({name}): comparison keys "
                             f"(got, settings') {wrong}")
        row.pop("frames", None)
        row.pop("cycles", None)
        row.update(gap_profile=profile, gap_row=k, gap_factor=name)
        if side_of is not None:
            row["gap_side_of"] = side_of
        out.append(row)
    return out


#: Columns of the printed table: (title, key of the RTL value or None, format).
_COLUMNS = (
    ("#", "gap_row", "{}"), ("factor", "gap_factor", "{}"), ("design", "design", "{}"),
    ("latency", "latency_cycles_rtl", "{:g}"), ("completion", "completion_cycles_rtl", "{:g}"),
    ("ii", "ii_cycles_rtl", "{:.2f}"), ("wire B", "wire_bytes_rtl", "{:.1f}"),
    ("host B", "host_bytes_rtl", "{:.0f}"), ("ctrl ops", "ctrl_ops_rtl", None),
    ("in flight bits", "inflight_bits_rtl", "{}"),
    ("endpoint bits", "endpoint_state_bits_rtl", "{}"),
    ("fabric buf bits", "fabric_buffer_bits_rtl", "{}"),
    ("replay buf bits", "replay_buffer_bits_rtl", "{}"), ("mismatch", "mismatches", "{}"),
)


def _cell(row, key, fmt):
    value = row.get(key)
    if value is None:
        return "-"
    if fmt is None:                      # control operations: a dict of kinds, or a number
        return f"{sum(value.values()) if isinstance(value, dict) else value:.2f}"
    return fmt.format(value)


def gap_table_lines(rows, profile):
    """The table of ``profile`` from :func:`finish_gap`'s rows, as text lines: one line per
    factor with the RTL figures (equal to the model's where ``mismatch`` is 0) and how
    latency and ii moved against the row above (a side row: against the row it stands
    beside, its number after ``<``)."""
    mine = [r for r in rows if r.get("gap_profile") == profile]
    by_row = {r["gap_row"]: r for r in mine}
    table = [[t for t, _, _ in _COLUMNS] + ["d latency", "d ii"]]
    prev = None
    for r in mine:
        cells = [_cell(r, key, fmt) for _, key, fmt in _COLUMNS]
        if "gap_side_of" in r:
            cells[0] += f"<{r['gap_side_of']}"
            prev = by_row[r["gap_side_of"]]
        for key in ("latency_cycles_rtl", "ii_cycles_rtl"):
            a, b = (prev or {}).get(key), r.get(key)
            cells.append("-" if a is None or b is None else f"{b - a:+.2f}".rstrip("0")
                         .rstrip("."))
        table.append(cells)
        prev = r
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    out = [f"Where the gap comes from ({profile}): each row the row above with one factor "
           f"changed"]
    for k, line in enumerate(table):
        out.append("  ".join(c.ljust(w) if i == 1 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(line, widths, strict=True))))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return out
