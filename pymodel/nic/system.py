"""Cycle-exact twin of :class:`rtl.tops.nic_top.NicTop`: frames, writes, stamps, counters.

The system model composes the twins of the NIC's blocks, one per RTL file of
``rtl/nic`` (:class:`~pymodel.nic.nic_tx.NicTxModel` with its
:class:`~pymodel.nic.store_segmenter.StoreSegmenterModel` and
:class:`~pymodel.nic.tx_framer.TxFramerModel`, :class:`~pymodel.nic.credit_return.
CreditReturnModel`, :class:`~pymodel.nic.fault_injector.FaultInjectorModel`,
:class:`~pymodel.nic.nic_rx.NicRxModel` with its :class:`~pymodel.nic.window_table.
WindowTableModel`) with the fabric's (``Link``, ``Switch``, the reliable link) and, for
the ``pcie`` attachment, the host interface's, cycle by cycle (with ``completion="e2e"``
also the :class:`~pymodel.nic.completion_gen.CompletionGenModel` and
:class:`~pymodel.nic.outstanding_tracker.OutstandingTrackerModel`, on any attachment and
with or without ``retry``: a receiver's completion counts its frames at NicRx's ``ack``,
which behind PCIe is the acceptance of the frame's last posted write by the host
interface, so the up direction of the interfaces is still played after the loop); each
block twin is stepped with ``step(c, side)`` (:mod:`pymodel.cycle`). It imports nothing
from the RTL: the layouts, the frame and credit sizing formulas and the LFSR polynomial come from
:mod:`spec`, and the behaviour (the stall patterns included) is computed with the
model's own code.

The end-to-end completion (:mod:`pymodel.nic.system_e2e`) and the receive and PCIe host
sides (:mod:`pymodel.nic.system_host`) are parts of the model in their own modules, base
classes of :class:`NicSystemModel`.
"""

from collections import deque
from dataclasses import replace

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.fabric.reliable_link import ReliableLinkModel
from pymodel.fabric.switch import SwitchModel
from pymodel.nic.credit_return import CreditReturnModel
from pymodel.nic.nic_tx import NicTxModel
from pymodel.nic.params import NicParams
from pymodel.nic.peer_retry import PeerRetrySenderModel
from pymodel.nic.store import Store
from pymodel.nic.system_e2e import E2eCompletion
from pymodel.nic.system_host import ReceiveAndHost
from pymodel.packet import pack_beat, unpack_beat
from pymodel.stall import stall_pattern
from spec.fabric import check_source_write
from spec.formats.nic import ID_BITS, frame_beats, header_bytes
from spec.host import PROFILES
from spec.nic import (
    COMPLETION_DEFAULTS,
    check_completion,
    check_destinations,
    check_peer_retry,
    check_records,
    completion_flush_idle,
)

__all__ = ["NicSystemModel", "NicParams", "Store"]


