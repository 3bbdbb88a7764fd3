"""Cycle-exact twin of :class:`rtl.tops.nic_top.NicTop`: frames, writes, stamps, counters.

The model follows the documented rules of each block (``NicTxFramer``, ``FcsInserter``,
``CreditCounter``, ``Link``, ``Switch``, ``CreditReturn``, ``FaultInjector``, ``NicRx``)
cycle by cycle. It imports nothing from the RTL: the layouts, the frame and credit
sizing formulas and the LFSR polynomial come from :mod:`spec`, and the behaviour (the
stall patterns included) is computed with the model's own code.
"""

import functools
from collections import defaultdict, deque
from dataclasses import replace

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.fabric.reliable_link import ReliableLinkModel
from pymodel.fabric.switch import SwitchModel
from pymodel.fcs import fcs_ok
from pymodel.host.host_interface import HostInterfaceModel
from pymodel.nic.frames import build_frame, parse_header
from pymodel.packet import frame_to_beats, pack_beat, unpack_beat
from pymodel.stall import stall_pattern
from spec.fabric import check_source_write
from spec.formats.nic import (
    MAC_PREFIX,
    frame_beats,
    header_bytes,
    header_layout,
    padded_bytes,
)
from spec.host import PROFILES
from spec.nic import check_attachment, pcie_mmio_addr

__all__ = ["NicSystemModel", "Store"]

# Pure functions of the framing and a length, called per frame; each call builds a layout
# (the soak's chunks spent a third of their time there), so they are cached.
padded_bytes = functools.cache(padded_bytes)
frame_beats = functools.cache(frame_beats)


class Store:
    """One store command: ``payload`` goes to ``addr`` of node ``dst``; ``length`` is the
    header field (default ``len(payload)``; another value makes a malformed frame).

    ``release`` (default 0): the store's arrival cycle. Its first command beat is offered
    from cycle ``release`` on, its later beats at once (the top's timed ``cmd<p>``
    player: :class:`rtl.sim.stream_player.StreamPlayer` with ``timed``); a store
    released earlier than the one before it in its node's list simply waits for that
    one (the player is in order). Release 0 is the behaviour of an untimed player.
    """

    def __init__(self, dst, addr, payload, length=None, release=0):
        self.dst, self.addr, self.payload = dst, addr, bytes(payload)
        self.length = len(payload) if length is None else length
        if not isinstance(release, int) or isinstance(release, bool) or not (
                0 <= release < 1 << 32):
            raise ValueError(f"release must be a cycle from 0 to 2**32 - 1, not {release!r}")
        self.release = release

    def beats(self, width):
        """The command beats: ``(data, nbytes, first, last)``."""
        return [unpack_beat(width, b) for b in frame_to_beats(self.payload, width)]

    def host_writes(self, mps=PROFILES["pcie"].max_payload):
        """The stores of the ``pcie`` attachment: the host writes this store as posted
        writes of at most ``mps`` bytes (MPS), each a store of its own at
        ``addr + k * mps``."""
        return [Store(self.dst, self.addr + k, self.payload[k:k + mps],
                      release=self.release if k == 0 else 0)
                for k in range(0, max(len(self.payload), 1), mps)]

    def segments(self, width, max_payload):
        """The frames' stores after the NIC's segmenter: a cut every ``max_payload``
        bytes of payload; segment ``k`` goes to ``addr + k * max_payload`` with the
        header length ``min(rem, max_payload)``, ``rem`` starting at ``length`` and
        losing ``max_payload`` (13-bit wrap) per segment."""
        out, rem = [], self.length
        for k in range(0, max(len(self.payload), 1), max_payload):
            out.append(Store(self.dst, self.addr + k, self.payload[k:k + max_payload],
                             min(rem, max_payload)))
            rem = (rem - max_payload) % (1 << 13)
        return out


