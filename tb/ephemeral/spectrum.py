"""The state spectrum: how much endpoint state each design holds to keep its rate, at 1 to
4,096 peers, on the golden model (no cell of it is co-simulated).

Four endpoints on one level field (:data:`tb.ephemeral.point.LEVEL`: the NIC's switch,
link retry, Ethernet-class headers, end-to-end completion; all behind the PCIe host
interface, or the engines on the accelerator's die and the NIC integrated:
``attachment`` ``"pcie"`` or ``"on_die"``), 128-byte messages, ``board`` and ``pod``:

``nic``
    The NIC with its end-to-end completion (:func:`tb.nic.headline.model_point`, L2
    header), counted when its completion record reaches host memory (``records`` =
    :data:`spec.nic.RECORD_SLOTS`), as the engines' when their CQE does: its only
    per-peer state is the completion's counters (per source at the receiver, per
    destination at the sender; :func:`spec.nic.completion_state_bits`) and the record
    writer's pending flag (:func:`spec.nic.record_state_bits`).
    Its model top has 16 nodes, so rate, latency and wire bytes are those of 15 peers
    round robin at 64 peers and more (its datapath holds nothing per peer: the figures
    of 1 and 15 peers are compared in the tests); its state is the formula at the row's
    peers. Its 8-bit node id addresses 254 peers: the 1,024 and 4,096 rows are the
    formula for a NIC with a wider id (``note`` says so).
``nic_retry``
    The NIC with per-peer end-to-end retry (``peer_retry``, docs/nic.md "Per-peer
    retry"; :func:`nic_retry_row`): the ``nic`` row's model point run with the per-peer
    retry on, its replay window sized for the cell from the ``nic`` row's rate and
    completion (:func:`retry_window`): rate, latency, completion and wire bytes are that
    run's (fault free; the model's sender refuses a new frame while the window is full,
    so a window too small for the round trip shows in the rate). Its state is the
    ``nic`` row's plus :func:`spec.nic.peer_retry_state_bits` at the row's peers (a
    formula, as the ``nic`` row's); ``note`` says so.
``ephemeral``
    :func:`tb.ephemeral.point.model_point` (the engine's datapath, the pool of 256).
``rdma``
    The RC engine at its best rung with 256 context-cache entries
    (:func:`tb.rdma.headline.model_point`, ``qps`` = peers, on the level field's switch
    as the other rows), its QPs by the row's popularity (Zipf: the NIC's destinations'
    law, :func:`analysis.scenarios.rdma.qp_order`, at the engine's best cache
    :data:`spec.design_point.rdma.BEST_CACHE`, :data:`RC_WAYS` ways, ``note`` says so):
    rate, latency and in-flight state of that run. Its context state: the entries of its
    two on-chip caches (requester and responder, 512 bits an entry) that its peers'
    contexts occupy (``min(256, peers)`` each) and, in host memory, a 256-byte context
    per peer.

Every row: ``msgs_per_s``, ``latency_cycles``, ``endpoint_state_bits`` (total: in flight,
contexts on chip, and for ``rdma`` the contexts in host memory), ``per_peer_bits``
(total / peers), ``per_inflight_bits`` (total / the messages in flight by Little's law,
``completion / ii``), ``msgs_per_s_per_kib`` (msgs/s per KiB of the total).
"""

import concurrent.futures

from spec.design_point.rdma import BEST_CACHE, BEST_WAYS
from spec.formats.nic import PSN_BYTES, header_bytes
from spec.formats.roce import QPC_BYTES_DEFAULT
from spec.nic import (
    COMPLETION_DEFAULTS,
    RECORD_SLOTS,
    completion_state_bits,
    peer_retry_state_bits,
    record_state_bits,
)
from spec.rdma_engine import LADDER
from tb.ephemeral.point import ATTACHMENTS, LEVEL, attachment_cap, model_point

