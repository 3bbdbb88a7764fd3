"""The switch model of :class:`pymodel.fabric.switch.SwitchModel` for thousands of ports:
the same cycle, visiting only the ports that hold a beat.

Not the twin of an RTL block of its own: a model-only equivalent of
:class:`~pymodel.fabric.switch.SwitchModel` (registered egress, no backpressure, the
source check of power-up: every node from any port) for fan-out runs
(:class:`pymodel.nic.mem_fanout.NicMemFanoutModel`), where :meth:`SwitchModel.cycle`
would visit every port and every output every cycle. Each beat carries its egress port
as its fifth item (the route table's verdict, decided by the caller: 8-bit node ids do
not name 4,096 ports); :meth:`route` reads it. Equality with :class:`SwitchModel` on the
same beats: tests/test_nic_mem_fanout.py.
"""

from pymodel.fabric.switch import SwitchModel

__all__ = ["SparseSwitchModel"]


class SparseSwitchModel(SwitchModel):
    """``SwitchModel(ports, framing, fifo_depth, width=..., hop_latency=...)`` without
    backpressure, table or source writes (``ValueError`` names them); :meth:`cycle` as
    :meth:`SwitchModel.cycle`, its cost the ports holding a beat, not ``ports``."""

    def __init__(self, ports, framing, fifo_depth, *, width, hop_latency=0):
        super().__init__(ports, framing, fifo_depth, width=width, hop_latency=hop_latency)
        if self.src_beat:
            raise ValueError(f"framing {framing!r} at width {width}: the source id is not "
                             f"in the first beat (use SwitchModel)")
        self.live = set()                 # ports whose FIFO holds a beat or that are busy

    def idle(self):
        return not self.live and not any(self.hop)

    def route(self, beat):
        return beat[4]

    def cycle(self, c, arrivals, table_write=None, ready=None, src_write=None):
        if table_write is not None or src_write is not None or ready is not None:
            raise ValueError("SparseSwitchModel takes no table_write, src_write or ready")
        n = self.ports
        live = sorted(self.live)
        heads = {}
        for p in live:
            f = self.fifos[p]
            if f and f[0][0] <= c:
                heads[p] = f[0][1]
        levels = {p: len(self.fifos[p]) for p in arrivals}
        # Every source is allowed (no source write): a head that starts a frame at a port
        # not forwarding one asks for its output; each free output grants the first
        # asking port from its round-robin pointer on (SwitchModel's scan, p by p).
        grants, asking = {}, {}
        for p, h in heads.items():
            if h[2] and not self.busy[p]:
                asking.setdefault(self.route(h), []).append(p)
        for o, ports in asking.items():
            if not self.owned[o]:
                grants[min(ports, key=lambda p, r=self.rr[o]: (p - r) % n)] = o
        egress, pops = {}, []
        for p in live:
            h = heads.get(p)
            if p in grants:
                o = grants[p]
                self.rr[o] = (p + 1) % n
                if not h[3]:
                    self.busy[p], self.dest[p], self.owned[o] = True, o, True
            elif self.busy[p] and h is not None:
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
            self.live.add(p)
        for p in live:
            if not self.fifos[p] and not self.busy[p]:
                self.live.discard(p)
        if self.hop_latency:
            self.hop.append(egress)
            egress = self.hop.popleft()
        return egress, pops

