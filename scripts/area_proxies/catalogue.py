"""The components ``make area`` measures, and the figures derived from their results.

Every entry is built with the parameters of the co-simulated designs: the NIC parts come
from the headline NicTop (:data:`spec.nic.HEADLINE_TOP`), the RDMA blocks from RdmaTop's
defaults (:data:`spec.rdma.DEFAULTS`), the link-level retry ends from the retry sizing
rule (:func:`spec.fabric.retry_sizes`) of the headline link. The datapath is 64 bytes
throughout.

The entries that only the "Where the gap comes from" rows need (:mod:`.gap`) follow the
same rules at each row's settings: the NIC endpoint (TX and RX of a NicTop with the row's
``framing``, ``completion`` and ``fabric``), its completion blocks and host interface
taken from that top; the link-retry ends sized by :func:`spec.fabric_profiles.replay_sizes`
for one link of the profile, for the NIC's frames and for the RDMA frames alike (an
endpoint retries on its own link to the switch, whichever design it is); the RDMA engine
with the row's header and the window records and transport timeout of the row's fabric
(:func:`spec.fabric_profiles.rdma_records`, :func:`~spec.fabric_profiles.rdma_timeout`).
"""

import importlib
from typing import NamedTuple

from spec.design_point import point_of
from spec.fabric import retry_sizes
from spec.fabric_profiles import (
    FABRIC_PROFILES,
    one_way,
    rdma_records,
    rdma_timeout,
    replay_sizes,
)
from spec.formats.nic import frame_beats
from spec.nic import HEADLINE_TOP as NIC
from spec.nic import RECORD_SLOTS
from spec.nic_mem import MEM_TOP_DEFAULTS as _MEM
from spec.nic_mem import default_tags, request_queue_depth
from spec.rdma import LINK_FRAME_BEATS
from spec.rdma_engine import FETCH_GROUP, LADDER, SEQ_GROUP, ContextCacheShape
from spec.rdma_engine import TOP_DEFAULTS as RDMA
from spec.rdma_read_req import ORD_DEFAULT
from spec.rdma_responder import READ_WORDS_RANGE, MrTableShape

__all__ = ["Entry", "COMPONENTS", "DESIGNS", "SLOW", "FIGURES", "CACHE_SIZES",
           "SWITCH_PORTS", "NIC", "GAP_PROFILES", "build", "factory_text", "totals",
           "design_totals", "growth", "gap_row_entries", "rdma_link_latency"]


class Entry(NamedTuple):
    """``factory(**params)`` from ``module`` builds the component."""
    group: str
    module: str
    factory: str
    params: dict


def _nic(part, **params):
    """A part of a NicTop with the NIC headline's parameters (and ``params``)."""
    return Entry("nic", "rtl.tops.area_wrappers", "nic_part",
                 {"part": part, **dict(NIC, **params)})


#: RDMA parameters of the engine: those of the RdmaTop the headline runs.
_DEPTH, _MR = RDMA["depth"], RDMA["mr_entries"]
_RESPONDER_C16 = {"cache": ContextCacheShape(16), "depth": _DEPTH, "mr": MrTableShape(_MR)}
#: The READ parameters of the READ/atomic points' top (requester slots, READ data FIFO).
_READ_TOP = {"reads": ORD_DEFAULT, "read_words": READ_WORDS_RANGE[0] * 2}
#: Entries of the QP-context cache measured for the growth table.
CACHE_SIZES = (16, 64, 256)
#: Switch sizes measured for the growth table.
SWITCH_PORTS = (2, 4, 8, 16)

#: The headline NIC link's longest frame (beats) and its retry sizes.
_FRAME_BEATS = frame_beats(64, "compact", NIC["max_payload"])
_RETRY = retry_sizes(NIC["link_latency"], _FRAME_BEATS)

#: The fabric profiles the gap rows' entries are built for (those of ``make report``'s
#: "Where the gap comes from" tables).
GAP_PROFILES = ("board", "pod")


