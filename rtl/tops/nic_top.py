"""Co-simulation top of the scale-up NIC: N nodes, a switch, links and local memories."""

from amaranth import ResetSignal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.latency_memory import LatencyMemory
from rtl.fabric.link import Link
from rtl.fabric.reliable_link import ReliableLink, connect_wire
from rtl.fabric.switch import Switch, source_write_layout, table_write_layout
from rtl.host.host_interface import HostInterface
from rtl.nic.completion_record import (
    CompletionRecorder,
    CompletionRecorderQueue,
    record_event,
    record_event_layout,
)
from rtl.nic.credit_return import CreditReturn
from rtl.nic.fault_injector import FaultInjector
from rtl.nic.nic_rx import NicRx
from rtl.nic.nic_tx import NicTx
from rtl.nic.outstanding_tracker import cpl_event_layout
from rtl.nic.tracker_memory import wide_cpl_layout
from rtl.nic.window_table import window_write_layout
from rtl.sim.harness_top import HarnessTop
from rtl.tops.nic_top_attach import NicAttachments
from spec.checks import check_int, reject
from spec.fabric import SOURCE_WRITES, switch_counters
from spec.fabric_profiles import fabric_profile, nic_top_credits, switch_hop_latency
from spec.formats.nic import ID_BITS, frame_beats, store_cmd_layout
from spec.formats.packet import packet_layout
from spec.host import HOST_COUNTERS, PROFILES, TAG_BITS
from spec.nic import (
    ATTACHMENTS,
    COMPLETION_DEFAULTS,
    COMPLETIONS,
    COUNTERS,
    PCIE_WORD_BITS,
    WINDOW_WRITES,
    check_destinations,
    check_records,
    completion_flush_idle,
    pcie_ack_req_bit,
)
from spec.ports import (
    CountersSignature,
    PortView,
    completion_signatures,
    peer_retry_signature,
)

__all__ = ["NicTop", "write_event_layout"]


def write_event_layout(depth):
    """What the ``wr<p>`` recorders keep of each local-memory write."""
    return data.StructLayout({"addr": range(depth), "be": 64})


