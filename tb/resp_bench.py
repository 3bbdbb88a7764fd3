"""The pipelined responder against its twin, cycle by cycle, with a test host.

One Amaranth-simulator testbench plays the frames into the RTL
:class:`rtl.rdma.resp.responder.Responder` and into its twin
(:class:`pymodel.rdma.resp.responder.ResponderModel`) in lockstep. In every cycle it
compares what each presents on ``o``, ``rd_req`` and ``wr``; a :class:`TbHost` then
decides for both (the presented items being equal) which were taken and which fill
word arrives. Counters are compared at the end.
"""

import dataclasses
import random

from amaranth.sim import Simulator

from pymodel.fields import pack, unpack
from pymodel.packet import frame_to_beats, unpack_beat
from pymodel.rdma.resp.responder import ResponderModel
from pymodel.rdma.verbs import mr_table_in_host
from rtl.rdma.resp.responder import Responder
from spec.formats.packet import packet_layout
from spec.host import rd_req_layout, wr_layout
from spec.rdma_engine import ContextCacheShape
from spec.rdma_responder import (
    MR_CACHE_COUNTERS,
    READ_COUNTERS,
    RESPONDER_COUNTERS,
    MrTableShape,
    mr_table_base,
)

__all__ = ["TbHost", "beat_schedule", "run_responder", "Run"]

_ALL = (1 << 64) - 1


class TbHost:
    """A host for the responder's DMA ports: a dict memory of 64-byte words.

    ``rd_req`` is taken in cycles where ``rd_ready(c)``; a read of ``words`` words taken
    in cycle ``a`` is answered on ``rd_data`` one word a cycle from cycle ``a +
    latency`` (or the cycle after the previous read's last word, if later), each the
    word the memory holds then, with the read's ``id``. ``wr`` is taken in cycles where
    ``wr_ready(c)`` and written at once (bytes under ``be``).
    """

    def __init__(self, mem, latency, rd_ready=None, wr_ready=None):
        self.mem, self.latency = dict(mem), latency
        self.rd_ready = rd_ready or (lambda c: True)
        self.wr_ready = wr_ready or (lambda c: True)
        self.pending = []          # (due cycle, address, id)
        self.reads, self.writes = [], []

    def step(self, c, rd_req, wr):
        """Returns ``(rd_req_taken, wr_taken, rd_data or None)`` for cycle ``c``."""
        rd_taken = rd_req is not None and self.rd_ready(c)
        wr_taken = wr is not None and self.wr_ready(c)
        rd_data = None
        if self.pending and self.pending[0][0] == c:
            _, addr, rid, last = self.pending.pop(0)
            rd_data = dict(data=self.mem.get(addr, 0), id=rid, last=last)
        if rd_taken:
            words = rd_req.get("words", 1)
            due = c + self.latency
            if self.pending:
                due = max(due, self.pending[-1][0] + 1)
            for k in range(words):
                self.pending.append((due + k, rd_req["addr"] + k, rd_req["id"],
                                     int(k == words - 1)))
            self.reads.append((c, rd_req["addr"]))
        if wr_taken:
            old = self.mem.get(wr["addr"], 0)
            mask = sum(0xFF << 8 * k for k in range(64) if wr["be"] >> k & 1)
            self.mem[wr["addr"]] = (old & ~mask) | (wr["data"] & mask)
            self.writes.append((c, dict(wr)))
        return rd_taken, wr_taken, rd_data


def beat_schedule(frames, rng=None, gap_rate=0.0, start=0):
    """``({cycle: beat dict}, cycles of each frame's beats)``: the frames back to back
    from ``start``, with a random gap before a beat at ``gap_rate``."""
    sched, spans, c = {}, [], start
    for frame in frames:
        cycles = []
        for bits in frame_to_beats(frame, 64):
            while rng is not None and rng.random() < gap_rate:
                c += 1
            data, nbytes, first, last = unpack_beat(64, bits)
            sched[c] = dict(data=data, nbytes=nbytes, first=int(first), last=int(last))
            cycles.append(c)
            c += 1
        spans.append(cycles)
    return sched, spans


@dataclasses.dataclass
class Run:
    """What a run recorded (RTL and model agreed on all of it)."""
    acks: list            # (cycle, beat dict) on o
    writes: list          # (cycle, wr dict) taken by the host
    reads: list           # (cycle, word address) fill reads taken
    counters: dict
    mem: dict
    cycles: int
    model: ResponderModel