def _tag(*parts):
    """``_a_b`` of the parts that are not None, "" or a default."""
    return "".join(f"_{t}" for t in parts if t)


def rdma_link_latency(fabric):
    """The latency of RdmaTop's one link on ``fabric``: the top's default at ``board``,
    the profile's path one way elsewhere (:func:`spec.fabric_profiles.one_way`), as
    tb.rdma.headline builds the top (at ``board`` the two are equal, 6 cycles)."""
    return RDMA["link_latency"] if fabric == "board" else one_way(fabric)


def _replay_ends(design, framing, fabric):
    """``[(name, Entry)]`` of the ReplayTx and ReplayRx of one link carrying ``design``'s
    frames on ``fabric``: :func:`spec.fabric_profiles.replay_sizes` (NicTop's rule) of one
    link of the profile, for the design's longest frame (the NIC's of ``framing``, or
    ``LINK_FRAME_BEATS``). Both designs are sized for the same link: an endpoint behind the
    profile's switch retries on its own link, as the gap rows' co-simulations run both
    (RdmaTop's one link, :func:`rdma_link_latency`, stands for the whole path). A
    NIC framing whose longest frame has as many beats as the compact one's shares the
    compact entries."""
    board = fabric == "board"
    if design == "rdma":
        beats = LINK_FRAME_BEATS
        (tx_depth, rx_depth, timeout), tag = (replay_sizes(fabric, beats),
                                              _tag("rdma", not board and fabric))
    else:
        beats = frame_beats(64, framing, NIC["max_payload"])
        (tx_depth, rx_depth, timeout), tag = (
            replay_sizes(fabric, beats),
            _tag(not board and fabric, beats != _FRAME_BEATS and framing))
    return [(f"replay_tx_w64{tag}", Entry("fabric", "rtl.fabric.replay_tx", "ReplayTx",
                                          {"width": 64, "depth": tx_depth,
                                           "timeout": timeout, "max_frame_beats": beats})),
            (f"replay_rx_w64{tag}", Entry("fabric", "rtl.fabric.replay_rx", "ReplayRx",
                                          {"width": 64, "depth": rx_depth}))]


