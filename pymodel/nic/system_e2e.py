"""End-to-end completion inside :class:`~pymodel.nic.system.NicSystemModel`
(``completion="e2e"``): per node its receiver twins (FaultInjector, WindowTable, NicRx)
stepped inside the cycle loop, its CompletionGen and OutstandingTracker twins, and each
message's completion from the completions its sender's tracker accepted.

:class:`E2eCompletion` is a part of the system model (a base class of
:class:`~pymodel.nic.system.NicSystemModel`, whose :meth:`run` calls these methods);
it reads the model's parameters (``nodes``, ``w``, ``framing``, ``max_payload``,
``mem_words``, ``coalesce``, ``flush_idle``, ``timeout``)."""

from pymodel.nic.completion_gen import CompletionGenModel
from pymodel.nic.fault_injector import FaultInjectorModel
from pymodel.nic.nic_rx import NicRxModel
from pymodel.nic.outstanding_tracker import OutstandingTrackerModel
from pymodel.nic.window_table import WindowTableModel
from spec.formats.nic import COMPLETION_COUNT_BITS


class E2eCompletion:
    """The end-to-end completion methods of :class:`~pymodel.nic.system.NicSystemModel`."""

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
