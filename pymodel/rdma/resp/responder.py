"""Twin of :class:`rtl.rdma.resp.responder.Responder`: the stage twins between Fifos.

Stepped one cycle at a time, so that a system model can put it between link twins and a
host-interface twin (``pymodel.host.host_interface.HostInterfaceModel``, node B's; the
requester's twins use node A's). In each cycle ``c``::

    out = resp.present()                     # o, rd_req, wr as the RTL presents them
    hb = host_b.step(c, rd_req=out.rd_req, wr=out.wr)     # node B's host interface
    resp.step(c, beat_ab, rd_data=hb.rd_data, o_ready=True,
              rd_req_taken=hb.rd_req_taken, wr_taken=hb.wr_taken)
    link_ba.send(c, out.o)                   # the ACK beat, taken since o_ready
    ...                                      # the requester with host_a, link_ab, ...
    resp.commit()                            # end of the cycle (then the others')

``beat_ab`` is the beat the A->B link delivers in cycle ``c`` (or None). ``present``
depends only on the state at the start of the cycle (every output of the RTL comes from
a FIFO head or a register), so it can be asked before the taker decides; the host
interface twin ignores the ``mark``/``tag`` keys of ``wr`` until it reports them. Idle
cycles may be skipped: :meth:`ResponderModel.next_event` is None when nothing is held.
"""

import dataclasses
from types import MappingProxyType

from pymodel.cycle import Fifo, StagedLog
from pymodel.fields import unpack
from pymodel.rdma.context_cache import ContextCacheModel
from pymodel.rdma.resp.ack import AckSenderModel
from pymodel.rdma.resp.header import HeaderCheckModel
from pymodel.rdma.resp.mr_cache import MrCacheModel
from pymodel.rdma.resp.response import ResponseSenderModel
from pymodel.rdma.resp.rx import ReceiveModel
from pymodel.rdma.resp.verify import VerifyModel
from pymodel.rdma.resp.wr_arbiter import WriteArbiterModel
from pymodel.rdma.resp.writer import PayloadWriterModel
from spec.formats.roce import MR_LAYOUT, MR_LAYOUT_RA
from spec.formats.scaleup import framing
from spec.rdma_engine import check_cache_shape
from spec.rdma_responder import (
    MR_READ_ID,
    READ_COUNTERS,
    READ_DATA_ID,
    RESP_GROUP,
    RESPONDER_COUNTERS,
    ResponderSizes,
    check_mr_table,
    check_read_words,
)

__all__ = ["ResponderModel", "Presented"]

#: The side inputs of a stage in a system (none: the stages read them only in unit tests).
_NO_SIDE = MappingProxyType({})


