"""Twin of :class:`rtl.fabric.switch.Switch`: cycle by cycle, same arbitration rule."""

from collections import deque

from spec.formats.nic import dst_byte

__all__ = ["SwitchModel"]


class SwitchModel:
    """Ingress FIFOs, a direct-indexed table, per-output round robin, registered egress.

    Beats are tuples whose first four items are ``(data, nbytes, first, last)``; the rest
    is carried along untouched (the model tags beats with their message).

    Call :meth:`cycle` once per clock cycle ``c`` (in increasing order) with the beats
    arriving on the ingress links in that cycle; it returns ``(egress, pops)``: the beats
    on the egress ports in cycle ``c + 1`` (``{port: beat}``) and the ingress ports that
    freed a buffer beat (returned a credit) in cycle ``c``.
    """

    def __init__(self, ports, framing, fifo_depth, backpressure=False):
        self.ports = ports
        self.backpressure = backpressure
        self.reg = [None] * ports                           # egress beat, backpressure
        self.fifo_depth = fifo_depth
        self.off = 8 * dst_byte(framing)
        self.table = [k % ports for k in range(256)]
        self.fifos = [deque() for _ in range(ports)]       # (readable_cycle, beat)
        self.busy = [False] * ports
        self.dest = [0] * ports
        self.owned = [False] * ports
        self.rr = [0] * ports
        self.overflow = False

    def idle(self):
        return (not any(self.fifos) and not any(self.busy)
                and all(r is None for r in self.reg))

    def route(self, beat):
        return self.table[(beat[0] >> self.off) & 0xFF]

    def cycle(self, c, arrivals, table_write=None, ready=None):
        """One clock cycle; ``table_write`` is a ``(node, port)`` written this cycle
        (effective from ``c + 1``, as the RTL's ``table_wr``).

        With ``backpressure``, ``ready[o]`` is the egress ``ready`` of cycle ``c`` and the
        first item returned is instead the beats that leave the egress ports in cycle
        ``c`` (valid and ready).
        """
        n = self.ports
        left = {}
        space = [True] * n
        if self.backpressure:
            for o in range(n):
                if self.reg[o] is not None and ready[o]:
                    left[o] = self.reg[o]
                    self.reg[o] = None
                space[o] = self.reg[o] is None
        heads = [f[0][1] if f and f[0][0] <= c else None for f in self.fifos]
        levels = [len(f) for f in self.fifos]
        grants = {}
        for o in range(n):
            if self.owned[o] or not space[o]:
                continue
            for j in range(n):
                p = (self.rr[o] + j) % n
                h = heads[p]
                if h is not None and h[2] and not self.busy[p] and self.route(h) == o:
                    grants[p] = o
                    break
        egress, pops = {}, []
        for p in range(n):
            h = heads[p]
            if p in grants:
                o = grants[p]
                self.rr[o] = (p + 1) % n
                if not h[3]:
                    self.busy[p], self.dest[p], self.owned[o] = True, o, True
            elif self.busy[p] and h is not None and space[self.dest[p]]:
                o = self.dest[p]
                if h[3]:
                    self.busy[p], self.owned[o] = False, False
            else:
                continue
            self.fifos[p].popleft()
            egress[o] = h
            pops.append(p)
        for p, beat in arrivals.items():
            if levels[p] >= self.fifo_depth:
                self.overflow = True
                continue
            self.fifos[p].append((c + 1, beat))
        if table_write is not None:
            node, port = table_write
            self.table[node & 0xFF] = port
        if self.backpressure:
            for o, beat in egress.items():
                self.reg[o] = beat
            return left, pops
        return egress, pops
