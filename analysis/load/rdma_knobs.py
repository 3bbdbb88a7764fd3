"""The knobs of an open-loop RDMA load point (:mod:`analysis.load.rdma`): the issuers a
point may name, the defaults, their checks and the rung each issuer posts with
(:func:`best_rung`; the rules are in :mod:`analysis.load.rdma`'s module doc)."""

from analysis.rdma.point import knobs_of
from analysis.workloads.carriers import ISSUERS
from pymodel.rdma.config import Config
from pymodel.rdma.point_fields import check_fields, model_defaults
from pymodel.rdma.verbs import inline_limit
from spec.load import LOAD_DEFAULTS, check_count, check_skew
from spec.rdma_engine import LADDER, TOP_DEFAULTS
from spec.rdma_stages import ACK_FRAMES_BITS, ACK_MSGS_BITS

ACK_MSGS_MASK, ACK_FRAMES_MASK = (1 << ACK_MSGS_BITS) - 1, (1 << ACK_FRAMES_BITS) - 1

#: The issuer profiles a load point may name (``cpu_framework`` is a framework's cost,
#: used by the inference carriers, not an issuer of single WRITEs).
LOAD_ISSUERS = ("none", "cpu", "gpu", "controller")
#: Issuers that fill the WQEs of one doorbell batch in parallel (one per lane of a warp,
#: then one doorbell): NVSHMEM's IBGDA transport, whose point is "a highly parallel
#: submission of requests to the network interface" (NVSHMEM best-practice guide,
#: "Tuning the queue-pair Type and Configuration for IBGDA"). A batch of at most 16
#: WQEs fits in one warp of 32 lanes.
PARALLEL_ISSUERS = ("gpu",)
#: Issuers that can write WQEs by MMIO with inline data (BlueFlame): not the GPU,
#: whose WQEs are in its own memory (IBGDA).
BLUEFLAME_ISSUERS = ("none", "cpu", "controller")
#: Relative agreement of two successive saturation estimates (the run doubled) that
#: :func:`steady_saturation` takes as stable.
SATURATION_TOLERANCE = 0.01

#: The design point's fields a load point takes (:class:`spec.design_point.RdmaPoint`;
#: the load's scenario builds the engines' configuration from them), checked by the
#: point's own rule; ``rung`` is the load's own (``"best"``: :func:`best_rung`).
LOAD_POINT_FIELDS = ("qps", "cache_entries", "host", "link_latency", "cache_ways",
                     "miss_queue", "qpc_bytes")
#: The load point's fields that a co-simulated load run takes from the model's
#: configuration of its top: all of them (the build's too: the warm-up that sets the
#: arrivals' start runs on the engine the top is, as a model-only point's does).
LOAD_FROM_CONFIG = tuple(Config.fields_of(dict.fromkeys(LOAD_POINT_FIELDS)))
#: Knobs of a load point and their defaults (the point's fields at the point's defaults,
#: the link latency the top's).
RDMA_LOAD_DEFAULTS = {**model_defaults(LOAD_POINT_FIELDS,
                                       link_latency=TOP_DEFAULTS["link_latency"]),
                      "pmtu_log2": 12, "issuer": "none", "popularity": "round_robin",
                      "skew": LOAD_DEFAULTS["skew"], "working_set": None, "burst": 1,
                      "ack_every": None, "ack_frames": None, "rung": "best"}


#: The knobs that shape the traffic (the rest are the top's and the engine's).
LOAD_KNOBS = ("qps", "issuer", "popularity", "skew", "working_set", "burst", "pmtu_log2",
              "rung")


def best_rung(issuer, msg_bytes):
    """The name of the best :data:`spec.rdma_engine.LADDER` rung ``issuer`` can use for
    WRITEs of ``msg_bytes`` (module doc): the last rung for an issuer that writes WQEs
    by MMIO and a message carried inline (at most
    :func:`pymodel.rdma.verbs.inline_limit` bytes), else ``+doorbell batching 16``."""
    if issuer not in LOAD_ISSUERS:
        raise ValueError(f"issuer must be one of {LOAD_ISSUERS}, not {issuer!r}")
    if issuer in BLUEFLAME_ISSUERS and msg_bytes <= inline_limit():
        return LADDER[-1][0]
    return "+doorbell batching 16"


def rung_knobs(p, msg_bytes):
    """``(rung name, knobs)`` of checked load knobs ``p``: the rung's
    :data:`spec.rdma_engine.RUNG_KNOBS`, with ``ack_every``/``ack_frames`` of ``p`` on top
    where given (not None)."""
    name = best_rung(p["issuer"], msg_bytes) if p["rung"] == "best" else p["rung"]
    k = knobs_of(name)
    for x in ("ack_every", "ack_frames"):
        if p[x] is not None:
            k[x] = p[x]
    return name, k


def check_load_knobs(msg_bytes, messages, k):
    """Every knob of ``k`` checked (``ValueError`` naming the first bad one) and the
    defaults filled in."""
    unknown = sorted(set(k) - set(RDMA_LOAD_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown RDMA load knob(s) {unknown}; known: "
                         f"{sorted(RDMA_LOAD_DEFAULTS)}")
    p = dict(RDMA_LOAD_DEFAULTS, **k)
    check_count("messages", messages, 1, 1 << 20)
    check_count("msg_bytes", msg_bytes, 1, 1 << 16)
    check_fields({n: p[n] for n in LOAD_POINT_FIELDS})   # by the point's own rules
    check_count("pmtu_log2", p["pmtu_log2"], 8, 12)
    check_count("burst", p["burst"], 1, 1 << 20)
    check_skew(p["skew"])
    if p["working_set"] is not None:
        check_count("working_set", p["working_set"], 1, p["qps"])
    if p["issuer"] not in LOAD_ISSUERS:
        raise ValueError(f"issuer must be one of {LOAD_ISSUERS}, not {p['issuer']!r}")
    names = [n for n, _ in LADDER]
    if p["rung"] != "best" and p["rung"] not in names:
        raise ValueError(f"rung must be 'best' or one of {names}, not {p['rung']!r}")
    _, k = rung_knobs(p, msg_bytes)
    if k["serial"]:
        raise ValueError("rung 'sequential' is not a load rung (one message in flight "
                         "at a time): use 'pipelined' or later")
    if k["inline"] and msg_bytes > inline_limit():
        raise ValueError(f"rung {p['rung']!r} carries the payload inline: msg_bytes must "
                         f"be at most {inline_limit()}, not {msg_bytes}")
    if k["bf"] and p["issuer"] not in BLUEFLAME_ISSUERS:
        raise ValueError(f"rung {p['rung']!r} writes WQEs by MMIO, which issuer "
                         f"{p['issuer']!r} does not (its WQEs are in its own memory)")
    for x in ("ack_every", "ack_frames"):
        if p[x] is not None:
            check_count(x, p[x], 0, ACK_MSGS_MASK if x == "ack_every" else ACK_FRAMES_MASK)
    return p


def _batch(p, msg_bytes):
    """Messages per announcement of a saturated issuer: 1 with WQEs by MMIO, else the
    doorbell batch (:func:`build_load`)."""
    _, k = rung_knobs(p, msg_bytes)
    return 1 if k["bf"] else max(ISSUERS[p["issuer"]].doorbell_batch, k["ring_every"])
