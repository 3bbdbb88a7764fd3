"""Fabric profiles: the delays between two nodes, and the state sized from them.

# Ref: docs/fabric.md (the profiles, their sources, the sizing rules and what was
# measured) and SPEC.md, "Comparisons on a level field".

A profile gives the one-way latency of each of the two links of a node-to-node path
(node -> switch, switch -> node: PHY, FEC, cable) and of the switch hop between them, in
cycles of the 1 GHz clock (1 cycle = 1 ns). The NIC's path is link, switch, link; the
RDMA top links its two nodes by one link that stands for the whole path
(:func:`one_way`). The sizing rules turn a profile's bandwidth-delay product into the
state each design must own to keep its rate: link credits, the link-retry replay buffer,
and the RDMA engine's window records and retransmit timer. Every rule returns at least
today's value, so that the ``board`` profile keeps today's sizes (and figures).

Each design imports these definitions; the delays themselves are simulation fabric
(:class:`rtl.fabric.link.Link`, :class:`rtl.fabric.switch.Switch`'s ``hop_latency``) and
stay out of the designs' area.
"""

from dataclasses import dataclass

from spec.fabric import retry_sizes
from spec.formats.nic import frame_beats
from spec.nic import link_credits
from spec.rdma import MAX_FRAME_BEATS
from spec.rdma_engine import REQUESTER_DEFAULTS, SIM_TIMEOUT

__all__ = ["FabricProfile", "FABRIC_PROFILES", "fabric_profile", "SWITCH_BASE_CYCLES",
           "one_way", "round_trip", "switch_hop_latency", "CREDIT_LOOP_EXTRA",
           "credit_loop", "retry_delivery_extra", "line_rate_credits", "nic_link_credits",
           "nic_top_credits", "rdma_fabric_credits", "rdma_fabric_top",
           "replay_sizes", "replay_buffer_bits",
           "RDMA_SPAN_BASE", "RDMA_SPAN_NO_READS", "RDMA_SIZING_II", "rdma_records",
           "rdma_timeout"]


@dataclass(frozen=True)
class FabricProfile:
    """The delays of one fabric, in cycles (1 ns).

    Attributes
    ----------
    name : str
    link : int
        One link's latency, each way (the NIC's node -> switch and switch -> node).
    switch : int
        One switch hop: from a frame's beat on the switch's ingress port to the same
        beat on its egress port, without contention.
    in_switch_reduction : bool
        Whether the switch reduces and multicasts (an all-reduce's data sent once to the
        switch, which sums it and delivers the result: NVLink SHARP / NVLS, an Ethernet
        switch's in-network collectives). Only where a source says the switch has it.
    """
    name: str
    link: int
    switch: int
    in_switch_reduction: bool = False

    def __post_init__(self):
        for field in ("link", "switch"):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"fabric profile {self.name!r}: {field} latency must be "
                                 f"a positive integer of cycles, not {v!r}")
        if not isinstance(self.in_switch_reduction, bool):
            raise ValueError(f"fabric profile {self.name!r}: in_switch_reduction must be "
                             f"True or False, not {self.in_switch_reduction!r}")
        if self.switch < SWITCH_BASE_CYCLES:
            raise ValueError(f"fabric profile {self.name!r}: switch latency must be at "
                             f"least {SWITCH_BASE_CYCLES} cycles (the switch's buffer and "
                             f"forwarding cycles), not {self.switch}")


#: Cycles the RTL switch takes without extra hop latency: one in the ingress buffer, one
#: through the registered crossbar (rtl.fabric.switch.Switch, "Timing and arbitration").
SWITCH_BASE_CYCLES = 2

FABRIC_PROFILES = {
    # Today's fabric: 2-cycle links and the switch's own 2 cycles (6 cycles node to node).
    # Ref: spec.nic.HEADLINE_TOP (link_latency 2); spec.rdma_engine.TOP_DEFAULTS
    # (link_latency 6, the same path as one link). Its switch (rtl.fabric.switch) forwards
    # frames only: no in-switch reduction.
    "board": FabricProfile("board", link=2, switch=2),
    # Tomahawk Ultra class: a 250 ns switch and 400 ns XPU to XPU, so 75 ns for each
    # link with its PHY and FEC.
    # Ref: Broadcom, Tomahawk Ultra announcement (2025-07-15): 250 ns switch latency
    # port to port at 51.2 Tb/s; Broadcom, Scale-Up Ethernet (SUE) framework (OCP,
    # 2025): sub-400 ns XPU-to-XPU latency with Tomahawk Ultra.
    # In-switch reduction: the same announcement, "In-Network Collectives": AllReduce,
    # Broadcast and AllGather executed within the switch chip, endpoint-agnostic.
    "rack": FabricProfile("rack", link=75, switch=250, in_switch_reduction=True),
    # UALink class, about 1 us round trip: a 250 ns switch (the 100T figure) and 125 ns
    # per link, 500 ns one way.
    # Ref: UALink Consortium, "A Deeper Dive: Responding to the UALink 200G 1.0
    # Specification Webinar Q&A Session" (2025): port-to-port latency with 400G ports,
    # 25T switch <= 150 ns, 50T < 200 ns, 100T < 250 ns. No in-switch reduction: the
    # UALink 200G 1.0 sources above name none.
    "pod": FabricProfile("pod", link=125, switch=250),
}


