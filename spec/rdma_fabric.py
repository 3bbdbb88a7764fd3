"""The multi-node RDMA top's definitions: node addresses, the uplink merge's frame-length
rule and the demux's opcode byte, its defaults and its counter names.

Shared by :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`, its model twin
:mod:`pymodel.rdma.fabric_system` and the scenarios (:mod:`analysis.scenarios.rdma_fabric`).

# Ref: docs/rdma_fabric.md. Wire offsets: IEEE 802.3-2022 clause 3.1.1 (14-byte MAC
# header, 4-byte FCS); RFC 791 section 3.1 (IPv4 total length at header byte 2); IBTA
# Vol 1 section 9.2 (BTH opcode, the first BTH byte) behind Ethernet (14), IPv4 (20)
# and UDP (8); IBTA table 38 (RC ACKNOWLEDGE).
"""

from spec.formats.nic import MAC_PREFIX
from spec.formats.roce import (
    ETH_LAYOUT,
    IPV4_BYTES,
    IPV4_LAYOUT,
    UDP_BYTES,
    header_bytes,
)
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_responder import REST_MAX, MrTableShape

__all__ = ["NODES_RANGE", "node_mac", "node_ip", "IP_LENGTH_BYTE", "FRAME_OVERHEAD",
           "OPCODE_BYTE", "FCS_BYTES", "MERGE_TAIL_BEATS", "MERGE_ROOM",
           "FABRIC_DEFAULTS", "MERGE_FLAGS", "MERGE_COUNTERS",
           "QPN_STRIDE", "req_qpn", "resp_qpn", "PAUSE_HYSTERESIS", "PAUSE_COUNTERS",
           "pause_min_headroom", "pause_thresholds"]

#: Nodes of the fabric top (switch ports).
NODES_RANGE = (2, 8)

_ETH = header_bytes(ETH_LAYOUT)
#: Bytes of the Ethernet FCS.
FCS_BYTES = 4
#: Frame byte of the IPv4 total length (big endian, 2 bytes).
IP_LENGTH_BYTE = _ETH + IPV4_LAYOUT["total_length"].offset // 8
#: Frame bytes outside the IPv4 total length: the MAC header and the FCS (RoCEv2 frames
#: are never shorter than 64 bytes, so there is no Ethernet padding).
FRAME_OVERHEAD = _ETH + FCS_BYTES
#: Frame byte of the BTH opcode.
OPCODE_BYTE = _ETH + IPV4_BYTES + UDP_BYTES


def node_mac(p):
    """Node ``p``'s MAC address as an int (02:00:00:00:00:pp): the switch routes by its
    byte 5 (:func:`spec.formats.nic.dst_byte`, L2)."""
    return int.from_bytes(MAC_PREFIX + bytes([p & 0xFF]), "big")


def node_ip(p):
    """Node ``p``'s IPv4 address as an int (10.0.1.p)."""
    return 0x0A_00_01_00 | (p & 0xFF)


#: Requester QPN of node ``s``'s QP ``k`` to node ``d`` on a fabric of ``nodes`` nodes is
#: ``1 + d + nodes * k``; responder QPN of node ``d``'s QP ``k`` from node ``s`` is
#: ``1 + s + nodes * k`` (``k`` < ``QPN_STRIDE``, so every QPN is at most
#: ``QPN_STRIDE ** 2``). The context caches are direct mapped (entry ``qpn mod
#: entries``): a node's requester QPNs (and its responder QPNs) are distinct integers of
#: ``1 .. nodes * qps``, so they fall on distinct entries of an ``E``-entry cache as long
#: as ``nodes * qps <= E`` (QPs that share an entry evict each other: a context fill and
#: a write-back per message).
QPN_STRIDE = NODES_RANGE[1]


def req_qpn(dst, k, nodes):
    return 1 + dst + nodes * k


def resp_qpn(src, k, nodes):
    return 1 + src + nodes * k


