"""Twin of :class:`rtl.fabric.switch.Switch`: cycle by cycle, same arbitration rule."""

from collections import deque

from pymodel.fabric.elastic_delay import ElasticDelayModel
from spec.fabric import check_source_write, check_switch_drops, check_table_entries
from spec.formats.nic import id_bytes

__all__ = ["SwitchModel"]


class SwitchModel:
    """Ingress FIFOs, a direct-indexed table, per-output round robin, registered egress,
    and the source check (``owner[node]``: the one ingress port node ``node`` may send
    from, or ``ports`` for any; all ``ports`` at power-up).

    Beats are tuples whose first four items are ``(data, nbytes, first, last)``; the rest
    is carried along untouched (the model tags beats with their message).

    ``width`` (the datapath bytes) says which beat carries the source byte.

    Call :meth:`cycle` once per clock cycle ``c`` (in increasing order) with the beats
    arriving on the ingress links in that cycle; it returns ``(egress, pops)``: the beats
    on the egress ports in cycle ``c + 1`` (``{port: beat}``) and the ingress ports that
    freed a buffer beat (returned a credit) in cycle ``c``.

    ``hop_latency`` (0 to 4096 cycles, 0 by default): each egress beat reaches its port
    ``hop_latency`` cycles after the crossbar's register would have put it there;
    arbitration and credits are timed as with 0. With ``backpressure`` the hop is an
    elastic delay (:class:`pymodel.fabric.elastic_delay.ElasticDelayModel`) that holds
    its beats while the egress is not ready; the crossbar's register hands it a beat
    only while it has room.

    ``table_entries`` (256 by default: 8-bit ids): the route table and the source table
    hold that many entries, indexed by the low bits of the frame's 16-bit ids (L2 MAC
    bytes 4..5 and 10..11, :func:`spec.formats.nic.id_bytes`) when more than 256
    (:func:`spec.fabric.check_table_entries`); both are written at setup
    (``table_write``, ``src_write``).

    ``faults`` (None by default: the switch built without them): ``{egress port: frame
    numbers}`` (:func:`spec.fabric.check_switch_drops`), the frames granted to that
    output (numbered from 0 in grant order) that are dropped: timed as forwarded, credits
    included, but none of their beats reaches the egress; :attr:`drop_fault` counts
    them and :attr:`dropped` lists ``(port, first beat)`` of each.
    """

    def __init__(self, ports, framing, fifo_depth, backpressure=False, *, width,
                 hop_latency=0, table_entries=256, faults=None):
        if (not isinstance(hop_latency, int) or isinstance(hop_latency, bool)
                or not 0 <= hop_latency <= 4096):
            raise ValueError(f"hop_latency (cycles) must be an integer from 0 to 4096, "
                             f"not {hop_latency!r}")
        self.hop_latency = hop_latency
        self.hop = deque({} for _ in range(hop_latency if not backpressure else 0))
        self.elastic = ([ElasticDelayModel(hop_latency) for _ in range(ports)]
                        if hop_latency and backpressure else [])
        self.ports = ports
        self.entries, id_bits = check_table_entries(table_entries, framing)
        self.owner = [ports] * self.entries
        src_at = id_bytes(framing, id_bits, "src")
        dst_at = id_bytes(framing, id_bits, "dst")
        if src_at[0] // width != src_at[-1] // width or dst_at[0] // width != dst_at[-1] // width:
            raise ValueError(f"width {width}: an id's bytes {src_at} span two beats")
        self.src_beat = src_at[-1] // width
        # The id's bytes, least significant first: (shift in the beat, shift in the id).
        self.src_parts = [(8 * (b % width), 8 * k) for k, b in enumerate(reversed(src_at))]
        self.dst_parts = [(8 * b, 8 * k) for k, b in enumerate(reversed(dst_at))]
        self.verdicts = [deque() for _ in range(ports)]    # late source beat: queued
        self.wbeat = [0] * ports                           # beat index being written
        self.dropping = [False] * ports
        self.drop_spoofed = 0
        self.backpressure = backpressure
        self.reg = [None] * ports                           # egress beat, backpressure
        self.fifo_depth = fifo_depth
        self.table = [k % ports for k in range(self.entries)]
        self.fifos = [deque() for _ in range(ports)]       # (readable_cycle, beat)
        self.busy = [False] * ports
        self.dest = [0] * ports
        self.owned = [False] * ports
        self.rr = [0] * ports
        self.overflow = False
        self.faults = None if faults is None else {
            o: set(f) for o, f in check_switch_drops(faults, ports).items()}
        self.numbers = [0] * ports                         # frames granted per output
        self.killing = [False] * ports                     # a dropped frame is moving
        self.drop_fault = 0
        self.dropped = []

    def idle(self):
        return (not any(self.fifos) and not any(self.busy) and not any(self.dropping)
                and all(r is None for r in self.reg) and not any(self.hop)
                and all(e.idle() for e in self.elastic))

    def _id(self, data, parts):
        value = 0
        for at, to in parts:
            value |= ((data >> at) & 0xFF) << to
        return value & (self.entries - 1)

    def route(self, beat):
        return self.table[self._id(beat[0], self.dst_parts)]

    def allowed(self, p, beat):
        """Whether the source id of ``beat`` may enter on port ``p`` (table as now)."""
        owner = self.owner[self._id(beat[0], self.src_parts)]
        return owner in (p, self.ports)

    def _grant_fault(self, o, head):
        """A frame granted to output ``o``: dropped when its number is one of ``o``'s."""
        if self.numbers[o] in self.faults.get(o, ()):
            self.killing[o] = True
            self.drop_fault += 1
            self.dropped.append((o, head))
        self.numbers[o] += 1

    def cycle(self, c, arrivals, table_write=None, ready=None, src_write=None):
        """One clock cycle; ``table_write`` is a ``(node, port)`` written this cycle
        (effective from ``c + 1``, as the RTL's ``table_wr``); ``src_write`` likewise
        ``(node, port)`` for the source table (``port`` = ``ports``: any port).

        With ``backpressure``, ``ready[o]`` is the egress ``ready`` of cycle ``c`` and the
        first item returned is instead the beats that leave the egress ports in cycle
        ``c`` (valid and ready).
        """
        n = self.ports
        left = {}
        space = [True] * n
        if self.elastic:
            for o in range(n):
                hop = self.elastic[o]
                beat = self.reg[o] if hop.ready() else None
                if beat is not None:
                    self.reg[o] = None
                out = hop.cycle(c, beat, ready[o])
                if out is not None:
                    left[o] = out
                space[o] = self.reg[o] is None
        elif self.backpressure:
            for o in range(n):
                if self.reg[o] is not None and ready[o]:
                    left[o] = self.reg[o]
                    self.reg[o] = None
                space[o] = self.reg[o] is None
        heads = [f[0][1] if f and f[0][0] <= c else None for f in self.fifos]
        levels = [len(f) for f in self.fifos]
        if self.src_beat:
            # The source byte is in a later beat: judge each frame as that beat arrives
            # (a frame that ends before it has no source: allowed).
            for p, beat in arrivals.items():
                k = 0 if beat[2] else self.wbeat[p]
                if k == self.src_beat or (beat[3] and k < self.src_beat):
                    self.verdicts[p].append(k < self.src_beat or self.allowed(p, beat))
                self.wbeat[p] = k if k > self.src_beat else k + 1
        verdict = [None] * n           # the head frame's verdict, when it is there
        for p in range(n):
            h = heads[p]
            if h is None or not h[2] or self.busy[p] or self.dropping[p]:
                continue
            if not self.src_beat:
                verdict[p] = self.allowed(p, h)
            elif self.verdicts[p]:
                verdict[p] = self.verdicts[p][0]
        grants = {}
        for o in range(n):
            if self.owned[o] or not space[o]:
                continue
            for j in range(n):
                p = (self.rr[o] + j) % n
                if verdict[p] and self.route(heads[p]) == o:
                    grants[p] = o
                    break
        egress, pops = {}, []
        for p in range(n):
            h = heads[p]
            if verdict[p] is not None and (p in grants or not verdict[p]) and self.src_beat:
                self.verdicts[p].popleft()
            if verdict[p] is False:               # spoofed: drain it, count it
                self.drop_spoofed += 1
                self.dropping[p] = not h[3]
                self.fifos[p].popleft()
                pops.append(p)
                continue
            if self.dropping[p]:
                if h is not None:
                    self.dropping[p] = not h[3]
                    self.fifos[p].popleft()
                    pops.append(p)
                continue
            if p in grants:
                o = grants[p]
                self.rr[o] = (p + 1) % n
                if not h[3]:
                    self.busy[p], self.dest[p], self.owned[o] = True, o, True
                if self.faults is not None:
                    self._grant_fault(o, h)
            elif self.busy[p] and h is not None and space[self.dest[p]]:
                o = self.dest[p]
                if h[3]:
                    self.busy[p], self.owned[o] = False, False
            else:
                continue
            self.fifos[p].popleft()
            if not self.killing[o]:
                egress[o] = h
            elif h[3]:
                self.killing[o] = False
            pops.append(p)
        for p, beat in arrivals.items():
            if levels[p] >= self.fifo_depth:
                self.overflow = True
                continue
            self.fifos[p].append((c + 1, beat))
        if table_write is not None:
            node, port = table_write
            self.table[node & (self.entries - 1)] = port
        if src_write is not None:
            node, port = check_source_write(n, *src_write, entries=self.entries)
            self.owner[node] = port
        if self.backpressure:
            for o, beat in egress.items():
                self.reg[o] = beat
            return left, pops
        if self.hop_latency:
            self.hop.append(egress)
            egress = self.hop.popleft()
        return egress, pops
