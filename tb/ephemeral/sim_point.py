"""`make sim --design ephemeral`: one point of the ephemeral design, its flow co-simulated.

The sender's flow (:class:`rtl.ephemeral.sender.EphemeralSender` on
:class:`rtl.tops.ephemeral_sender_top.EphemeralSenderTop`) runs the point's messages in
co-simulation and every send, CLOSE and counter is compared with the twin
(:class:`pymodel.ephemeral.sender.SenderModel`; a difference is a mismatch). The datapath
around it (posting, framing, the wire, the responder, the ACK) is not RTL of this design
(docs/ephemeral.md, "Reusing the RDMA engine"): its figures come from the engine's
model at 1 QP on the level field (:func:`tb.ephemeral.point.datapath_row`), as in the
model's point (:func:`tb.ephemeral.point.model_point`).

The row: the model point's keys and ``_model`` figures, plus ``_rtl`` figures computed
from the co-simulated sends and CLOSEs with the datapath's constants (:data:`SOURCES`
says which figure comes from where) and ``mismatches``.
"""

import json
import math
from pathlib import Path

from pymodel.throughput import steady_ii
from spec.ephemeral import (
    COMPLETION_RANGE,
    EPHEMERAL_DEFAULTS,
    II_BITS,
    RTL_POOL_ENTRIES_MAX,
    check_ephemeral,
    recv_context_bits,
    send_context_bits,
)

__all__ = ["check_sim_point", "run_point", "SOURCES", "MAX_MESSAGES", "figure_lines"]

#: Most messages of a co-simulated point (the top's player and recorders hold them).
MAX_MESSAGES = 1 << 16

#: Per figure of the row: where its ``_rtl`` value comes from.
SOURCES = {
    "ii_cycles": "co-simulated (the RTL's send cycles; the datapath's ii as the spacing)",
    "msgs_per_s": "co-simulated (1e9 / ii, capped by the attachment as the model's)",
    "send_contexts_max": "co-simulated (the pool's used_max)",
    "recv_contexts_max": "co-simulated CLOSE and open cycles + the datapath's latency "
                         "and one-way delay (model)",
    "pool_full_waits": "co-simulated (the pool's counter)",
    "opens_per_message": "co-simulated (the pool's counter)",
    "wait_p99_cycles": "co-simulated (the RTL's send cycles)",
    "wire_bytes": "co-simulated ACK requests and CLOSEs + the frames' sizes (model)",
    "context_state_bits": "co-simulated (contexts at their most x their bits)",
    "endpoint_state_bits": "context state co-simulated + the datapath's state (model)",
    "latency_cycles": "model (the engine's datapath at 1 QP)",
    "completion_cycles": "model (the engine's datapath at 1 QP)",
    "host_bytes": "model (the engine's datapath at 1 QP)",
    "datapath_state_bits": "model (the engine's datapath at 1 QP)",
}


def check_sim_point(peers, fabric, popularity, messages, msg_bytes, knobs, lanes=1):
    """``ValueError`` naming the first bad knob of a co-simulated point; the knobs
    (:data:`spec.ephemeral.EPHEMERAL_DEFAULTS` filled in) otherwise. Nothing is run."""
    from tb.ephemeral.point import check_point

    check_point(peers, fabric, popularity, lanes, messages)
    if lanes > 1:
        _check_lane_shares(peers, popularity, lanes, messages)
    k = dict(EPHEMERAL_DEFAULTS, **knobs)
    check_ephemeral(k["pool_entries"], k["idle"], k["ack_every"], k["lookahead"])
    if k["pool_entries"] > RTL_POOL_ENTRIES_MAX:
        raise ValueError(f"pool_entries must be at most {RTL_POOL_ENTRIES_MAX} for the RTL "
                         f"sender (the model takes more: tb.ephemeral.point.model_point), "
                         f"not {k['pool_entries']}")
    if messages > MAX_MESSAGES:
        raise ValueError(f"messages must be at most {MAX_MESSAGES} for a co-simulated "
                         f"point, not {messages}")
    from pymodel.rdma.verbs import inline_limit

    if not 1 <= msg_bytes <= inline_limit():
        raise ValueError(f"msg_bytes must be 1 to {inline_limit()} (the datapath is the "
                         f"engine's best rung, which carries a message in its WQE), not "
                         f"{msg_bytes}")
    return k


