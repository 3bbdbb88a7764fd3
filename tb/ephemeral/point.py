"""A point of the ephemeral-context design on the golden model (no RTL co-simulation).

The design reuses the RDMA engine's datapath at its best rung (WQEs by MMIO with inline
data, unsignalled completions, ACK coalescing) with the context on chip: the figures of
that datapath come from the engine's own model at 1 QP on the same level field
(:func:`datapath_row`: the NIC's switch, link retry, RoCEv2 headers, end-to-end
completion, behind the point's attachment), whose context never leaves its cache. The
context store is the ephemeral pool, run by :func:`analysis.ephemeral.flow.run_flow`
(the pool's twin, stepped every cycle) over the destinations of the messages.

What a row carries (``_model`` figures; every figure is the model's, none co-simulated):

``ii_cycles``, ``msgs_per_s``
    the steady cycles per message of the sends (:func:`pymodel.throughput.steady_ii`,
    the pool's waits included), and ``1e9 / ii`` (1 GHz), summed over ``lanes`` and
    capped by the attachment (``limit`` says which: ``"lanes"`` or ``"host interface"``).
``latency_cycles``, ``completion_cycles``
    a message alone (the datapath's: opening a context costs no cycle, it is allocated in
    the lookup's cycle as a hit is found).
``wire_bytes``
    the data frame, and the ACK frames (one per ACK request) and CLOSE frames (one per
    context closed, the size of an ACK frame) shared over the messages.
``host_bytes``
    the datapath's (posting and CQEs; no context ever crosses the host interface).
``endpoint_state_bits``
    the datapath's in-flight state (its window records, held payload, receive beats:
    the engine's ``endpoint_state_bits`` at 1 QP) plus the context state: the send pool
    at its most (contexts open at once) of :func:`spec.ephemeral.send_context_bits` and
    the receive contexts at their most of :func:`spec.ephemeral.recv_context_bits` (what
    each node needs when every node sends as this one does), per lane.
"""

import functools

from analysis.ephemeral.flow import Datapath, run_flow
from analysis.load.traffic import qp_sequence
from analysis.rdma.fastpath.frames import _ack_bytes, _frames
from pymodel.fcs import IFG_BYTES, PREAMBLE_SFD_BYTES
from pymodel.throughput import steady_ii
from spec.ephemeral import (
    EPHEMERAL_DEFAULTS,
    MAX_LANES,
    recv_context_bits,
    send_context_bits,
)
from spec.fabric_profiles import FABRIC_PROFILES, one_way
from spec.load import POPULARITY
from spec.rdma_engine import LADDER
from tb.rdma.row_keys import comparison_keys

__all__ = ["LEVEL", "ATTACHMENTS", "datapath_row", "datapath_point", "model_point",
           "check_point", "MAX_LANES", "attachment_cap", "DATAPATH_MESSAGES", "lane_shares"]

#: The level field of the spectrum (SPEC.md, "Comparisons on a level field"): the NIC's
#: switch with link retry, RoCEv2 (Ethernet-class) headers, end-to-end completion; the
#: attachment is a point's own (:data:`ATTACHMENTS`).
LEVEL = dict(link_retry=True, header="roce", topology="switch")
#: The engines' attachments a point takes, and the NIC's attachment that matches each:
#: behind the PCIe host interface (the gap table's field), or on the accelerator's die
#: (the NIC integrated).
ATTACHMENTS = {"pcie": "pcie", "on_die": "integrated"}
#: Messages of the datapath's back-to-back run.
DATAPATH_MESSAGES = 1000


def datapath_point(fabric, attachment="pcie"):
    """The keyword arguments of the datapath's RDMA point, which its model run
    (:func:`datapath_row`) and its co-simulation (:func:`tb.ephemeral.sim_point.run_point`
    by :func:`tb.rdma.headline.run_point`) share: 1 QP, 16 cache entries, the best rung,
    :data:`LEVEL` at ``fabric`` behind ``attachment``."""
    return dict(qps=1, cache_entries=16, rung=LADDER[-1][0], fabric=fabric,
                host=attachment, **LEVEL)


@functools.lru_cache(maxsize=8)
def datapath_row(fabric, attachment="pcie", msg_bytes=128):
    """The RDMA engine's model row of :func:`datapath_point` (:func:`tb.rdma.headline.
    model_point`, :data:`DATAPATH_MESSAGES` messages): the datapath the ephemeral design
    reuses."""
    from tb.rdma.headline import model_point as rdma_point

    return rdma_point(msg_bytes, DATAPATH_MESSAGES, **datapath_point(fabric, attachment))


def attachment_cap(row, side="model"):
    """Messages a second the attachment of an RDMA row carries at most: its busier
    direction is ``host_util`` busy at the row's ii, so ``1e9 / (ii * host_util)``
    (``side``: ``"model"`` or ``"rtl"``, the row's figures of that side)."""
    return 1e9 / (row[f"ii_cycles_{side}"] * row[f"host_util_{side}"])


def _wire(nbytes):
    return PREAMBLE_SFD_BYTES + max(64, nbytes) + IFG_BYTES


