"""Reduce one run of the RDMA top (RTL records or model predictions, same shapes) to the
metrics of SPEC.md, per message.

Timing comes from the top's stamps: the cycle the host interface took the first word of
the MMIO write that announced a message (its doorbell, or its WQE by MMIO), the cycle
the last payload word of a message reached host memory B (``written``, one per message
in order per QP) and the cycle each CQE reached host memory A (``completed``, one per
signalled message in order per QP; an unsignalled message is complete when the next CQE
of its QP is written, as the host learns it then).
"""

import statistics

from pymodel.host.metrics import host_bytes, host_tlps
from pymodel.rdma.frames import ETH_OVERHEAD
from pymodel.throughput import steady_ii
from spec.formats.roce import HOST_WORD_BITS, HOST_WORD_BYTES, OpCode
from spec.formats.scaleup import framing
from spec.rdma import DOORBELL_BYTES
from spec.rdma_engine import TOP_DEFAULTS
from spec.rdma_stages import window_record_layout

_LAST_OPCODES = (OpCode.RC_RDMA_WRITE_ONLY.value, OpCode.RC_RDMA_WRITE_LAST.value)

__all__ = ["summarize", "per_message", "inflight_bits", "RECORD_BITS", "message_starts",
           "steady_ii"]

#: Bits of one window record as the completion unit stores it: QPN, first and last PSN,
#: wr_id, SQ index, message length and signalled (185 bits), and the link to the next
#: record of its QP, (records - 1).bit_length() bits: 9 for the default pool of 512.
RECORD_BITS = window_record_layout().size + (TOP_DEFAULTS["records"] - 1).bit_length()
#: Bits the host interface keeps per outstanding read request (its due-queue entry:
#: word address, words, id, a 32-bit due cycle).
READ_BITS = 32 + 7 + 8 + 32


def per_message(messages, write_starts, stamps, written, completed, qpn_b_of):
    """``(latency, completion)`` lists, one per message, in posting order.

    ``messages``: the :class:`pymodel.rdma.verbs.Message` list; ``write_starts``: the
    index of each MMIO write's first word among the MMIO words; ``stamps``: the cycle
    each MMIO word was taken; ``written``/``completed``: ``(cycle, tag)`` lists (tag the
    responder's QPN / the requester's QPN); ``qpn_b_of``: requester QPN -> responder QPN.
    """
    wq, cq = {}, {}
    for cycle, tag in written:
        wq.setdefault(tag, []).append(cycle)
    for cycle, tag in completed:
        cq.setdefault(tag, []).append(cycle)
    lat, comp = [], []
    wpos, cpos, pend = {}, {}, {}
    for m in messages:
        accept = stamps[write_starts[m.announce]]
        b = qpn_b_of[m.qpn]
        i = wpos.get(b, 0)
        wpos[b] = i + 1
        lat.append(wq[b][i] - accept if i < len(wq.get(b, ())) else None)
        pend.setdefault(m.qpn, []).append((len(comp), accept))
        comp.append(None)
        if m.signalled:
            j = cpos.get(m.qpn, 0)
            cpos[m.qpn] = j + 1
            if j < len(cq.get(m.qpn, ())):
                for k, acc in pend[m.qpn]:
                    comp[k] = cq[m.qpn][j] - acc
            pend[m.qpn] = []
    return lat, comp


def inflight_bits(req, resp, host_a, host_b):
    """The state held in flight, from high-water marks: outstanding reads (both host
    interfaces), window records, prefetched WQE words, payload words held or reserved,
    context fills (both caches), and the responder's receive buffers."""
    return (READ_BITS * (host_a["tags_max"] + host_b["tags_max"])
            + RECORD_BITS * req["records_max"]
            + HOST_WORD_BITS * (req["wqe_words_max"] + req["payload_words_max"]
                                     + req["fills_max"] + resp.get("fills_max", 0)
                                     + resp.get("rx_beats_max", 0)))


def summarize(messages, lat, comp, wire_ab, wire_ba, req, resp, host_a, host_b,
              qpc_words=1):
    """Per-message metrics of a run of ``messages`` messages.

    ``lat``/``comp``: per-message latency and completion (:func:`per_message`);
    ``wire_ab``/``wire_ba``: the frames (bytes with FCS) on each link; the counters of
    the requester, the responder and both host interfaces. ``qpc_words``: host words
    of a QP context (a fill moves them all, a write-back one).
    """
    n = messages
    good_lat = [x for x in lat if x is not None]
    good_comp = [x for x in comp if x is not None]
    wire = sum(len(f) + ETH_OVERHEAD for f in wire_ab) \
        + sum(len(f) + ETH_OVERHEAD for f in wire_ba)
    ops = {
        "doorbells": req["doorbells"] + req["bf_writes"],
        "wqe_reads": req["wqe_reads"],
        "cqe_writes": req["cqe_writes"],
        "ctx_lookups": req["lookups"] + resp["lookups"],
        "ctx_misses": req["misses"] + resp["misses"],
        "ctx_writebacks": req["writebacks"] + resp["writebacks"],
        "acks_sent": resp["acks"], "acks_received": req["acks"],
        "credit_updates": 0,
    }
    ctrl_bytes = (DOORBELL_BYTES * req["doorbells"]
                  + HOST_WORD_BYTES * (req["bf_writes"] + req["wqes"] + req["cqe_writes"]
                                       + ops["ctx_misses"] * qpc_words
                                       + ops["ctx_writebacks"]))
    return {
        "latency_cycles": statistics.median(good_lat) if good_lat else None,
        "completion_cycles": statistics.median(good_comp) if good_comp else None,
        "wire_bytes": wire / n,
        "ctrl_ops": {k: v / n for k, v in ops.items()},
        "ctrl_bytes": ctrl_bytes / n,
        "host_bytes": host_bytes(host_a, host_b) / n,
        "host_tlps": {k: v / n for k, v in host_tlps(host_a, host_b).items()},
        "inflight_bits": inflight_bits(req, resp, host_a, host_b),
    }


def message_starts(wire_ab, header=None):
    """The first-beat cycles of the frames that end a message (WRITE ONLY or LAST), in
    sending order: when the requester sends each message. ``header``: the framing
    (``"roce"``, ``"scaleup"``); None reads it from each frame (an IPv4 EtherType at
    bytes 12-13 is RoCEv2; a scale-up frame has the BTH's P_Key 0xFFFF there)."""
    out = []
    for cycles, frame in wire_ab:
        h = header or ("roce" if frame[12:14] == b"\x08\x00" else "scaleup")
        at = framing(h).outer
        if len(frame) > at and frame[at] in _LAST_OPCODES:
            out.append(cycles[0])
    return out