#: Beats of the requester's frame in progress that can still reach the uplink merge after
#: its frame sender takes the next descriptor: the framer takes it in the cycle it sends
#: its own last beat, and the ICRC/FCS inserters add at most one beat behind it
#: (:class:`rtl.rdma.req.frame_sender.FrameSender`'s timing), so at most 2.
MERGE_TAIL_BEATS = 2
#: The uplink merge's flow-control threshold (:class:`rtl.rdma.frame_merge.FrameMerge`):
#: the requester may take a descriptor only while the merge's requester buffer holds at
#: most ``depth - MERGE_ROOM`` beats, room for the tail of the frame in progress and a
#: whole frame of the largest size (:data:`spec.rdma.MAX_FRAME_BEATS`) with nothing
#: leaving; also the least ``merge_depth``.
MERGE_ROOM = MAX_FRAME_BEATS + MERGE_TAIL_BEATS

#: Defaults of :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`. ``depth``: host-memory
#: words per host function (256 KiB); ``cache_entries``: context-cache entries per engine;
#: ``link_latency``: each uplink and downlink (2 + 2-cycle switch + 2: the 6 cycles node
#: to node of RdmaTop and the NIC headline); ``credits``: the switch's ingress buffer per
#: port in beats, two of the largest frames; ``merge_depth``: beats of the requester
#: buffer in each uplink merge (at least :data:`MERGE_ROOM`; 256 holds the room for a
#: largest frame and its tail plus 188 beats, about ten 1 KiB frames, of backlog);
#: ``mmio``/``wire_beats``/``events``: player and recorder depths per node; ``pause``
#: (0: off, every figure as without it), ``pause_headroom`` (0: the least safe value,
#: :func:`pause_min_headroom`) and ``pause_hysteresis`` (None: :data:`PAUSE_HYSTERESIS`):
#: the PFC-like pause of each node's downlink (:func:`pause_thresholds`); every
#: responder's MR table: the parameters of :class:`spec.rdma_responder.MrTableShape`
#: (its defaults, as :data:`spec.rdma_engine.TOP_DEFAULTS`); ``hop_latency``: the
#: switch's extra cycles (:func:`spec.fabric_profiles.switch_hop_latency`; 0: its own 2
#: cycles); ``link_retry``
#: (0 or 1): every link a reliable link (link-level retry, as the NIC top's with
#: ``retry``). :func:`spec.fabric_profiles.rdma_fabric_top` gives the link latency, hop
#: latency, credits and link retry that put the top on a fabric profile.
FABRIC_DEFAULTS = dict(nodes=4, host="pcie", depth=1 << 12, cache_entries=16,
                       **MrTableShape().params(), link_latency=2, credits=2 * MAX_FRAME_BEATS,
                       merge_depth=256, mmio=512, wire_beats=2048, events=512,
                       pause=0, pause_headroom=0, pause_hysteresis=None,
                       hop_latency=0, link_retry=0)

#: Sticky error flags of each uplink merge (ports ``n<p>_merge_<name>``).
MERGE_FLAGS = ("overflow", "credit_errors")
#: Counters of each uplink merge (ports ``n<p>_merge_<name>``): the high-water marks of
#: its requester buffer's level and of its credits in use (the switch ingress beats
#: the node's frames take until their credits return).
MERGE_COUNTERS = ("level_max", "credits_max")


# ---- The PFC-like pause of each node's downlink ----------------------------------------
# Ref: IEEE 802.1Qbb-2011 (priority-based flow control: a receiver pauses one priority
# class of its link partner's transmission; the partner finishes the frame it has
# started and starts no other of that class until the pause ends); here one class.
# Headroom: the buffer above the XOFF threshold must hold what arrives after the
# receiver decides to pause: the pause's own delay to the partner, the partner's
# response, the beats already on the link, and the largest frame the partner may have
# just started (Cisco's derivation, "How to compute headroom for lossless Ethernet
# links", D-Max-Frame-Len + D-Pause + D-Intf + D-Cable + D-Resp; NVIDIA's mlx5 driver,
# drivers/net/ethernet/mellanox/mlx5/core/en/port_buffer.c, sizes xoff from the cable's
# round trip plus the MTU).

