"""One measurement point of a design, run on the cycle-exact golden models (no RTL).

:func:`cycle_point` plays ``messages`` back-to-back messages of ``msg_bytes`` bytes on
the cycle-level model of a design and reduces them to the metrics of SPEC.md exactly as
the co-simulation reduces the model side (:mod:`tb.nic.cocotb_nic`,
:mod:`tb.rdma.cocotb_rdma`). :mod:`analysis.fastpath` computes the same dict without
stepping cycles; both share the parameter checks of :func:`resolve`.

Designs and their knobs (every knob is optional unless marked required):

``"nic"`` (:class:`pymodel.nic.system.NicSystemModel`)
    ``framing`` (required): ``"compact"`` or ``"l2"``. ``peers``: destination nodes,
    1 to 254 (default 1; the switch has ``peers + 1`` nodes). Node 0 sends store ``k``
    to node ``1 + k % peers`` at
    byte address ``(k * msg_bytes) % (window - window % msg_bytes)`` rounded down to the
    width: the ``pair`` scenario of :mod:`analysis.scenarios.nic` (the headline) for
    ``peers=1``, its ``fanout`` scenario otherwise (``peers`` as in the results rows
    and :func:`tb.nic.headline.run_point`). Top
    parameters (defaults :data:`spec.nic.HEADLINE_TOP`):
    ``attachment`` (:data:`spec.nic.ATTACHMENTS`, default ``"integrated"``): ``"pcie"``
    puts node 0's stores through a PCIe host interface as posted writes of at most
    256 bytes (each one message, as :func:`tb.nic.headline.run_point` counts them) and
    the receivers' writes out as DMA writes; it needs width 64, mem_words at most 2048
    and peers at most 15, and the row gains ``host_bytes``, ``host_tlps``, ``host_util``.
    ``width`` (8, 16, 32, 64 bytes), ``link_latency`` (1..1024 cycles), ``mem_words``
    (2..2**20; the window is ``mem_words * width`` bytes), ``max_payload`` (largest
    frame payload, a multiple of ``width`` from ``width`` to 8191; longer stores are
    segmented), ``credits`` (each sender's credits, the switch's ingress beats, 1 to
    65536; default :func:`spec.fabric_profiles.nic_top_credits` of the link, which
    keeps line rate: fewer show a sender stalled by its credits).
    ``msg_bytes``: 1 to min(8191, window).

``"rdma"`` (:func:`analysis.rdma.point.rdma_point`, on :func:`pymodel.rdma.system.simulate`)
    Every field of :class:`spec.design_point.RdmaPoint` the model takes
    (:data:`pymodel.rdma.point_fields.MODEL_FIELDS`: ``qps``, ``cache_entries``,
    ``host``, ``header``, ``mrs``, the engines' build fields, ...), with
    the point's default and checked by the point's own rule (``make sim --help`` words
    each), except ``link_latency`` (default 6, the top's) and ``rung`` (a rung of
    :data:`spec.rdma_engine.LADDER`, default ``"pipelined"``); any knob of
    :data:`spec.rdma_engine.RUNG_KNOBS` (``ring_every``, ``bf``, ``inline``,
    ``signal_every``, ``ack_every``, ``ack_frames``, ``serial``) overrides the rung.
    The model's own: ``pmtu_log2`` (8..12, default 12), ``latency_messages`` (messages
    of the one-at-a-time run, default 16), ``windows`` (the requester's window slots,
    :data:`spec.rdma_engine.REQUESTER_DEFAULTS`: 0 pins a QP's context until its ACKs,
    or a power of two from 256 to 4096; default 4096; a cache of more than one way per
    set needs ``windows`` > 0), ``popularity`` (the QP of each message of both runs:
    ``round_robin``, the default, or ``uniform`` or ``zipf`` 0.99 as the NIC's
    destinations, :func:`analysis.scenarios.rdma.qp_order`). The point is
    two runs (:mod:`analysis.rdma.point`): the rate and costs with the messages back to
    back after a warm-up message, the latency and completion one message at a time.
    ``msg_bytes``: 1 to 65536; the scenario must fit node A's host memory.

The returned dict (all numbers exact integers where whole, floats otherwise):

``latency_cycles``
    median over messages of (last payload byte written in the remote memory - request
    accepted: the first command beat of the store, or the doorbell write).
``completion_cycles``
    median of (sender learns it is done - accepted): the credit of the store's last
    wire beat back at the sender (NIC), the CQE write (RDMA).
``ii_cycles``
    steady-state cycles per message at the sender, a throughput (the middle half of the
    back-to-back run, :func:`pymodel.throughput.steady_ii`), for both designs over the
    messages' first wire beats: the NIC's stores' first beats on the sender's uplink
    (:func:`pymodel.nic.frames.wire_starts`; 0 for one message), the RDMA engine's
    messages'.
``wire_bytes``
    bytes on the wire per message with preamble+SFD and IFG, both directions (NIC: the
    median over stores of its frames' bytes; RDMA: the total divided by ``messages``).
``ctrl_ops``
    dict of control actions per message (:data:`spec.metrics.CTRL_KINDS`): the
    NIC has only ``credit_updates`` (median wire beats per store); the RDMA counts are
    totals divided by ``messages``, ``credit_updates`` 0.
``ctrl_bytes``
    host-interface bytes of those actions per message (0 for the NIC).
``host_bytes``, ``host_tlps``, ``host_util``
    RDMA and the NIC's ``pcie`` attachment: see :data:`spec.metrics.METRICS` (None for
    the ``integrated`` NIC).
``inflight_bits``
    see :data:`spec.metrics.METRICS`.
``messages``, ``cycles``
    the message count; the cycles simulated: for the NIC the model's whole run
    (drain included), for the RDMA engine the cycle after the last CQE write.

:func:`cycle_run` also returns the per-message cycles behind the medians. Cost: the
cycle models step every cycle in pure Python (a few hundred RDMA messages or a few
thousand small NIC stores per second); for sweeps use :mod:`analysis.fastpath`.
"""


