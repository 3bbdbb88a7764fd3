"""The NIC headline: 1000 stores of 128 B from node 0 to node 1 through the switch.

:func:`run_headline` runs it in co-simulation for both framings and returns the rows of
``results.json`` (SPEC.md, "What every run measures"); the L2 frames go to ``nic.pcap``.

A row is two runs on the same top, measured as the RDMA engine's (:mod:`tb.rdma.headline`):
one with ``messages`` stores back to back after a warm-up store and the engine's gap
(:func:`warmup_cycles`; ``ii_cycles`` at the stores' first wire beats, wire and host
bytes, control operations, in-flight state) and one with ``latency_messages`` stores after a warm-up
store, each released alone into an idle NIC (``latency_cycles``, ``completion_cycles``:
the median without the warm-up, :func:`pymodel.throughput.isolated_median`).
"""

import json
import pathlib

from pymodel.pcap import write_pcapng
from pymodel.throughput import isolated_median
from rtl.tops.nic_top import NicTop
from spec.checks import silence
from spec.design_point import NicPoint
from spec.fabric_profiles import fabric_profile, replay_buffer_bits
from spec.formats.nic import frame_beats
from spec.metrics import row_metrics
from spec.nic import COMPLETIONS, HEADLINE_TOP, check_destinations, check_peer_retry
from tb.cosim import check_params, run_cosim
from tb.nic.e2e_check import e2e_state_bits
from tb.rdma.row_keys import ii_messages

__all__ = ["run_headline", "run_point", "model_point", "state_kinds", "point_top",
           "point_depth", "HEADLINE_DEPTH", "headline_jobs", "finish_headline",
           "HEADLINE_POINTS", "comparison_keys", "TOPOLOGY"]

#: The metrics of a NIC results row.
METRICS = row_metrics("nic")


