"""The receive side and the PCIe host side of
:class:`~pymodel.nic.system.NicSystemModel`: a node's receiver twins (FaultInjector,
WindowTable, NicRx) stepped over the beats its downlink delivered, and, for the ``pcie``
attachment, the host's posted writes into the MMIO path and NicRx's writes through the
host interface's up direction.

:class:`ReceiveAndHost` is a part of the system model (a base class of
:class:`~pymodel.nic.system.NicSystemModel`, whose :meth:`run` calls these methods); it
reads the model's parameters (``w``, ``framing``, ``max_payload``, ``mem_words``,
``profile``)."""

from pymodel.host.host_interface import HostInterfaceModel
from pymodel.nic.fault_injector import FaultInjectorModel
from pymodel.nic.nic_rx import NicRxModel
from pymodel.nic.window_table import WindowTableModel
from spec.nic import pcie_mmio_addr


class ReceiveAndHost:
    """The receive and PCIe host methods of :class:`~pymodel.nic.system.NicSystemModel`."""

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