import numpy as np

from analysis.scenarios.nic import build_scenario
from pymodel.fcs import phy_bytes
from pymodel.host.metrics import host_bytes, host_tlps, host_util
from pymodel.inflight import peak_in_flight
from pymodel.nic.frames import wire_starts
from pymodel.nic.system import NicSystemModel
from pymodel.rdma.point_fields import MODEL_FIELDS, check_fields, model_defaults
from pymodel.throughput import steady_ii
from spec.fabric_profiles import nic_top_credits
from spec.formats.nic import MAX_LENGTH
from spec.formats.packet import SUPPORTED_WIDTHS
from spec.load import POPULARITY
from spec.metrics import CTRL_KINDS, METRICS
from spec.nic import ATTACHMENTS, HEADLINE_TOP, PCIE_WORD_BITS
from spec.rdma_engine import (
    REQUESTER_DEFAULTS,
    RUNG_KNOBS,
    TOP_DEFAULTS,
    check_ways_windows,
)

__all__ = ["cycle_point", "cycle_run", "resolve", "normalise", "whole", "nic_stores",
           "DESIGNS", "NIC_DEFAULTS", "RDMA_DEFAULTS", "METRIC_KEYS", "MESSAGE_KEYS"]

DESIGNS = ("nic", "rdma")
#: Keys of every point dict, in order: the metrics, then the run's size.
METRIC_KEYS = METRICS + ("messages", "cycles")

#: Per-message arrays of :func:`cycle_run` and :func:`analysis.fastpath.fast_run`.
MESSAGE_KEYS = ("accept", "remote_write", "completion", "wire_bytes")

NIC_DEFAULTS = {"framing": None, "peers": 1, "attachment": "integrated", "credits": None,
                **{k: HEADLINE_TOP[k] for k in ("width", "link_latency", "mem_words",
                                                "max_payload")}}
#: The RDMA point's knobs: the design point's fields the model takes, at the point's
#: defaults (the model's link latency and rung its own), and the model's own knobs.
RDMA_DEFAULTS = {**model_defaults(link_latency=TOP_DEFAULTS["link_latency"],
                                  rung="pipelined"),
                 "pmtu_log2": 12, "latency_messages": 16, "popularity": "round_robin",
                 "windows": REQUESTER_DEFAULTS["windows"], **dict.fromkeys(RUNG_KNOBS)}
#: Largest RDMA message this runner accepts (bytes).
RDMA_MAX_BYTES = 1 << 16


def _int(name, value, low, high, power_of_two=False):
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}")
    if power_of_two and value & (value - 1):
        raise ValueError(f"{name} must be a power of two, not {value!r}")
    return value


