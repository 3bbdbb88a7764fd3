"""`make sim --design ephemeral --lanes N` (N > 1): a multi-lane point, its lanes
co-simulated side by side in one simulation.

The lanes are ``N`` senders behind one attachment
(:class:`rtl.tops.ephemeral_lanes_top.EphemeralLanesTop`, each lane
:class:`rtl.tops.ephemeral_sender_top.EphemeralSenderTop`'s sender with its own pool),
lane ``j`` fed the messages :func:`tb.ephemeral.point.lane_shares` gives it (destination
``d`` on lane ``d % N``, as the model's point splits them). Each lane's sends, CLOSEs and
counters are compared with its own twin (:mod:`tb.cocotb_ephemeral_lanes`; a difference
is a mismatch). The row is :func:`tb.ephemeral.point.model_point`'s at ``lanes=N`` with
``_rtl`` figures from the lanes' co-simulated events, combined as the model combines its
lanes (:data:`LANE_SOURCES`): the rate is the sum of the lanes' rates (each ``1e9 /`` the
lane's steady ii), capped by the attachment exactly as the model caps it
(:func:`tb.ephemeral.point.attachment_cap`); contexts, waits and counters are summed over
the lanes. The datapath's figures are the engine's model at 1 QP (:data:`LANE_SOURCES`
says which): the one-lane point co-simulates that datapath beside its sender
(:mod:`tb.ephemeral.sim_point`, RTL = model), and every lane runs the same one.
"""


from pymodel.throughput import steady_ii
from spec.ephemeral import recv_context_bits, send_context_bits
from tb.ephemeral.sim_point import (
    SOURCES,
    _wire_bytes,
    check_sim_point,
    cosim_result,
    lane_events,
    sender_params,
)

__all__ = ["run_lanes_point", "LANE_SOURCES"]

#: Per figure of a multi-lane row: where its ``_rtl`` value comes from.
LANE_SOURCES = dict(
    SOURCES,
    ii_cycles="co-simulated (1e9 / msgs_per_s)",
    msgs_per_s="co-simulated (each lane's 1e9 / ii from its send cycles, summed over the "
               "lanes and capped by the attachment as the model's)",
    send_contexts_max="co-simulated (the lanes' used_max, summed)",
    recv_contexts_max="co-simulated CLOSE and open cycles + the datapath's latency and "
                      "one-way delay (model), summed over the lanes",
    pool_full_waits="co-simulated (the lanes' counters, summed)",
    opens_per_message="co-simulated (the lanes' counters, summed)",
    wait_p99_cycles="co-simulated (the lanes' send cycles, all lanes' waits)",
    endpoint_state_bits="context state co-simulated + the datapath's state of every "
                        "lane (model)",
    wire_bytes="co-simulated ACK requests and CLOSEs + the frames' sizes (model)",
    context_state_bits="co-simulated (the lanes' contexts at their most x their bits)",
    latency_cycles="model (the engine's datapath at 1 QP; RTL in the one-lane point)",
    completion_cycles="model (the engine's datapath at 1 QP; RTL in the one-lane point)",
    host_bytes="model (the engine's datapath at 1 QP; RTL in the one-lane point)",
    datapath_state_bits="model (the engine's datapath at 1 QP per lane; RTL in the "
                        "one lane)",
)


def run_lanes_point(sim, peers=4096, fabric="pod", popularity="round_robin", lanes=2,
                    messages=2000, msg_bytes=128, seed=1, test_id="lanes", log=print,
                    **knobs):
    """Co-simulate the ``lanes`` lanes of the point; return its row (module docstring).
    ``ValueError`` names a bad option before anything is built."""
    from analysis.ephemeral.flow import max_overlap
    from analysis.load.traffic import qp_sequence
    from rtl.tops.ephemeral_lanes_top import EphemeralLanesTop
    from spec.fabric_profiles import one_way
    from tb.ephemeral.point import attachment_cap, datapath_row, lane_shares, model_point

    k = check_sim_point(peers, fabric, popularity, messages, msg_bytes, knobs, lanes)
    log(f"[sim] ephemeral: the model's point at {lanes} lanes (the datapath from the "
        f"engine's model at 1 QP, a pool twin per lane) ...")
    row = model_point(peers, fabric, popularity, lanes=lanes, messages=messages, seed=seed,
                      msg_bytes=msg_bytes, **k)
    dp = datapath_row(fabric, "pcie", msg_bytes)
    params = sender_params(dp, k, popularity=popularity, peers=peers, messages=messages,
                           seed=seed, lanes=lanes)
    ii, completion, slots = params["ii"], params["completion"], params["ack_slots"]
    latency, hop = int(dp["latency_cycles_model"]), one_way(fabric)
    shares = lane_shares(qp_sequence(popularity, peers, messages, seed), peers, lanes)
    depth = max(1024, 1 << (max(len(s) for s in shares) - 1).bit_length())
    log(f"[sim] ephemeral: co-simulating {lanes} senders side by side, {messages} messages "
        f"split d % {lanes} (a pool of {k['pool_entries']} each, ii {ii}, ACKs "
        f"{completion} cycles after their request) on {sim} ...")
    top = EphemeralLanesTop(lanes, k["pool_entries"], slots, depth)
    name = f"ephemeral_lanes_{lanes}_{k['pool_entries']}_{slots}_{depth}"
    res, failure = cosim_result(top, name, "tb.cocotb_ephemeral_lanes",
                                "ephemeral_lanes.json", sim, test_id, params)
    rates, waits, recv_max, used_max, asks, closes = [], [], 0, 0, 0, 0
    opens = full_waits = 0
    for lane, dests in zip(res["lanes"], shares, strict=True):
        cycles, lane_waits, recv = lane_events(lane["sends"], lane["closes"], dests, ii,
                                               latency, hop)
        rates.append(1e9 / steady_ii(cycles) if len(cycles) > 1 else 0.0)
        waits += lane_waits
        recv_max += max_overlap(recv) if recv else 0
        c = lane["counters"]
        used_max, opens, full_waits = (used_max + c["used_max"], opens + c["opens"],
                                       full_waits + c["full_waits"])
        asks += sum(1 for s in lane["sends"] if s[2])
        closes += len(lane["closes"])
    rate = min(sum(rates), attachment_cap(dp)) if sum(rates) else None
    data_wire, ack_wire = _wire_bytes(msg_bytes)
    send_bits, recv_bits = used_max * send_context_bits(), recv_max * recv_context_bits()
    waits.sort()
    figures = {
        "ii_cycles": 1e9 / rate if rate else None, "msgs_per_s": rate,
        "send_contexts_max": used_max, "recv_contexts_max": recv_max,
        "pool_full_waits": full_waits, "opens_per_message": opens / messages,
        "wait_p99_cycles": waits[min(len(waits) - 1, (99 * len(waits)) // 100)],
        "wire_bytes": data_wire + (asks + closes) * ack_wire / messages,
        "context_state_bits": send_bits + recv_bits,
        "endpoint_state_bits": row["datapath_state_bits_model"] + send_bits + recv_bits,
    }
    row.update({f"{key}_rtl": v for key, v in figures.items()})
    row["lane_msgs_per_s_rtl"] = rates
    row["limit_rtl"] = "host interface" if sum(rates) > attachment_cap(dp) else "lanes"
    row["mismatches"] = res["mismatches"] + (failure is not None and not res["mismatches"])
    row["sources"] = LANE_SOURCES
    row["ack_slots"] = slots
    return row