def fabric_profile(name):
    """The profile called ``name``; ``ValueError`` naming it if there is none."""
    try:
        return FABRIC_PROFILES[name]
    except (KeyError, TypeError):
        raise ValueError(f"fabric must be one of {list(FABRIC_PROFILES)}, "
                         f"not {name!r}") from None


def _profile(p):
    return p if isinstance(p, FabricProfile) else fabric_profile(p)


def one_way(profile):
    """Node-to-node latency one way: link + switch + link (cycles); also the latency of
    the single link of a top that links two nodes directly (RdmaTop)."""
    p = _profile(profile)
    return 2 * p.link + p.switch


def round_trip(profile):
    """Twice :func:`one_way`."""
    return 2 * one_way(profile)


def switch_hop_latency(profile):
    """The ``hop_latency`` of :class:`rtl.fabric.switch.Switch` that makes it take the
    profile's ``switch`` cycles: ``switch - SWITCH_BASE_CYCLES`` (0 for ``board``)."""
    return _profile(profile).switch - SWITCH_BASE_CYCLES


# -- (a) NIC link credits ------------------------------------------------------------------

#: Cycles of the NIC's credit loop beyond the two link crossings. A beat sent (a credit
#: taken) in cycle ``t`` is on the switch's ingress port in ``t + L``, can leave the
#: ingress buffer (the buffer's one cycle: the credit pulse) in ``t + L + 1``, its
#: credit pulse reaches the sender in ``t + 2L + 1`` (the credit return's ``L``), and
#: counts from ``t + 2L + 2`` (the credit counter's register). Ref: the timing
#: sections of rtl.nic.nic_tx.NicTx, rtl.fabric.switch.Switch, rtl.nic.credit_return.
CREDIT_LOOP_EXTRA = 2


def credit_loop(link_latency):
    """Cycles from a credit taken to the same credit usable again: ``2 L + 2``."""
    return 2 * link_latency + CREDIT_LOOP_EXTRA


def retry_delivery_extra(frame_beats_):
    """Cycles a reliable link (:class:`rtl.fabric.reliable_link.ReliableLink`) adds to a
    frame of ``frame_beats_`` beats over a plain :class:`rtl.fabric.link.Link` of the same
    latency: ``frame_beats_ + 1`` (its Timing section: a frame taken in ``c .. c + n - 1``
    leaves from ``c + n + latency + 1``, one cycle in the replay buffer, the rest of the
    frame received and one cycle to judge it, where a plain link gives ``c + latency``)."""
    return frame_beats_ + 1


def line_rate_credits(profile, n_max, floor, retry=False, link_latency=None):
    """Credits (switch ingress beats) that keep a sender of frames of up to ``n_max``
    beats at line rate on ``profile``: Little's law on the credit loop (a credit is out
    for the whole loop, so the loop's cycles of credits are in flight) and a frame
    starts only with all its credits in hand, so ``loop - 1 + n_max``, and at least
    ``floor``. The loop is :func:`credit_loop` of the link (``link_latency``, default the
    profile's) and, with link-level ``retry``, the uplink's delivery latency on top
    (:func:`retry_delivery_extra` of the longest frame: the reliable link holds a frame
    until it has judged it). The rule of both designs' tops
    (:func:`nic_link_credits`, :func:`rdma_fabric_credits`)."""
    p = _profile(profile)
    link = p.link if link_latency is None else link_latency
    loop = credit_loop(link) + (retry_delivery_extra(n_max) if retry else 0)
    return max(floor, loop - 1 + n_max)


def nic_link_credits(profile, width, max_payload, retry=False, link_latency=None):
    """Credits (switch ingress beats) a NIC link needs on ``profile``.

    Little's law on the credit loop: at one beat a cycle, a credit is out for the whole
    loop, so the loop's cycles of credits are in flight; and a frame of ``n`` beats
    starts only with ``n`` credits in hand, so line rate for frames of up to ``n_max``
    beats (the longest frame, L2 framing, of ``max_payload``) needs ``loop - 1 + n_max``
    credits. The loop is :func:`credit_loop` of the link (``link_latency``, default the
    profile's; ``board`` takes any) and, with link-level ``retry``, the uplink's delivery
    latency on top (:func:`retry_delivery_extra` of the longest frame: the reliable link
    holds a frame until it has judged it). The rule is the larger of that and
    :func:`spec.nic.link_credits` (room for two of the longest frames, a burst
    allowance), so ``board`` without retry keeps 34 at 64 bytes and 1024-byte frames.
    """
    n_max = frame_beats(width, "l2", max_payload)
    return line_rate_credits(profile, n_max, link_credits(width, max_payload), retry,
                             link_latency)