def _check(name, value, low, high):
    """A power of two in ``[low, high]``, else ``ValueError`` naming the parameter."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}")
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two, not {value!r}")


@dataclasses.dataclass(slots=True)
class Presented:
    """The responder's outputs in one cycle (each None when not valid): ``o`` a beat
    dict (``data``, ``nbytes``, ``first``, ``last``), ``rd_req`` a dict (``addr``,
    ``words``, ``id``), ``wr`` a dict (``addr``, ``data``, ``be``, ``last``, ``mark``,
    ``tag``)."""
    o: dict | None
    rd_req: dict | None
    wr: dict | None


class ResponderModel:
    """The pipelined responder, cycle for cycle.

    Parameters
    ----------
    cache, depth, mr, **sizes
        As for the RTL :class:`~rtl.rdma.resp.responder.Responder` (``cache``: the
        context cache's :class:`~spec.rdma_engine.ContextCacheShape`, ``mr``: the MR
        table's :class:`~spec.rdma_responder.MrTableShape`, None their defaults).
    qpc_base : int
        The ``qpc_base`` port (word address of the context table).
    qpc_words : int
        Host words of a QP context (``2**`` the ``qpc_log2`` port): a fill reads them
        all (:class:`~pymodel.rdma.context_cache.ContextCacheModel`).
    mr_table : iterable of int
        The MR table's entries (``MR_LAYOUT`` integers; missing ones are 0).
    selective : int
        The ``selective`` port (0 go-back-N, 1 selective repeat).
    mr_base : int
        The ``mr_base`` port (with the MR table in host memory, ``mr.in_host``: the MRs
        are read from there through the MR cache twin, ``mr_table`` is then unused).

    Attributes
    ----------
    counters : dict
        :data:`RESPONDER_COUNTERS`, as the RTL ports show them after the last cycle.
    fifos : dict
        The FIFOs between the stages (``hdr``, ``pay``, ``jobs``, ``wjobs``, ``acks``,
        ``words``, ``fills``, ``wbs``).
    """

    def __init__(self, cache=None, depth=1 << 15, mr=None, *, qpc_base=0,
                 qpc_words=1, mr_table=(), cache_used=None, header="roce", selective=0,
                 mr_base=0, read_words=0, **sizes):
        cache = check_cache_shape(cache)
        cache_entries = cache.entries
        _check("host-memory depth (words)", depth, 1 << 6, 1 << 32)
        mr = check_mr_table(mr)
        mr_entries = mr.entries
        self.read_words = check_read_words(read_words)
        mr.check_reads(read_words)
        reads = self.reads = bool(read_words)
        self.mrc = MrCacheModel(mr.cache, mr_entries) if mr.in_host else None
        self.mr_base = mr_base
        fr = framing(header)
        s = self.sizes = ResponderSizes.of(sizes)
        self.depth, self.mr_entries = depth, mr_entries
        self._staged = StagedLog()          # what to commit at the end of a cycle
        f = self.fifos = {name: Fifo(d, name, self._staged) for name, d in dict(
            hdr=s.rx_frames, pay=s.rx_beats, jobs=s.jobs, wjobs=s.write_jobs,
            acks=s.ack_jobs, words=s.words, fills=s.fills, wbs=s.writebacks).items()}
        if reads:
            f["rdata"] = Fifo(read_words, "rdata", self._staged)
        self.cache = ContextCacheModel(cache_entries, {"resp": RESP_GROUP}, qpc_base, depth,
                                       cache_used, cache.ways, qpc_words)
        used = self.cache.used
        layout = MR_LAYOUT_RA if read_words else MR_LAYOUT
        mr = [unpack(layout, v) for v in mr_table]
        self.mr_table = mr + [unpack(layout, 0)] * (mr_entries - len(mr))
        self.rx = ReceiveModel(f["hdr"], f["pay"], fr.header.value)
        self.verify = VerifyModel(f["jobs"], f["wjobs"], f["acks"], cache_entries, s.jobs,
                                  depth, self, used, log=self._staged, selective=selective,
                                  mr=self.mrc, reads=reads)
        self.header = HeaderCheckModel(f["hdr"], f["jobs"], cache_entries, s.jobs,
                                       lookup=self._lookup,
                                       done=lambda e, side: self.verify.done_of(e),
                                       used=used, log=self._staged,
                                       header=fr.header.value,
                                       entry_of=lambda qpn, side: self.cache.entry_of(qpn),
                                       reads=reads)
        self.writer = PayloadWriterModel(f["wjobs"], f["pay"], f["words"], depth,
                                         fr.head_bytes)
        self.arbiter = WriteArbiterModel(f["words"], f["wbs"])
        wjobs, words = f["wjobs"].q, f["words"].q
        self.ack = (ResponseSenderModel(f["acks"], f["rdata"], read_words, fr.header.value,
                                        writes_idle=lambda: not wjobs and not words,
                                        wr=f["words"], save=self.verify.save)
                    if reads else AckSenderModel(f["acks"], header=fr.header.value))
        self._presented = None
        self._idle = True               # _holds_nothing() of the cycle's present()
        self._queues = tuple(f[name].q for name in f)     # (read by _holds_nothing)
        self._stage_queues = tuple(f[name].q for name in ("hdr", "pay", "jobs", "wjobs"))

    # ---- the context cache and the MR table, as the verify stage sees them ----
    def ready(self, e, side):
        return self.cache.ready(e)

    def static(self, e, side):
        return self.cache.static_of(e)

    def group(self, e, side):
        return self.cache.group_view("resp", e)      # (the verify stage only reads it)

    def write_group(self, e, values):
        self.cache.write_group("resp", e, values)

    def mr(self, rkey, side):
        return self.mr_table[rkey % self.mr_entries]

    def _lookup(self, qpn, victim_busy, side):
        f = self.fifos
        # The verify stage's frames placed out of order hold the entry too.
        busy = victim_busy or self.verify.held(self.cache.entry_of(qpn))
        taken, fill, wb = self.cache.lookup(qpn, busy, f["fills"].can_write(),
                                            f["wbs"].can_write())
        if fill is not None:
            f["fills"].write(fill % self.depth)
        if wb is not None:
            f["wbs"].write(dict(addr=wb[0] % self.depth, data=wb[1]))
        return taken

    # ---- the cycle ----
    def _holds_nothing(self):
        """No FIFO holds an entry and the ACK sender no beat (start of the cycle): then
        nothing is presented, and without a beat or read data arriving no stage acts
        (:meth:`next_event` is None); :meth:`present` and :meth:`step` return at once."""
        for q in self._queues:
            if q:
                return False
        if self.reads:
            return not self.ack.spill and self.ack.frame is None
        return self.ack.spill is None

    def present(self):
        """What the responder presents in this cycle (see :class:`Presented`)."""
        self._idle = idle = self._holds_nothing()
        if idle:
            self._presented = Presented(None, None, None)
            return self._presented
        fills = self.fifos["fills"]
        mr_x = self.mrc.present() if self.mrc is not None else None
        if mr_x is not None:            # an MR read goes before the fill FIFO's head
            rd_req = dict(addr=(self.mr_base + mr_x) % self.depth, words=1, id=MR_READ_ID)
        else:
            rd_req = (dict(addr=fills.head(), words=self.cache.words, id=0)
                      if fills.can_read() else None)
        if rd_req is None and self.reads:
            rd_req = self.ack.present_rd()
            if rd_req is not None:
                rd_req["addr"] %= self.depth
        self._presented = Presented(self.ack.present(), rd_req, self.arbiter.present())
        return self._presented

    def step(self, c, beat_in=None, rd_data=None, *, o_ready=True, rd_req_taken=False,
             wr_taken=False):
        """Cycle ``c``: ``beat_in`` arrives on ``i`` (a beat dict or None), ``rd_data``
        on ``rd_data`` (a dict with ``data``, or None); ``o_ready`` is ``o.ready``;
        ``rd_req_taken``/``wr_taken`` say whether the host interface took what
        :meth:`present` showed. Returns the :class:`Presented` of the cycle."""
        out = self._presented or self.present()
        if (rd_req_taken and out.rd_req is None) or (wr_taken and out.wr is None):
            raise ValueError(f"cycle {c}: taken, but nothing was presented")
        if beat_in is None and rd_data is None and self._idle:     # (as :meth:`present`)
            return out                  # (every stage would pass the cycle by)
        # A stage is called only when it can act or count: the receive stage with a beat
        # or a FIFO level above its high-water counts, the header check with an entry or
        # the jobs FIFO above its count, verify and the payload writer with a job.
        rx, header = self.rx, self.header
        hdr, pay, jobs, wjobs = self._stage_queues
        if (beat_in is not None or len(pay) > rx.count["rx_beats_max"]
                or len(hdr) > rx.count["rx_frames_max"]):
            rx.step(c, {"i": beat_in})
        if hdr or len(jobs) > header.count["jobs_max"]:
            header.step(c, _NO_SIDE)
        if rd_data is not None:
            if self.mrc is not None and rd_data["id"] == MR_READ_ID:
                self.mrc.fill(rd_data["data"])
            elif self.reads and rd_data["id"] == READ_DATA_ID:
                self.fifos["rdata"].write(rd_data["data"])
            else:
                self.cache.fill(rd_data["data"])
        if jobs:
            self.verify.step(c, _NO_SIDE)
        if wjobs:
            self.writer.step(c, _NO_SIDE)
        self.arbiter.advance(wr_taken, out.wr)
        rd_taken_data = False
        if rd_req_taken:
            if out.rd_req["id"] == MR_READ_ID and self.mrc is not None:
                self.mrc.taken()
            elif self.reads and out.rd_req["id"] == READ_DATA_ID:
                rd_taken_data = True
            else:
                self.fifos["fills"].read()
        if self.reads:
            self.ack.advance(o_ready and out.o is not None, rd_taken_data, self.depth)
        elif o_ready and out.o is not None:   # (the ACK sender acts only on a beat taken)
            self.ack.advance(True)
        return out

    def commit(self):
        """End of the cycle: every staged write and pop takes effect (the FIFOs and the
        header check's and verify's registers are in the responder's StagedLog)."""
        self._staged.commit()
        self.cache.commit()
        if self.mrc is not None:
            self.mrc.commit()
        if self.reads:
            self.ack.commit()
            self.verify.commit_atomics()
        self._presented = None

    def next_event(self, c):
        """The next cycle after ``c`` in which the responder can change without new
        inputs (``c + 1`` while anything is held), or None when it is idle."""
        return None if self._holds_nothing() else c + 1

    @property
    def counters(self):
        values = {**self.rx.count, **self.header.count, **self.verify.count,
                  **self.writer.count, **self.ack.count, **self.cache.count}
        names = RESPONDER_COUNTERS + (READ_COUNTERS if self.reads else ())
        return {name: values[name] & 0xFFFFFFFF for name in names}