class NicSystemModel(E2eCompletion, ReceiveAndHost):
    """The top's parameters (checked: :class:`pymodel.nic.params.NicParams`, also
    :attr:`params`); :meth:`run` plays one scenario. :meth:`of` builds one from a
    :class:`NicParams`."""

    def __init__(self, width, framing, nodes, link_latency, mem_words, max_payload, credits,
                 retry=False, attachment="integrated", fabric="board", completion="credit",
                 coalesce=None, flush_idle=None, timeout=None, records=0, destinations=None,
                 peer_retry=False, peer_window=None, switch_faults=False):
        self.params = prm = NicParams(framing, width, nodes, link_latency, mem_words,
                                      max_payload, credits, bool(retry), attachment, fabric)
        self.attachment = prm.attachment
        self.pcie = prm.attachment == "pcie"
        self.profile = PROFILES["pcie"]
        self.w, self.framing, self.nodes = prm.width, prm.framing, prm.nodes
        self.retry = prm.retry
        self.lat, self.mem_words = prm.link_latency, prm.mem_words
        self.max_payload, self.credits = prm.max_payload, prm.credits
        self.h = header_bytes(prm.framing)
        # End-to-end completion (NicTop's ``completion``, ``coalesce``, ``flush_idle``,
        # ``timeout``; peers: node ids 0 .. nodes - 1).
        self.completion = check_completion(completion)
        self.e2e = completion == "e2e"
        self.coalesce = COMPLETION_DEFAULTS["coalesce"] if coalesce is None else coalesce
        self.timeout = COMPLETION_DEFAULTS["timeout"] if timeout is None else timeout
        # Completion records (NicTop's ``records``): the ring's slots, 0 for none.
        self.records = check_records(records, prm.mem_words, completion)
        self.flush_idle = (completion_flush_idle(prm.width, prm.framing, prm.max_payload)
                           if flush_idle is None else flush_idle)
        # Many destinations (NicTop's ``destinations``; docs/nic.md, "4,096
        # destinations"): node 0 sends to ids 0 .. destinations - 1 and has the id
        # ``destinations``; receiver p stands for the ids d with 1 + d mod (nodes - 1)
        # = p; 16-bit ids; the switch's tables hold 2 * destinations entries.
        self.destinations = check_destinations(destinations, prm.framing, completion)
        self.id_bits = 8 if destinations is None else ID_BITS
        self.ids = self.nodes if destinations is None else destinations
        self.table_entries = 256 if destinations is None else 2 * destinations
        # Per-peer retry (NicTop's ``peer_retry``, ``peer_window``; docs/nic.md,
        # "Per-peer retry"): PSNs and go-back-N per destination over node ids.
        self.peer_retry, self.peer_window = check_peer_retry(peer_retry, completion,
                                                             peer_window)
        if self.peer_retry and destinations is not None:
            raise ValueError("peer_retry: not with destinations")
        # Frames lost inside the switch (NicTop's ``switch_faults``): run's switch_drops.
        if not isinstance(switch_faults, bool):
            raise ValueError(f"switch_faults must be True or False, not {switch_faults!r}")
        self.switch_faults = switch_faults
        self._senders = []

    @classmethod
    def of(cls, params):
        """The model of the top with ``params`` (a :class:`NicParams`)."""
        if not isinstance(params, NicParams):
            raise ValueError(f"params must be a NicParams, not {params!r}")
        return cls(params.width, params.framing, params.nodes, params.link_latency,
                   params.mem_words, params.max_payload, params.credits, params.retry,
                   params.attachment, params.fabric)

    def run(self, stores, node_ids, stalls=None, faults=None, max_cycles=2_000_000,
            table_writes=(), window_writes=None, link_settings=None, source_writes=(),
            mem=None, until=0, stop=None, switch_drops=None):
        """Play ``stores[p]`` (lists of :class:`Store`) from each node.

        ``mem[p]`` (optional) is node ``p``'s local memory (``mem_words`` words) before the
        run, as a run after a reset that kept the memories finds it (the soak's chunks);
        by default every memory starts at zero.

        ``table_writes`` are ``(node, port)`` switch-table writes played one per cycle
        from cycle 0 (the ``tbl`` player of the top, no stalls); ``source_writes``
        likewise the switch's source-table writes ``(node, port)`` (the ``src`` player;
        ``port`` = nodes: any port; without them every node id is allowed everywhere).
        ``window_writes[p]`` are the ``(src, base, size)`` window-table writes (words)
        of node ``p``'s receiver, likewise one per cycle from cycle 0 (the ``win<p>``
        player); without them every source may write the whole memory.

        ``stalls[p]`` is the ``(seed, rate)`` of node ``p``'s command player, ``faults[p]``
        the downlink beat numbers whose byte 0 is inverted. With ``retry``,
        ``link_settings`` (a :class:`FaultSettings`) are the ``flt_*`` ports of the top:
        wire ``2p`` (uplink of ``p``) and ``2p + 1`` (its downlink) use seed + wire.
        ``until``: run at least to that cycle (e2e timeouts of a silent destination).
        ``stop``: end the run at that cycle whatever is still busy (a sender of
        ``peer_retry`` that is never acknowledged resends for ever: the hostile tests).
        ``switch_drops[o]`` (needs ``switch_faults``): the frames granted to egress ``o``
        (numbered from 0) that the switch drops (:func:`spec.fabric.check_switch_drops`);
        ``switch_dropped`` lists ``(o, message id)`` of each (None: a completion).
        Returns a dict (see the keys at the end).
        """
        n, w, lat = self.nodes, self.w, self.lat
        if mem and self.pcie:
            raise ValueError("mem: a run with initial memories needs attachment "
                             "'integrated', not 'pcie'")
        stalls = stalls or {}
        faults = faults or {}
        self._senders = [PeerRetrySenderModel(n, self.peer_window, self.timeout)
                         for _ in range(n)] if self.peer_retry else [None] * n
        txs = [NicTxModel(w, self.framing, self.max_payload, self.credits, node_ids[p],
                          self.completion, self.id_bits, self._senders[p])
               for p in range(n)]
        e2e = self._e2e_start(node_ids, window_writes, mem, faults) if self.e2e else None
        crs = [CreditReturnModel(lat) for _ in range(n)]
        msgs, cmds = [], []
        total_beats = frames = 0
        for p in range(n):
            for s in stores.get(p, []):
                total_beats += len(s.beats(w))
                cmds.append({"src": p, "dst": s.dst, "msgs": []})
                for k, (seg, slots, frame) in enumerate(txs[p].frames(s)):
                    mid = len(msgs)
                    cmds[-1]["msgs"].append(mid)
                    # The store's release gates the player's valid while it offers the
                    # store's first command beat: the first frame's slots up to its
                    # first body beat.
                    gate = [kind for kind, _ in slots].index("body") if k == 0 else -1
                    msgs.append({"src": p, "store": seg, "frame": frame, "id": mid,
                                 "beats": len(slots), "accept": None, "credit_stamps": [],
                                 "cmd": len(cmds) - 1, "release": s.release, "gate": gate})
                    msgs[-1]["need"] = txs[p].queue(mid, seg, slots)
                    frames += 1
        # Generous: every frame may wait a whole credit round trip (2 links + switch).
        hop = self.params.hop_latency
        horizon = 64 * (total_beats + 64) + (2 * lat + 8 + hop) * (frames + 1) * n + 4096
        horizon += max((s.release for p in range(n) for s in stores.get(p, [])), default=0)
        if self.retry or self.peer_retry:                   # replays: generous again
            horizon *= 8
        if self.peer_retry:              # resends after timeouts
            horizon += 16 * self.timeout * (1 + sum(len(f) for f in faults.values())
                                            + sum(len(f) for f in (switch_drops or {}).values()))
        horizon = max(horizon, stop or 0)
        stall = {p: stall_pattern(*stalls.get(p, (1, 0)), horizon) for p in range(n)}
        words, his = self._host_words(txs, msgs) if self.pcie else ({}, {})
        kw = [0] * n
        if switch_drops and not self.switch_faults:
            raise ValueError("switch_drops: the model needs switch_faults=True")
        sw = SwitchModel(n, self.framing, self.credits, backpressure=self.retry, width=w,
                         hop_latency=hop, table_entries=self.table_entries,
                         faults=(switch_drops or {}) if self.switch_faults else None)
        source_writes = [check_source_write(n, *x, entries=self.table_entries)
                         for x in source_writes]
        links, meta = {}, {}
        if self.retry:
            base = link_settings or FaultSettings()
            longest = frame_beats(w, self.framing, self.max_payload)
            for p in range(n):
                for k, side in enumerate(("up", "down")):
                    seed = (base.seed + 2 * p + k) & 0xFFFF
                    links[side, p] = ReliableLinkModel(w, lat, longest,
                                                       replace(base, seed=seed))
                    meta[side, p] = deque()
        cmd_stamps = {p: [] for p in range(n)}
        up = {}                                        # cycle -> {port: beat}
        down = {p: [] for p in range(n)}               # (cycle, beat)
        c = 0
        idle_since = 0
        while True:
            if stop is not None and c >= stop:
                break
            if c >= max_cycles or c >= horizon:
                raise RuntimeError("model did not finish: raise max_cycles")
            active = False
            sent_now = {}
            took = [False] * n
            for p in range(n):
                tx = txs[p]
                give = crs[p].output(c)
                head = tx.head()
                offer = e2e["gen"][p].offer(c) if e2e else None
                if head is None and offer is None and not (e2e and tx.cpl_rest) and not (
                        tx.sender and (tx.rs_rest or tx.sender.offer() is not None)):
                    if give:
                        tx.step(c, {"give": give})
                    continue
                active = True
                mid, si, _ = head if head is not None else (None, 0, None)
                if head is None:
                    valid = False
                elif self.pcie:                # the command beats come from the interface
                    valid = his[p].mmio_head(c) is not None
                else:
                    m = msgs[mid]
                    valid = not stall[p][c] and (si > m["gate"] or c >= m["release"])
                ready = not self.retry or links["up", p].ready()
                res = tx.step(c, {"valid": valid, "link_ready": ready, "give": give,
                                  "cpl": offer})
                out = res["o"]
                if e2e:
                    e2e["step"][p] = res
                if out is None:
                    continue
                mid, beat, body, number = out
                if body:
                    took[p] = True
                    if not self.pcie:
                        cmd_stamps[p].append(c)
                    if msgs[mid]["accept"] is None:
                        msgs[mid]["accept"] = c
                if self.retry:
                    sent_now[p] = beat
                    meta["up", p].append((mid, number))
                else:
                    data, nb, first, last = unpack_beat(w, beat)
                    up.setdefault(c + lat, {})[p] = (data, nb, first, last, mid, number)
            for p in his:                    # pcie: the host and the MMIO path
                word = words[p][kw[p]] if kw[p] < len(words[p]) else None
                due = word is not None and c >= word[2]       # the host's arrival
                r = his[p].step(c, mmio_in=word[1] if due else None, mmio_ready=took[p])
                if r.mmio_in_taken:
                    cmd_stamps[p].append(c)
                    if word[1]["first"] and msgs[word[0]]["accept"] is None:
                        msgs[word[0]]["accept"] = c
                    kw[p] += 1
                if word is not None or his[p].next_event(c) is not None:
                    active = True
            tw = table_writes[c] if c < len(table_writes) else None
            sw_src = source_writes[c] if c < len(source_writes) else None
            if self.retry:
                arrivals = {}
                for p in range(n):
                    out = links["up", p].cycle(c, sent_now.get(p))
                    if out is not None:
                        arrivals[p] = (*unpack_beat(w, out), *meta["up", p].popleft())
                ready = [links["down", o].ready() for o in range(n)]
                left, pops = sw.cycle(c, arrivals, tw, ready=ready, src_write=sw_src)
                for o in range(n):
                    b = left.get(o)
                    if b is not None:
                        meta["down", o].append(b[4:])
                    out = links["down", o].cycle(c, None if b is None else pack_beat(w, *b[:4]))
                    if out is not None:
                        down[o].append((c, (*unpack_beat(w, out), *meta["down", o].popleft())))
            else:
                egress, pops = sw.cycle(c, up.pop(c, {}), tw, src_write=sw_src)
                for o, beat in egress.items():
                    down[o].append((c + 1 + lat, beat))
            for p in pops:
                crs[p].step(c, {"i": 1})
            if e2e:
                self._e2e_cycle(c, e2e, down, msgs)
            busy = (active or up or any(cr.busy() for cr in crs) or not sw.idle()
                    or c < until or (e2e is not None and self._e2e_busy(e2e, down, txs))
                    or c < len(table_writes) or c < len(source_writes)
                    or any(link.busy() for link in links.values()))
            if busy:
                idle_since = c + 1
            elif c > idle_since + 2 * lat + 4:
                break
            c += 1
        # Completion: the credit of each message's last wire beat reaching its sender.
        for p in range(n):
            cr, k = txs[p].cr, 0
            for mid, slots, _ in txs[p].plan:
                k += len(slots)
                msgs[mid]["completion"] = cr[k - 1] if k <= len(cr) else None
        window_writes = window_writes or {}
        mem = mem or {}
        if e2e:
            rx = self._e2e_finish(e2e, msgs)
        else:
            rx = {p: self._receive(p, down[p], node_ids[p], set(faults.get(p, ())), msgs,
                                   window_writes.get(p, ()), mem.get(p))
                  for p in range(n)}
        landed = {}
        for p in his:
            end, landed[p] = self._post(rx[p], his[p], msgs, p,
                                        e2e["ok"][p] if self.records else ())
            c = max(c, end)
        if self.records and not self.pcie:
            for p in range(n):
                landed[p], end = self._records_local(rx[p], e2e["ok"][p], mem.get(p))
                c = max(c, end)
        if self.records:            # complete: the record that covers it in memory
            self._cover(e2e, msgs, landed)
        per_store = []
        for cmd in cmds:
            parts = [msgs[i] for i in cmd["msgs"]]
            writes = [m.get("remote_writes", [None])[-1] for m in parts]
            per_store.append({
                "src": cmd["src"], "dst": cmd["dst"], "accept": parts[0]["accept"],
                "remote_write": None if None in writes else max(writes),
                "completion": parts[-1]["completion"],
                "frames": [m["frame"] for m in parts],
                "wire_beats": sum(m["beats"] for m in parts)})
        return {"messages": msgs, "stores": per_store, "cmd_stamps": cmd_stamps,
                "tx": {p: txs[p].tx for p in range(n)},
                "cr": {p: txs[p].cr for p in range(n)},
                "wr": {p: rx[p]["wr"] for p in range(n)},
                "counters": {p: rx[p]["counters"] for p in range(n)},
                "mem": {p: rx[p]["mem"] for p in range(n)},
                "credit_errors": any(tx.credit_error for tx in txs) or sw.overflow,
                "cycles": c,
                "switch": {"drop_spoofed": sw.drop_spoofed,
                           **({"drop_fault": sw.drop_fault} if self.switch_faults else {})},
                "switch_dropped": [(o, b[4]) for o, b in sw.dropped],
                "host": {p: dict(hi.counters) for p, hi in his.items()},
                "links": {f"{side}{p}": links[side, p].all_counters() for side, p in links},
                "e2e": self._e2e_result(e2e) if e2e else None,
                "peer": self._peer_result(e2e) if self.peer_retry else None,
                "records": landed if self.records else None}
