"""Open-loop traffic scenarios of the RDMA fabric (:class:`rtl.tops.rdma_fabric_top.
RdmaFabricTop` and its twin :mod:`pymodel.rdma.fabric_system`), built with the verbs
model: who sends to whom (:func:`analysis.load.traffic.flows`), when each message arrives
(:func:`analysis.load.traffic.arrival_cycles`: one doorbell per message, released at its
arrival), QPs per (sender, destination), MRs on the destinations.

Shared by the cocotb module, the tests and the model-only runner
(:mod:`analysis.rdma.fabric_point`).
"""

import dataclasses
import random

from analysis.load.traffic import arrival_cycles, flows, senders
from pymodel.fields import pack
from pymodel.rdma.req.frame_sender import frame_timing
from pymodel.rdma.verbs import QpPair, Verbs
from spec.formats.roce import PSN_BITS, QPC_LAYOUT, OpCode, QpState
from spec.load import check_count
from spec.rdma_fabric import (
    FABRIC_DEFAULTS,
    NODES_RANGE,
    QPN_STRIDE,
    node_ip,
    node_mac,
    req_qpn,
    resp_qpn,
)

__all__ = ["FabricScenario", "FabricMessage", "fabric_scenario", "message_beats",
           "service_cycles"]

_PSN_MASK = (1 << PSN_BITS) - 1

#: Context-table words reserved at word 0 of every host memory (QPNs below this).
MAX_QPN = 1 + QPN_STRIDE * QPN_STRIDE


@dataclasses.dataclass
class FabricMessage:
    """One posted WRITE: sender ``src``, destination ``dst``, QP index ``qp`` of that
    pair, its requester/responder QPNs, send-queue index, target and payload, arrival
    (the release cycle of its doorbell), ``mmio`` (index of its doorbell among the
    sender's MMIO words), ``wr_id``; ``warm``: a warm-up message (not measured)."""
    src: int
    dst: int
    qp: int
    qpn_a: int
    qpn_b: int
    sq_index: int
    raddr: int
    payload: bytes
    arrival: int
    mmio: int
    wr_id: int
    warm: bool = False


class NodeVerbs(Verbs):
    """Node ``p``'s two host functions as one :class:`Verbs`: ``mem_a`` is the
    requester's host memory (``mem_rq``), ``mem_b`` the responder's (``mem_rs``),
    ``writes`` the node's MMIO writes. :meth:`connect` links a QP of this node to a QP
    of another node with the fabric's addresses."""

    def __init__(self, node, depth, mr_entries, cq_log2, qpc_words=None):
        super().__init__(depth=depth, mr_entries=mr_entries, max_qps=MAX_QPN, cq_log2=cq_log2,
                         qpc_words=qpc_words)
        self.node = node

    def connect(self, dst, k, nodes, sq_log2, pmtu_log2, psn):
        """QP ``k`` from this node (requester QPN :func:`~spec.rdma_fabric.req_qpn`) to
        node ``dst.node`` (responder QPN :func:`~spec.rdma_fabric.resp_qpn`) on a fabric
        of ``nodes`` nodes, RTS at both ends, ``psn`` the first PSN; returns the
        :class:`QpPair`."""
        s, d = self.node, dst.node
        qpn_a, qpn_b = req_qpn(d, k, nodes), resp_qpn(s, k, nodes)
        sq_base = self._alloc_a(1 << sq_log2)
        self.put_context(self.mem_a, self.qpc_base_a, qpn_a, pack(
            QPC_LAYOUT, valid=1, state=QpState.RTS.value, pmtu_log2=pmtu_log2,
            dest_qp=qpn_b, next_psn=psn, sq_size_log2=sq_log2, sq_stride_log2=0,
            sq_base=sq_base, dmac=node_mac(d), smac=node_mac(s), dip=node_ip(d),
            sip=node_ip(s)))
        dst.put_context(dst.mem_b, dst.qpc_base_b, qpn_b, pack(
            QPC_LAYOUT, valid=1, state=QpState.RTS.value, pmtu_log2=pmtu_log2,
            dest_qp=qpn_a, expected_psn=psn, dmac=node_mac(s), smac=node_mac(d),
            dip=node_ip(s), sip=node_ip(d)))
        qp = self.qps[qpn_a] = QpPair(qpn_a, qpn_b, sq_base, sq_log2, 0)
        return qp


def message_beats(msg_bytes, pmtu_log2=12):
    """Wire beats of one WRITE of ``msg_bytes`` (its frames, ICRC and FCS included)."""
    mtu = 1 << pmtu_log2
    segs = [min(mtu, msg_bytes - k) for k in range(0, max(msg_bytes, 1), mtu)]
    if len(segs) == 1:
        ops = [OpCode.RC_RDMA_WRITE_ONLY]
    else:
        ops = ([OpCode.RC_RDMA_WRITE_FIRST] + [OpCode.RC_RDMA_WRITE_MIDDLE] * (len(segs) - 2)
               + [OpCode.RC_RDMA_WRITE_LAST])
    return sum(frame_timing(op.value, n)[0] for op, n in zip(ops, segs, strict=True))