class NicTop(NicAttachments, HarnessTop):
    """``nodes`` NICs, each on its own port of one :class:`Switch`.

    Per node ``p``: player ``cmd<p>`` (store commands; timed: see below) -> NicTx ->
    uplink Link -> switch
    port ``p`` -> downlink Link -> FaultInjector (player ``flt<p>``: downlink beat numbers
    to corrupt) -> NicRx -> LatencyMemory ``mem<p>``. The switch's credit pulses for
    ingress ``p`` come back through a CreditReturn of the link latency.

    Recorders: ``tx<p>`` every uplink beat (the frames on the wire), ``wr<p>`` every
    local-memory write (word address, byte enables), ``cr<p>`` every credit that reaches
    sender ``p``. Player ``tbl`` writes the switch table (``(node, port)`` items, always
    accepted). Player ``src`` writes the switch's source table (``(node, port)`` items,
    ``port`` = ``nodes`` for any port, one per cycle from cycle 0, always accepted;
    :data:`spec.fabric.SOURCE_WRITES` deep; an empty player keeps the power-up table,
    every node id allowed on every port). Player ``win<p>`` writes the per-source window
    table of node ``p``'s receiver (``window_write_layout(mem_words)`` items ``(src,
    base, size)`` in words, one per cycle from cycle 0, always accepted;
    :data:`spec.nic.WINDOW_WRITES` deep; an empty player keeps the power-up windows, the
    whole memory for every source).
    Run-time inputs: ``node_id[p]`` (set before reset). Outputs: ``rx[p]``, the counters
    of :data:`spec.nic.COUNTERS` of node ``p``'s receiver, ``switch_counters``
    (:func:`spec.fabric.switch_counters`: ``drop_spoofed``), ``credit_errors`` (any
    counter's sticky underflow/overflow). Counter ports are
    :class:`spec.ports.CountersSignature` ports (in Verilog ``rx__<p>__<name>``).

    ``attachment`` (:data:`spec.nic.ATTACHMENTS`): ``integrated`` as above. ``pcie``
    (needs ``width`` 64 and ``mem_words`` at most ``2**PCIE_WORD_BITS``): node ``p`` has
    a :class:`HostInterface` ``hi<p>`` (profile ``pcie``, depth ``mem_words``) whose
    host memory is ``mem<p>``. The player ``cmd<p>`` is then the host CPU: each store
    (at most 256 bytes, the profile's MPS; ``length`` its payload bytes) is one host
    posted write on ``mmio_in`` (register offset :func:`spec.nic.pcie_mmio_addr`,
    ``nbytes`` the length), and the interface's ``mmio`` words become NicTx's command
    beats. NicRx's writes go to the interface's ``wr`` port (``last`` on each frame's
    last write: one posted write TLP per frame) and reach ``mem<p>`` from its
    ``mem_wr``; ``wr<p>`` then records those memory writes. The interfaces' counters
    are ports ``hi[p]`` (:data:`spec.host.HOST_COUNTERS`). The receive path
    assumes the interface's write buffer never fills (the model raises if it would).

    Open-loop arrivals: the ``cmd<p>`` players are timed
    (:class:`rtl.sim.stream_player.StreamPlayer` with ``timed``): command beat ``k`` is
    offered from cycle ``release_at[k]`` on. A store's first beat carries the store's
    release (its arrival cycle), its later beats 0 (offered at once), so a store waits
    for its arrival and then goes as an untimed player would send it; release 0
    everywhere is the untimed player, cycle for cycle. With ``pcie`` the player is the
    host, and a release delays the host's posted write the same way.

    ``items`` (command beats) and ``events`` (recorder depth) are an int or one value per
    node: memories cost export and build time, so idle nodes can be given small ones.

    With ``retry`` every uplink and downlink is a :class:`ReliableLink` (link-level
    retry over a faulty wire; docs/recovery.md) instead of a plain ``Link``, and the
    switch holds its egress beats while a downlink's replay buffer is full. The wires
    share the fault settings port ``flt`` (:data:`spec.fabric.SETTINGS` and
    :data:`spec.fabric.RETRY_SETTINGS`: tags and ACK/NAKs damaged too); wire ``k``
    (``2p`` the uplink of node ``p``, ``2p + 1`` its downlink) uses the seed
    ``flt.seed + k`` (16 bits). Each link's counters are ports ``up[p]`` and
    ``down[p]`` (:meth:`rtl.fabric.reliable_link.ReliableLink.port_signatures`).

    ``fabric`` (a profile of :data:`spec.fabric_profiles.FABRIC_PROFILES`, default
    ``board``): the links take the profile's ``link`` cycles (``link_latency`` None; on
    ``board`` any ``link_latency`` may be given, elsewhere only the profile's), the credit
    returns the same, the switch adds
    :func:`~spec.fabric_profiles.switch_hop_latency` cycles after its crossbar, and
    each sender's credits (the switch's ingress buffer) are
    :func:`~spec.fabric_profiles.nic_top_credits` (the credit loop of the link's latency
    and, with ``retry``, the reliable uplink's delivery latency, at least
    :func:`spec.nic.link_credits`). With ``retry`` the hop is elastic (it holds its
    beats while a downlink's replay buffer is full; :class:`Switch`), and each reliable
    link sizes its replay buffer from its own latency, the profile's ``link``
    (:func:`spec.fabric_profiles.replay_sizes`).

    ``completion`` (:data:`spec.nic.COMPLETIONS`): ``credit`` as above; ``e2e`` adds
    per node a
    :class:`CompletionGen` ``cgen<p>`` fed by NicRx's ``ack`` (node ids ``0 ..
    nodes - 1`` tracked; ``coalesce`` and ``flush_idle``, defaults
    :data:`spec.nic.COMPLETION_DEFAULTS` and :func:`spec.nic.completion_flush_idle`)
    whose frames NicTx merges onto the uplink, and an :class:`OutstandingTracker`
    ``otrk<p>`` (``timeout``) fed by NicTx's ``sent`` and NicRx's ``cpl``. Their counters
    are ports ``cgen[p]`` and ``otrk[p]`` (:func:`spec.ports.completion_signatures`: in
    Verilog ``cgen__<p>__cpl_sent``, ``cgen__<p>__ack_req_seen``, ``otrk__<p>__cpl_ok``,
    ``otrk__<p>__outstanding``
    with destination ``d`` in bits ``16d .. 16d + 15``); recorder ``cp<p>`` every
    completion that reaches node ``p``'s tracker (``cpl_event_layout``). A store frame
    counts as complete at its receiver in the cycle NicRx's ``ack`` says so: its last
    buffered beat drained, with or after its last write on ``wr``. With ``pcie`` that
    write is the frame's last word taken by ``hi<p>``'s ``wr`` port, a posted write the
    interface accepts at once (the assumption above): the completion means "handed to
    the host interface as posted writes", not "in host memory", the RDMA responder's ACK
    point (:class:`rtl.rdma.resp.responder.Responder`, Timing: the verify stage writes a
    frame's ACK and its write job in the same cycle, the ACK leaves in ``t + 3`` and the
    payload words reach the host interface from ``t + 4``; posted writes are never
    acknowledged by the host, and PCIe ordering makes them visible before anything the
    host reads after the completion). With ``retry`` the completion frames cross the
    reliable links like store frames: NicTx gates them on the same credits and on the
    uplink's ``ready``, and the links replay them like any frame.

    ``records`` (0, or the slots of a ring, :func:`spec.nic.check_records`; needs
    ``e2e``): node ``p`` also has a :class:`CompletionRecorder` ``rec<p>`` that writes a
    completion record (:data:`spec.formats.nic.completion_record_layout`) for every
    completion its tracker accepts into the top ``records`` words of its memory, through
    the same port as NicRx's writes: with ``pcie`` the host interface's ``wr`` (a posted
    write of one word, marked, as the RDMA engine writes a CQE), otherwise ``mem<p>``'s
    write port. A record waits while NicRx writes or is inside a frame's posted write.
    Recorder ``cq<p>`` keeps each record's tag (destination in bits 0..7, count in bits
    8..23) in the cycle the record reaches memory (the interface's ``marked``; with
    ``integrated`` the cycle of the memory write), which is then the end-to-end
    completion: in host memory, as the engine's CQE. ``wr<p>`` records the record
    writes like any other.

    ``destinations`` (:func:`spec.nic.check_destinations`; docs/nic.md, "4,096
    destinations"): 16-bit ids, a :class:`CompletionKeyed` and a :class:`TrackerMemory`
    per node. With ``pcie`` the host interfaces' register offset is 28 bits (the 16-bit
    id above the word address, the ack request above it:
    :func:`spec.nic.pcie_mmio_addr`). With ``records`` each node's records come from a
    :class:`CompletionRecorderQueue` (acceptance order, 16-bit ``peer``) reading its
    tracker's record port; its tag is the record's ring slot, and recorder ``cq<p>``
    keeps :data:`rtl.nic.completion_record.record_event_layout`: the slot, and the
    destination and count of the word written in that cycle.

    ``peer_retry`` (``e2e``, either attachment; not with ``destinations``) and
    ``peer_window``: the per-peer retry (docs/nic.md), NicTx's sender as the tracker
    (``otrk[p]`` its registers; with ``records`` it feeds ``rec<p>``), NicRx's check;
    ports ``peer[p]`` (:func:`spec.ports.peer_retry_signature`). Twin: ``peer_retry=``.
    ``switch_faults`` (bool): frames lost inside the switch (:class:`Switch`'s ``faults``):
    player ``sflt<p>`` (:data:`spec.fabric.SWITCH_DROPS` deep) offers egress ``p``'s frame
    numbers to drop; ``switch_counters`` adds ``drop_fault``. Twin: ``switch_faults=``.
    """

    def __init__(self, width=16, framing="compact", nodes=4, link_latency=None, mem_words=256,
                 max_payload=512, items=1024, events=4096, retry=False,
                 attachment="integrated", fabric="board", completion="credit",
                 coalesce=None, flush_idle=None, timeout=None, records=0,
                 destinations=None, peer_retry=False, peer_window=None, switch_faults=False):
        try:
            profile = fabric_profile(fabric)
        except ValueError as exc:
            reject(self, str(exc))
        self.fabric = profile.name
        if link_latency is None:
            link_latency = profile.link
        elif profile.name != "board" and link_latency != profile.link:
            reject(self, f"link_latency {link_latency!r}: fabric {profile.name!r} sets the "
                         f"link latency ({profile.link} cycles); leave link_latency out")
        if completion not in COMPLETIONS:
            reject(self, f"completion must be one of {list(COMPLETIONS)}, "
                         f"not {completion!r}")
        self.completion = completion
        self.e2e = completion == "e2e"
        if attachment not in ATTACHMENTS:
            reject(self, f"attachment must be one of {list(ATTACHMENTS)}, "
                         f"not {attachment!r}")
        self.attachment = attachment
        self.pcie = attachment == "pcie"
        if self.pcie and width != 64:
            reject(self, f"attachment 'pcie' needs width 64 (host words), not {width!r}")
        if self.pcie and mem_words > 1 << PCIE_WORD_BITS:
            reject(self, f"attachment 'pcie' needs mem_words at most "
                         f"{1 << PCIE_WORD_BITS}, not {mem_words!r}")
        try:
            self.records = check_records(records, mem_words, completion)
        except ValueError as exc:
            reject(self, str(exc))
        try:
            self.destinations = check_destinations(destinations, framing, completion)
        except ValueError as exc:
            reject(self, str(exc))
        dests = self.destinations
        ib = ID_BITS if dests else 8
        self._check_peer_retry(peer_retry, peer_window, completion, dests)
        self.switch_faults = self._check_switch_faults(switch_faults)
        self.width, self.framing = width, framing
        self.nodes = check_int(self, "nodes", nodes, 2, 16)
        self.link_latency, self.mem_words = link_latency, mem_words
        self.max_payload = max_payload
        self.retry = bool(retry)
        self.credits = nic_top_credits(profile, width, max_payload, self.retry, link_latency)
        self.hop_latency = switch_hop_latency(profile)
        self.switch = Switch(width, nodes, framing, self.credits, backpressure=self.retry,
                             hop_latency=self.hop_latency,
                             table_entries=2 * dests if dests else 256,
                             faults=self.switch_faults)
        self.coalesce = COMPLETION_DEFAULTS["coalesce"] if coalesce is None else coalesce
        self.timeout = COMPLETION_DEFAULTS["timeout"] if timeout is None else timeout
        self.flush_idle = (completion_flush_idle(width, framing, max_payload)
                           if flush_idle is None else flush_idle)
        prt = ({"peer_retry": {"peers": nodes, "window": self.peer_window,
                               "timeout": self.timeout}} if self.peer_retry else {})
        self.txs = [NicTx(width, framing, self.credits, max_payload, completion,
                          **({"id_bits": ib} if dests else {}), **prt)
                    for _ in range(nodes)]
        self.rxs = [NicRx(width, framing, max_payload, mem_words, completion,
                          **({"stands_for": (dests, nodes - 1, p)} if dests else {}),
                          **({"peer_retry": nodes} if self.peer_retry else {}))
                    for p in range(nodes)]
        self._completion_blocks(width, framing, nodes, dests)
        if dests:
            self.recs = [CompletionRecorderQueue(dests, width, mem_words, self.records)
                         for _ in range(nodes)] if self.records else []
        else:
            self.recs = [CompletionRecorder(nodes, width, mem_words, self.records)
                         for _ in range(nodes)] if self.records else []
        if self.retry:
            beats = frame_beats(width, framing, max_payload)
            self.links = [(ReliableLink(width, link_latency, beats),
                           ReliableLink(width, link_latency, beats)) for _ in range(nodes)]
        else:
            self.links = [(Link(width, link_latency), Link(width, link_latency))
                          for _ in range(nodes)]
        self.crs = [CreditReturn(link_latency) for _ in range(nodes)]
        self.mems = [LatencyMemory(width, mem_words, 1) for _ in range(nodes)]
        # The register offset: the word address, the destination id, the ack request
        # (spec.nic.pcie_mmio_addr).
        self.mmio_ack_bit = pcie_ack_req_bit(ID_BITS if dests else None)
        mmio_kw = {"mmio_addr_bits": self.mmio_ack_bit + 1} if dests else {}
        self.his = ([HostInterface(PROFILES["pcie"], mem_words, **mmio_kw)
                     for _ in range(nodes)] if self.pcie else [])
        items = list(items) if isinstance(items, (list, tuple)) else [items] * nodes
        events = list(events) if isinstance(events, (list, tuple)) else [events] * nodes
        players, recorders, ports = {}, {}, {"credit_errors": Out(1)}
        sw_counters = CountersSignature(switch_counters(self.switch_faults))
        ports.update({"switch_counters": Out(sw_counters),
                      "node_id": In(ib).array(nodes),
                      "rx": Out(CountersSignature(COUNTERS)).array(nodes)})
        if self.retry:
            settings, counters = ReliableLink.port_signatures()
            ports.update({"flt": In(settings), "up": Out(counters).array(nodes),
                          "down": Out(counters).array(nodes)})
        if self.pcie:
            ports["hi"] = Out(CountersSignature(HOST_COUNTERS)).array(nodes)
        if self.e2e:
            gen, tracker = completion_signatures(nodes, poll=bool(dests))
            ports.update({"cgen": Out(gen).array(nodes), "otrk": Out(tracker).array(nodes)})
        if self.peer_retry:
            ports["peer"] = Out(peer_retry_signature(nodes)).array(nodes)
        id_kw = {"id_bits": ib} if dests else {}
        players["tbl"] = (table_write_layout(nodes, **id_kw),
                          dests + nodes if dests else 16)
        players["src"] = (source_write_layout(nodes, **id_kw), SOURCE_WRITES)
        for p in range(nodes):
            players[f"cmd{p}"] = (store_cmd_layout(width, **id_kw), items[p], True)
            players.update({f"flt{p}": (32, 64), **self._switch_fault_players(p)})
            players[f"win{p}"] = (window_write_layout(mem_words), WINDOW_WRITES)
            recorders[f"tx{p}"] = (packet_layout(width), events[p])
            recorders[f"wr{p}"] = (write_event_layout(mem_words), events[p])
            recorders[f"cr{p}"] = (1, events[p])
            if self.e2e:
                recorders[f"cp{p}"] = (wide_cpl_layout if dests else cpl_event_layout,
                                       events[p])
            if self.records:
                recorders[f"cq{p}"] = (record_event_layout if dests else TAG_BITS,
                                       events[p])
        super().__init__(players=players, recorders=recorders, ports=ports)

    def elaborate_design(self, m, players, recorders):
        m.submodules.switch = sw = self.switch
        tbl = players["tbl"].o
        m.d.comb += [sw.table_wr.valid.eq(tbl.valid), sw.table_wr.payload.eq(tbl.payload),
                     tbl.ready.eq(~ResetSignal())]
        src = players["src"].o
        m.d.comb += [sw.src_wr.valid.eq(src.valid), sw.src_wr.payload.eq(src.payload),
                     src.ready.eq(~ResetSignal())]
        wiring.connect(m, sw.counters, wiring.flipped(self.switch_counters))
        self._attach_switch_faults(m, sw, players)
        errors = []
        for p in range(self.nodes):
            tx, rx, (up, down), cr, mem = (self.txs[p], self.rxs[p], self.links[p],
                                           self.crs[p], self.mems[p])
            m.submodules[f"nic_tx{p}"] = tx
            m.submodules[f"nic_rx{p}"] = rx
            m.submodules[f"up{p}"] = up
            m.submodules[f"down{p}"] = down
            m.submodules[f"cret{p}"] = cr
            m.submodules[f"mem{p}"] = mem
            m.submodules[f"inj{p}"] = inj = FaultInjector(self.width)
            cmd = players[f"cmd{p}"].o
            node_id = self.node_id[p]
            ingress, egress = sw.i[p], sw.o[p]
            txrec, wrrec, crrec = (recorders[f"tx{p}"].i, recorders[f"wr{p}"].i,
                                   recorders[f"cr{p}"].i)
            m.d.comb += [
                tx.node_id.eq(node_id), rx.node_id.eq(node_id),
                up.i.valid.eq(tx.o.valid), up.i.payload.eq(tx.o.payload),
                # The link is always ready; deriving the constant from reset makes every
                # simulator evaluate the logic behind it when reset is released.
                tx.o.ready.eq(up.i.ready & ~ResetSignal()),
                txrec.valid.eq(tx.o.valid & up.i.ready), txrec.payload.eq(tx.o.payload),
                ingress.valid.eq(up.o.valid), ingress.payload.eq(up.o.payload),
                up.o.ready.eq(~ResetSignal()),
                down.i.valid.eq(egress.valid), down.i.payload.eq(egress.payload),
                egress.ready.eq(down.i.ready), down.o.ready.eq(~ResetSignal()),
                inj.i.valid.eq(down.o.valid), inj.i.payload.eq(down.o.payload),
                inj.faults.valid.eq(players[f"flt{p}"].o.valid),
                inj.faults.payload.eq(players[f"flt{p}"].o.payload),
                players[f"flt{p}"].o.ready.eq(inj.faults.ready),
                rx.win_wr.valid.eq(players[f"win{p}"].o.valid),
                rx.win_wr.payload.eq(players[f"win{p}"].o.payload),
                players[f"win{p}"].o.ready.eq(~ResetSignal()),
                rx.i.valid.eq(inj.o.valid), rx.i.payload.eq(inj.o.payload),
                cr.i.eq(sw.credit[p]),
                tx.give.eq(cr.o),
                crrec.valid.eq(cr.o), crrec.payload.eq(1),
            ]
            wiring.connect(m, PortView(self.rx[p].signature, rx), wiring.flipped(self.rx[p]))
            rec = self.recs[p] if self.records else None
            if rec is not None:
                m.submodules[f"rec{p}"] = rec
            if self.pcie:
                self._attach_pcie(m, p, cmd, tx, rx, mem, wrrec, rec,
                                  recorders.get(f"cq{p}"))
            else:
                m.d.comb += [
                    tx.cmd.valid.eq(cmd.valid), tx.cmd.payload.eq(cmd.payload),
                    cmd.ready.eq(tx.cmd.ready),
                    mem.wr.valid.eq(rx.wr.valid), mem.wr.payload.eq(rx.wr.payload),
                    mem.rd_addr.valid.eq(0),
                    wrrec.valid.eq(mem.wr.valid),
                    wrrec.payload.addr.eq(mem.wr.payload.addr),
                    wrrec.payload.be.eq(mem.wr.payload.be),
                ]
                if rec is not None:     # the record in a cycle without a NicRx write
                    r, cq = rec.wr, recorders[f"cq{p}"].i
                    m.d.comb += [
                        rec.free.eq(~rx.wr.valid), r.ready.eq(~ResetSignal()),
                        cq.valid.eq(r.valid),
                        cq.payload.eq(record_event(r.payload.tag, r.payload.data)
                                      if self.destinations else r.payload.tag),
                    ]
                    with m.If(r.valid):
                        m.d.comb += [mem.wr.valid.eq(1),
                                     mem.wr.payload.addr.eq(r.payload.addr),
                                     mem.wr.payload.data.eq(r.payload.data),
                                     mem.wr.payload.be.eq(-1)]
            if self.retry:
                for k, (link, port) in enumerate(((up, self.up[p]), (down, self.down[p]))):
                    connect_wire(m, link, self.flt, port, 2 * p + k)
            if self.e2e:
                self._attach_completion(m, p, tx, rx, node_id, recorders[f"cp{p}"].i, rec)
            errors += [tx.underflow, tx.overflow]
        m.d.comb += self.credit_errors.eq(sum(errors) != 0)