def run_point(sim: str, framing: str, msg_bytes: int, messages: int, peers: int = 1,
              top: dict | None = None, test_id: str | None = None,
              attachment: str = "integrated", fabric: str = "board",
              retry: bool = False, completion: str = "credit",
              latency_messages: int = 16, depth: int | None = None,
              check_only: bool = False, records: int = 0, destinations: int | None = None,
              popularity: str = "round_robin", peer_retry: bool = False,
              peer_window: int | None = None) -> dict | None:
    """Co-simulate node 0 storing ``messages`` x ``msg_bytes`` round robin to ``peers``
    destination nodes (``peers`` = 1: the headline pair) on a top with
    ``max(4, peers + 1)`` nodes (at most 16). Returns the results row (SPEC.md) with
    ``frames``: the ``(cycle, hex)`` of every frame node 0 sent.

    Two runs on the same top (the module docstring), each after a warm-up store: the
    back-to-back run's ``messages`` stores follow theirs after :func:`warmup_cycles`,
    as the RDMA engine's (the per-message figures count the warm-up store, as the
    engine's count its warm-up message; ``ii_cycles`` is taken at the stores' first
    wire beats, as the engine's at its messages'). ``latency_cycles`` and
    ``completion_cycles`` come from ``latency_messages`` stores after a warm-up store,
    each released alone once the one before has completed and the NIC is idle
    (``one_at_a_time`` of :mod:`tb.nic.cocotb_nic`: every such store is its issuer's
    last queued one), every other metric from the back-to-back run; ``mismatches``
    counts both runs' and every metric whose RTL and model values differ.
    ``latency_messages`` = 0: no second run, latency and completion the medians of the
    back-to-back run.

    ``attachment="pcie"`` (:data:`spec.nic.ATTACHMENTS`): the top's ``pcie`` attachment;
    the row then carries the host metrics (``row_metrics("nic", host=True)``). Its
    messages are the host's posted writes: a store over 256 bytes
    counts as one per 256 bytes. ``top`` holds :data:`spec.nic.HEADLINE_TOP` keys only;
    every parameter is checked before anything is built (``ValueError`` naming it).

    ``fabric`` (:data:`spec.fabric_profiles.FABRIC_PROFILES`): the top's fabric profile
    (its links, switch hop and credits; :class:`NicTop`); a profile other than ``board``
    sets ``link_latency``, which ``top`` may then not give otherwise.

    ``retry``: the top's link-level retry (:class:`NicTop` ``retry``: every link a
    reliable link, the switch's hop elastic), over clean wires (the fault settings
    ``flt_*`` all 0).

    ``completion`` (:data:`spec.nic.COMPLETIONS`): the top's completion, ``"credit"``
    (the last beat's link credit back) or ``"e2e"`` (the receiver's cumulative
    completion frames, with the top's defaults of ``coalesce``, ``flush_idle`` and
    ``timeout``; the row's ``completion_cycles`` then run to the completion covering the
    store, and its wire bytes and ``ctrl_ops`` count the completion frames: see
    :mod:`tb.nic.cocotb_nic`). ``records`` (with ``"e2e"``; :func:`spec.nic.
    check_records`): the top's completion records, the store then complete when the
    record covering it reaches its sender's memory (through the host interface with
    ``pcie``), as the RDMA engine's CQE. Every row carries the comparison keys
    ``fabric``, ``attachment``, ``completion``, ``reliability`` (``"none"``, or
    ``"link-retry"`` with ``retry``) and ``header`` (the framing), and
    ``completion_at`` (:func:`comparison_keys`).

    ``depth``: node 0's player and recorders and the peers' recorders (:func:`point_top`;
    None: the least that holds the run). A capacity, not a timing: a shorter point given
    :data:`HEADLINE_DEPTH` shares the headline's build. The top holds both runs: the
    ``messages`` stores and the ``latency_messages + 1`` of the one-at-a-time run.

    ``destinations`` (:func:`spec.nic.check_destinations`; either attachment, with or
    without ``records``): node 0 stores to that many destination ids by ``popularity``
    on a top with ``destinations`` (:func:`model_point`'s).

    ``peer_retry``, ``peer_window`` (:func:`spec.nic.check_peer_retry`, with ``e2e``):
    the top's per-peer retry (docs/nic.md, "Per-peer retry"; :func:`model_point`); the
    row's ``peer_retry`` is then True.

    ``check_only``: every check above, then return ``None`` (nothing exported or built).
    ``ii_cycles`` is ``None`` below :func:`tb.rdma.row_keys.ii_messages` stores (the
    steady window would start at the warm-up store), as for the engine."""
    nt, name, params, lat_params = _point_params(
        framing, msg_bytes, messages, peers, top, attachment, fabric, retry, completion,
        latency_messages, depth, records, destinations, popularity, peer_retry, peer_window)
    if check_only:
        silence(nt)             # checked only: the top is deliberately never elaborated
        return None
    profile = fabric_profile(fabric)
    metrics = row_metrics("nic", host=attachment == "pcie")
    scenario = params["scenario"]
    test_id = test_id or f"{scenario}-{peers}-{messages}x{msg_bytes}"

    def run(run_params, run_id):
        run_dir = run_cosim(nt, name=name, test_module="tb.nic.cocotb_nic", sim=sim,
                            test_id=run_id, params=run_params)
        res = json.loads((pathlib.Path(run_dir) / "nic_results.json").read_text())
        if "rtl" not in res:
            raise RuntimeError(f"{run_dir}: no per-message figures (a store was lost?)")
        return res

    res = run(params, test_id)
    row = {"design": "nic", "framing": framing, "simulator": sim, "msg_bytes": msg_bytes,
           "messages": messages, "peers": peers,
           **comparison_keys(framing, attachment, profile.name, retry, completion, records),
           **({"peer_retry": True} if params.get("peer_retry") else {})}
    for key in metrics:
        row[f"{key}_rtl"] = res["rtl"][key]
        row[f"{key}_model"] = res["model"][key]
    mismatches = res["mismatches"]
    if latency_messages:
        lat = run(lat_params, f"{test_id}-lat")
        mismatches += lat["mismatches"]
        for side in ("rtl", "model"):
            for key in ("latency", "completion"):
                row[f"{key}_cycles_{side}"] = isolated_median(lat["per_store"][side][key])
    for side in ("rtl", "model"):
        row.update({f"{k}_{side}": v for k, v in state_kinds(
            row[f"inflight_bits_{side}"], params).items()})
    row["mismatches"] = mismatches + sum(row[f"{k}_rtl"] != row[f"{k}_model"]
                                         for k in metrics)
    if messages < ii_messages():            # the steady window would hold the warm-up
        row["ii_cycles_rtl"] = row["ii_cycles_model"] = None
    row["cycles"] = res["cycles"]
    row["frames"] = res["frames"]
    return row


