"""Open-loop traffic on the NIC: seeded arrivals into the golden model of NicTop.

Each sender of ``pattern`` (:func:`analysis.load.traffic.flows`) gets ``messages`` stores
of ``msg_bytes``; store ``k`` of sender ``s`` *arrives* at cycle ``arrival[k]``
(:func:`analysis.load.traffic.arrival_cycles`, seeded per sender) and is given to the
model as its ``release`` (:class:`pymodel.nic.system.Store`): its first command beat is
offered from that cycle on, exactly as the top's timed ``cmd<p>`` player offers it, so
the model and the co-simulation see the same arrivals to the cycle. A store that
arrives while its sender is still busy with earlier ones waits (the player is in
order): that wait is the queueing at the sender.

Latency under load counts **from arrival**, not from accept: ``latency`` = remote write
(the cycle the store's last payload byte is written at its destination) minus arrival,
``completion`` = the credit of its last wire beat back at the sender minus arrival. Both
include the queueing at the sender (``accept - arrival``) and at the switch's output.
SPEC.md's ``latency_cycles`` of a back-to-back run counts from accept; with every
arrival at cycle 0 the two differ by that queueing only.

The saturated rate (``service_cycles``, the cycles per store of one sender that is
never idle): the store's **wire beats** (:func:`spec.formats.nic.frame_beats`, summed
over its segments). The uplink carries one beat a cycle and the framer leaves no bubble
between frames, so one sender alone on its link sends a store every ``wire beats``
cycles as long as its credits last (the credits of
:func:`spec.fabric_profiles.nic_top_credits` cover the credit round trip of the link and
the longest frame).
It is taken from the format rather than from a back-to-back model run so that the load
a run offers does not depend on the code under test; the unit tests check that a
back-to-back model run of the same point sends exactly one store per ``service_cycles``.
With ``attachment="pcie"`` (each store one host posted write: width 64, at most 256
bytes) the host interface's down direction may be the limit instead, and there the
saturated rate is taken from a back-to-back model run (:func:`pcie_service_cycles`).
``load`` is then the fraction of that rate each sender offers; several senders to one
destination (incast) can offer the destination more than its downlink carries.

Addresses: each destination's memory (``mem_words * width`` bytes) is cut into
``nodes`` equal regions, region ``s`` for sender ``s``; a sender's stores to one
destination use the slots of its region (each ``msg_bytes`` rounded up to the width) in
turn, wrapping when there are more stores than slots. Regions of different senders are
disjoint, and a sender's stores to one destination take one path in order, so the final
memories follow from the stores alone (:func:`load_intent`).

Bad parameters raise ``ValueError`` naming them (:mod:`spec.load` for the traffic ones).
"""

import random

import numpy as np

from analysis.load.traffic import arrival_cycles, distribution, flows, senders
from pymodel.nic.system import NicSystemModel, Store
from spec.fabric_profiles import nic_top_credits
from spec.formats.nic import Framing, frame_beats
from spec.host import PROFILES
from spec.load import check_count, check_load
from spec.nic import HEADLINE_TOP, PCIE_WORD_BITS, check_attachment

__all__ = ["LOAD_TOP", "LoadPlan", "load_plan", "run_plan", "nic_load_run", "load_intent",
           "load_row", "service_cycles", "pcie_service_cycles", "MESSAGE_FIELDS"]

#: The top knobs of a load run and their defaults (the headline top's, integrated
#: attachment; ``nodes`` is a parameter of its own).
LOAD_TOP = {**{k: v for k, v in HEADLINE_TOP.items() if k != "nodes"},
            "attachment": "integrated"}

#: The per-message arrays :func:`run_plan` returns, in this order.
MESSAGE_FIELDS = ("sender", "dst", "arrival", "accept", "remote_write", "completion")

#: The largest store (the 13-bit length field of the store header).
MAX_STORE = 8191


def service_cycles(width, framing, msg_bytes, max_payload):
    """Cycles per store of one saturated sender: the wire beats of its frames
    (segments of at most ``max_payload`` bytes, FCS and L2 padding included)."""
    full, rest = divmod(msg_bytes, max_payload)
    beats = full * frame_beats(width, framing, max_payload)
    return beats + (frame_beats(width, framing, rest) if rest else 0)