def _check_lane_shares(peers, popularity, lanes, messages, seed=1):
    """``ValueError`` naming ``messages`` unless each of ``lanes`` lanes gets at least two
    of the point's messages (:func:`tb.ephemeral.point.lane_shares`): a lane's rate is
    its steady ii, which takes two sends."""
    from analysis.load.traffic import qp_sequence
    from tb.ephemeral.point import lane_shares

    shares = lane_shares(qp_sequence(popularity, peers, messages, seed), peers, lanes)
    fewest = min(range(lanes), key=lambda j: len(shares[j]))
    if len(shares[fewest]) < 2:
        raise ValueError(f"messages ({messages}, {popularity} over {peers} peers) give "
                         f"lane {fewest} of {lanes} only {len(shares[fewest])}; each lane "
                         f"needs at least 2 for its rate: more messages or fewer lanes")


def _slots(completion, ii):
    """ACK queue entries: a power of two holding every ACK awaited when requests are
    ``ii`` apart (``ceil(completion / ii)``), so the queue never holds a message."""
    need = max(2, math.ceil(completion / ii))
    return 1 << (need - 1).bit_length()


def run_point(sim, peers=4096, fabric="pod", popularity="round_robin", messages=2000,
              msg_bytes=128, seed=1, test_id="point", log=print, **knobs):
    """Co-simulate the point; return its row (module docstring)."""
    from analysis.ephemeral.flow import max_overlap
    from analysis.load.traffic import qp_sequence
    from rtl.tops.ephemeral_sender_top import EphemeralSenderTop
    from spec.fabric_profiles import one_way
    from tb.cosim import BUILD, CosimFailure, run_cosim
    from tb.ephemeral.point import attachment_cap, datapath_row, model_point
    from tb.run_dirs import run_dir_name

    k = check_sim_point(peers, fabric, popularity, messages, msg_bytes, knobs)
    log("[sim] ephemeral: the model's point (the datapath from the engine's model at 1 QP, "
        "the pool twin) ...")
    row = model_point(peers, fabric, popularity, lanes=1, messages=messages, seed=seed,
                      msg_bytes=msg_bytes, **k)
    dp = datapath_row(fabric, "pcie", msg_bytes)
    ii, latency = int(dp["ii_cycles_model"]), int(dp["latency_cycles_model"])
    completion, hop = int(dp["completion_cycles_model"]), one_way(fabric)
    if not 1 <= ii < 1 << II_BITS or not COMPLETION_RANGE[0] <= completion <= \
            COMPLETION_RANGE[1]:
        raise ValueError(f"the datapath's ii ({ii}) or completion ({completion}) is out of "
                         f"the sender block's range")
    slots = _slots(completion, ii)
    depth = max(1024, 1 << (messages - 1).bit_length())
    params = dict(entries=k["pool_entries"], ack_slots=slots, idle=k["idle"],
                  ack_every=k["ack_every"], ii=ii, completion=completion,
                  lookahead=k["lookahead"], popularity=popularity, peers=peers,
                  messages=messages, seed=seed)
    log(f"[sim] ephemeral: co-simulating the sender's {messages} messages (pool of "
        f"{k['pool_entries']}, ii {ii}, ACKs {completion} cycles after their request) on "
        f"{sim} ...")
    top = EphemeralSenderTop(k["pool_entries"], slots, depth)
    name = f"ephemeral_sender_{k['pool_entries']}_{slots}_{depth}"
    failure = None
    try:
        run_dir = run_cosim(top, name=name, test_module="tb.cocotb_ephemeral_sender",
                            sim=sim, test_id=test_id, params=params)
    except CosimFailure as exc:
        failure = exc
        # This run's folder (run_cosim empties it first): the RTL's events, if the test
        # got as far as comparing them.
        found = sorted(BUILD.glob(f"cosim/{sim}/{name}-*/{run_dir_name(test_id)}/"
                                  f"ephemeral_sender.json"), key=lambda p: p.stat().st_mtime)
        run_dir = found[-1].parent if found else None
    out = run_dir and Path(run_dir) / "ephemeral_sender.json"
    if not out or not out.exists():
        raise failure or RuntimeError(f"{run_dir}: no ephemeral_sender.json")
    res = json.loads(out.read_text())
    sends, closes, counters = res["sends"], res["closes"], res["counters"]
    dests = qp_sequence(popularity, peers, messages, seed)
    cycles = [s[0] for s in sends]
    waits = [0] + [cycles[j] - cycles[j - 1] - ii for j in range(1, len(cycles))]
    opened_at, recv = {}, []
    events = sorted([(c, 1, j) for j, (c, *_) in enumerate(sends)]
                    + [(c, 0, key) for c, key in closes])
    for c, kind, x in events:           # a CLOSE is seen before a send of its cycle
        if kind == 1 and sends[x][3]:
            opened_at[dests[x]] = c + latency
        elif kind == 0 and x in opened_at:
            recv.append((opened_at.pop(x), c + hop))
    ii_rtl = steady_ii(cycles) if len(cycles) > 1 else None
    cap = attachment_cap(dp)
    rate = min(1e9 / ii_rtl, cap) if ii_rtl else None
    asks = sum(1 for s in sends if s[2])
    data_wire, ack_wire = _wire_bytes(msg_bytes)
    send_bits = counters["used_max"] * send_context_bits()
    recv_bits = max_overlap(recv) * recv_context_bits() if recv else 0
    figures = {
        "ii_cycles": 1e9 / rate if rate else None, "msgs_per_s": rate,
        "send_contexts_max": counters["used_max"],
        "recv_contexts_max": max_overlap(recv) if recv else 0,
        "pool_full_waits": counters["full_waits"],
        "opens_per_message": counters["opens"] / messages,
        "wait_p99_cycles": sorted(waits)[min(len(waits) - 1, (99 * len(waits)) // 100)],
        "wire_bytes": data_wire + (asks + len(closes)) * ack_wire / messages,
        "context_state_bits": send_bits + recv_bits,
        "endpoint_state_bits": row["datapath_state_bits_model"] + send_bits + recv_bits,
    }
    row.update({f"{key}_rtl": v for key, v in figures.items()})
    row["mismatches"] = res["mismatches"] + (failure is not None and not res["mismatches"])
    row["sources"] = SOURCES
    row["ack_slots"] = slots
    return row


def _wire_bytes(msg_bytes):
    """Wire bytes of a message's data frame and of an ACK (or CLOSE) frame on the level
    field, as :func:`tb.ephemeral.point.model_point` counts them."""
    from analysis.rdma.fastpath.frames import _ack_bytes, _frames
    from pymodel.fcs import IFG_BYTES, PREAMBLE_SFD_BYTES
    from tb.ephemeral.point import LEVEL

    def wire(nbytes):
        return PREAMBLE_SFD_BYTES + max(64, nbytes) + IFG_BYTES

    frames = _frames(msg_bytes, 1 << 12, LEVEL["header"])
    return sum(wire(f.nbytes) for f in frames), wire(_ack_bytes(LEVEL["header"]))


def _fmt(v):
    return "-" if v is None else f"{v:,.4g}" if isinstance(v, float) else f"{v:,}"


def figure_lines(row):
    """The point's figures, RTL (co-simulated flow) and model side by side, each with
    its source."""
    lines = []
    for key, src in row.get("sources", SOURCES).items():
        rtl, model = row.get(f"{key}_rtl"), row.get(f"{key}_model")
        lines.append(f"  {key:22} RTL {_fmt(rtl):>14}  model {_fmt(model):>14}  {src}")
    return lines