def service_cycles(pattern, nodes, msg_bytes, pmtu_log2=12):
    """The cycles per message of one sender at which the busiest destination's downlink
    would be full of data frames: the message's beats times the senders per destination
    (``nodes - 1`` for incast, 1 otherwise: ``all_to_all`` on average). ``load`` is a
    fraction of this rate."""
    fan_in = len(senders(pattern, nodes)) if pattern == "incast" else 1
    return message_beats(msg_bytes, pmtu_log2) * fan_in


@dataclasses.dataclass
class FabricScenario:
    """Every node's verbs (:class:`NodeVerbs`) and every message in posting order."""
    verbs: list
    messages: list
    cq_log2: int

    def images(self):
        """Per node: ``mem_rq``, ``mem_rs``, ``mr_table``, ``mmio``, ``release`` (the
        shape :func:`pymodel.rdma.fabric_system.simulate_fabric` takes)."""
        out = []
        for v in self.verbs:
            items, release = v.mmio_items()
            out.append(dict(mem_rq=dict(v.mem_a), mem_rs=dict(v.mem_b),
                            mr_table=list(v.mr_table), mmio=items, release=release))
        return out

    @property
    def cq_base(self):
        return self.verbs[0].cq_base

    def expected_mr_bytes(self, node):
        """``{MR base: bytes}`` node ``node``'s MRs must hold once every WRITE to it has
        landed exactly once (zeros elsewhere), from the posted messages only."""
        out = {}
        for base, nbytes in self.verbs[node].mrs:
            buf = bytearray(nbytes)
            for m in self.messages:
                if m.dst == node and base <= m.raddr < base + nbytes:
                    buf[m.raddr - base:m.raddr - base + len(m.payload)] = m.payload
            out[base] = bytes(buf)
        return out


def fabric_scenario(pattern, nodes, messages, msg_bytes, load, seed=1, qps=1,
                    pmtu_log2=12, depth=FABRIC_DEFAULTS["depth"],
                    mr_entries=FABRIC_DEFAULTS["mr_entries"], warmup=0, qpc_words=None):
    """``messages`` RDMA WRITEs of ``msg_bytes`` per sender of ``pattern`` over
    ``nodes`` nodes, each signalled and announced by its own doorbell released at its
    arrival (open loop, :func:`arrival_cycles` at ``load`` of :func:`service_cycles`,
    seeded per sender); ``qps`` QPs per (sender, destination) pair, used round robin by
    that pair's messages; one MR per (sender, destination) on the destination, every
    message with its own target bytes. ``warmup`` (cycles; 0: none): first one message
    per QP, all released at cycle 0 (``warm``: they fill the context caches at both
    ends), then the measured messages with arrivals after cycle ``warmup``. Returns a
    :class:`FabricScenario`. ``qpc_words``: host words of a QP context (None: the
    default, :class:`~pymodel.rdma.verbs.Verbs`).
    """
    lo, hi = NODES_RANGE
    check_count("nodes", nodes, lo, hi)
    check_count("messages", messages)
    check_count("msg_bytes", msg_bytes, 1, 1 << 20)
    check_count("qps", qps, 1, QPN_STRIDE)
    dests = flows(pattern, nodes, messages, seed)
    rng = random.Random(seed)
    per_pair = {}
    warm = qps if warmup else 0
    for s, ds in dests.items():
        for d in ds:
            per_pair[s, d] = per_pair.get((s, d), warm) + 1
    cq_log2 = max(4, (messages + warm * nodes - 1).bit_length())
    verbs = [NodeVerbs(p, depth, mr_entries, cq_log2, qpc_words) for p in range(nodes)]
    words = -(-msg_bytes // 64)
    qp_of, mr_of, cursor = {}, {}, {}
    for (s, d), count in sorted(per_pair.items()):
        per_qp = -(-count // qps)
        sq_log2 = max(0, (per_qp - 1).bit_length())
        for k in range(qps):
            psn = (s * 4099 + d * 977 + k * 131) & _PSN_MASK
            qp_of[s, d, k] = verbs[s].connect(verbs[d], k, nodes, sq_log2, pmtu_log2, psn)
        mr_of[s, d] = verbs[d].reg_mr(64 * words * count, index=s)
        cursor[s, d] = mr_of[s, d][0]
    svc = service_cycles(pattern, nodes, msg_bytes, pmtu_log2)
    out = []
    for s, ds in sorted(dests.items()):
        arrivals = arrival_cycles(messages, load, svc, seed * 1009 + s, start=warmup)
        first = [(d, 0, True) for d in sorted(set(ds)) for _ in range(qps)] if warm else []
        used = {}
        for j, (d, t, is_warm) in enumerate(first + [(d, t, False) for d, t in
                                                     zip(ds, arrivals, strict=True)]):
            k = used.get(d, 0) % qps
            used[d] = used.get(d, 0) + 1
            qp = qp_of[s, d, k]
            payload = rng.randbytes(msg_bytes)
            raddr, rkey = cursor[s, d], mr_of[s, d][1]
            cursor[s, d] += 64 * words
            wr_id = s << 24 | j
            msg = verbs[s].post_write(qp, payload, raddr, rkey, wr_id=wr_id)
            mmio = len(verbs[s].writes)
            verbs[s].ring(qp, t)
            out.append(FabricMessage(s, d, k, qp.qpn_a, qp.qpn_b, msg.sq_index, raddr,
                                     payload, t, mmio, wr_id, is_warm))
    return FabricScenario(verbs, out, cq_log2)