def gap_row_entries(design, settings):
    """``{name: (Entry, count)}``: the hardware of ONE endpoint of a "Where the gap comes
    from" row (``design`` and ``settings`` of :func:`tb.gap_table.gap_settings`).

    NIC (``"nic"``): the endpoint (TX + RX of a NicTop with the row's ``header``
    (framing), ``completion`` and ``fabric``: its credits follow the fabric), the
    host interface with ``attachment`` ``pcie``, the CompletionGen and
    OutstandingTracker with ``completion`` ``e2e`` and the CompletionRecorder of its
    records (:data:`spec.nic.RECORD_SLOTS`, as the rows' tops), and with ``reliability``
    ``link-retry`` one ReplayTx (its uplink) and one ReplayRx (its downlink) sized for
    the row's fabric. RDMA (``"rdma"``): the engine (requester + responder,
    ``cache_entries``, the row's ``header``, the window records and timeout of its
    fabric, the records sized to the row's rung), one host interface of the
    ``attachment`` profile (the engine's two DMA ports would share it; that arbiter is
    not counted, as in :class:`RdmaEngine`), and with ``link-retry`` the same two retry
    ends sized for one link of the fabric (as the NIC's, for RDMA frames).

    Not counted on any row, so that both designs stand on the same field: the fabric,
    i.e. the switch (whatever its ports, hop latency or ingress credits), the links and
    every delay line that stands for a wire (``Link``, the switch's hop and
    ``ElasticDelay``, the NIC's credit return, the reliable link's ACK sideband), and the
    retry ends at the far side of the endpoint's two links (the switch's, or in RdmaTop
    the peer's). ``qps`` is run-time state in host memory and adds nothing. A NIC with
    ``destinations`` (a side row) is named with ``_d<destinations>`` and its completion
    blocks are the wide ones (CompletionKeyed, TrackerMemory, CompletionRecorderQueue),
    none of them in :data:`COMPONENTS`: not measured, the report shows ``-``. An engine
    whose point sets a field with a ``tag`` off its default (a side row's best cache:
    ``_w4``, :meth:`spec.design_point.Point.tags`) is named with it and has no entry of
    its own in :data:`COMPONENTS` (the area wrapper builds the default build,
    direct-mapped caches): its area is not measured, and the report shows ``-``.
    ``ValueError`` names a setting with no entry (e.g. an attachment without a host
    interface entry)."""
    s = settings
    board = s["fabric"] == "board"
    if design == "nic":
        framing, e2e = s["header"], s["completion"] == "e2e"
        dests = s.get("destinations")
        name = ("nic_endpoint_w64_" + framing
                + _tag(e2e and "e2e", not board and s["fabric"], dests and f"d{dests}"))
        wide = {"destinations": dests} if dests else {}
        out = {name: (_nic("endpoint", framing=framing, completion=s["completion"],
                           fabric=s["fabric"],
                           link_latency=FABRIC_PROFILES[s["fabric"]].link, **wide), 1)}
        if e2e and dests:
            for part in ("completion_keyed", "tracker_memory", "completion_recorder_queue"):
                out[f"{part}_d{dests}"] = (_nic(part, framing=framing, completion="e2e",
                                                records=RECORD_SLOTS, **wide), 1)
        elif e2e:
            out[f"completion_gen_w64_{framing}"] = (
                _nic("completion_gen", framing=framing, completion="e2e"), 1)
            out["outstanding_tracker"] = (
                _nic("outstanding_tracker", framing="compact", completion="e2e"), 1)
            out["completion_recorder"] = (
                _nic("completion_recorder", framing="compact", completion="e2e",
                     records=RECORD_SLOTS), 1)
        elif s["completion"] != "credit":
            raise ValueError(f"completion must be 'credit' or 'e2e', not {s['completion']!r}")
        if s["attachment"] == "pcie":
            out["host_interface_pcie_nic"] = (
                _nic("host_interface", framing="compact", attachment="pcie"), 1)
        elif s["attachment"] != "integrated":
            raise ValueError(f"NIC attachment must be 'integrated' or 'pcie', "
                             f"not {s['attachment']!r}")
    elif design == "rdma":
        header, fabric = s["header"], s["fabric"]
        params = {"cache_entries": s["cache_entries"], "depth": _DEPTH, "mr_entries": _MR}
        if header != "roce":
            params["header"] = header
        reads = not (dict(LADDER).get(s.get("rung"), {}).get("bf")
                     and dict(LADDER).get(s.get("rung"), {}).get("inline"))
        for key, value in (("records", rdma_records(fabric, reads=reads)),
                           ("timeout", rdma_timeout(fabric))):
            if not board and value != RDMA[key]:     # as tb.rdma.headline's top
                params[key] = value
        name = (f"rdma_engine_c{s['cache_entries']}"
                + _tag(*point_of("rdma", s).tags(), header != "roce" and header,
                       not board and fabric))
        out = {name: (Entry("rdma", "rtl.tops.area_wrappers", "RdmaEngine", params), 1)}
        if s["attachment"] != "pcie":
            raise ValueError(f"RDMA attachment must be 'pcie' (the measured host "
                             f"interface), not {s['attachment']!r}")
        out["host_interface_pcie"] = (_HOST_INTERFACE, 1)
    else:
        raise ValueError(f"design must be 'nic' or 'rdma', not {design!r}")
    if s["reliability"] == "link-retry":
        for name, entry in _replay_ends(design, s["header"], s["fabric"]):
            out[name] = (entry, 1)
    elif s["reliability"] != "none":
        raise ValueError(f"reliability must be 'none' or 'link-retry', "
                         f"not {s['reliability']!r}")
    return out


