"""Twin of :class:`rtl.host.down_scheduler.DownScheduler`: completions and host posted
writes on the serial ``down`` direction, and the memory reads behind ``rd_data``."""

from pymodel.host.common import pick, tlp_cycles
from spec.host import WORD_BYTES

__all__ = ["DownSchedulerModel"]


class DownSchedulerModel:
    """The ``down`` direction.

    Parameters
    ----------
    profile : spec.host.HostProfile
    depth : int
        Host-memory words.
    due : pymodel.host.due_queue.DueQueueModel
        The completions' source.
    mmio : pymodel.host.mmio_buffer.MmioBufferModel
        Where host writes go (room reserved at their start).
    mem : dict
        The host memory (read here).
    counters, note
        As for :class:`pymodel.host.up_scheduler.UpSchedulerModel` (``dn_*`` written).

    ``step(c, side)``: the word of a completion read in ``c - 1`` leaves on ``rd_data``;
    in a cycle in which ``down`` is free, a completion (the head chunk due) or a host
    write (``side["mmio_in"]`` a first word whose words fit the buffer's room, no other
    write being taken) starts, round robin when both can. A completion of ``n`` words
    starting in ``s`` occupies ``down`` for ``d`` cycles and reads its word ``j`` in
    ``s + d - n + j`` (seeing memory before that cycle's write), on ``rd_data`` a cycle
    later. Returns ``{"rd_data": word or None}``.
    """

    __slots__ = ("p", "depth", "due", "mmio", "mem", "counters", "note", "free", "last",
                 "reads", "out")

    def __init__(self, profile, depth, due, mmio, mem, counters, note):
        self.p, self.depth, self.due, self.mmio, self.mem = profile, depth, due, mmio, mem
        self.counters, self.note = counters, note
        self.free, self.last = 0, "mmio"  # first free cycle, the kind that started last
        self.reads = {}                   # cycle -> (addr, id, last): memory read then
        self.out = {}                     # cycle -> rd_data word

    def step(self, c, side):
        return {"rd_data": self.advance(c, side.get("mmio_in"))}

    def advance(self, c, word):
        """:meth:`step` of cycle ``c`` without the dicts (``word``: ``mmio_in``): the
        word on ``rd_data`` or None."""
        rd_data = self.out.pop(c, None) if self.out else None
        if c >= self.free:
            can_cpl = self.due.due(c)
            can_mmio = False
            if word is not None and word["first"] and not self.mmio.takes:
                can_mmio = self.mmio.words_of(word) <= self.mmio.room()
            if can_cpl or can_mmio:
                kind = pick("cpl", can_cpl, "mmio", can_mmio, self.last)
                if kind == "cpl":
                    self._start_cpl(c)
                else:
                    self._start_mmio(c, word)
        if c < self.free:
            self.counters["dn_busy_cycles"] += 1
        # A completion's memory read (perhaps of a completion started just now) sees the
        # memory before this cycle's write; its word is on rd_data in the next cycle.
        if self.reads:
            read = self.reads.pop(c, None)
            if read is not None:
                addr, rid, last = read
                self.out[c + 1] = {"data": self.mem.get(addr, 0), "id": rid, "last": last}
        return rd_data

    def _start_cpl(self, c):
        p = self.p
        addr, n, rid, last = self.due.take()
        d = tlp_cycles(WORD_BYTES * n, p.cpl_overhead, p.bytes_per_cycle, n)
        for j in range(n):
            self.reads[c + d - n + j] = ((addr + j) % self.depth, rid, last and j == n - 1)
        self.free, self.last = c + d, "cpl"
        self.counters["dn_cpl_tlps"] += 1
        self.counters["dn_payload_bytes"] += WORD_BYTES * n
        self.counters["dn_overhead_bytes"] += p.cpl_overhead
        self.note(c, "cpl", addr, n, d)

    def _start_mmio(self, c, first):
        p = self.p
        n, nbytes = self.mmio.words_of(first), first["nbytes"]
        d = tlp_cycles(nbytes, p.mmio_overhead, p.bytes_per_cycle, n)
        self.mmio.reserve(c, d, n)
        self.free, self.last = c + d, "mmio"
        self.counters["dn_mmio_tlps"] += 1
        self.counters["dn_payload_bytes"] += nbytes
        self.counters["dn_overhead_bytes"] += p.mmio_overhead
        self.note(c, "mmio_tlp", first["addr"], nbytes, d)

    def commit(self):
        """End of the cycle: nothing staged (the interface steps its parts in the order
        of the RTL's combinational paths, so each changes its state at once)."""