def pcie_service_cycles(framing, msg_bytes, link_latency, mem_words, max_payload,
                        stores=16):
    """Cycles per store of one saturated sender behind the ``pcie`` attachment: the gap
    between the last two accepts of ``stores`` back-to-back stores of ``msg_bytes`` from
    node 0 to node 1 on the model. Here the host interface's posted write (payload plus
    its TLP overhead over the down direction) can be the limit rather than the wire, and
    its cost is the model's to say; the gaps must have settled to one value (else
    ``AssertionError``)."""
    m = NicSystemModel(64, framing, 2, link_latency, mem_words, max_payload,
                       nic_top_credits("board", 64, max_payload, link_latency=link_latency),
                       attachment="pcie")
    run = m.run({0: [Store(1, 0, bytes(msg_bytes)) for _ in range(stores)]}, [0, 1])
    accept = [st["accept"] for st in run["stores"]]
    gaps = [b - a for a, b in zip(accept, accept[1:], strict=False)]
    if len(set(gaps[len(gaps) // 2:])) != 1:
        raise AssertionError(f"pcie: back-to-back gaps did not settle: {gaps}")
    return gaps[-1]


class LoadPlan:
    """What one load run plays: ``stores[p]`` (the :class:`Store` list of node ``p``, each
    with its ``release``), ``node_ids``, ``top`` (the knobs, ``nodes`` included),
    ``service`` (cycles per store at saturation), ``params`` (the run's traffic
    parameters) and ``order``: ``(sender, index)`` of each message, the order of the
    per-message arrays (by sender, then arrival)."""

    def __init__(self, stores, node_ids, top, service, params, order):
        self.stores, self.node_ids, self.top = stores, node_ids, top
        self.service, self.params, self.order = service, params, order

    def model(self):
        """The :class:`NicSystemModel` of the plan's top."""
        t = self.top
        return NicSystemModel(t["width"], self.params["framing"], t["nodes"],
                              t["link_latency"], t["mem_words"], t["max_payload"],
                              nic_top_credits("board", t["width"], t["max_payload"],
                                              link_latency=t["link_latency"]),
                              attachment=t["attachment"])


def load_plan(pattern, nodes, msg_bytes, messages, load, seed, burst=1, framing="l2",
              **top):
    """The stores of a load run (see the module doc); ``messages`` per sender."""
    who = senders(pattern, nodes)                       # checks pattern and nodes
    check_count("nodes", nodes, 2, 16)                  # the RTL top's switch
    check_count("messages", messages)
    check_count("msg_bytes", msg_bytes, 1, MAX_STORE)
    load = check_load(load)
    check_count("burst", burst, 1, 1 << 20)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, not {seed!r}")
    if framing not in [f.value for f in Framing]:
        raise ValueError(f"framing must be one of {[f.value for f in Framing]}, "
                         f"not {framing!r}")
    unknown = sorted(set(top) - set(LOAD_TOP))
    if unknown:
        raise ValueError(f"unknown top knob(s) {unknown}; the knobs are {sorted(LOAD_TOP)}")
    top = dict(LOAD_TOP, **top, nodes=nodes)
    w = check_count("width", top["width"], 8, 64)
    if w not in (8, 16, 32, 64):
        raise ValueError(f"width must be 8, 16, 32 or 64, not {w!r}")
    check_count("link_latency", top["link_latency"], 1, 1 << 10)
    check_count("mem_words", top["mem_words"], 1, 1 << 24)
    mp = check_count("max_payload", top["max_payload"], w, 8184)
    if mp % w:
        raise ValueError(f"max_payload must be a multiple of the width {w}, not {mp!r}")
    pcie = check_attachment(top["attachment"]) == "pcie"
    if pcie and (w != 64 or msg_bytes > PROFILES["pcie"].max_payload
                 or top["mem_words"] > 1 << PCIE_WORD_BITS):
        raise ValueError(f"attachment 'pcie' needs width 64 (not {w}), msg_bytes at most "
                         f"{PROFILES['pcie'].max_payload} (one host write; not {msg_bytes})"
                         f" and mem_words at most {1 << PCIE_WORD_BITS} "
                         f"(not {top['mem_words']})")
    stride = -(-msg_bytes // w) * w
    region = top["mem_words"] // nodes * w              # bytes, a multiple of the width
    slots = region // stride
    if slots < 1:
        raise ValueError(f"msg_bytes {msg_bytes} does not fit a sender's region of a "
                         f"destination's memory (mem_words {top['mem_words']} x width {w} "
                         f"bytes / {nodes} nodes)")
    if pcie:
        service = pcie_service_cycles(framing, msg_bytes, top["link_latency"],
                                      top["mem_words"], mp)
    else:
        service = service_cycles(w, framing, msg_bytes, mp)
    dests = flows(pattern, nodes, messages, seed)
    rng = random.Random(f"{seed}/nic-load/payload")
    stores = {p: [] for p in range(nodes)}
    order = []
    for s in who:
        arrivals = arrival_cycles(messages, load, service, f"{seed}/nic-load/{s}", burst)
        if arrivals[-1] >= 1 << 32:
            raise ValueError("messages, load: the arrivals pass 2**32 cycles")
        used = {}
        for k, (d, t) in enumerate(zip(dests[s], arrivals, strict=True)):
            j = used.get(d, 0)
            used[d] = j + 1
            addr = s * region + (j % slots) * stride
            payload = rng.randbytes(msg_bytes)
            stores[s].append(Store(d, addr, payload, release=int(t)))
            order.append((s, k))
    params = dict(pattern=pattern, nodes=nodes, msg_bytes=msg_bytes, messages=messages,
                  load=load, seed=seed, burst=burst, framing=framing)
    return LoadPlan(stores, list(range(nodes)), top, service, params, order)


def run_plan(plan):
    """Run ``plan`` on the model. Returns ``(arrays, row, want)``: ``arrays`` maps each
    of :data:`MESSAGE_FIELDS` to a numpy int64 array (one entry per message, in
    ``plan.order``), ``row`` the load row (:func:`load_row`), ``want`` the model's
    whole result (:meth:`NicSystemModel.run`) for a co-simulation to compare with."""
    want = plan.model().run(plan.stores, plan.node_ids)
    per_store = iter(want["stores"])            # the model lists stores node by node
    got = {p: [next(per_store) for _ in plan.stores[p]] for p in range(plan.top["nodes"])}
    cols = {f: [] for f in MESSAGE_FIELDS}
    for s, k in plan.order:
        st, m = plan.stores[s][k], got[s][k]
        if m["src"] != s or m["dst"] != st.dst:
            raise AssertionError(f"model: store {k} of node {s} out of place")
        if m["remote_write"] is None or m["completion"] is None:
            raise RuntimeError(f"model: store {k} of node {s} was not delivered")
        for f, v in zip(MESSAGE_FIELDS, (s, st.dst, st.release, m["accept"],
                                         m["remote_write"], m["completion"]), strict=True):
            cols[f].append(v)
    arrays = {f: np.asarray(v, dtype=np.int64) for f, v in cols.items()}
    return arrays, load_row(plan, arrays), want


def load_row(plan, arrays):
    """The load row of a run's per-message ``arrays`` (the model's or the RTL's), with
    the keys and definitions of the RDMA load rows where they exist: the run's
    parameters and top knobs (``messages_per_sender``; ``messages`` is then the run's
    total),
    ``service_cycles``, ``offered_per_cycle`` (senders x load / service: messages
    offered per cycle by all senders), ``achieved_per_cycle`` (the rate of the remote
    writes, ``(n - 1) / (last - first)``; None for one message), ``queue_max_cycles``
    (the longest wait at a sender, accept - arrival) and the ``latency`` and
    ``completion`` distributions from arrival (every message: the NIC has no cache to
    warm)."""
    n = len(arrays["arrival"])
    rw = arrays["remote_write"]
    span = int(rw.max()) - int(rw.min())
    who = len(set(arrays["sender"].tolist()))
    params = dict(plan.params)
    params["messages_per_sender"] = params.pop("messages")
    row = {"design": "nic", **params, **{k: plan.top[k] for k in LOAD_TOP},
           "messages": n, "service_cycles": plan.service,
           "offered_per_cycle": who * plan.params["load"] / plan.service,
           "achieved_per_cycle": (n - 1) / span if n > 1 and span else None,
           "queue_max_cycles": int((arrays["accept"] - arrays["arrival"]).max())}
    row.update(distribution("latency", (rw - arrays["arrival"]).tolist()))
    row.update(distribution("completion",
                            (arrays["completion"] - arrays["arrival"]).tolist()))
    return {k: int(v) if isinstance(v, np.integer) else v for k, v in row.items()}


def nic_load_run(pattern, nodes, msg_bytes, messages, load, seed, burst=1, framing="l2",
                 **top):
    """One open-loop run on the model: ``messages`` stores of ``msg_bytes`` per sender of
    ``pattern`` on ``nodes`` nodes at offered ``load`` (a fraction of one sender's
    saturated rate, see the module doc), arrivals seeded by ``seed`` in bursts of
    ``burst``; ``top`` knobs: :data:`LOAD_TOP` (``width``, ``link_latency``,
    ``mem_words``, ``max_payload``, ``attachment``).

    Returns ``(arrays, row)``: per message (by sender, then arrival) the numpy arrays
    ``sender``, ``dst``, ``arrival``, ``accept``, ``remote_write``, ``completion``
    (cycles), and the row (:func:`load_row`): the parameters, the offered and achieved
    messages per cycle,
    and the nearest-rank distributions (:func:`analysis.load.traffic.distribution`) of
    ``latency`` = remote_write - arrival and ``completion`` = completion - arrival.
    Latency under load counts from **arrival**: the queueing at the sender is in it.
    """
    arrays, row, _ = run_plan(load_plan(pattern, nodes, msg_bytes, messages, load, seed,
                                        burst, framing, **top))
    return arrays, row


def load_intent(plan):
    """What the destinations must hold after ``plan``, from the stores alone (not the
    model): ``(memories, words)``. ``memories[p]`` is node ``p``'s final memory as
    bytes (each sender's stores applied in order; the regions of different senders are
    disjoint, so their relative order does not matter); ``words[p]`` the sorted list of
    the word addresses every store to ``p`` writes, once per store (each store lands
    once, where it was sent)."""
    t = plan.top
    w = t["width"]
    mems = {p: bytearray(t["mem_words"] * w) for p in range(t["nodes"])}
    words = {p: [] for p in range(t["nodes"])}
    for p in range(t["nodes"]):
        for s in plan.stores[p]:
            mems[s.dst][s.addr:s.addr + len(s.payload)] = s.payload
            words[s.dst] += range(s.addr // w, (s.addr + len(s.payload) + w - 1) // w)
    return {p: bytes(m) for p, m in mems.items()}, {p: sorted(v) for p, v in words.items()}