__all__ = ["PEERS", "PROFILES", "PATTERNS", "RC_CACHE", "RC_WAYS", "NIC_TOP_PEERS", "spectrum_rows",
           "sizing_rows", "nic_row", "rc_row", "ephemeral_row", "finish", "TARGET",
           "nic_retry_row", "retry_window", "nic_rows"]

PEERS = (1, 64, 1024, 4096)
PROFILES = ("board", "pod")
PATTERNS = ("round_robin", "zipf")
#: The RC engine's context cache: its largest, the best cache's
#: (:data:`spec.design_point.rdma.BEST_CACHE`).
RC_CACHE = BEST_CACHE.cache_entries
#: Ways of the RC engine's context cache in its Zipf rows: the engine at its best cache
#: (docs/rdma.md, "Associative context cache": a direct-mapped cache stalls its in-order
#: lookup behind a victim still being filled, which Zipf's random sets meet and round
#: robin never does; round robin's rate is the same at 1 and 4 ways).
RC_WAYS = BEST_WAYS
#: Peers of the NIC's model top (16 nodes).
NIC_TOP_PEERS = 15
#: Largest peer count the NIC's 8-bit node id addresses.
NIC_MAX_PEERS = 254
#: Bits of one cached context on chip (a 64-byte word, :data:`spec.formats.roce.
#: QPC_LAYOUT` in one host word).
RC_ENTRY_BITS = 512
#: The sizing target: messages per second per accelerator.
TARGET = 10 ** 9


def finish(row, total, ii, completion):
    """Add the per-peer, per-message-in-flight and per-KiB figures to ``row``."""
    rate = 1e9 / ii
    inflight = max(1.0, completion / ii)
    row.update(msgs_per_s=rate, endpoint_state_bits=total,
               per_peer_bits=total / row["peers"], per_inflight_bits=total / inflight,
               msgs_per_s_per_kib=rate / (total / 8192))
    return row


def nic_row(peers, fabric, pattern, messages=1000, attachment="pcie"):
    """The NIC's row (module docstring)."""
    from tb.nic.headline import _point_params
    from tb.nic.headline import model_point as nic_point

    used, att = min(peers, NIC_TOP_PEERS), ATTACHMENTS[attachment]
    r = nic_point("l2", 128, messages, peers=used, attachment=att, fabric=fabric,
                  retry=True, completion="e2e", records=RECORD_SLOTS)
    nt = _point_params("l2", 128, messages, used, None, att, fabric, True, "e2e",
                       16, None, RECORD_SLOTS)[0]
    state = (sum(completion_state_bits(peers + 1, nt.coalesce, nt.flush_idle, nt.timeout))
             + record_state_bits(peers + 1, RECORD_SLOTS))
    note = []
    if peers > used:
        note.append(f"rate of {used} peers; state by formula")
    if peers > NIC_MAX_PEERS:
        note.append("needs a node id wider than 8 bits")
    row = {"design": "nic", "peers": peers, "lanes": 1, "fabric": fabric,
           "attachment": attachment, "popularity": pattern, "simulator": "model",
           "note": "; ".join(note), "cap": attachment_cap(r) if att == "pcie" else None,
           "latency_cycles": r["latency_cycles_model"],
           "completion_cycles": r["completion_cycles_model"],
           "context_state_bits": state, "host_context_bits": 0,
           "wire_bytes": r["wire_bytes_model"], "width": nt.width}
    return finish(row, state, r["ii_cycles_model"], r["completion_cycles_model"])