def resolve(design, msg_bytes, messages, knobs):
    """Check a point's parameters; return ``(design, params)`` with every knob filled in.

    Raises ``ValueError`` naming the first bad parameter (unknown design or knob, value
    out of range).
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, not {design!r}")
    _int("messages", messages, 1, 1 << 40)
    defaults = NIC_DEFAULTS if design == "nic" else RDMA_DEFAULTS
    unknown = sorted(set(knobs) - set(defaults))
    if unknown:
        raise ValueError(f"unknown knob(s) {unknown} for design {design!r}; "
                         f"known: {sorted(defaults)}")
    p = dict(defaults, **knobs)
    if design == "nic":
        if p["framing"] not in ("compact", "l2"):
            raise ValueError(f"framing must be 'compact' or 'l2' (required for the NIC), "
                             f"not {p['framing']!r}")
        _int("peers", p["peers"], 1, 254)
        if p["width"] not in SUPPORTED_WIDTHS or isinstance(p["width"], bool):
            raise ValueError(f"width must be one of {SUPPORTED_WIDTHS}, not {p['width']!r}")
        _int("link_latency", p["link_latency"], 1, 1024)
        _int("mem_words", p["mem_words"], 2, 1 << 20)
        _int("max_payload", p["max_payload"], p["width"], MAX_LENGTH)
        if p["max_payload"] % p["width"]:
            raise ValueError(f"max_payload must be a multiple of the width ({p['width']}), "
                             f"not {p['max_payload']}")
        _int("msg_bytes", msg_bytes, 1, min(MAX_LENGTH, p["mem_words"] * p["width"]))
        if p["attachment"] not in ATTACHMENTS:
            raise ValueError(f"attachment must be one of {list(ATTACHMENTS)}, "
                             f"not {p['attachment']!r}")
        if p["attachment"] == "pcie":
            # The register offset of a host write names the node (4 bits) and the
            # word (spec.nic.pcie_mmio_addr); the host interface moves 64-byte words.
            if p["width"] != 64:
                raise ValueError(f"width must be 64 with attachment 'pcie', "
                                 f"not {p['width']!r}")
            _int("mem_words (attachment 'pcie')", p["mem_words"], 2, 1 << PCIE_WORD_BITS)
            _int("peers (attachment 'pcie')", p["peers"], 1, 15)
        if p["credits"] is None:
            p["credits"] = nic_top_credits("board", p["width"], p["max_payload"],
                                           link_latency=p["link_latency"])
        _int("credits", p["credits"], 1, 1 << 16)
    else:
        check_fields({n: p[n] for n in MODEL_FIELDS})   # each by the point's own rule
        _int("pmtu_log2", p["pmtu_log2"], 8, 12)
        _int("latency_messages", p["latency_messages"], 1, 1024)
        # 0, or a power of two from the caches' capacity (TOP_DEFAULTS) to 4096.
        if _int("windows", p["windows"], 0, 4096):
            _int("windows", p["windows"], TOP_DEFAULTS["cache_entries"], 4096,
                 power_of_two=True)
        check_ways_windows(p)
        _int("msg_bytes", msg_bytes, 1, RDMA_MAX_BYTES)
        if p["popularity"] not in POPULARITY:
            raise ValueError(f"popularity must be one of {POPULARITY}, "
                             f"not {p['popularity']!r}")
        for name in RUNG_KNOBS:
            if p[name] is not None:
                _int(name, p[name], 0, 255 if name != "ack_frames" else 65535)
    return design, p


def whole(value):
    """``value`` as an int when it is whole, else as a float; ``None`` stays ``None``."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else float(value)


def _median(values):
    """The median as :func:`statistics.median` gives it (mean of the middle pair)."""
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def nic_stores(msg_bytes, messages, peers, width, window, max_payload, seed=1):
    """The stores node 0 sends: the ``pair`` scenario of
    :func:`analysis.scenarios.nic.build_scenario` for ``peers=1``, its ``fanout`` with
    ``peers`` destinations otherwise (as the co-simulation runs them)."""
    kind = "pair" if peers == 1 else "fanout"
    stores, _, _ = build_scenario(kind, nodes=peers + 1, width=width, window=window,
                                  max_payload=max_payload, seed=seed, msg_bytes=msg_bytes,
                                  messages=messages, peers=peers)
    return stores[0]


