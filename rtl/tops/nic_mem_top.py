"""Co-simulation top of the NIC's memory operations: N nodes issuing loads and atomics to
each other through the switch."""

from amaranth import Mux, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.fabric.link import Link
from rtl.fabric.reliable_link import ReliableLink, connect_wire
from rtl.fabric.switch import Switch
from rtl.nic.credit_return import CreditReturn
from rtl.nic.local_memory import LocalMemory
from rtl.nic.mem_requester import MemRequester
from rtl.nic.mem_responder import MemResponder
from rtl.nic.mem_rx import MemRx
from rtl.nic.mem_tx import MemTx
from rtl.nic.tag_table import TagTable
from rtl.sim.harness_top import HarnessTop
from rtl.tops.nic_top import write_event_layout
from spec.checks import check_int, reject
from spec.fabric_profiles import fabric_profile, nic_top_credits, switch_hop_latency
from spec.formats.nic import Framing
from spec.formats.nic_mem import MEM_WIDTH, mem_cmd_layout, mem_frame_beats, rsp_event_layout
from spec.formats.packet import packet_layout
from spec.nic_mem import (
    MEM_RESP_COUNTERS,
    MEM_RX_COUNTERS,
    MEM_TOP_DEFAULTS,
    TARGET_LEVEL_READS,
    check_tags,
    check_target,
    default_tags,
    request_queue_depth,
)
from spec.ports import CountersSignature, PortView

__all__ = ["NicMemTop"]