def _point_params(framing, msg_bytes, messages, peers, top, attachment, fabric, retry,
                  completion, latency_messages, depth, records=0, destinations=None,
                  popularity="round_robin", peer_retry=False, peer_window=None):
    """``(NicTop, name, params, lat_params)`` of a :func:`run_point` point: the top and
    the parameters of its two runs, checked (``ValueError`` naming a bad one)."""
    if not isinstance(latency_messages, int) or isinstance(latency_messages, bool) \
            or latency_messages < 0:
        raise ValueError(f"latency_messages must be a count of stores (0: none), not "
                         f"{latency_messages!r}")
    if not isinstance(retry, bool):
        raise ValueError(f"retry must be True or False, not {retry!r}")
    if completion not in COMPLETIONS:
        raise ValueError(f"completion must be one of {list(COMPLETIONS)}, "
                         f"not {completion!r}")
    held = max(messages + 1, latency_messages + 1 if latency_messages else 0)
    peer_retry, peer_window = check_peer_retry(peer_retry, completion, peer_window)
    given = {k: v for k, v in (top or {}).items() if k in ("link_latency", "max_payload")}
    nt, name, top = point_top(framing, msg_bytes, held, peers, top, attachment, fabric,
                              retry, completion, depth, records, destinations,
                              (peer_window if peer_retry else None))
    # The design point of these fields, each by its own rule (spec/design_point), named.
    NicPoint(framing=framing, peers=peers, attachment=attachment, fabric=fabric,
             link_retry=retry, completion=completion, **given)
    profile = fabric_profile(fabric)
    scenario = "pair" if peers == 1 else "fanout"
    if check_destinations(destinations, framing, completion):
        scenario = "destinations"
    params = dict(top, framing=framing, credits=nt.credits, scenario=scenario, seed=1,
                  messages=messages + 1, msg_bytes=msg_bytes, peers=peers,
                  attachment=attachment, fabric=profile.name, retry=retry,
                  completion=completion, warmup=warmup_cycles(attachment))
    if completion == "e2e":
        params.update(coalesce=nt.coalesce, flush_idle=nt.flush_idle, timeout=nt.timeout,
                      records=nt.records)
    if destinations:
        params.update(destinations=destinations, popularity=popularity)
    if peer_retry:
        params.update(peer_retry=True, peer_window=peer_window)
    lat_params = dict(params, messages=latency_messages + 1, one_at_a_time=True, warmup=0)
    check_params("tb.nic.cocotb_nic", lat_params)   # both runs' before either is built
    return nt, name, params, lat_params


def model_point(framing, msg_bytes, messages, peers=1, attachment="integrated",
                fabric="board", retry=False, completion="credit", latency_messages=16,
                records=0, destinations=None, popularity="round_robin", peer_retry=False,
                peer_window=None):
    """The golden model's side of :func:`run_point` alone (no simulator): the row with
    ``_model`` values only, computed by the co-simulation's own code
    (:func:`tb.nic.cocotb_nic.model_run`, :func:`~tb.nic.cocotb_nic.model_figures`), so
    that they equal a co-simulated row's ``_model`` values, and the comparison keys.

    ``destinations`` (:func:`spec.nic.check_destinations`): node 0 stores round robin to
    that many destination ids (scenario ``destinations`` of :mod:`analysis.scenarios.nic`)
    on the model of a NicTop with that option, ``popularity`` (:data:`spec.load.
    POPULARITY`, Zipf with skew 0.99) choosing each store's id, as :func:`run_point`'s
    (docs/nic.md, "4,096 destinations").

    ``peer_retry`` (with ``completion="e2e"``), ``peer_window`` (None: the default):
    the NIC's per-peer retry (:func:`spec.nic.check_peer_retry`, docs/nic.md "Per-peer
    retry"): each frame 2 bytes longer (its PSN), the row's ``endpoint_state_bits``
    with :func:`spec.nic.peer_retry_state_bits` per node; the row's ``peer_retry`` is True.
    Bad values stop with an error naming the option."""
    from tb.nic.cocotb_nic import model_figures, model_run

    _, _, params, lat_params = _point_params(
        framing, msg_bytes, messages, peers, None, attachment, fabric, retry, completion,
        latency_messages, None, records, destinations, popularity, peer_retry, peer_window)
    figures = model_figures(params, model_run(params))
    if figures is None:
        raise RuntimeError("NIC model: a store was lost")
    row = {"design": "nic", "framing": framing, "msg_bytes": msg_bytes,
           "messages": messages, "peers": peers,
           **comparison_keys(framing, attachment, fabric_profile(fabric).name, retry,
                             completion, records)}
    row.update({f"{k}_model": v for k, v in figures[0].items()})
    if peer_retry:
        row["peer_retry"] = True
    if latency_messages:
        per = model_figures(lat_params, model_run(lat_params))[1]
        for key in ("latency", "completion"):
            row[f"{key}_cycles_model"] = isolated_median(per[key])
    row.update({f"{k}_model": v for k, v in state_kinds(row["inflight_bits_model"],
                                                         params).items()})
    if messages < ii_messages():
        row["ii_cycles_model"] = None
    return row


