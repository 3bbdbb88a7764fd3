"""End-to-end completion inside :class:`~pymodel.nic.system.NicSystemModel`
(``completion="e2e"``): per node its receiver twins (FaultInjector, WindowTable, NicRx)
stepped inside the cycle loop, its CompletionGen and OutstandingTracker twins, and each
message's completion from the completions its sender's tracker accepted.

:class:`E2eCompletion` is a part of the system model (a base class of
:class:`~pymodel.nic.system.NicSystemModel`, whose :meth:`run` calls these methods);
it reads the model's parameters (``nodes``, ``w``, ``framing``, ``max_payload``,
``mem_words``, ``coalesce``, ``flush_idle``, ``timeout``)."""

from collections import deque

from pymodel.nic.completion_gen import CompletionGenModel
from pymodel.nic.completion_keyed import CompletionKeyedModel
from pymodel.nic.completion_record import CompletionRecorderModel
from pymodel.nic.fault_injector import FaultInjectorModel
from pymodel.nic.nic_rx import NicRxModel
from pymodel.nic.outstanding_tracker import OutstandingTrackerModel
from pymodel.nic.peer_retry import PeerRetryReceiverModel
from pymodel.nic.tracker_memory import TrackerMemoryModel
from pymodel.nic.window_table import WindowTableModel
from spec.formats.nic import COMPLETION_COUNT_BITS, CompletionStatus