def run_responder(frames, mem, mr_table, *, qpc_base=0, latency=20, cache_entries=16,
                  depth=1 << 14, mr_shape=None, sizes=None, schedule=None, seed=1,
                  o_stall=0.0, wr_stall=0.0, rd_stall=0.0, max_cycles=200_000,
                  read_words=0, header="roce"):
    """Play ``frames`` (or the beat ``schedule`` given) into the RTL and the model.

    ``o_stall``, ``wr_stall``, ``rd_stall``: probability that ``o.ready``, the host's
    ``wr`` or ``rd_req`` readiness is low in a cycle (seeded). Fails on the first
    difference; returns a :class:`Run`. ``mr_shape``: the responder's MR table
    (:class:`spec.rdma_responder.MrTableShape`; None: 16 MRs on chip), given to the RTL
    block and its twin alike; with the table in host memory (behind an MR cache) it is
    loaded there (:func:`mr_table_in_host`) and the MR cache's counters are compared
    too. ``read_words``: the responder's parameter (RDMA READ;
    its counters are compared too). ``header``: the framing.
    """
    sizes = sizes or {}
    if schedule is None:
        schedule, _ = beat_schedule(frames)
    cache, mr_shape = ContextCacheShape(cache_entries), mr_shape or MrTableShape()
    mr_entries = mr_shape.entries
    dut = Responder(cache, depth, mr_shape, header=header, read_words=read_words, **sizes)
    mr_base = mr_table_base(depth, mr_entries)
    on_host = dut.mr_table is None
    if on_host:
        mem = mr_table_in_host(mem, list(mr_table) + [0] * (mr_entries - len(mr_table)),
                               depth)
    else:
        dut.mr_table.init = [unpack(dut.mr_table.shape, v) for v in mr_table] + \
            [{}] * (mr_entries - len(mr_table))
    model = ResponderModel(cache, depth, mr_shape, qpc_base=qpc_base,
                           mr_table=mr_table, mr_base=mr_base, read_words=read_words,
                           header=header, **sizes)
    rng = random.Random(seed)
    stalls = {}

    def stalled(kind, c, rate):
        return rate > 0 and stalls.setdefault((kind, c), rng.random() < rate)

    host = TbHost(mem, latency, rd_ready=lambda c: not stalled("rd", c, rd_stall),
                  wr_ready=lambda c: not stalled("wr", c, wr_stall))
    beat_l, rd_l, wr_l = packet_layout(64), rd_req_layout(depth), wr_layout(depth)
    last_beat = max(schedule) if schedule else 0
    acks = []
    result = {}

    def flat(port):
        return port.payload.as_value()

    async def bench(ctx):
        ctx.set(dut.qpc_base, qpc_base)
        if on_host:
            ctx.set(dut.mr_base, mr_base)
        c = 0
        while True:
            if c > max_cycles:
                raise AssertionError(f"the responder was still busy after {max_cycles}")
            beat = schedule.get(c)
            ctx.set(dut.i.valid, beat is not None)
            if beat is not None:
                ctx.set(flat(dut.i), pack(beat_l, beat))
            want = model.present()
            for name, layout, item in (("o", beat_l, want.o), ("rd_req", rd_l, want.rd_req),
                                       ("wr", wr_l, want.wr)):
                port = dut.o if name == "o" else getattr(dut.host, name)
                have = ctx.get(flat(port)) if ctx.get(port.valid) else None
                exp = pack(layout, item) if item is not None else None
                if have != exp:
                    raise AssertionError(
                        f"cycle {c}: {name}: RTL {have if have is None else unpack(layout, have)}"
                        f", model {item}")
            rd_taken, wr_taken, rd_data = host.step(c, want.rd_req, want.wr)
            o_ready = not stalled("o", c, o_stall)
            ctx.set(dut.host.rd_req.ready, rd_taken)
            ctx.set(dut.host.wr.ready, wr_taken)
            ctx.set(dut.o.ready, o_ready)
            ctx.set(dut.host.rd_data.valid, rd_data is not None)
            if rd_data is not None:
                ctx.set(dut.host.rd_data.payload.data, rd_data["data"])
                ctx.set(dut.host.rd_data.payload.id, rd_data["id"])
            if want.o is not None and o_ready:
                acks.append((c, want.o))
            model.step(c, beat, rd_data, o_ready=o_ready, rd_req_taken=rd_taken,
                       wr_taken=wr_taken)
            model.commit()
            await ctx.tick()
            c += 1
            if c > last_beat and model.next_event(c) is None and not host.pending:
                break
        names = RESPONDER_COUNTERS + (READ_COUNTERS if read_words else ())
        result["counters"] = {name: ctx.get(getattr(dut, name)) for name in names}
        if on_host:
            result["mr"] = {name: ctx.get(getattr(dut, name)) for name in MR_CACHE_COUNTERS}
        result["cycles"] = c

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert result["counters"] == model.counters, (result["counters"], model.counters)
    if on_host:
        assert result["mr"] == model.mrc.count, (result["mr"], model.mrc.count)
        result["counters"].update(result["mr"])
    return Run(acks=acks, writes=host.writes, reads=host.reads,
               counters=result["counters"], mem=host.mem, cycles=result["cycles"],
               model=model)