def _gap_entries():
    """Every entry of the gap rows at :data:`GAP_PROFILES`, in the rows' order, and of
    the engine with the scale-up header class (the engine's rows with the other header,
    which the factors' shares over all orders visit, tb/gap_shares.py)."""
    from tb.gap_table import gap_settings

    out = {}
    for profile in GAP_PROFILES:
        for _, design, settings in gap_settings(profile):
            variants = [settings] + ([dict(settings, header="scaleup")]
                                     if design == "rdma" else [])
            for s in variants:
                for name, (entry, _) in gap_row_entries(design, s).items():
                    out.setdefault(name, entry)
    return out


#: The host interface of the RDMA engine (and of RdmaNode): pcie, host memory of RdmaTop.
_HOST_INTERFACE = Entry("shared", "rtl.tops.area_wrappers", "host_interface",
                        {"profile": "pcie", "depth": _DEPTH})

#: name -> Entry. The datapath is 64 bytes throughout (the headline width).
COMPONENTS = {
    # Shared blocks.
    "crc32_core_w64": Entry("shared", "rtl.common.crc32", "Crc32Core", {"width": 64}),
    "fcs_inserter_w64": Entry("shared", "rtl.common.fcs_inserter", "FcsInserter",
                              {"width": 64}),
    "fcs_checker_w64": Entry("shared", "rtl.common.fcs_checker", "FcsChecker", {"width": 64}),
    "credit_counter_64": Entry("shared", "rtl.common.credit_counter", "CreditCounter",
                               {"max_credits": 64}),
    "link_w64_lat4": Entry("fabric", "rtl.fabric.link", "Link", {"width": 64, "latency": 4}),
    # The link-level retry of NicTop(retry=True), sized by retry_sizes() for the headline
    # link; the FaultyLink between its ends is a test fixture, not hardware.
    "replay_tx_w64": Entry("fabric", "rtl.fabric.replay_tx", "ReplayTx",
                           {"width": 64, "depth": _RETRY[0], "timeout": _RETRY[2],
                            "max_frame_beats": _FRAME_BEATS}),
    "replay_rx_w64": Entry("fabric", "rtl.fabric.replay_rx", "ReplayRx",
                           {"width": 64, "depth": _RETRY[1]}),
    # NIC (design 1): parts of the headline NicTop, node 0.
    "store_segmenter_w64": Entry("nic", "rtl.nic.store_segmenter", "StoreSegmenter",
                                 {"width": 64, "max_payload": NIC["max_payload"]}),
    "nic_tx_framer_w64_compact": Entry("nic", "rtl.nic.tx_framer", "NicTxFramer",
                                       {"width": 64, "framing": "compact"}),
    "nic_tx_framer_w64_l2": Entry("nic", "rtl.nic.tx_framer", "NicTxFramer",
                                  {"width": 64, "framing": "l2"}),
    "nic_tx_w64_compact": _nic("tx", framing="compact"),
    "nic_tx_w64_l2": _nic("tx", framing="l2"),
    "nic_window_table_w64": Entry("nic", "rtl.nic.window_table", "WindowTable",
                                  {"width": 64, "depth": NIC["mem_words"]}),
    "nic_rx_w64_compact": _nic("rx", framing="compact"),
    "nic_rx_w64_l2": _nic("rx", framing="l2"),
    "credit_return_lat2": _nic("credit_return", framing="compact"),
    "nic_node_w64_compact": _nic("node", framing="compact"),
    "nic_node_w64_l2": _nic("node", framing="l2"),
    **{f"switch_w64_p{n}": _nic("switch", framing="compact", nodes=n) for n in SWITCH_PORTS},
    # RDMA (design 2): the blocks of rtl/rdma, with RdmaTop's parameters.
    "write_framer": Entry("rdma", "rtl.rdma.write_framer", "WriteFramer", {"width": 64}),
    "ack_framer": Entry("rdma", "rtl.rdma.ack_framer", "AckFramer", {}),
    "icrc_inserter": Entry("rdma", "rtl.rdma.icrc_inserter", "IcrcInserter", {"width": 64}),
    "frame_check": Entry("rdma", "rtl.rdma.frame_check", "FrameCheck", {"width": 64}),
    "ack_receiver": Entry("rdma", "rtl.rdma.ack_receiver", "AckReceiver", {}),
    # The requester's context cache (its two owned groups, three static read ports).
    **{f"qpc_cache_{n}": Entry("rdma", "rtl.rdma.context_cache", "ContextCache",
                               {"entries": n, "depth": _DEPTH,
                                "groups": {"fetch": FETCH_GROUP, "seq": SEQ_GROUP},
                                "static_reads": 3}) for n in CACHE_SIZES},
    "requester_c16": Entry("rdma", "rtl.rdma.req.requester", "Requester",
                           {"cache": ContextCacheShape(16), "depth": _DEPTH}),
    # The requester's READ/atomic blocks: the outstanding-operation table and response
    # intake at 16 slots (ORD 16, spec.rdma_read_req.ORD_DEFAULT), the request framer.
    "response_intake_s16": Entry("rdma", "rtl.rdma.req.response_intake", "ResponseIntake",
                                 {"slots": 16, "ord": 16, "depth": _DEPTH}),
    "request_framer": Entry("rdma", "rtl.rdma.req.request_framer", "RequestFramer", {}),
    # The reads builds of the READ/atomic points' top (tb.rdma.read_point.READ_TOP).
    "requester_c16_reads": Entry("rdma", "rtl.rdma.req.requester", "Requester",
                                 {"cache": ContextCacheShape(16), "depth": _DEPTH,
                                  "reads": _READ_TOP["reads"]}),
    "responder_c16_reads": Entry("rdma", "rtl.rdma.resp.responder", "Responder",
                                 {**_RESPONDER_C16, "read_words": _READ_TOP["read_words"]}),
    # The NIC's loads and atomics (NicMemTop's blocks): tag table at board's and pod's tags.
    **{f"nic_tag_table_t{t}": Entry("nic", "rtl.nic.tag_table", "TagTable",
                                    {"tags": t, "mem_words": _MEM["mem_words"]})
       for t in sorted({default_tags("board"), default_tags("pod")})},
    "nic_mem_requester": Entry("nic", "rtl.nic.mem_requester", "MemRequester",
                               {"framing": "compact", "mem_words": _MEM["mem_words"]}),
    "nic_mem_rx": Entry("nic", "rtl.nic.mem_rx", "MemRx",
                        {"framing": "compact", "mem_words": _MEM["mem_words"],
                         "max_payload": _MEM["max_payload"]}),
    "nic_mem_responder": Entry("nic", "rtl.nic.mem_responder", "MemResponder", {
        "framing": "compact", "mem_words": _MEM["mem_words"], "max_payload":
        _MEM["max_payload"], "queue": request_queue_depth(_MEM["nodes"], default_tags("board"))}),
    # As written (its MR table, never written, is optimised away: see docs/area.md) and
    # with the write port that the table needs in hardware.
    "responder_c16": Entry("rdma", "rtl.rdma.resp.responder", "Responder", _RESPONDER_C16),
    # The host interface both designs attach through (pcie profile).
    "host_interface_pcie": _HOST_INTERFACE,
    "responder_c16_mr_port": Entry("rdma", "rtl.tops.area_wrappers", "ResponderWithMrPort",
                                   {"cache_entries": 16, "depth": _DEPTH, "mr_entries": _MR}),
    **{f"rdma_engine_c{n}": Entry("rdma", "rtl.tops.area_wrappers", "RdmaEngine",
                                  {"cache_entries": n, "depth": _DEPTH, "mr_entries": _MR})
       for n in (16, 256)},
    # Ephemeral contexts (design 3): the context pool, 64 entries with 12-bit node keys
    # (its lookup grows with the entries; 256 take Yosys many minutes).
    "context_pool_64": Entry("ephemeral", "rtl.ephemeral.pool", "ContextPool",
                             {"entries": 64, "key_bits": 12}),
}
#: The gap rows' entries that the entries above do not already give (a name given
#: above must be the same entry: checked by the tests).
COMPONENTS.update({name: entry for name, entry in _gap_entries().items()
                   if name not in COMPONENTS})