class NicSystemModel:
    """The top's parameters; :meth:`run` plays one scenario."""

    def __init__(self, width, framing, nodes, link_latency, mem_words, max_payload, credits,
                 retry=False, attachment="integrated"):
        self.attachment = check_attachment(attachment)
        self.pcie = attachment == "pcie"
        self.profile = PROFILES["pcie"]
        self.w, self.framing, self.nodes = width, framing, nodes
        self.retry = retry
        self.lat, self.mem_words, self.max_payload = link_latency, mem_words, max_payload
        self.credits = credits
        self.h = header_bytes(framing)

    # -- transmit ---------------------------------------------------------------------
    def _slots(self, store, node):
        """Output beats of one store: (kind, wire beat) with kind hdr/body/tail/spill."""
        w, (q, r) = self.w, divmod(self.h, self.w)
        cmd = store.beats(w)
        frame = build_frame(self.framing, node, store.dst, store.addr, store.length,
                            store.payload)
        wire = frame_to_beats(frame, w)
        kinds = ["hdr"] * q + ["body"] * len(cmd)
        nb = cmd[-1][1]
        if r and nb > w - r:
            kinds.append("tail")
        # The padder's zero beats (L2 frames under 60 bytes), then the FCS spill beat.
        padded = padded_bytes(self.framing, len(store.payload))
        kinds += ["pad"] * (-(-padded // w) - len(kinds))
        if padded - (-(-padded // w) - 1) * w > w - 4:
            kinds.append("spill")
        if len(kinds) != len(wire):
            raise AssertionError(f"model: {len(kinds)} slots for {len(wire)} beats")
        return list(zip(kinds, wire, strict=True)), frame

    def run(self, stores, node_ids, stalls=None, faults=None, max_cycles=2_000_000,
            table_writes=(), window_writes=None, link_settings=None, source_writes=(),
            mem=None):
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
        Returns a dict (see the keys at the end).
        """
        n, w, lat = self.nodes, self.w, self.lat
        if mem and self.pcie:
            raise ValueError("mem: a run with initial memories needs attachment "
                             "'integrated', not 'pcie'")
        stalls = stalls or {}
        faults = faults or {}
        total_beats = sum(len(s.beats(w)) for p in range(n) for s in stores.get(p, []))
        # Generous: every frame may wait a whole credit round trip (2 links + switch).
        frames = sum(len(s.segments(w, self.max_payload)) for p in range(n)
                     for s in stores.get(p, []))
        horizon = 64 * (total_beats + 64) + (2 * lat + 8) * (frames + 1) * n + 4096
        horizon += max((s.release for p in range(n) for s in stores.get(p, [])), default=0)
        if self.retry:                   # replays: generous again
            horizon *= 8
        stall = {p: stall_pattern(*stalls.get(p, (1, 0)), horizon) for p in range(n)}
        plan = {}
        msgs, cmds = [], []
        for p in range(n):
            plan[p] = []
            for s in stores.get(p, []):
                cmds.append({"src": p, "dst": s.dst, "msgs": []})
                for k, seg in enumerate(s.segments(w, self.max_payload)):
                    slots, frame = self._slots(seg, node_ids[p])
                    mid = len(msgs)
                    cmds[-1]["msgs"].append(mid)
                    # The store's release gates the player's valid while it offers the
                    # store's first command beat: the first frame's slots up to its
                    # first body beat.
                    gate = [kind for kind, _ in slots].index("body") if k == 0 else -1
                    msgs.append({"src": p, "store": seg, "frame": frame, "id": mid,
                                 "need": frame_beats(w, self.framing, seg.length),
                                 "beats": len(slots), "accept": None, "credit_stamps": [],
                                 "cmd": len(cmds) - 1, "release": s.release, "gate": gate})
                    plan[p].append((mid, slots))
        # pcie: the host's posted writes (one per store, its command beats as words) and
        # each node's host interface (the MMIO path on the way out).
        words = {p: [] for p in range(n)}
        his = {}
        if self.pcie:
            for p in range(n):
                his[p] = HostInterfaceModel(self.profile, self.mem_words)
                for mid, _ in plan[p]:
                    s = msgs[mid]["store"]
                    if len(s.payload) > self.profile.max_payload or s.length != len(
                            s.payload) or not s.payload:
                        raise ValueError("pcie: every store must be one host write of 1 to "
                                         f"{self.profile.max_payload} bytes (Store."
                                         "host_writes), with length its payload bytes")
                    rel = msgs[mid]["release"] if msgs[mid]["gate"] >= 0 else 0
                    for data, _nb, first, last in s.beats(w):
                        words[p].append((mid, {"addr": pcie_mmio_addr(s.dst, s.addr),
                                               "nbytes": s.length, "data": data,
                                               "first": first, "last": last},
                                         rel if first else 0))
        kw = [0] * n
        sw = SwitchModel(n, self.framing, self.credits, backpressure=self.retry, width=w)
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
        credits = [self.credits] * n
        cred_err = False
        fi = [0] * n                         # frame index per sender
        si = [0] * n                         # slot index in the frame
        cmd_stamps = {p: [] for p in range(n)}
        tx = {p: ([], []) for p in range(n)}
        gives = defaultdict(lambda: [0] * n)          # cycle -> credits arriving per node
        cr = {p: [] for p in range(n)}
        up = defaultdict(dict)                         # cycle -> {port: beat}
        down = {p: [] for p in range(n)}               # (cycle, beat)
        sent_beats = [0] * n
        c = 0
        idle_since = 0
        while True:
            if c >= max_cycles or c >= horizon:
                raise RuntimeError("model did not finish: raise max_cycles")
            active = False
            sent_now = {}
            took = [False] * n
            for p in range(n):
                if fi[p] >= len(plan[p]):
                    continue
                active = True
                mid, slots = plan[p][fi[p]]
                kind, beat = slots[si[p]]
                if self.pcie:                # the command beats come from the interface
                    valid = his[p].mmio_head(c) is not None
                else:
                    valid = not stall[p][c] and (si[p] > msgs[mid]["gate"]
                                                 or c >= msgs[mid]["release"])
                if kind in ("tail", "pad", "spill"):
                    ok = True
                elif si[p] == 0:
                    ok = valid and credits[p] >= msgs[mid]["need"]
                else:
                    ok = valid
                if not ok or (self.retry and not links["up", p].ready()):
                    continue
                if kind == "body":
                    took[p] = True
                    if not self.pcie:
                        cmd_stamps[p].append(c)
                    if msgs[mid]["accept"] is None:
                        msgs[mid]["accept"] = c
                tx[p][0].append(beat)
                tx[p][1].append(c)
                data, nb, first, last = unpack_beat(w, beat)
                if self.retry:
                    sent_now[p] = beat
                    meta["up", p].append((mid, sent_beats[p]))
                else:
                    up[c + lat][p] = (data, nb, first, last, mid, sent_beats[p])
                sent_beats[p] += 1
                credits[p] -= 1
                if credits[p] < 0:
                    cred_err = True
                si[p] += 1
                if si[p] == len(slots):
                    fi[p] += 1
                    si[p] = 0
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
                gives[c + lat][p] += 1
            g = gives.pop(c, None)
            if g:
                for p in range(n):
                    if g[p]:
                        cr[p].append(c)
                        credits[p] += g[p]
                        if credits[p] > self.credits:
                            cred_err = True
                            credits[p] = self.credits
            busy = (active or up or gives or not sw.idle() or c < len(table_writes)
                    or c < len(source_writes)
                    or any(link.busy() for link in links.values()))
            if busy:
                idle_since = c + 1
            elif c > idle_since + 2 * lat + 4:
                break
            c += 1
        # Completion: the credit of each message's last wire beat reaching its sender.
        for p in range(n):
            k = 0
            for mid, slots in plan[p]:
                k += len(slots)
                msgs[mid]["completion"] = cr[p][k - 1] if k <= len(cr[p]) else None
        window_writes = window_writes or {}
        mem = mem or {}
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
        return {"messages": msgs, "stores": per_store, "cmd_stamps": cmd_stamps, "tx": tx,
                "cr": cr,
                "wr": {p: rx[p]["wr"] for p in range(n)},
                "counters": {p: rx[p]["counters"] for p in range(n)},
                "mem": {p: rx[p]["mem"] for p in range(n)},
                "credit_errors": cred_err or sw.overflow, "cycles": c,
                "switch": {"drop_spoofed": sw.drop_spoofed},
                "host": {p: dict(hi.counters) for p, hi in his.items()},
                "links": {f"{side}{p}": links[side, p].all_counters() for side, p in links}}

    # -- receive ----------------------------------------------------------------------
    def _receive(self, port, beats, node_id, faults, msgs, windows=(), mem=None):
        """NicRx of node ``port``: ``beats`` ``(cycle, beat)`` from its downlink;
        ``windows`` the ``(src, base, size)`` window-table writes (words) of cycles 0, 1,
        ... (written at the end of their cycle); ``mem`` the memory's words before the
        run (default zeros). A frame's window is the table as it is
        in the cycle of the beat holding the source byte (writes of earlier cycles);
        the frame is unauthorised when ``[addr, addr + length)`` is not inside it or its
        L2 source MAC lacks ``MAC_PREFIX``; checked after the memory bound."""
        w, h = self.w, self.h
        q, r = divmod(h, w)
        nh = -(-h // w)
        max_push = -(-(self.max_payload + 4) // w)
        hdr_raw = bytearray(nh * w)
        counters = dict.fromkeys(("frames_ok", "drop_fcs", "drop_malformed", "drop_dst",
                                  "drop_addr", "drop_window"), 0)
        layout = header_layout(self.framing)
        l2 = "src_mac" in layout.members
        src_at = layout["src_mac" if l2 else "src"].offset // 8 + (len(MAC_PREFIX) if l2
                                                                   else 0)
        prefix_at = slice(src_at - len(MAC_PREFIX), src_at)
        held = (0, 0)                     # the window read last (registered in the RTL)
        if mem is not None and len(mem) != self.mem_words:
            raise ValueError(f"node {port}: mem holds {len(mem)} words, not {self.mem_words}")
        mem = [0] * self.mem_words if mem is None else list(mem)
        wr = ([], [])
        posted = []                       # (cycle, host-interface wr word) per write
        bidx = count = pushed = 0
        frame = bytearray()
        writer_free = 0
        for num, (cyc, beat) in enumerate(beats):
            data, nb, first, last, mid = beat[:5]
            if num in faults:
                data ^= 0xFF
            k = 0 if first else bidx
            base = 0 if first else pushed
            room = base < max_push
            push = k > q and room
            pushed = base + push
            bidx = k if k > q else k + 1
            count = (0 if first else count) + nb
            if first:
                frame = bytearray()
            raw = data.to_bytes(w, "little")
            frame += raw[:nb]
            if k == src_at // w:
                src = raw[src_at % w]
                held = (0, self.mem_words)
                for s, b, z in list(windows)[:cyc]:     # written in cycles before cyc
                    if s == src:
                        held = (b, z)
            if k < nh:
                hdr_raw[k * w:(k + 1) * w] = raw
            if not last:
                continue
            tail = k >= q and nb > r and room
            nbeats = pushed + tail
            f = parse_header(self.framing, bytes(hdr_raw))
            length, addr = f["length"], f["addr"]
            if "dst_mac" in f:
                wrong_dst = f["dst_mac"] != MAC_PREFIX + bytes([node_id])
            else:
                wrong_dst = f["dst"] != node_id
            if not fcs_ok(bytes(frame)):
                reason = "drop_fcs"
            elif ((count & 0xFFFF) != padded_bytes(self.framing, length) + 4 or length == 0
                  or length > self.max_payload or addr % w or f["opcode"] != 1
                  or not f["ethertype_ok"]):
                reason = "drop_malformed"
            elif wrong_dst:
                reason = "drop_dst"
            elif addr + length > self.mem_words * w:
                reason = "drop_addr"
            elif ((l2 and bytes(hdr_raw[prefix_at]) != MAC_PREFIX) or addr < held[0] * w
                  or addr + length > (held[0] + held[1]) * w):
                reason = "drop_window"
            else:
                reason = "frames_ok"
            counters[reason] += 1
            start = max(cyc + 2, writer_free)
            writer_free = start + max(nbeats, 1)
            if reason != "frames_ok":
                continue
            payload = bytes(frame[h:])
            word = (addr // w) % self.mem_words
            last_write = None
            for j in range(nbeats):
                left = length - j * w
                if left <= 0:
                    break
                nbytes = min(left, w)
                chunk = payload[j * w:j * w + nbytes]
                old = mem[word + j].to_bytes(w, "little")
                mem[word + j] = int.from_bytes(chunk + old[nbytes:], "little")
                wr[0].append((word + j, (1 << nbytes) - 1))
                wr[1].append(start + j)
                posted.append((start + j, {"addr": word + j, "be": (1 << nbytes) - 1,
                                           "data": int.from_bytes(chunk, "little"),
                                           "last": int(left <= w)}))
                last_write = start + j
            if mid is not None and mid < len(msgs):
                msgs[mid].setdefault("remote_writes", []).append(last_write)
                msgs[mid].setdefault("remote_index", []).append(
                    None if last_write is None else len(wr[1]) - 1)
                msgs[mid]["remote_port"] = port
        return {"wr": wr, "counters": counters, "mem": mem, "posted": posted}

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

