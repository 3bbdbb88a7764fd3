"""`make sim --design ephemeral`: one point of the ephemeral design, co-simulated.

Two co-simulations, each compared with its model (a difference is a mismatch):

* the sender's flow (:class:`rtl.ephemeral.sender.EphemeralSender` on
  :class:`rtl.tops.ephemeral_sender_top.EphemeralSenderTop`) runs the point's messages and
  every send, CLOSE and counter is compared with the twin
  (:class:`pymodel.ephemeral.sender.SenderModel`);
* the datapath around it (posting, framing, the wire, the responder, the ACK: the RDMA
  engine's at 1 QP with its context on chip, docs/ephemeral.md, "Reusing the RDMA
  engine") runs as the engine's RTL on :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`,
  the point :func:`tb.ephemeral.point.datapath_point` (the level field's switch with link
  retry, the best rung, behind the point's attachment) with the messages of
  :func:`tb.ephemeral.point.datapath_row`, by :func:`tb.rdma.headline.run_point` (the
  RDMA ``switch`` rows' run, the gap table's row 6 at the same profile: one build). Its
  RTL figures must equal the model's datapath that the model point and the sender's run
  use (ii, attachment utilisation, latency, completion, host bytes, state, the frames'
  sizes); each that differs is a mismatch. The two run at once (the datapath in a
  process of its own).

The row: the model point's keys and ``_model`` figures (:func:`tb.ephemeral.point.
model_point`), plus ``_rtl`` figures computed from the co-simulated sends and CLOSEs and
the co-simulated datapath's figures (:data:`SOURCES` says which figure comes from where)
and ``mismatches`` (both co-simulations').
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

__all__ = ["check_sim_point", "run_point", "SOURCES", "MAX_MESSAGES", "figure_lines",
           "DATAPATH_FIGURES", "datapath_mismatches", "frame_wire_bytes", "lane_events",
           "MAX_LANE_CONTEXTS", "cosim_result", "sender_params"]

#: Most messages of a co-simulated point (the top's player and recorders hold them).
MAX_MESSAGES = 1 << 16
#: Most contexts of a co-simulated multi-lane point, over all its lanes' pools (8 lanes of
#: 256: its Verilator build peaks at 4.7 GB, docs/ephemeral.md).
MAX_LANE_CONTEXTS = 2048

#: Per figure of the row: where its ``_rtl`` value comes from ("the datapath": the
#: engine's datapath at 1 QP co-simulated on RdmaFabricTop).
SOURCES = {
    "ii_cycles": "co-simulated (the RTL's send cycles; the datapath's ii as the spacing)",
    "msgs_per_s": "co-simulated (1e9 / ii, capped by the datapath's attachment)",
    "send_contexts_max": "co-simulated (the pool's used_max)",
    "recv_contexts_max": "co-simulated (CLOSE and open cycles + the datapath's latency "
                         "and the profile's one-way delay)",
    "pool_full_waits": "co-simulated (the pool's counter)",
    "opens_per_message": "co-simulated (the pool's counter)",
    "wait_p99_cycles": "co-simulated (the RTL's send cycles)",
    "wire_bytes": "co-simulated (ACK requests and CLOSEs + the datapath's frame sizes)",
    "context_state_bits": "co-simulated (contexts at their most x their bits)",
    "endpoint_state_bits": "co-simulated (context state + the datapath's state)",
    "latency_cycles": "co-simulated (the engine's datapath at 1 QP on RdmaFabricTop)",
    "completion_cycles": "co-simulated (the engine's datapath at 1 QP on RdmaFabricTop)",
    "host_bytes": "co-simulated (the engine's datapath at 1 QP on RdmaFabricTop)",
    "datapath_state_bits": "co-simulated (the engine's datapath at 1 QP on RdmaFabricTop)",
}

#: The datapath's figures its co-simulation must give as the model's datapath (the RDMA
#: row's keys, ``_rtl`` against :func:`tb.ephemeral.point.datapath_row`'s ``_model``).
DATAPATH_FIGURES = ("ii_cycles", "host_util", "latency_cycles", "completion_cycles",
                    "host_bytes", "endpoint_state_bits")


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
    if lanes > 1 and lanes * k["pool_entries"] > MAX_LANE_CONTEXTS:
        raise ValueError(f"lanes x pool_entries ({lanes} x {k['pool_entries']}) must be at "
                         f"most {MAX_LANE_CONTEXTS} for a co-simulated multi-lane point (8 "
                         f"lanes of 256 contexts take 4.7 GB to build on Verilator; the "
                         f"model's sizing table takes more: make report)")
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


def sender_params(dp, k, **run):
    """The senders' run parameters on the datapath of model row ``dp`` (its ii as their
    spacing, its completion as the ACK delay; ``ValueError`` when either is out of the
    sender block's range), the pool's knobs ``k`` and the ``run`` settings (popularity,
    peers, messages, seed, lanes)."""
    ii, completion = int(dp["ii_cycles_model"]), int(dp["completion_cycles_model"])
    if not 1 <= ii < 1 << II_BITS or not COMPLETION_RANGE[0] <= completion <= \
            COMPLETION_RANGE[1]:
        raise ValueError(f"the datapath's ii ({ii}) or completion ({completion}) is out of "
                         f"the sender block's range")
    return dict(entries=k["pool_entries"], ack_slots=_slots(completion, ii), idle=k["idle"],
                ack_every=k["ack_every"], ii=ii, completion=completion,
                lookahead=k["lookahead"], **run)


def run_point(sim, peers=4096, fabric="pod", popularity="round_robin", messages=2000,
              msg_bytes=128, seed=1, test_id="point", log=print, **knobs):
    """Co-simulate the point, the sender's flow and the datapath at once; return its row
    (module docstring)."""
    import concurrent.futures

    from analysis.ephemeral.flow import max_overlap
    from analysis.load.traffic import qp_sequence
    from spec.fabric_profiles import one_way
    from tb.ephemeral.point import (
        DATAPATH_MESSAGES,
        attachment_cap,
        datapath_point,
        datapath_row,
        model_point,
    )
    from tb.rdma.headline import run_point as run_rdma_point

    k = check_sim_point(peers, fabric, popularity, messages, msg_bytes, knobs)
    log("[sim] ephemeral: the model's point (the datapath from the engine's model at 1 QP, "
        "the pool twin) ...")
    row = model_point(peers, fabric, popularity, lanes=1, messages=messages, seed=seed,
                      msg_bytes=msg_bytes, **k)
    dp = datapath_row(fabric, "pcie", msg_bytes)
    params = sender_params(dp, k, popularity=popularity, peers=peers, messages=messages,
                           seed=seed)
    ii, completion, slots = params["ii"], params["completion"], params["ack_slots"]
    log(f"[sim] ephemeral: co-simulating the datapath (the engine at 1 QP on RdmaFabricTop, "
        f"{fabric}, {DATAPATH_MESSAGES} messages) and the sender's {messages} messages "
        f"(pool of {k['pool_entries']}, ii {ii}, ACKs {completion} cycles after their "
        f"request) on {sim}, at once ...")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
        job = pool.submit(run_rdma_point, sim, msg_bytes, DATAPATH_MESSAGES,
                          test_id=f"{test_id}-datapath", **datapath_point(fabric, "pcie"))
        res, failure = _run_sender(sim, params, messages, test_id)
        dpr = job.result()
    wrong = datapath_mismatches(dp, dpr, msg_bytes)
    for key, got, want in wrong:
        log(f"[sim] ephemeral: MISMATCH the datapath's {key}: RTL {got}, model {want}")
    log(f"[sim] ephemeral: the datapath's co-simulation: {dpr['mismatches']} RTL/model "
        f"mismatches, {len(wrong)} figures off the model's datapath")
    latency, hop = dpr["latency_cycles_rtl"], one_way(fabric)
    sends, closes, counters = res["sends"], res["closes"], res["counters"]
    dests = qp_sequence(popularity, peers, messages, seed)
    cycles, waits, recv = lane_events(sends, closes, dests, ii, latency, hop)
    ii_rtl = steady_ii(cycles) if len(cycles) > 1 else None
    rate = min(1e9 / ii_rtl, attachment_cap(dpr, "rtl")) if ii_rtl else None
    asks = sum(1 for s in sends if s[2])
    data_wire, ack_wire = frame_wire_bytes(dpr["frames"])
    send_bits = counters["used_max"] * send_context_bits()
    recv_bits = max_overlap(recv) * recv_context_bits() if recv else 0
    datapath_bits = dpr["endpoint_state_bits_rtl"]
    figures = {
        "ii_cycles": 1e9 / rate if rate else None, "msgs_per_s": rate,
        "send_contexts_max": counters["used_max"],
        "recv_contexts_max": max_overlap(recv) if recv else 0,
        "pool_full_waits": counters["full_waits"],
        "opens_per_message": counters["opens"] / messages,
        "wait_p99_cycles": sorted(waits)[min(len(waits) - 1, (99 * len(waits)) // 100)],
        "wire_bytes": data_wire + (asks + len(closes)) * ack_wire / messages,
        "context_state_bits": send_bits + recv_bits,
        "endpoint_state_bits": datapath_bits + send_bits + recv_bits,
        "latency_cycles": latency, "completion_cycles": dpr["completion_cycles_rtl"],
        "host_bytes": dpr["host_bytes_rtl"], "datapath_state_bits": datapath_bits,
    }
    row.update({f"{key}_rtl": v for key, v in figures.items()})
    row["mismatches"] = (res["mismatches"] + (failure is not None and not res["mismatches"])
                         + dpr["mismatches"] + len(wrong))
    row["sources"] = SOURCES
    row["ack_slots"] = slots
    return row


def lane_events(sends, closes, dests, ii, latency, hop):
    """``(cycles, waits, recv)`` of one lane's co-simulated ``sends`` and ``closes``
    (``dests``: its messages' destinations): the send cycles, each send's wait beyond
    ``ii`` after the one before, and the receive contexts' ``(open, CLOSE)`` arrival
    cycles (opened ``latency`` after the send that opens, closed ``hop`` after the
    CLOSE; a CLOSE is seen before a send of its cycle)."""
    cycles = [s[0] for s in sends]
    waits = [0] + [cycles[j] - cycles[j - 1] - ii for j in range(1, len(cycles))]
    opened_at, recv = {}, []
    events = sorted([(c, 1, j) for j, (c, *_) in enumerate(sends)]
                    + [(c, 0, key) for c, key in closes])
    for c, kind, x in events:
        if kind == 1 and sends[x][3]:
            opened_at[dests[x]] = c + latency
        elif kind == 0 and x in opened_at:
            recv.append((opened_at.pop(x), c + hop))
    return cycles, waits, recv


def _run_sender(sim, params, messages, test_id):
    """The sender's co-simulation of ``params`` (:mod:`tb.cocotb_ephemeral_sender`):
    ``(result, failure)`` of :func:`cosim_result`."""
    from rtl.tops.ephemeral_sender_top import EphemeralSenderTop

    entries, slots = params["entries"], params["ack_slots"]
    depth = max(1024, 1 << (messages - 1).bit_length())
    return cosim_result(EphemeralSenderTop(entries, slots, depth),
                        f"ephemeral_sender_{entries}_{slots}_{depth}",
                        "tb.cocotb_ephemeral_sender", "ephemeral_sender.json", sim, test_id,
                        params)


def cosim_result(top, name, test_module, result, sim, test_id, params):
    """Co-simulate ``top`` with ``test_module``: ``(result, failure)``, the JSON file
    ``result`` the test wrote (its events and mismatches) and the
    :class:`tb.cosim.CosimFailure` it raised (``None`` if it passed). A failed test's
    file is still read when it got as far as writing it; ``RuntimeError`` (or the
    failure) when there is none."""
    from tb.cosim import BUILD, CosimFailure, run_cosim
    from tb.run_dirs import run_dir_name

    failure = None
    try:
        run_dir = run_cosim(top, name=name, test_module=test_module, sim=sim,
                            test_id=test_id, params=params)
    except CosimFailure as exc:
        failure = exc
        # This run's folder (run_cosim empties it first): the RTL's events, if the test
        # got as far as comparing them.
        found = sorted(BUILD.glob(f"cosim/{sim}/{name}-*/{run_dir_name(test_id)}/{result}"),
                       key=lambda p: p.stat().st_mtime)
        run_dir = found[-1].parent if found else None
    out = run_dir and Path(run_dir) / result
    if not out or not out.exists():
        raise failure or RuntimeError(f"{run_dir}: no {result}")
    return json.loads(out.read_text()), failure


def datapath_mismatches(model_row, cosim_row, msg_bytes):
    """``[(figure, RTL, model)]``: each figure of the co-simulated datapath ``cosim_row``
    (:func:`tb.rdma.headline.run_point`'s row) that differs from the model's datapath
    ``model_row`` (:func:`tb.ephemeral.point.datapath_row`): :data:`DATAPATH_FIGURES`,
    and the wire bytes of a message's data frames and of an ACK frame
    (:func:`frame_wire_bytes` of its frames against :func:`_wire_bytes`)."""
    wrong = [(key, cosim_row[f"{key}_rtl"], model_row[f"{key}_model"])
             for key in DATAPATH_FIGURES
             if cosim_row[f"{key}_rtl"] != model_row[f"{key}_model"]]
    got, want = frame_wire_bytes(cosim_row["frames"]), _wire_bytes(msg_bytes)
    return wrong + [(f"{kind} frame wire bytes", g, w)
                    for kind, g, w in zip(("data", "ACK"), got, want, strict=True) if g != w]


def frame_wire_bytes(frames):
    """Wire bytes of a message's data frames and of an ACK frame, from the RoCEv2 frames
    ``[(cycle, bytes with FCS)]`` of a run of WRITEs of one size: the frames other than
    ACKNOWLEDGEs over the messages (WRITE ONLY and FIRST frames), and the largest
    ACKNOWLEDGE. The BTH opcode is read at its offset: Ethernet II (14 bytes), IPv4 (IHL
    words), UDP (8 bytes), then the BTH's first byte (IBTA Vol 1 section 9.2; Annex A17).
    ``ValueError`` if there is no WRITE or no ACKNOWLEDGE."""
    from spec.formats.roce import OpCode
    from tb.ephemeral.point import _wire

    def opcode(frame):
        return frame[14 + (frame[14] & 0xF) * 4 + 8]

    firsts = {OpCode.RC_RDMA_WRITE_ONLY.value, OpCode.RC_RDMA_WRITE_FIRST.value}
    data, acks, messages = 0, [], 0
    for _, frame in frames:
        op = opcode(bytes(frame))
        if op == OpCode.RC_ACKNOWLEDGE.value:
            acks.append(_wire(len(frame)))
        else:
            data += _wire(len(frame))
            messages += op in firsts
    if not messages or not acks:
        raise ValueError(f"frames: {messages} WRITE(s) and {len(acks)} ACKNOWLEDGE(s); "
                         f"both are needed")
    return data / messages, max(acks)


def _wire_bytes(msg_bytes):
    """Wire bytes of a message's data frame and of an ACK (or CLOSE) frame on the level
    field, as :func:`tb.ephemeral.point.model_point` counts them."""
    from analysis.rdma.fastpath.frames import _ack_bytes, _frames
    from tb.ephemeral.point import LEVEL, _wire

    frames = _frames(msg_bytes, 1 << 12, LEVEL["header"])
    return sum(_wire(f.nbytes) for f in frames), _wire(_ack_bytes(LEVEL["header"]))


def _fmt(v):
    return "-" if v is None else f"{v:,.4g}" if isinstance(v, float) else f"{v:,}"


def figure_lines(row):
    """The point's figures, RTL (co-simulated: the sender's flow and the datapath) and
    model side by side, each with its source."""
    lines = []
    for key, src in row.get("sources", SOURCES).items():
        rtl, model = row.get(f"{key}_rtl"), row.get(f"{key}_model")
        lines.append(f"  {key:22} RTL {_fmt(rtl):>14}  model {_fmt(model):>14}  {src}")
    return lines
