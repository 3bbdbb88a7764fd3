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
"""

from collections import deque
from dataclasses import replace

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.fabric.reliable_link import ReliableLinkModel
from pymodel.fabric.switch import SwitchModel
from pymodel.host.host_interface import HostInterfaceModel
from pymodel.nic.completion_gen import CompletionGenModel
from pymodel.nic.credit_return import CreditReturnModel
from pymodel.nic.fault_injector import FaultInjectorModel
from pymodel.nic.nic_rx import NicRxModel
from pymodel.nic.nic_tx import NicTxModel
from pymodel.nic.outstanding_tracker import OutstandingTrackerModel
from pymodel.nic.params import NicParams
from pymodel.nic.store import Store
from pymodel.nic.window_table import WindowTableModel
from pymodel.packet import pack_beat, unpack_beat
from pymodel.stall import stall_pattern
from spec.fabric import check_source_write
from spec.formats.nic import COMPLETION_COUNT_BITS, frame_beats, header_bytes
from spec.host import PROFILES
from spec.nic import (
    COMPLETION_DEFAULTS,
    check_completion,
    completion_flush_idle,
    pcie_mmio_addr,
)

__all__ = ["NicSystemModel", "NicParams", "Store"]


class NicSystemModel:
    """The top's parameters (checked: :class:`pymodel.nic.params.NicParams`, also
    :attr:`params`); :meth:`run` plays one scenario. :meth:`of` builds one from a
    :class:`NicParams`."""

    def __init__(self, width, framing, nodes, link_latency, mem_words, max_payload, credits,
                 retry=False, attachment="integrated", fabric="board", completion="credit",
                 coalesce=None, flush_idle=None, timeout=None):
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
        self.flush_idle = (completion_flush_idle(prm.width, prm.framing, prm.max_payload)
                           if flush_idle is None else flush_idle)

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
            mem=None, until=0):
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
        Returns a dict (see the keys at the end).
        """
        n, w, lat = self.nodes, self.w, self.lat
        if mem and self.pcie:
            raise ValueError("mem: a run with initial memories needs attachment "
                             "'integrated', not 'pcie'")
        stalls = stalls or {}
        faults = faults or {}
        txs = [NicTxModel(w, self.framing, self.max_payload, self.credits, node_ids[p],
                          self.completion) for p in range(n)]
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
        if self.retry:                   # replays: generous again
            horizon *= 8
        stall = {p: stall_pattern(*stalls.get(p, (1, 0)), horizon) for p in range(n)}
        words, his = self._host_words(txs, msgs) if self.pcie else ({}, {})
        kw = [0] * n
        sw = SwitchModel(n, self.framing, self.credits, backpressure=self.retry, width=w,
                         hop_latency=hop)
        source_writes = [check_source_write(n, *x) for x in source_writes]
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
                if head is None and offer is None and not (e2e and tx.cpl_rest):
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
        for p in his:
            c = max(c, self._post(rx[p], his[p], msgs, p))
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
                "switch": {"drop_spoofed": sw.drop_spoofed},
                "host": {p: dict(hi.counters) for p, hi in his.items()},
                "links": {f"{side}{p}": links[side, p].all_counters() for side, p in links},
                "e2e": self._e2e_result(e2e) if e2e else None}

    # -- end-to-end completion -----------------------------------------------------------
    def _e2e_start(self, node_ids, window_writes, mem, faults):
        """``e2e``: the receivers run inside the cycle loop (their completions go back
        through the fabric): per node its FaultInjector, WindowTable and NicRx twins, its
        CompletionGen and OutstandingTracker twins."""
        n, window_writes, mem = self.nodes, window_writes or {}, mem or {}
        tables = [WindowTableModel(self.mem_words) for _ in range(n)]
        return {
            "rx": [NicRxModel(self.w, self.framing, self.max_payload, self.mem_words,
                              node_ids[p], tables[p], mem.get(p), p, "e2e")
                   for p in range(n)],
            "tables": tables, "at": [0] * n, "ptr": [0] * n,
            "windows": [list(window_writes.get(p, ())) for p in range(n)],
            "inj": [FaultInjectorModel(set(faults.get(p, ()))) for p in range(n)],
            "gen": [CompletionGenModel(self.w, self.framing, n, self.coalesce,
                                       self.flush_idle, node_ids[p]) for p in range(n)],
            "trk": [OutstandingTrackerModel(n, self.timeout) for _ in range(n)],
            "step": [{} for _ in range(n)],
            "cp": [([], []) for _ in range(n)],          # completions at the tracker
            "ok": [[] for _ in range(n)],                # (cycle, src, count) accepted
            "seq": [{} for _ in range(n)],               # dst -> mids of frames sent
        }

    def _e2e_cycle(self, c, e2e, down, msgs):
        """``e2e``, cycle ``c``: the downlink beats arriving in ``c`` into each receiver
        (window writes of the cycles before applied first, as :meth:`_receive` does),
        then each node's tracker and generator."""
        for p, rx in enumerate(e2e["rx"]):
            beats, windows, table = down[p], e2e["windows"][p], e2e["tables"][p]
            while e2e["ptr"][p] < len(beats) and beats[e2e["ptr"][p]][0] == c:
                cyc, beat = beats[e2e["ptr"][p]]
                e2e["ptr"][p] += 1
                while e2e["at"][p] < min(cyc, len(windows)):
                    table.step(e2e["at"][p], {"w": windows[e2e["at"][p]]})
                    table.commit()
                    e2e["at"][p] += 1
                done = rx.step(cyc, {"i": e2e["inj"][p].step(cyc, {"i": beat})["o"]}).get(
                    "written")
                if done is not None:
                    mid, last_write, index = done
                    if mid is not None and mid < len(msgs):
                        msgs[mid].setdefault("remote_writes", []).append(last_write)
                        msgs[mid].setdefault("remote_index", []).append(index)
                        msgs[mid]["remote_port"] = p
            res = e2e["step"][p]
            e2e["step"][p] = {}
            out = res.get("o")
            if res.get("sent") is not None:
                e2e["seq"][p].setdefault(res["sent"], []).append(out[0])
            cpl = rx.cpls.pop(c, None)
            r = e2e["trk"][p].step(c, {"sent": res.get("sent"), "cpl": cpl})
            if cpl is not None:
                e2e["cp"][p][0].append(cpl)
                e2e["cp"][p][1].append(c)
                if r["ok"]:
                    e2e["ok"][p].append((c, cpl[0], cpl[3]))
            e2e["gen"][p].step(c, {"ev": rx.acks.pop(c, None),
                                   "started": res.get("started", False)})

    @staticmethod
    def _e2e_busy(e2e, down, txs):
        return (any(g.busy() for g in e2e["gen"]) or any(tx.cpl_rest for tx in txs)
                or any(rx.acks or rx.cpls for rx in e2e["rx"])
                or any(e2e["ptr"][p] < len(down[p]) for p in range(len(txs))))

    def _e2e_finish(self, e2e, msgs):
        """``e2e``: each message's completion is the cycle an accepted completion first
        covered its frame at its sender's tracker (None if none did); the receivers'
        results as :meth:`_receive` gives them."""
        mask = (1 << COMPLETION_COUNT_BITS) - 1
        for m in msgs:
            m["completion"] = None
        for p in range(self.nodes):
            done = {}
            for c, d, count in e2e["ok"][p]:
                old = done.get(d, 0)
                new = old + ((count - old) & mask)
                for mid in e2e["seq"][p].get(d, [])[old:new]:
                    msgs[mid]["completion"] = c
                done[d] = new
        return {p: {"wr": rx.wr, "counters": rx.counters, "mem": rx.mem, "posted": rx.posted}
                for p, rx in enumerate(e2e["rx"])}

    @staticmethod
    def _e2e_result(e2e):
        """Per node: the CPL counters, the tracker's per-destination ports, the
        completions that reached the tracker (``cp``: events and cycles), the cycles of
        the timeouts and the completions the generator sent."""
        return {p: {"cpl_sent": g.cpl_sent, "ack_req_seen": g.ack_req_seen,
                    "cpl_ok": t.cpl_ok, "cpl_bad": t.cpl_bad,
                    "ports": t.ports(), "cp": e2e["cp"][p],
                    "timeout_cycles": t.timeout_cycles, "sent": g.sent}
                for p, (g, t) in enumerate(zip(e2e["gen"], e2e["trk"], strict=True))}

    def _host_words(self, txs, msgs):
        """pcie: the host's posted writes (one per store, its command beats as words,
        ``(mid, word, release)``) and each node's host interface (the MMIO path on the
        way out)."""
        words, his = {}, {}
        w = self.w
        for p, tx in enumerate(txs):
            words[p] = []
            his[p] = HostInterfaceModel(self.profile, self.mem_words)
            for mid, _, _ in tx.plan:
                s = msgs[mid]["store"]
                if len(s.payload) > self.profile.max_payload or s.length != len(
                        s.payload) or not s.payload:
                    raise ValueError("pcie: every store must be one host write of 1 to "
                                     f"{self.profile.max_payload} bytes (Store."
                                     "host_writes), with length its payload bytes")
                rel = msgs[mid]["release"] if msgs[mid]["gate"] >= 0 else 0
                for data, _nb, first, last in s.beats(w):
                    words[p].append((mid, {"addr": pcie_mmio_addr(s.dst, s.addr, s.ack_req),
                                           "nbytes": s.length, "data": data,
                                           "first": first, "last": last},
                                     rel if first else 0))
        return words, his

    # -- receive ----------------------------------------------------------------------
    def _receive(self, port, beats, node_id, faults, msgs, windows=(), mem=None):
        """The receive side of node ``port``: its FaultInjector, WindowTable and NicRx
        twins stepped over ``beats``, the ``(cycle, beat)`` its downlink delivered
        (nothing there pushes back or reaches the transmit side, so the receivers run
        after the fabric). ``faults`` are the downlink beat numbers to corrupt,
        ``windows`` the ``(src, base, size)`` window-table writes of cycles 0, 1, ...,
        ``mem`` the memory's words before the run (default zeros). Each message received
        gains ``remote_writes`` (the cycle of its last word), ``remote_index`` (that
        word's index in ``wr``) and ``remote_port``. Returns the receiver's ``wr``,
        ``counters``, ``mem`` and ``posted``."""
        table = WindowTableModel(self.mem_words)
        rx = NicRxModel(self.w, self.framing, self.max_payload, self.mem_words, node_id,
                        table, mem, port)
        inj = FaultInjectorModel(faults)
        windows = list(windows)
        at = 0                           # the next cycle of the window table
        for cyc, beat in beats:
            while at < min(cyc, len(windows)):
                table.step(at, {"w": windows[at]})
                table.commit()
                at += 1
            done = rx.step(cyc, {"i": inj.step(cyc, {"i": beat})["o"]}).get("written")
            if done is not None:
                mid, last_write, index = done
                if mid is not None and mid < len(msgs):
                    msgs[mid].setdefault("remote_writes", []).append(last_write)
                    msgs[mid].setdefault("remote_index", []).append(index)
                    msgs[mid]["remote_port"] = port
        return {"wr": rx.wr, "counters": rx.counters, "mem": rx.mem, "posted": rx.posted}

    def _post(self, rx, his, msgs, port):
        """pcie: NicRx's writes of node ``port`` through the up direction of its host
        interface ``his`` (whose MMIO path carried the node's stores): ``rx["wr"]`` then
        holds the cycles the words reach memory, and each message received there its
        remote write likewise (its ``remote_index`` counts that node's writes)."""
        events = dict(rx["posted"])
        if not events:
            return 0
        hi = HostInterfaceModel(self.profile, self.mem_words)
        hi.trace = []
        c, last = -1, max(events)
        while True:
            c += 1
            word = events.pop(c, None)
            if word is None and c > last and hi.next_event(c - 1) is None:
                break
            r = hi.step(c, wr=word)
            if word is not None and not r.wr_taken:
                raise RuntimeError(f"pcie: node's posted-write buffer full in cycle {c}")
        cycles = [s + j for s, ev, d in hi.trace if ev == "wr_tlp" for j in range(d["words"])]
        if len(cycles) != len(rx["wr"][1]):
            raise AssertionError("pcie: posted writes and memory writes differ in number")
        rx["wr"] = (rx["wr"][0], cycles)
        for m in msgs:
            if "remote_index" in m and m.get("remote_port") == port:
                m["remote_writes"] = [None if i is None else cycles[i]
                                      for i in m["remote_index"]]
        for name, value in hi.counters.items():
            his.counters[name] = (his.counters[name] + value if name != "tags_max"
                                  else max(his.counters[name], value))
        if any(hi.mem.get(a, 0) != v for a, v in enumerate(rx["mem"]) if v):
            raise AssertionError("pcie: host memory differs from the receiver's writes")
        return c