#: Design totals: component -> how many of it. The NIC design is one node plus its share
#: (one port of four, the headline's node count) of the switch it needs: its frames
#: (compact ones are not Ethernet) need this switch. The RDMA design is one engine
#: (requester + responder); the RoCE frames cross any Ethernet switch, which is not
#: counted, as RdmaTop links the nodes directly.
DESIGNS = {
    "nic_design": {"nic_node_w64_compact": 1, f"switch_w64_p{NIC['nodes']}": 1 / NIC["nodes"]},
    "rdma_design_c16": {"rdma_engine_c16": 1},
    "rdma_design_c256": {"rdma_engine_c256": 1},
}

#: The components that take longest in Yosys (minutes), longest first.
SLOW = ("responder_c16_reads", "switch_w64_p16", "switch_w64_p8", "rdma_engine_c256",
        "rdma_engine_c16_scaleup_pod", "rdma_engine_c16_pod", "rdma_engine_c16_scaleup",
        "rdma_engine_c16", "requester_c16_reads", "requester_c16", "responder_c16_mr_port",
        "responder_c16", "host_interface_pcie")

#: The figures of a result that add up over parts.
FIGURES = ("ff_bits", "mem_bits", "rom_bits", "cells", "lut4")


def build(name):
    """The component ``name`` of COMPONENTS, freshly built."""
    e = COMPONENTS[name]
    return getattr(importlib.import_module(e.module), e.factory)(**e.params)


