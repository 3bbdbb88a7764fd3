"""The parts of :class:`rtl.tops.nic_top.NicTop` that attach a node's end-to-end
completion, its PCIe host interface and its completion records (a base class of NicTop:
its ``elaborate_design`` calls these)."""

from amaranth import Mux, Signal
from amaranth.lib import wiring

from rtl.nic.completion_gen import CompletionGen
from rtl.nic.completion_keyed import CompletionKeyed
from rtl.nic.completion_record import record_event
from rtl.nic.outstanding_tracker import OutstandingTracker
from rtl.nic.tracker_memory import TrackerMemory
from spec.checks import reject
from spec.fabric import SWITCH_DROPS
from spec.nic import PCIE_WORD_BITS, check_peer_retry
from spec.ports import PortView

__all__ = ["NicAttachments"]


class NicAttachments:
    """The attach methods of :class:`rtl.tops.nic_top.NicTop`."""

    def _check_peer_retry(self, peer_retry, window, completion, dests):
        """``peer_retry``, ``peer_window`` checked (:func:`spec.nic.check_peer_retry`;
        not with ``destinations``): errors name the option."""
        try:
            self.peer_retry, self.peer_window = check_peer_retry(peer_retry, completion,
                                                                 window)
        except ValueError as exc:
            reject(self, str(exc))
        if self.peer_retry and dests:
            reject(self, "peer_retry: not with destinations")

    def _check_switch_faults(self, switch_faults):
        """``switch_faults`` checked: a bool (an error naming it otherwise)."""
        if not isinstance(switch_faults, bool):
            reject(self, f"switch_faults must be True or False, not {switch_faults!r}")
        return switch_faults

    def _switch_fault_players(self, p):
        """``switch_faults``: the player ``sflt<p>`` of egress ``p``'s frames to drop."""
        return {f"sflt{p}": (32, SWITCH_DROPS)} if self.switch_faults else {}

    def _attach_switch_faults(self, m, sw, players):
        """``switch_faults``: player ``sflt<p>`` feeds the switch's ``faults[p]`` (one
        frame number taken per dropped frame)."""
        for p in range(self.nodes) if self.switch_faults else ():
            wiring.connect(m, players[f"sflt{p}"].o, sw.faults[p])

    def _completion_blocks(self, width, framing, nodes, dests):
        """``e2e``: the generators and trackers of the nodes (none with ``peer_retry``:
        the sender is the tracker)."""
        if dests:
            self.gens = [CompletionKeyed(width, dests, self.coalesce, self.flush_idle)
                         for _ in range(nodes)]
            self.trks = [TrackerMemory(dests, self.timeout, record_port=bool(self.records))
                         for _ in range(nodes)]
        else:
            self.gens = [CompletionGen(width, framing, nodes, self.coalesce,
                                       self.flush_idle, self.peer_retry)
                         for _ in range(nodes)] if self.e2e else []
            self.trks = [OutstandingTracker(nodes, self.timeout)
                         for _ in range(nodes)] if self.e2e and not self.peer_retry else []

    def _attach_peer(self, m, p, tx, rx, rec):
        """``peer_retry``: node ``p``'s sender (in NicTx) takes the completions that reach
        the node (an unknown source as id 255) and stands for the tracker: its ports
        ``otrk[p]`` read the sender's registers (``dropped`` the count of the last
        accepted completion); ports ``peer[p]`` (:func:`spec.ports.
        peer_retry_signature`). ``rec`` (``records``): the recorder takes, as the
        tracker's ``accepted``, a completion the sender accepts whose count moves the
        destination's oldest unacknowledged PSN (frames newly completed, as the tracker
        accepts only a count that advances; a NAK that repeats the count writes no
        record), and the ``otrk[p]`` ``completed`` and ``dropped``."""
        snd, chk, cpl = tx.peer, rx.check, rx.cpl.payload
        m.d.comb += [tx.ack.valid.eq(rx.cpl.valid),
                     tx.ack.payload.src.eq(Mux(cpl.known, cpl.src, 0xFF)),
                     tx.ack.payload.count.eq(cpl.count), tx.ack.payload.gap.eq(cpl.status[1])]
        trk, port = self.otrk[p], self.peer[p]
        m.d.comb += [trk.cpl_ok.eq(snd.ack_ok), trk.cpl_bad.eq(snd.ack_bad)]
        for d in range(self.nodes):
            dropped = Signal(16, name=f"peer_dropped{p}_{d}")
            with m.If(snd.accepted & (cpl.src == d)):
                m.d.sync += dropped.eq(cpl.dropped)
            m.d.comb += [trk.outstanding[d].eq(snd.next_psn[d] - snd.una[d]),
                         trk.completed[d].eq(snd.una[d]), trk.dropped[d].eq(dropped),
                         trk.timeouts[d].eq(snd.timeouts[d])]
        if rec is not None:
            una = Signal(16, name=f"peer_una{p}")
            for d in range(self.nodes):
                with m.If(cpl.src == d):
                    m.d.comb += una.eq(snd.una[d])
            m.d.comb += [rec.accepted.valid.eq(snd.accepted & (cpl.count != una)),
                         rec.accepted.payload.src.eq(cpl.src),
                         rec.completed.eq(trk.completed), rec.dropped.eq(trk.dropped)]
        ports = {"ack_ok": snd.ack_ok, "ack_bad": snd.ack_bad, "refused": snd.refused,
                 "next_psn": snd.next_psn, "una": snd.una, "timeouts": snd.timeouts,
                 "resent": snd.resent, "expected": chk.expected, "gaps": chk.gaps,
                 "duplicates": chk.duplicates}
        wiring.connect(m, PortView(port.signature, ports), wiring.flipped(port))

    def _attach_completion(self, m, p, tx, rx, node_id, cprec, rec):
        """``e2e``: node ``p``'s completion generator (NicRx ``ack`` -> NicTx ``cpl``) and
        outstanding tracker (NicTx ``sent``, NicRx ``cpl``)."""
        m.submodules[f"cgen{p}"] = gen = self.gens[p]
        wiring.connect(m, rx.ack, gen.ev)
        wiring.connect(m, gen.o, tx.cpl)
        if self.peer_retry:
            m.d.comb += [cprec.valid.eq(rx.cpl.valid), cprec.payload.eq(rx.cpl.payload)]
            self._attach_peer(m, p, tx, rx, rec)
            m.d.comb += gen.node_id.eq(node_id)
            wiring.connect(m, PortView(self.cgen[p].signature, gen),
                           wiring.flipped(self.cgen[p]))
            return
        m.submodules[f"otrk{p}"] = trk = self.trks[p]
        wiring.connect(m, tx.sent, trk.sent)
        wiring.connect(m, rx.cpl, trk.cpl)
        if rec is not None:
            wiring.connect(m, trk.accepted, rec.accepted)
            if self.destinations:       # the record's entry through the record port
                m.d.comb += [trk.rec_id.eq(rec.read_id),
                             rec.completed.eq(trk.rec_completed),
                             rec.dropped.eq(trk.rec_dropped)]
            else:
                m.d.comb += [rec.completed.eq(trk.completed), rec.dropped.eq(trk.dropped)]
        if self.destinations:           # the one sender tracked: node 0
            m.d.comb += gen.sender.eq(self.node_id[0])
        else:
            m.d.comb += gen.node_id.eq(node_id)
        m.d.comb += [cprec.valid.eq(rx.cpl.valid), cprec.payload.eq(rx.cpl.payload)]
        for port, block in ((self.cgen[p], gen), (self.otrk[p], trk)):
            wiring.connect(m, PortView(port.signature, block), wiring.flipped(port))

    def _attach_pcie(self, m, p, cmd, tx, rx, mem, wrrec, rec=None, cqrec=None):
        """Node ``p``'s host interface between the host (player ``cmd<p>``) and NicTx, and
        between NicRx and ``mem<p>``."""
        m.submodules[f"hi{p}"] = hi = self.his[p]
        hin, hout, c, o = hi.mmio_in.payload, hi.mmio.payload, cmd.payload, tx.cmd.payload
        wb, ack = PCIE_WORD_BITS, self.mmio_ack_bit
        m.d.comb += [
            # The host: one posted write per store, the register offset names the
            # destination (node or id) and the store's word address, and its top bit
            # the store's ack request.
            hi.mmio_in.valid.eq(cmd.valid), cmd.ready.eq(hi.mmio_in.ready),
            hin.addr.eq(c.ack_req << ack | c.dst[:ack - wb] << wb | c.addr[6:6 + wb]),
            hin.nbytes.eq(c.length), hin.data.eq(c.data),
            hin.first.eq(c.first), hin.last.eq(c.last),
            # The device: the host write's words are NicTx's command beats.
            tx.cmd.valid.eq(hi.mmio.valid), hi.mmio.ready.eq(tx.cmd.ready),
            o.dst.eq(hout.addr[wb:ack]), o.addr.eq(hout.addr[:wb] << 6),
            o.ack_req.eq(hout.addr[ack]),
            o.length.eq(hout.nbytes), o.data.eq(hout.data),
            o.nbytes.eq(Mux(hout.last, (hout.nbytes - 1)[:6] + 1, 64)),
            o.first.eq(hout.first), o.last.eq(hout.last),
            # NicRx's writes: one posted write TLP per frame.
            hi.wr.valid.eq(rx.wr.valid), hi.wr.payload.addr.eq(rx.wr.payload.addr),
            hi.wr.payload.data.eq(rx.wr.payload.data), hi.wr.payload.be.eq(rx.wr.payload.be),
            hi.wr.payload.last.eq(rx.wr_last),
            hi.rd_req.valid.eq(0),
            wrrec.valid.eq(hi.mem_wr.valid),
            wrrec.payload.addr.eq(hi.mem_wr.payload.addr),
            wrrec.payload.be.eq(hi.mem_wr.payload.be),
        ]
        if rec is not None:
            self._attach_records(m, p, rx, hi, rec, cqrec.i)
        wiring.connect(m, hi.mem_rd_addr, mem.rd_addr)
        wiring.connect(m, mem.rd_data, hi.mem_rd_data)
        wiring.connect(m, hi.mem_wr, mem.wr)
        wiring.connect(m, PortView(self.hi[p].signature, hi), wiring.flipped(self.hi[p]))

    def _attach_records(self, m, p, rx, hi, rec, cq):
        """``records`` with ``pcie``: node ``p``'s records share the interface's ``wr``
        with NicRx's writes, outside NicRx's frames (a posted write TLP gathers a frame's
        words up to ``last``); recorder ``cq<p>`` takes the interface's ``marked``."""
        in_frame = Signal(name=f"rx_in_frame{p}")
        with m.If(rx.wr.valid):
            m.d.sync += in_frame.eq(~rx.wr_last)
        r = rec.wr
        m.d.comb += [rec.free.eq(~rx.wr.valid & ~in_frame), r.ready.eq(hi.wr.ready),
                     cq.valid.eq(hi.marked.valid),
                     # With destinations the tag is the ring slot; the record's id and
                     # count are in the word written in the same cycle.
                     cq.payload.eq(record_event(hi.marked.payload, hi.mem_wr.payload.data)
                                   if self.destinations else hi.marked.payload),
                     hi.marked.ready.eq(1)]
        with m.If(r.valid):
            m.d.comb += [hi.wr.valid.eq(1), hi.wr.payload.addr.eq(r.payload.addr),
                         hi.wr.payload.data.eq(r.payload.data), hi.wr.payload.be.eq(-1),
                         hi.wr.payload.last.eq(1), hi.wr.payload.mark.eq(1),
                         hi.wr.payload.tag.eq(r.payload.tag)]