def retry_window(ii, completion, coalesce=COMPLETION_DEFAULTS["coalesce"]):
    """The replay buffer's slots for a stream of one frame every ``ii`` cycles whose
    completion takes ``completion`` cycles: a frame stays until the coalesced completion
    that covers it returns (its own completion time, plus ``coalesce - 1`` frames of its
    group sent after it at most: ``(completion + coalesce * ii) / ii`` frames), rounded
    up to a power of two, at least 2 (:func:`spec.nic.check_peer_retry`)."""
    frames = -(-(completion + coalesce * ii) // ii)
    return max(2, 1 << (int(frames) - 1).bit_length())


def nic_retry_row(peers, fabric, pattern, messages=1000, attachment="pcie", nic=None):
    """The row of the NIC with per-peer retry (module docstring); ``nic`` is the cell's
    :func:`nic_row` (computed when None), whose rate and completion size the window."""
    from tb.nic.headline import model_point as nic_point

    nic = nic or nic_row(peers, fabric, pattern, messages, attachment)
    window = retry_window(1e9 / nic["msgs_per_s"], nic["completion_cycles"])
    used, att = min(peers, NIC_TOP_PEERS), ATTACHMENTS[attachment]
    r = nic_point("l2", 128, messages, peers=used, attachment=att, fabric=fabric,
                  retry=True, completion="e2e", records=RECORD_SLOTS, peer_retry=True,
                  peer_window=window)
    slot = header_bytes("l2") + PSN_BYTES + 128          # the frame without its FCS
    rx, tx, replay = peer_retry_state_bits(peers, window, slot)
    total = nic["endpoint_state_bits"] + rx + tx + replay
    row = dict(nic, design="nic_retry", cap=attachment_cap(r) if att == "pcie" else None,
               latency_cycles=r["latency_cycles_model"],
               completion_cycles=r["completion_cycles_model"],
               wire_bytes=r["wire_bytes_model"],
               context_state_bits=nic["context_state_bits"] + rx + tx,
               replay_bits=replay, window=window,
               note="; ".join(x for x in (
                   nic["note"].replace("; state by formula", ""),
                   f"window {window}: replay {replay:,} bits", "state by formula") if x))
    return finish(row, total, r["ii_cycles_model"], r["completion_cycles_model"])


def nic_rows(peers, fabric, pattern, messages=1000, attachment="pcie"):
    """The cell's ``nic`` and ``nic_retry`` rows (one NIC model run)."""
    nic = nic_row(peers, fabric, pattern, messages, attachment)
    return [nic, nic_retry_row(peers, fabric, pattern, messages, attachment, nic=dict(nic))]


def rc_row(peers, fabric, pattern, messages=1000, attachment="pcie"):
    """The RC engine's row (module docstring)."""
    from tb.rdma.headline import model_point as rdma_point

    skewed = pattern != "round_robin" and peers > 1
    kw = dict(qps=peers, cache_entries=RC_CACHE, rung=LADDER[-1][0], fabric=fabric,
              host=attachment, **LEVEL)
    if skewed:
        kw.update(BEST_CACHE.changes(), popularity=pattern)
    r = rdma_point(128, messages, **kw)
    ii, note = r["ii_cycles_model"], f"{RC_WAYS}-way cache" if skewed else ""
    on_chip = 2 * min(RC_CACHE, peers) * RC_ENTRY_BITS
    host = peers * QPC_BYTES_DEFAULT * 8
    total = r["endpoint_state_bits_model"] + on_chip + host
    row = {"design": "rdma", "peers": peers, "lanes": 1, "fabric": fabric,
           "attachment": attachment, "popularity": pattern, "simulator": "model",
           "note": note, "cap": attachment_cap(r),
           "latency_cycles": r["latency_cycles_model"],
           "completion_cycles": r["completion_cycles_model"],
           "context_state_bits": on_chip, "host_context_bits": host,
           "wire_bytes": r["wire_bytes_model"]}
    return finish(row, total, ii, r["completion_cycles_model"])


def ephemeral_row(peers, fabric, pattern, messages=2000, lanes=1, attachment="pcie",
                  **knobs):
    """The ephemeral design's row (:func:`tb.ephemeral.point.model_point`)."""
    r = model_point(peers, fabric, pattern, lanes=lanes, messages=messages,
                    attachment=attachment, **knobs)
    row = {"design": "ephemeral", "peers": peers, "lanes": lanes, "fabric": fabric,
           "attachment": attachment, "popularity": pattern, "simulator": "model",
           "note": "; ".join(x for x in (
               "" if r["limit"] == "lanes" else f"{r['limit']} full",
               f"pool of {r['pool_entries']} full: new destinations wait"
               if r["pool_full_waits_model"] else "") if x),
           "latency_cycles": r["latency_cycles_model"],
           "completion_cycles": r["completion_cycles_model"],
           "context_state_bits": r["context_state_bits_model"], "host_context_bits": 0,
           "wire_bytes": r["wire_bytes_model"],
           "pool_entries": r["pool_entries"],
           "send_contexts_max": r["send_contexts_max_model"]}
    return finish(row, r["endpoint_state_bits_model"], r["ii_cycles_model"],
                  r["completion_cycles_model"])


def _cell(fn, args, kwargs):
    return fn(*args, **kwargs)


def spectrum_rows(peers=PEERS, profiles=PROFILES, patterns=PATTERNS, messages=1000,
                  attachment="pcie", workers=1):
    """Every cell: ``[row]`` in the order fabric, pattern, peers, design; ``workers``
    processes at a time (1: in this process; the cells are independent model runs)."""
    cells = []
    for fabric in profiles:
        for pattern in patterns:
            for p in peers:
                cells += [(nic_rows, (p, fabric, pattern, messages, attachment), {}),
                          (ephemeral_row, (p, fabric, pattern, 2 * messages),
                           {"attachment": attachment}),
                          (rc_row, (p, fabric, pattern, messages, attachment), {})]
    if workers <= 1:
        out = [_cell(*c) for c in cells]
    else:
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
            out = list(pool.map(_cell, *zip(*cells, strict=True)))
    return [r for x in out for r in (x if isinstance(x, list) else [x])]


def sizing_rows(peers=(1, 64, 4096), fabric="board", max_lanes=8, messages=1000,
                attachment="pcie"):
    """For :data:`TARGET` messages a second of 128 B: per design and peer count the fewest
    lanes (1 to ``max_lanes``) that reach it, or the most it reaches, with the fewest
    lanes that reach that, and what stops it.

    A lane is one endpoint of the design, with its own link; lanes share the
    accelerator's one attachment (:func:`tb.ephemeral.point.attachment_cap`; the NIC
    integrated has none). Destinations are split over the lanes (``d % lanes``) when
    there are at least as many peers as lanes (each lane's state is that of its share
    of the peers), else messages are dealt out (each lane its own state to a peer)."""
    rows = []
    for p in peers:
        for design in ("nic", "ephemeral", "rdma"):
            best = None
            for lanes in range(1, max_lanes + 1):
                if design == "ephemeral":
                    r = ephemeral_row(p, fabric, "round_robin", 2 * messages, lanes=lanes,
                                      attachment=attachment)
                    rate, state = r["msgs_per_s"], r["endpoint_state_bits"]
                    limit = "host interface" if "host interface" in r["note"] else \
                        "context pool" if "pool" in r["note"] else "lanes"
                else:
                    share = max(1, p // lanes)
                    one = (nic_row if design == "nic" else rc_row)(
                        share, fabric, "round_robin", messages, attachment)
                    rate, state = lanes * one["msgs_per_s"], lanes * one["endpoint_state_bits"]
                    limit = "lanes"
                    if one["cap"] is not None and rate > one["cap"]:
                        rate, limit = one["cap"], "host interface"
                row = dict(design=design, peers=p, lanes=lanes, fabric=fabric,
                           attachment=attachment, msgs_per_s=rate,
                           endpoint_state_bits=state, limit=limit,
                           reaches=rate >= TARGET * (1 - 1e-9), simulator="model")
                if limit == "host interface" and best is not None \
                        and best["msgs_per_s"] >= rate * (1 - 1e-9):
                    best["limit"] = limit     # one lane fewer already fills the attachment
                    break
                best = row
                if best["reaches"] or limit == "host interface":
                    break
            rows.append(best)
    return rows