#: Beats between the XOFF and XON thresholds of the responder's payload FIFO: one
#: largest frame, as NVIDIA's mlx5 driver sets ``xon = xoff - max_mtu`` (Linux commit
#: "net/mlx5e: Update xon formula", port_buffer.c), so that a pause is lifted only when a
#: whole largest frame fits again.
PAUSE_HYSTERESIS = MAX_FRAME_BEATS
#: Counters of each node's pause, with ``pause`` on (ports ``pause__<p>__<name>``).
PAUSE_COUNTERS = ("xoffs",)


def pause_min_headroom(link_latency):
    """The least pause headroom, in beats (one beat a cycle): ``2 * link_latency + 1``.

    The round trip of the pause through the fabric top: the responder's levels at the
    start of cycle ``s`` set the registered XOFF in ``s + 1``; it travels the uplink's
    sideband (``link_latency`` cycles, like the credits) to the switch's egress gate in
    ``s + 1 + L``; a first beat the gate lets through in that cycle reaches the
    responder ``L`` cycles later (downlink; the demux adds none): ``2L + 1`` cycles, so
    at most ``2L + 1`` beats written in between. The largest frame the egress may have
    started is the responder's own admission reserve (:data:`spec.rdma_responder.
    REST_MAX` payload beats below the top of its payload FIFO), so the thresholds are
    counted from there."""
    return 2 * link_latency + 1


def pause_thresholds(rx_beats, rx_frames, link_latency, headroom=0, hysteresis=None):
    """``(xoff_beats, xon_beats, xoff_frames, xon_frames)`` of a responder with FIFOs of
    ``rx_beats`` payload beats and ``rx_frames`` header entries.

    XOFF (pause raised) when the payload FIFO holds more than ``xoff_beats`` beats or the
    header FIFO more than ``xoff_frames`` entries; XON (pause lowered) once it holds at
    most ``xon_beats`` and ``xon_frames``. ``xoff_beats = rx_beats - REST_MAX -
    headroom`` (the receive stage admits a frame while at most ``rx_beats - REST_MAX``
    beats are held), ``xoff_frames = rx_frames - 1 - headroom`` (it admits one while at
    most ``rx_frames - 1`` entries are held; each beat adds at most one entry);
    ``xon_beats = xoff_beats - hysteresis``, ``xon_frames = xoff_frames -
    ceil(hysteresis / MAX_FRAME_BEATS)`` (a largest frame is one entry), at least 0.

    ``headroom`` (beats; 0: :func:`pause_min_headroom`) must be at least
    :func:`pause_min_headroom` and leave ``xoff_beats`` and ``xoff_frames`` at least 0;
    ``hysteresis`` (beats; None: :data:`PAUSE_HYSTERESIS`) from 1 to ``xoff_beats``.
    A bad value raises ``ValueError`` naming ``pause_headroom`` or ``pause_hysteresis``.
    """
    least = pause_min_headroom(link_latency)
    if headroom == 0:
        headroom = least
    top = min(rx_beats - REST_MAX, rx_frames - 1)
    if (not isinstance(headroom, int) or isinstance(headroom, bool)
            or not least <= headroom <= top):
        raise ValueError(f"pause_headroom (beats) must be 0 or an integer from {least} "
                         f"(2 * link_latency + 1) to {top}, not {headroom!r}")
    xoff_beats = rx_beats - REST_MAX - headroom
    xoff_frames = rx_frames - 1 - headroom
    if hysteresis is None:
        hysteresis = PAUSE_HYSTERESIS
    if (not isinstance(hysteresis, int) or isinstance(hysteresis, bool)
            or not 1 <= hysteresis <= max(1, xoff_beats)):
        raise ValueError(f"pause_hysteresis (beats) must be an integer from 1 to "
                         f"{max(1, xoff_beats)} (the XOFF threshold), not {hysteresis!r}")
    xon_beats = max(0, xoff_beats - hysteresis)
    xon_frames = max(0, xoff_frames - -(-hysteresis // MAX_FRAME_BEATS))
    return xoff_beats, xon_beats, xoff_frames, xon_frames