def nic_top_credits(profile, width, max_payload, retry=False, link_latency=None):
    """The credits of the NIC top (and of its model) on ``profile`` with links of
    ``link_latency`` cycles (None: the profile's): :func:`nic_link_credits`, on every
    profile and at every ``max_payload``, so that a sender keeps line rate whatever its
    frames' size and its link's round trip."""
    return nic_link_credits(profile, width, max_payload, retry, link_latency)


def rdma_fabric_credits(profile, retry=False, link_latency=None):
    """The credits of the RDMA fabric top's senders (:class:`rtl.tops.rdma_fabric_top.
    RdmaFabricTop`'s uplink merges) on ``profile``: the NIC's rule
    (:func:`line_rate_credits`) for the engine's longest frame
    (:data:`spec.rdma.MAX_FRAME_BEATS`, a 4 KiB WRITE with RETH: 66 beats), at least two
    of them (the NIC's floor, :func:`spec.nic.link_credits`, for the engine's frames)."""
    return line_rate_credits(profile, MAX_FRAME_BEATS, 2 * MAX_FRAME_BEATS, retry,
                             link_latency)


def rdma_fabric_top(profile, retry=False):
    """The parameters of :class:`rtl.tops.rdma_fabric_top.RdmaFabricTop` that put the RDMA
    engine on the NIC's fabric of ``profile``: the profile's ``link`` latency on every
    link, :func:`switch_hop_latency`, :func:`rdma_fabric_credits`, and ``link_retry``
    (every link reliable, each sized by :func:`replay_sizes` of its own latency, as
    the NIC's)."""
    p = _profile(profile)
    return dict(link_latency=p.link, hop_latency=switch_hop_latency(p),
                credits=rdma_fabric_credits(p, retry), link_retry=int(bool(retry)))


# -- (b) The link-retry replay buffer ----------------------------------------------------

def replay_sizes(profile, max_frame_beats):
    """``(tx_depth, rx_depth, timeout)`` of a link-level retry on one link of
    ``profile``: :func:`spec.fabric.retry_sizes` of the profile's link latency. The
    replay buffer holds the ACK round trip (``2 L`` + a frame to judge + a frame being
    sent + 8 cycles) and a frame more, at one beat a cycle; the timeout is that trip and
    the longest frame again."""
    return retry_sizes(_profile(profile).link, max_frame_beats)


def replay_buffer_bits(profile, max_frame_beats, width=64):
    """Bits of the replay buffer an endpoint owns on its uplink with link-level retry on
    ``profile``: :func:`replay_sizes`' ``tx_depth`` beats of ``width`` bytes. Both designs
    are sized for the same link, one link of the profile (an endpoint behind the switch
    retries on its own link; scripts/area_proxies/catalogue.py counts the same ends)."""
    return replay_sizes(profile, max_frame_beats)[0] * width * 8


# -- (c) The RDMA engine's window records and retransmit timer -----------------------------

#: Cycles a message holds its window record apart from the round trip on the fabric:
#: today's figure of spec.rdma_engine.REQUESTER_DEFAULTS (about 1,300 cycles from the
#: WQE read to the ACK over PCIe, two host reads included) less the ``board`` round
#: trip of 2 x 6 cycles.
RDMA_SPAN_BASE = 1300 - 12
#: The same for a rung that reads neither WQE nor payload from host memory (WQE by MMIO
#: with inline data): two PCIe reads fewer, 2 x the ``pcie`` profile's 560-cycle read
#: latency (spec.host.PROFILES; the ~1,130 cycles of two reads in the figure above).
RDMA_SPAN_NO_READS = RDMA_SPAN_BASE - 2 * 560
#: The engine's rate the records are sized for: 4 cycles a message (the best rung of
#: spec.rdma_engine.LADDER at 128 B, docs/findings.md).
RDMA_SIZING_II = 4


def _pow2(n):
    return 1 << max(n - 1, 0).bit_length()


def rdma_records(profile, ii=RDMA_SIZING_II, reads=True):
    """Window records that keep ``ii`` cycles a message (Little's law): the messages in
    flight over a record's life, ``(RDMA_SPAN_BASE + round_trip) / ii``, rounded up to
    a power of two, and at least the requester's default pool (``records``, 512);
    capped at the requester's limit of 4096. ``reads``: the rung reads its WQE and
    payload from host memory before the frame (every rung but WQE by MMIO with inline
    data, :data:`spec.rdma_engine.LADDER`); without them a record's life is shorter by
    those two reads, :data:`RDMA_SPAN_NO_READS`."""
    base = RDMA_SPAN_BASE if reads else RDMA_SPAN_NO_READS
    need = -(-(base + round_trip(profile)) // ii)
    return min(4096, max(REQUESTER_DEFAULTS["records"], _pow2(need)))


def rdma_timeout(profile):
    """The transport timeout (cycles) of a simulated run at ``profile``: the short
    :data:`spec.rdma_engine.SIM_TIMEOUT` (4096, about three of ``board``'s round trips
    of a message) plus what the profile adds to the round trip over
    ``board``'s, so that its margin over an ACK's arrival stays the same."""
    extra = round_trip(profile) - round_trip("board")
    return SIM_TIMEOUT + max(0, extra)