def _nic(msg_bytes, messages, p):
    w = p["width"]
    nodes = p["peers"] + 1
    pcie = p["attachment"] == "pcie"
    model = NicSystemModel(w, p["framing"], nodes, p["link_latency"], p["mem_words"],
                           p["max_payload"], p["credits"], attachment=p["attachment"])
    stores = nic_stores(msg_bytes, messages, p["peers"], w, p["mem_words"] * w,
                        p["max_payload"])
    if pcie:                     # the host writes each store as posted writes (MPS)
        stores = [t for s in stores for t in s.host_writes()]
    res = model.run({0: stores}, list(range(nodes)))
    rows = [(s["accept"], s["remote_write"], s["completion"],
             sum(phy_bytes(f) for f in s["frames"]), s["wire_beats"])
            for s in res["stores"]]
    if res["credit_errors"] or any(None in r for r in rows):
        raise RuntimeError("NIC model: a store was lost or a credit counter overflowed")
    accept = [r[0] for r in rows]
    ctrl = dict.fromkeys(CTRL_KINDS, 0)
    ctrl["credit_updates"] = whole(_median([r[4] for r in rows]))
    # ii at the stores' first wire beats, where the engine's is taken.
    ii = steady_ii(wire_starts(res["tx"][0], stores, w, p["framing"], p["max_payload"])) or 0
    host = {"host_bytes": None, "host_tlps": None, "host_util": None}
    if pcie:        # every node's host interface, per message (tb/nic/cocotb_nic.py)
        his, n = list(res["host"].values()), len(rows)
        host = {"host_bytes": host_bytes(*his) / n,
                "host_tlps": {k: v / n for k, v in host_tlps(*his).items()},
                "host_util": host_util(his, n, ii)}
    point = {"latency_cycles": _median([r[1] - r[0] for r in rows]),
             "completion_cycles": _median([r[2] - r[0] for r in rows]),
             "ii_cycles": ii, "wire_bytes": _median([r[3] for r in rows]),
             "ctrl_ops": ctrl, "ctrl_bytes": 0, **host,
             "inflight_bits": 8 * w * peak_in_flight(accept, [r[2] for r in rows],
                                                     [r[4] for r in rows]),
             "messages": len(rows), "cycles": res["cycles"]}
    cols = list(zip(*rows, strict=True))
    return point, {"accept": cols[0], "remote_write": cols[1], "completion": cols[2],
                   "wire_bytes": cols[3]}


def _rdma(msg_bytes, messages, p):
    from analysis.rdma.point import rdma_point

    knobs = {k: p[k] for k in RUNG_KNOBS if p[k] is not None}
    try:
        row, per = rdma_point(msg_bytes, messages, knobs=knobs, pmtu_log2=p["pmtu_log2"],
                              latency_messages=p["latency_messages"], per_message=True,
                              windows=p["windows"], popularity=p["popularity"],
                              **{n: p[n] for n in MODEL_FIELDS})
    except ValueError as exc:            # the verbs heap: the scenario does not fit
        raise ValueError(f"messages ({messages}) x msg_bytes ({msg_bytes}): {exc}") from exc
    point = {k: row[k] for k in METRICS}
    point["ctrl_ops"] = dict(point["ctrl_ops"])
    point["messages"], point["cycles"] = messages, per["cycles"]
    return point, per


def normalise(point):
    """The point with every number passed through :func:`whole` and keys in order."""
    out = {}
    for k in METRIC_KEYS:
        v = point.get(k)
        if isinstance(v, dict):
            out[k] = {kind: whole(x) for kind, x in v.items()}
        else:
            out[k] = whole(v)
    out["ctrl_ops"] = {k: whole(point["ctrl_ops"][k]) for k in CTRL_KINDS}
    return {k: out[k] for k in METRIC_KEYS}


def cycle_run(design, *, msg_bytes, messages, **knobs):
    """Run one point on the cycle-exact model; return ``(point, per_message)``: the
    metrics dict (module doc) and a dict of int64 numpy arrays, one value per message
    in order: ``accept``, ``remote_write``, ``completion`` (absolute cycles) and
    ``wire_bytes`` (bytes of the message's frames on the wire, both directions, with
    preamble+SFD and IFG).

    ``design`` is ``"nic"`` or ``"rdma"``; ``knobs`` as listed in the module doc.
    Raises ``ValueError`` for a bad parameter, ``RuntimeError`` if the model loses a
    message (it should not for these scenarios).
    """
    design, p = resolve(design, msg_bytes, messages, knobs)
    point, per = (_nic if design == "nic" else _rdma)(msg_bytes, messages, p)
    return normalise(point), {k: np.asarray(per[k], dtype=np.int64) for k in MESSAGE_KEYS}


def cycle_point(design, *, msg_bytes, messages, **knobs):
    """The metrics dict of :func:`cycle_run` (same arguments and errors)."""
    return cycle_run(design, msg_bytes=msg_bytes, messages=messages, **knobs)[0]