def warmup_cycles(attachment):
    """The cycles between the warm-up store of a back-to-back run and the rest: those of
    the RDMA engine's back-to-back run on the same attachment
    (:func:`analysis.rdma.point.latency_spacing`: ``pcie``, and ``on_die`` for the
    ``integrated`` NIC), so that both designs' runs are one warm-up message, the same
    gap, then the messages back to back; the NIC's store completes well within it."""
    from analysis.rdma.point import latency_spacing

    return latency_spacing("pcie" if attachment == "pcie" else "on_die")


def state_kinds(inflight_bits, params):
    """A NIC row's ``inflight_bits`` split into the kinds of
    :data:`spec.metrics.STATE_KINDS`, for a run of ``params`` (:func:`_point_params`):
    endpoint state, the end-to-end completion's state (:func:`spec.nic.
    completion_state_bits` of the top's nodes, which ``inflight_bits`` adds with
    ``completion`` ``e2e``; 0 otherwise); fabric buffer, the rest: the payload beats in
    the switch's ingress buffer until their credits return; replay buffer with
    ``retry``, :func:`spec.fabric_profiles.replay_buffer_bits` of the longest frame of
    the row's framing (0 otherwise)."""
    endpoint = 0
    if params.get("completion") == "e2e":
        endpoint = e2e_state_bits(params)
    beats = frame_beats(params["width"], params["framing"], params["max_payload"])
    return {"endpoint_state_bits": endpoint, "fabric_buffer_bits": inflight_bits - endpoint,
            "replay_buffer_bits": (replay_buffer_bits(params["fabric"], beats,
                                                      params["width"])
                                   if params.get("retry") else 0)}