def check_point(peers, fabric, popularity, lanes, messages, attachment="pcie"):
    """``ValueError`` naming the first bad option of a point."""
    if attachment not in ATTACHMENTS:
        raise ValueError(f"attachment must be one of {list(ATTACHMENTS)}, "
                         f"not {attachment!r}")
    for name, v, lo, hi in (("peers", peers, 1, 4096), ("lanes", lanes, 1, MAX_LANES),
                            ("messages", messages, 2, 1 << 20)):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {v!r}")
    if fabric not in FABRIC_PROFILES:
        raise ValueError(f"fabric must be one of {list(FABRIC_PROFILES)}, not {fabric!r}")
    if popularity not in POPULARITY:
        raise ValueError(f"popularity must be one of {list(POPULARITY)}, "
                         f"not {popularity!r}")


def lane_shares(dests, peers, lanes):
    """The destinations of each of ``lanes`` lanes, in their order (a lane may have
    none): lane ``j`` sends the messages whose destination ``d`` has ``d % lanes == j``
    (it holds contexts for its share of the ``peers`` only); with fewer peers than lanes
    message ``k`` goes to lane ``k % lanes`` instead (each lane then holds its own context
    to a peer)."""
    if peers >= lanes:
        return [[d for d in dests if d % lanes == j] for j in range(lanes)]
    return [dests[j::lanes] for j in range(lanes)]


def model_point(peers, fabric="board", popularity="round_robin", lanes=1, messages=2000,
                seed=1, msg_bytes=128, attachment="pcie", **knobs):
    """The row of one point (module docstring). ``knobs``: the pool's
    (:data:`spec.ephemeral.EPHEMERAL_DEFAULTS`: ``pool_entries`` per lane, ``idle``,
    ``ack_every``, ``lookahead``). Destinations: :func:`analysis.load.traffic.qp_sequence`
    (``round_robin``, ``uniform`` or ``zipf`` 0.99 over ``peers``). Lanes split the
    destinations: lane ``j`` sends the messages whose destination ``d`` has
    ``d % lanes == j``, in their order (each lane holds contexts for its share of the
    peers only); with fewer peers than lanes the messages are dealt out instead, message
    ``k`` to lane ``k % lanes`` (each lane then holds its own context to a peer).
    ``attachment``: :data:`ATTACHMENTS`."""
    check_point(peers, fabric, popularity, lanes, messages, attachment)
    unknown = sorted(set(knobs) - set(EPHEMERAL_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown ephemeral knob(s) {unknown}; known: "
                         f"{sorted(EPHEMERAL_DEFAULTS)}")
    k = dict(EPHEMERAL_DEFAULTS, **knobs)
    dp_row = datapath_row(fabric, attachment, msg_bytes)
    ii_dp = dp_row["ii_cycles_model"]
    if ii_dp != int(ii_dp):
        raise RuntimeError(f"the datapath's ii ({ii_dp}) is not a whole number of cycles")
    dp = Datapath(int(ii_dp), int(dp_row["latency_cycles_model"]),
                  int(dp_row["completion_cycles_model"]), one_way(fabric))
    dests = qp_sequence(popularity, peers, messages, seed)
    lanes_out = [run_flow(mine, dp, **k) for mine in lane_shares(dests, peers, lanes)
                 if mine]
    rate_cycles = sum(1 / steady_ii(r.sent) if len(r.sent) > 1 else 0 for r in lanes_out)
    cap = attachment_cap(dp_row) / 1e9
    limit = "host interface" if rate_cycles > cap else "lanes"
    per_cycle = min(rate_cycles, cap)
    asks = sum(sum(r.asked) for r in lanes_out)
    closes = sum(r.closes for r in lanes_out)
    frame = _frames(msg_bytes, 1 << 12, LEVEL["header"])
    data_wire = sum(_wire(f.nbytes) for f in frame)
    ack_wire = _wire(_ack_bytes(LEVEL["header"]))
    send_bits = sum(r.send_max for r in lanes_out) * send_context_bits()
    recv_bits = sum(r.recv_max for r in lanes_out) * recv_context_bits()
    datapath_bits = lanes * dp_row["endpoint_state_bits_model"]
    waits = sorted(w for r in lanes_out for w in r.waits)
    row = {"design": "ephemeral", "msg_bytes": msg_bytes, "messages": messages,
           "peers": peers, "lanes": lanes, "popularity": popularity, "limit": limit,
           **{f"pool_{x}" if x != "pool_entries" else x: v for x, v in k.items()},
           **comparison_keys(attachment, fabric, LEVEL["link_retry"], LEVEL["header"],
                             LEVEL["topology"])}
    figures = {
        "ii_cycles": 1 / per_cycle, "msgs_per_s": 1e9 * per_cycle,
        "latency_cycles": dp.latency, "completion_cycles": dp.completion,
        "wire_bytes": data_wire + (asks + closes) * ack_wire / messages,
        "host_bytes": dp_row["host_bytes_model"],
        "endpoint_state_bits": datapath_bits + send_bits + recv_bits,
        "context_state_bits": send_bits + recv_bits,
        "datapath_state_bits": datapath_bits,
        "send_contexts_max": sum(r.send_max for r in lanes_out),
        "recv_contexts_max": sum(r.recv_max for r in lanes_out),
        "opens_per_message": sum(r.counters["opens"] for r in lanes_out) / messages,
        "pool_full_waits": sum(r.counters["full_waits"] for r in lanes_out),
        "wait_p99_cycles": waits[min(len(waits) - 1, (99 * len(waits)) // 100)],
    }
    row.update({f"{name}_model": v for name, v in figures.items()})
    return row