def factory_text(entry):
    args = ", ".join(f"{k}={v!r}" for k, v in entry.params.items())
    return f"{entry.factory}({args})"



def totals(results):
    """Each component's figures with its black boxes' figures added."""
    out = {}
    for name, r in results.items():
        fig = {k: r[k] for k in FIGURES}
        for block, count in r["blocks"].items():
            leaf = results[block]
            for k in FIGURES:
                fig[k] += count * leaf[k]
        out[name] = fig
    return out


def design_totals(figures):
    designs = {}
    for design, parts in DESIGNS.items():
        if all(p in figures for p in parts):
            fig = {k: round(sum(n * figures[p][k] for p, n in parts.items())) for k in FIGURES}
            designs[design] = {"parts": parts, **fig}
    return designs


def growth(figures):
    def rows(key, names, extra):
        out = []
        for n, name in names:
            if name in figures:
                f = figures[name]
                out.append({key: n, "component": name, **{k: f[k] for k in FIGURES},
                            **extra(n, f)})
        return out

    return {
        "qpc_cache_entries": rows(
            "entries", [(n, f"qpc_cache_{n}") for n in CACHE_SIZES],
            lambda n, f: {"mem_bits_per_entry": f["mem_bits"] / n}),
        "rdma_engine_cache_entries": rows(
            "entries", [(n, f"rdma_engine_c{n}") for n in (16, 256)], lambda n, f: {}),
        "switch_ports": rows(
            "ports", [(n, f"switch_w64_p{n}") for n in SWITCH_PORTS],
            lambda n, f: {"lut4_per_port": round(f["lut4"] / n, 1),
                          "ff_bits_per_port": round(f["ff_bits"] / n, 1),
                          "mem_bits_per_port": round(f["mem_bits"] / n, 1)}),
    }