def point_depth(msg_bytes: int, messages: int, width: int, max_payload: int) -> int:
    """The least depth of a point's player and recorders (a power of two, at least 16)
    that holds ``messages`` stores of ``msg_bytes``: their command beats, and their wire
    beats with 64 bytes of header and FCS per segment of ``max_payload`` and one idle
    beat per frame (an upper bound)."""
    cmd_beats = messages * -(-msg_bytes // width)
    frames = -(-msg_bytes // max_payload)               # segments per store
    wire_beats = messages * (-(-(msg_bytes + 64 * frames) // width) + frames)
    return 1 << max(4, (max(cmd_beats, wire_beats) - 1).bit_length())


#: The depth of the ``make sim`` headline point (1000 stores of 128 B on
#: :data:`spec.nic.HEADLINE_TOP`, :func:`headline_jobs`): a shorter point on the same top
#: given it as ``depth`` shares the headline's export and build (the depth is capacity:
#: recorders take every item, players release by count and time, neither by depth).
HEADLINE_DEPTH = point_depth(128, 1000, HEADLINE_TOP["width"], HEADLINE_TOP["max_payload"])


def point_top(framing, msg_bytes, messages, peers=1, top=None, attachment="integrated",
              fabric="board", retry=False, completion="credit", depth=None, records=0,
              destinations=None, peer_window=None):
    """The top of a :func:`run_point` point, ``(NicTop, Verilog name, top parameters)``:
    :data:`spec.nic.HEADLINE_TOP` updated by ``top`` (its keys only), with
    ``max(nodes, peers + 1)`` nodes and the ``fabric`` profile's link latency; node 0's
    command player and recorders and the ``peers`` destinations' recorders ``depth``
    deep (None: :func:`point_depth`), the other nodes' 16. The name carries everything
    else that makes a build: framing, nodes, attachment, fabric, retry, completion,
    records, destinations, the per-peer retry's ``peer_window`` (None: no per-peer
    retry; a top with it otherwise) (with ``destinations`` every receiver's recorders are
    ``depth`` deep: each takes a share of the stores and sends completions).
    Checked before anything is built (``ValueError`` naming the parameter)."""
    unknown = sorted(set(top or {}) - set(HEADLINE_TOP))
    if unknown:
        raise ValueError(f"unknown NicTop parameter(s) in top: {unknown} (accepted: "
                         f"{sorted(HEADLINE_TOP)})")
    profile = fabric_profile(fabric)
    given = (top or {}).get("link_latency", profile.link)
    if profile.name != "board" and given != profile.link:
        raise ValueError(f"link_latency {given!r}: fabric {profile.name!r} sets the link "
                         f"latency ({profile.link} cycles); leave link_latency out")
    top = dict(HEADLINE_TOP, **(top or {}))
    if profile.name != "board":
        top["link_latency"] = profile.link
    top["nodes"] = max(top["nodes"], peers + 1)
    if not 1 <= peers <= 15:
        raise ValueError(f"peers must be 1 to 15 for the RTL top (16 nodes), not {peers}")
    need = point_depth(msg_bytes, messages, top["width"], top["max_payload"])
    if depth is None:
        depth = need
    elif not isinstance(depth, int) or isinstance(depth, bool) or depth < need:
        raise ValueError(f"depth must be an int of at least {need} (the beats of "
                         f"{messages} stores of {msg_bytes} B), not {depth!r}")
    events = [depth] + [depth] * peers + [16] * (top["nodes"] - 1 - peers)
    nt = NicTop(framing=framing, items=[depth] + [16] * (top["nodes"] - 1),
                events=[depth] * top["nodes"] if destinations else events,
                attachment=attachment, fabric=profile.name, retry=retry,
                completion=completion, records=records, destinations=destinations,
                peer_retry=peer_window is not None, peer_window=peer_window, **top)
    name = (f"nic_point_{framing}_n{top['nodes']}" + "_pcie" * (attachment == "pcie")
            + ("" if profile.name == "board" else f"_{profile.name}") + "_retry" * retry
            + "_e2e" * (completion == "e2e") + (f"_rec{records}" if records else "")
            + (f"_d{destinations}" if destinations else "")
            + (f"_pr{peer_window}" if peer_window else ""))
    return nt, name, top


def comparison_keys(framing, attachment="integrated", fabric="board", retry=False,
                    completion="credit", records=0):
    """The keys of a NIC row that say what it compares on (docs/results.md): ``fabric``,
    ``attachment``, ``completion`` (``"credit"``: the link credit, no end-to-end
    completion; ``"e2e"``: the receiver's completion frames), ``reliability``
    (``"link-retry"`` with link-level retry, else ``"none"``), ``header`` (the
    framing) and ``completion_at``, where a store counts as complete
    (:data:`spec.metrics.COMPLETION_AT`): ``"link-credit"``, ``"tracker"`` (e2e, at the
    sender's tracker) or ``"host-memory"`` (e2e with ``records``: its record in the
    sender's memory)."""
    at = ("link-credit" if completion != "e2e" else "host-memory" if records
          else "tracker")
    return {"topology": TOPOLOGY, "fabric": fabric, "attachment": attachment,
            "completion": completion, "reliability": "link-retry" if retry else "none",
            "header": framing, "completion_at": at}


#: The NIC top's topology key: node, link, switch, link, node, credit-based flow control
#: into the switch (:class:`rtl.tops.nic_top.NicTop`).
TOPOLOGY = "switch"


#: The headline's points: both framings on the integrated attachment (the accelerator's
#: store port), then the L2 framing behind the same PCIe host interface as the RDMA engine.
HEADLINE_POINTS = (("l2", "integrated"), ("compact", "integrated"), ("l2", "pcie"))


def headline_jobs(sim: str, messages: int = 1000, msg_bytes: int = 128,
                  latency_messages: int = 16) -> list:
    """The headline's co-simulations as ``[(label, function, kwargs)]``: independent of
    each other (run them in any order, or in parallel), then :func:`finish_headline`."""
    return [(f"nic {framing}, {attachment}", run_point,
             dict(sim=sim, framing=framing, msg_bytes=msg_bytes, messages=messages, peers=1,
                  test_id=f"headline-{messages}x{msg_bytes}", attachment=attachment,
                  latency_messages=latency_messages))
            for framing, attachment in HEADLINE_POINTS]


def finish_headline(rows: list[dict], out_dir: pathlib.Path) -> list[dict]:
    """The results rows of :func:`headline_jobs`' results (in their order); writes the
    frames of the first (L2, integrated) to ``out_dir / "nic.pcap"``."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for (framing, attachment), row in zip(HEADLINE_POINTS, rows, strict=True):
        row = dict(row)
        frames = row.pop("frames")
        row.pop("cycles")
        out.append(row)
        if (framing, attachment) == ("l2", "integrated"):
            write_pcapng(out_dir / "nic.pcap",
                         [(cycle, bytes.fromhex(frame)) for cycle, frame in frames])
    return out


def run_headline(sim: str, out_dir: pathlib.Path, messages: int = 1000,
                 msg_bytes: int = 128, latency_messages: int = 16) -> list[dict]:
    """:func:`headline_jobs` one after the other, then :func:`finish_headline`."""
    jobs = headline_jobs(sim, messages, msg_bytes, latency_messages)
    return finish_headline([fn(**kw) for _, fn, kw in jobs], out_dir)