class E2eCompletion:
    """The end-to-end completion methods of :class:`~pymodel.nic.system.NicSystemModel`."""

    def _e2e_start(self, node_ids, window_writes, mem, faults):
        """``e2e``: the receivers run inside the cycle loop (their completions go back
        through the fabric): per node its FaultInjector, WindowTable and NicRx twins, its
        CompletionGen and OutstandingTracker twins."""
        n, window_writes, mem = self.nodes, window_writes or {}, mem or {}
        tables = [WindowTableModel(self.mem_words) for _ in range(n)]
        if self.destinations:
            gens = [CompletionKeyedModel(self.w, self.framing, self.destinations,
                                         self.coalesce, self.flush_idle, node_ids[p],
                                         sender=node_ids[0]) for p in range(n)]
            trks = [TrackerMemoryModel(self.destinations, self.timeout) for _ in range(n)]
        else:
            gens = [CompletionGenModel(self.w, self.framing, n, self.coalesce,
                                       self.flush_idle, node_ids[p], self.peer_retry)
                    for p in range(n)]
            trks = [OutstandingTrackerModel(n, self.timeout) for _ in range(n)]
        checks = [PeerRetryReceiverModel(n) if self.peer_retry else None for _ in range(n)]
        return {
            "rx": [NicRxModel(self.w, self.framing, self.max_payload, self.mem_words,
                              node_ids[p], tables[p], mem.get(p), p, "e2e",
                              self._stands_for(p), checks[p]) for p in range(n)],
            "checks": checks,
            "tables": tables, "at": [0] * n, "ptr": [0] * n,
            "windows": [list(window_writes.get(p, ())) for p in range(n)],
            "inj": [FaultInjectorModel(set(faults.get(p, ()))) for p in range(n)],
            "gen": gens, "trk": trks,
            "step": [{} for _ in range(n)],
            "cp": [([], []) for _ in range(n)],          # completions at the tracker
            "ok": [[] for _ in range(n)],        # (cycle, src, count, dropped) accepted
            "seq": [{} for _ in range(n)],               # dst -> mids of frames sent
        }

    def _stands_for(self, p):
        """Receiver ``p``'s rule for the ids it stands for (None: node ids only)."""
        if not self.destinations:
            return None
        n, d_max = self.nodes, self.destinations
        return lambda d: p > 0 and d < d_max and 1 + d % (n - 1) == p

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
            if self.peer_retry:     # the sender is the tracker ("State reused"), whose
                # ports and counters (not stepped) then read the sender's registers
                snd = self._senders[p]
                before, fired, una = snd.ack_ok, list(snd.timeouts), list(snd.una)
                ack = None if cpl is None else (cpl[0] if cpl[1] else 0xFF, cpl[3],
                                                bool(cpl[2] & CompletionStatus.GAP))
                snd.step(c, {"send": res.get("sent"), "ack": ack,
                             "ready": res.get("resent", False)})
                # Accepted: a count that moves the oldest unacknowledged PSN (frames
                # newly completed, the tracker's rule; a NAK that repeats it is not).
                r = {"ok": snd.ack_ok != before and cpl[3] != una[cpl[0]]}
                trk = e2e["trk"][p]             # the tracker's ports, from the sender
                trk.cpl_ok, trk.cpl_bad = snd.ack_ok, snd.ack_bad
                trk.sent, trk.completed = list(snd.next_psn), list(snd.una)
                trk.timeouts = list(snd.timeouts)
                trk.timeout_cycles += [(c, d) for d in range(snd.peers)
                                       if snd.timeouts[d] != fired[d]]
                if snd.ack_ok != before:
                    trk.dropped[cpl[0]] = cpl[4]
            else:
                r = e2e["trk"][p].step(c, {"sent": res.get("sent"), "cpl": cpl})
            if cpl is not None:
                e2e["cp"][p][0].append(cpl)
                e2e["cp"][p][1].append(c)
                if r["ok"]:
                    e2e["ok"][p].append((c, cpl[0], cpl[3], cpl[4]))
            e2e["gen"][p].step(c, {"ev": rx.acks.pop(c, None),
                                   "started": res.get("started", False)})

    def _cover(self, e2e, msgs, events):
        """Each message's completion: the first cycle of ``events[p]`` (``(cycle, dst,
        count, ...)``, cumulative counts of its sender ``p``) that covers its frame."""
        mask = (1 << COMPLETION_COUNT_BITS) - 1
        for m in msgs:
            m["completion"] = None
        for p in range(self.nodes):
            done = {}
            for c, d, count, *_ in events.get(p, ()):
                old = done.get(d, 0)
                new = old + ((count - old) & mask)
                for mid in e2e["seq"][p].get(d, [])[old:new]:
                    msgs[mid]["completion"] = c
                done[d] = new

    def _recorder(self):
        """``records``: a node's :class:`CompletionRecorderModel`."""
        return CompletionRecorderModel(self.ids, self.w, self.mem_words, self.records,
                                       self.id_bits)

    def _records_local(self, rx, acc, mem=None):
        """``records``, ``integrated``: the records of one node's accepted completions
        ``acc`` (``(cycle, src, count, dropped)``) written into its memory in the cycles
        without a NicRx write; ``rx["wr"]`` and ``rx["mem"]`` gain them (``mem``: the
        memory before the run; a word both wrote holds their writes in cycle order).
        Returns the records as they land, ``[(cycle, dst, count)]``, and the last
        cycle."""
        rec, acc = self._recorder(), deque(acc)
        if not acc:
            return [], 0
        writes = set(rx["wr"][1])
        completed, dropped = [0] * self.ids, [0] * self.ids
        landed, extra = [], []
        c = acc[0][0]
        while acc or rec.busy():
            word = rec.offer(c not in writes, completed, dropped)
            if word is not None:
                landed.append((c, *rec.record))
                extra.append((c, word))
            a = acc.popleft() if acc and acc[0][0] == c else None
            rec.step(None if a is None else a[1], word is not None)
            if a is not None:
                completed[a[1]], dropped[a[1]] = a[2], a[3]
            c += 1
        self._replay(rx, extra, mem)
        items, cycles = rx["wr"]
        merged = sorted([(cy, k, it) for k, (it, cy) in enumerate(zip(items, cycles,
                                                                          strict=True))]
                        + [(cy, -1, (w["addr"], w["be"])) for cy, w in extra])
        rx["wr"] = ([it for _, _, it in merged], [cy for cy, _, _ in merged])
        return landed, c

    def _replay(self, rx, extra, mem):
        """``rx["mem"]`` with the record writes ``extra`` (``(cycle, word)``): each word a
        record wrote rebuilt from ``mem`` (the memory before the run) by NicRx's writes
        (``rx["posted"]``) and the records, in cycle order."""
        touched = {w["addr"] for _, w in extra}
        if not touched:
            return
        writes = sorted([(cy, w["addr"], w["be"], w["data"]) for cy, w in rx["posted"]
                         if w["addr"] in touched]
                        + [(cy, w["addr"], w["be"], w["data"]) for cy, w in extra])
        for a in touched:
            rx["mem"][a] = (mem or [0] * self.mem_words)[a]
        for _, a, be, data in writes:
            mask = sum(0xFF << (8 * i) for i in range(be.bit_length()) if be >> i & 1)
            rx["mem"][a] = (rx["mem"][a] & ~mask) | (data & mask)

    @staticmethod
    def _e2e_busy(e2e, down, txs):
        return (any(g.busy() for g in e2e["gen"]) or any(tx.cpl_rest for tx in txs)
                or any(tx.rs_rest or (tx.sender and any(
                    tx.sender.outstanding(d) for d in range(tx.sender.peers)))
                    for tx in txs)
                or any(rx.acks or rx.cpls for rx in e2e["rx"])
                or any(e2e["ptr"][p] < len(down[p]) for p in range(len(txs))))

    def _e2e_finish(self, e2e, msgs):
        """``e2e``: each message's completion is the cycle an accepted completion first
        covered its frame at its sender's tracker (None if none did); the receivers'
        results as :meth:`_receive` gives them."""
        self._cover(e2e, msgs, {p: e2e["ok"][p] for p in range(self.nodes)})
        return {p: {"wr": rx.wr, "counters": rx.counters, "mem": rx.mem, "posted": rx.posted}
                for p, rx in enumerate(e2e["rx"])}

    def _peer_result(self, e2e):
        """``peer_retry``: per node the sender's and the check's counters."""
        return {p: {"next_psn": list(t.next_psn), "una": list(t.una),
                    "timeouts": list(t.timeouts), "resent": list(t.resent),
                    "ack_ok": t.ack_ok, "ack_bad": t.ack_bad, "refused": t.refused,
                    "expected": list(k.expected), "gaps": list(k.gaps),
                    "duplicates": list(k.duplicates)}
                for p, (t, k) in enumerate(zip(self._senders, e2e["checks"], strict=True))}

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