class NicMemTop(HarnessTop):
    """``nodes`` NICs with remote loads and 8-byte atomics, each on a port of one
    :class:`Switch`, on the fabric profile ``fabric`` (links, switch hop, credits as
    :class:`rtl.tops.nic_top.NicTop`).

    Per node ``p``: player ``cmd<p>`` (``mem_cmd_layout`` commands, untimed) ->
    :class:`MemRequester` (tags from a :class:`TagTable` of ``tags``) -> :class:`MemTx`
    (with the :class:`MemResponder`'s responses and the player ``raw<p>``'s one-beat
    frames) -> uplink Link -> switch port ``p`` -> downlink Link -> :class:`MemRx`
    (requests to the responder; responses land in the :class:`LocalMemory` ``mem<p>``
    and free their tags). The switch's credit pulses come back through a
    :class:`CreditReturn` of the link latency.

    Recorders: ``tx<p>`` every uplink beat, ``wr<p>`` every local-memory write (word
    address, byte enables: the landing responses and the atomics' updates), ``rsp<p>``
    every response landed at node ``p`` (``rsp_event_layout``: tag, status, op; the
    cycle its tag is freed). Player ``cmd<p>``'s stamps are the cycles each command was
    taken (its tag issued). Run-time inputs: ``node_id[p]`` (set before reset; node
    ``p`` is on switch port ``p`` by the switch's power-up table). Outputs: ``cnt_rx[p]``
    and ``cnt_resp[p]`` (:data:`spec.nic_mem.MEM_RX_COUNTERS`, ``MEM_RESP_COUNTERS``),
    ``outstanding[p]`` (busy tags), ``credit_errors``.

    Parameters: ``nodes`` (2 to 16), ``framing``, ``fabric``, ``tags`` (None:
    :func:`spec.nic_mem.default_tags` of the fabric), ``mem_words`` and ``max_payload``
    (:data:`spec.nic_mem.MEM_TOP_DEFAULTS`), ``items`` (command player depth), ``raws``
    (raw player depth), ``events`` (recorder depth), ``target_latency`` and
    ``target_reads`` (every node's :class:`MemResponder`: the read of its target memory;
    0, the default, reads it in no cycle). The datapath is 64 bytes.

    ``link_retry`` (default False: plain links, as above): every uplink and downlink is a
    :class:`ReliableLink` (link-level retry over a faulty wire, as
    :class:`rtl.tops.nic_top.NicTop` with ``retry``; docs/recovery.md), sized for the
    longest memory frame (:func:`spec.formats.nic_mem.mem_frame_beats` of
    ``max_payload``: a load's whole answer), and the switch holds its egress beats while
    a downlink's replay buffer is full. The wires share the run-time fault settings port
    ``flt`` (:data:`spec.fabric.SETTINGS` and :data:`spec.fabric.RETRY_SETTINGS`: frames
    dropped, corrupted, duplicated, their sequence tags and the ACK/NAKs damaged; all
    rates 0 by default); wire ``k`` (``2p`` the uplink of node ``p``, ``2p + 1`` its
    downlink) uses the seed ``flt.seed + k`` (16 bits). Each link's counters are ports
    ``up[p]`` and ``down[p]`` (:meth:`rtl.fabric.reliable_link.ReliableLink.
    port_signatures`). Latency: a frame of ``n`` beats reaches the switch ``n + 1``
    cycles later than over a plain link, and its receiver the same again (the reliable
    link's Timing), plus the replays when the wire damages it; the credits
    (:func:`~spec.fabric_profiles.nic_top_credits` with ``retry``) cover that delivery
    latency. Backpressure: MemTx's ``o`` waits while the uplink's replay buffer could
    not hold the next beat or a whole frame (nothing is dropped: the frame's source holds
    it). On faults every frame still reaches its receiver once, whole and in order per
    link, so every request is executed once and every response lands once; only the
    cycles move (the reliable link's receiver judges each frame by its FCS and tag, and
    the sender replays what was not acknowledged).
    """

    def __init__(self, nodes=MEM_TOP_DEFAULTS["nodes"], framing="compact", fabric="board",
                 tags=None, mem_words=MEM_TOP_DEFAULTS["mem_words"],
                 max_payload=MEM_TOP_DEFAULTS["max_payload"], items=256, raws=16,
                 events=1024, target_latency=0, target_reads=TARGET_LEVEL_READS,
                 link_retry=False):
        try:
            profile = fabric_profile(fabric)
        except ValueError as exc:
            reject(self, str(exc))
        try:
            self.framing = Framing(framing)
        except ValueError:
            reject(self, f"framing must be 'l2' or 'compact', not {framing!r}")
        self.fabric = profile.name
        self.nodes = check_int(self, "nodes", nodes, 2, 16)
        try:
            self.tags = default_tags(fabric) if tags is None else check_tags(tags)
        except ValueError as exc:
            reject(self, str(exc))
        self.mem_words, self.max_payload = mem_words, max_payload
        try:
            self.target_latency, self.target_reads = check_target(target_latency,
                                                                  target_reads)
        except ValueError as exc:
            reject(self, str(exc))
        if not isinstance(link_retry, bool):
            reject(self, f"link_retry must be True or False, not {link_retry!r}")
        self.link_retry = link_retry
        self.link_latency = profile.link
        self.hop_latency = switch_hop_latency(profile)
        self.credits = nic_top_credits(profile, MEM_WIDTH, max_payload, link_retry)
        self.queue = request_queue_depth(nodes, self.tags)
        self.switch = Switch(MEM_WIDTH, nodes, self.framing, self.credits,
                             backpressure=link_retry, hop_latency=self.hop_latency)
        lat = self.link_latency
        beats = mem_frame_beats(self.framing, max_payload)
        wire = ((lambda: ReliableLink(MEM_WIDTH, lat, beats)) if link_retry
                else (lambda: Link(MEM_WIDTH, lat)))
        self.blocks = [dict(
            tt=TagTable(self.tags, mem_words),
            rq=MemRequester(self.framing, mem_words),
            rs=MemResponder(self.framing, mem_words, max_payload, self.queue,
                            self.target_latency, self.target_reads),
            rx=MemRx(self.framing, mem_words, max_payload),
            nic_tx=MemTx(self.credits),
            mem=LocalMemory(mem_words),
            up=wire(), down=wire(),
            cret=CreditReturn(self.link_latency)) for _ in range(nodes)]
        players, recorders = {}, {}
        for p in range(nodes):
            players[f"cmd{p}"] = (mem_cmd_layout, items)
            players[f"raw{p}"] = (packet_layout(MEM_WIDTH), raws)
            recorders[f"tx{p}"] = (packet_layout(MEM_WIDTH), events)
            recorders[f"wr{p}"] = (write_event_layout(mem_words), events)
            recorders[f"rsp{p}"] = (rsp_event_layout, events)
        ports = {"node_id": In(8).array(nodes),
                 "cnt_rx": Out(CountersSignature(MEM_RX_COUNTERS)).array(nodes),
                 "cnt_resp": Out(CountersSignature(MEM_RESP_COUNTERS)).array(nodes),
                 "outstanding": Out(16).array(nodes),
                 "credit_errors": Out(1)}
        if link_retry:
            settings, counters = ReliableLink.port_signatures()
            ports.update({"flt": In(settings), "up": Out(counters).array(nodes),
                          "down": Out(counters).array(nodes)})
        super().__init__(players=players, recorders=recorders, ports=ports)

    def elaborate_design(self, m, players, recorders):
        m.submodules.switch = sw = self.switch
        m.d.comb += [sw.table_wr.valid.eq(0), sw.src_wr.valid.eq(0)]
        errors = []
        live = ~ResetSignal()
        for p, b in enumerate(self.blocks):
            for name, block in b.items():
                m.submodules[f"{name}{p}"] = block
            tt, rq, rs, rx, tx, mem = (b["tt"], b["rq"], b["rs"], b["rx"], b["nic_tx"],
                                      b["mem"])
            up, down, cr = b["up"], b["down"], b["cret"]
            node_id = self.node_id[p]
            cmd, raw = players[f"cmd{p}"].o, players[f"raw{p}"].o
            txrec, wrrec, rsprec = (recorders[f"tx{p}"].i, recorders[f"wr{p}"].i,
                                    recorders[f"rsp{p}"].i)
            wiring.connect(m, cmd, rq.cmd)
            wiring.connect(m, raw, tx.raw)
            wiring.connect(m, rq.o, tx.req)
            wiring.connect(m, rs.o, tx.rsp)
            wiring.connect(m, rx.req, rs.req)
            # The memory's write port: the landing responses first, then the atomics.
            landing = rx.wr.valid
            m.d.comb += [
                rq.node_id.eq(node_id), rs.node_id.eq(node_id), rx.node_id.eq(node_id),
                rq.free.eq(tt.free), rq.free_tag.eq(tt.free_tag),
                tt.take.eq(rq.take), tt.take_entry.eq(rq.take_entry),
                tt.lookup_tag.eq(rx.lookup_tag), rx.lookup_pending.eq(tt.lookup_pending),
                rx.lookup_entry.eq(tt.lookup_entry), tt.answer.eq(rx.answer),
                tt.release.eq(rx.release), tt.release_tag.eq(rx.release_tag),
                tx.rsp_has.eq(rs.has), tx.rsp_need.eq(rs.need),
                rs.start_ok.eq(tx.rsp_start_ok),
                mem.rd0_addr.eq(rs.rd0_addr), mem.rd1_addr.eq(rs.rd1_addr),
                rs.rd0_data.eq(mem.rd0_data), rs.rd1_data.eq(mem.rd1_data),
                rs.wr_block.eq(landing),
                mem.wr.valid.eq(landing | rs.wr.valid),
                mem.wr.payload.eq(Mux(landing, rx.wr.payload.as_value(),
                                      rs.wr.payload.as_value())),
                wrrec.valid.eq(landing | rs.wr.valid),
                wrrec.payload.addr.eq(mem.wr.payload.addr),
                wrrec.payload.be.eq(mem.wr.payload.be),
                rsprec.valid.eq(rx.rsp.valid), rsprec.payload.eq(rx.rsp.payload),
                # Uplink: the link is always ready (from reset, so that every simulator
                # evaluates the logic behind it when reset is released).
                up.i.valid.eq(tx.o.valid), up.i.payload.eq(tx.o.payload),
                tx.o.ready.eq(up.i.ready & live),
                txrec.valid.eq(tx.o.valid & up.i.ready & live),
                txrec.payload.eq(tx.o.payload),
                sw.i[p].valid.eq(up.o.valid), sw.i[p].payload.eq(up.o.payload),
                up.o.ready.eq(live),
                down.i.valid.eq(sw.o[p].valid), down.i.payload.eq(sw.o[p].payload),
                sw.o[p].ready.eq(down.i.ready), down.o.ready.eq(live),
                rx.i.valid.eq(down.o.valid), rx.i.payload.eq(down.o.payload),
                cr.i.eq(sw.credit[p]), tx.give.eq(cr.o),
                self.outstanding[p].eq(tt.outstanding),
            ]
            for port, block in ((self.cnt_rx[p], rx), (self.cnt_resp[p], rs)):
                wiring.connect(m, PortView(port.signature, block), wiring.flipped(port))
            if self.link_retry:
                for k, (link, port) in enumerate(((up, self.up[p]), (down, self.down[p]))):
                    connect_wire(m, link, self.flt, port, 2 * p + k)
            errors += [tx.underflow, tx.overflow]
        m.d.comb += self.credit_errors.eq(sum(errors) != 0)
