"""The receive side and the PCIe host side of
:class:`~pymodel.nic.system.NicSystemModel`: a node's receiver twins (FaultInjector,
WindowTable, NicRx) stepped over the beats its downlink delivered, and, for the ``pcie``
attachment, the host's posted writes into the MMIO path and NicRx's writes through the
host interface's up direction.

:class:`ReceiveAndHost` is a part of the system model (a base class of
:class:`~pymodel.nic.system.NicSystemModel`, whose :meth:`run` calls these methods); it
reads the model's parameters (``w``, ``framing``, ``max_payload``, ``mem_words``,
``profile``)."""

from collections import deque

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
                    addr = pcie_mmio_addr(s.dst, s.addr, s.ack_req,
                                          4 if self.id_bits == 8 else self.id_bits)
                    words[p].append((mid, {"addr": addr,
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

    def _post(self, rx, his, msgs, port, acc=()):
        """pcie: NicRx's writes of node ``port`` through the up direction of its host
        interface ``his`` (whose MMIO path carried the node's stores): ``rx["wr"]`` then
        holds the cycles the words reach memory, and each message received there its
        remote write likewise (its ``remote_index`` counts that node's writes). With
        ``records``, the records of the node's accepted completions ``acc`` (``(cycle,
        src, count, dropped)``) share the interface's ``wr`` outside NicRx's frames
        (:class:`pymodel.nic.completion_record.CompletionRecorderModel`); ``rx["wr"]``
        and ``rx["mem"]`` gain them. Returns the last cycle and the records as they
        reach memory, ``[(cycle, dst, count)]``."""
        events = dict(rx["posted"])
        acc = deque(acc if self.records else ())
        if not events and not acc:
            return 0, []
        rec = self._recorder() if self.records else None
        completed, dropped = [0] * self.ids, [0] * self.ids
        hi = HostInterfaceModel(self.profile, self.mem_words)
        hi.trace = []
        order, landed, in_frame = [], [], False
        posted = deque()        # the taken records' (slot tag, destination, count)
        c, last = -1, max([*events, *(a[0] for a in acc)])
        while True:
            c += 1
            word = events.pop(c, None)
            if (word is None and c > last and hi.next_event(c - 1) is None
                    and not (rec is not None and rec.busy())):
                break
            offer = None
            if rec is not None:
                offer = rec.offer(word is None and not in_frame, completed, dropped)
            r = hi.step(c, wr=word if word is not None else offer)
            if word is not None:
                if not r.wr_taken:
                    raise RuntimeError(f"pcie: node's posted-write buffer full in cycle {c}")
                order.append(None)
                in_frame = not word["last"]
            elif offer is not None and r.wr_taken:
                order.append(offer)
                posted.append((offer["tag"], *rec.record))
            if r.marked is not None:    # the records reach memory in the order posted
                tag, dst, count = posted.popleft()
                if tag != r.marked:
                    raise AssertionError(f"pcie: record tag {r.marked} in cycle {c}, "
                                         f"{tag} posted")
                landed.append((c, dst, count))
            if rec is not None:
                a = acc.popleft() if acc and acc[0][0] == c else None
                rec.step(None if a is None else a[1],
                         word is None and offer is not None and r.wr_taken)
                if a is not None:
                    completed[a[1]], dropped[a[1]] = a[2], a[3]
        written = [s + j for s, ev, d in hi.trace if ev == "wr_tlp" for j in range(d["words"])]
        if len(written) != len(order):
            raise AssertionError("pcie: posted writes and memory writes differ in number")
        cycles = [cy for cy, o in zip(written, order, strict=True) if o is None]
        if len(cycles) != len(rx["wr"][1]):
            raise AssertionError("pcie: posted writes and memory writes differ in number")
        items, k = [], 0
        for o in order:
            if o is None:
                items.append(rx["wr"][0][k])
                k += 1
            else:
                items.append((o["addr"], o["be"]))
        rx["wr"] = (items, written)
        for m in msgs:
            if "remote_index" in m and m.get("remote_port") == port:
                m["remote_writes"] = [None if i is None else cycles[i]
                                      for i in m["remote_index"]]
        for name, value in hi.counters.items():
            his.counters[name] = (his.counters[name] + value if name != "tags_max"
                                  else max(his.counters[name], value))
        if rec is None and any(hi.mem.get(a, 0) != v for a, v in enumerate(rx["mem"]) if v):
            raise AssertionError("pcie: host memory differs from the receiver's writes")
        if rec is not None:              # the records and NicRx's words in their order
            rx["mem"] = [hi.mem.get(a, 0) for a in range(self.mem_words)]
        return c, landed
