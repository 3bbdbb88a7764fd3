"""Twin of :class:`rtl.host.up_scheduler.UpScheduler`: read request TLPs and posted write
TLPs on the serial ``up`` direction, and the writes into host memory."""

from pymodel.host.common import pick, tlp_cycles

__all__ = ["UpSchedulerModel"]


class UpSchedulerModel:
    """The ``up`` direction.

    Parameters
    ----------
    profile : spec.host.HostProfile
    reads : pymodel.host.read_splitter.ReadSplitterModel
        The ``chunk`` source.
    due : pymodel.host.due_queue.DueQueueModel
        Where issued chunks go (``tag_free``, ``issue``).
    wbuf : pymodel.host.write_buffer.WriteBufferModel
        The ``tlp`` source.
    counters : dict
        The interface's counters (``up_*``, ``tag_wait_cycles`` are written).
    note : callable
        ``note(c, event, *details)``: the interface's trace.

    ``step(c, side)``: in a cycle in which ``up`` is free, starts a read request (a chunk
    and a free tag) or a posted write (a whole TLP), the kind that did not start last
    when both can (round robin, :func:`pymodel.host.common.pick`); a TLP starting in
    ``s`` occupies ``up`` for ``d`` cycles (:func:`tlp_cycles`) and a write's word ``j``
    reaches host memory in ``s + j``. Returns ``{"mem_wr": (addr, data, be, mark, tag)}``,
    the word written in ``c`` (or None), for the owner to apply after the memory reads of
    the cycle.
    """

    __slots__ = ("p", "reads", "due", "wbuf", "counters", "note", "free", "last", "writes",
                 "_rd_d")

    def __init__(self, profile, reads, due, wbuf, counters, note):
        self.p, self.reads, self.due, self.wbuf = profile, reads, due, wbuf
        self.counters, self.note = counters, note
        self.free, self.last = 0, "wr"    # first free cycle, the kind that started last
        self.writes = {}                  # cycle -> (addr, data, be, mark, tag)
        self._rd_d = tlp_cycles(0, profile.req_overhead, profile.bytes_per_cycle)

    def step(self, c, side):
        return {"mem_wr": self.advance(c)}

    def advance(self, c):
        """:meth:`step` of cycle ``c`` without the dicts: the word written in ``c`` or
        None."""
        cnt = self.counters
        if c >= self.free:
            reads, tlps = self.reads.q, self.wbuf.tlps
            tag_free = self.due.tag_free()
            if reads and not tag_free:
                cnt["tag_wait_cycles"] += 1
            if reads or tlps:
                kind = pick("rd", bool(reads) and tag_free, "wr", bool(tlps), self.last)
                if kind == "rd":
                    self._start_read(c)
                elif kind == "wr":
                    self._start_write(c)
        if c < self.free:
            cnt["up_busy_cycles"] += 1
        return self.writes.pop(c, None) if self.writes else None

    def _start_read(self, c):
        p = self.p
        a, n, rid, last = self.reads.cut(c)
        self.due.push(c, a, n, rid, last)
        d = self._rd_d
        self.free, self.last = c + d, "rd"
        self.counters["up_rd_tlps"] += 1
        self.counters["up_overhead_bytes"] += p.req_overhead
        self.note(c, "rd_tlp", a, n, d)

    def _start_write(self, c):
        p = self.p
        words = self.wbuf.pop_tlp()
        payload = sum(4 * -(-w[2].bit_count() // 4) for w in words)
        d = tlp_cycles(payload, p.req_overhead, p.bytes_per_cycle, len(words))
        for j, word in enumerate(words):
            self.writes[c + j] = word
        self.free, self.last = c + d, "wr"
        self.counters["up_wr_tlps"] += 1
        self.counters["up_payload_bytes"] += payload
        self.counters["up_overhead_bytes"] += p.req_overhead
        self.note(c, "wr_tlp", words[0][0], len(words), payload, d)

    def commit(self):
        """End of the cycle: nothing staged (the interface steps its parts in the order
        of the RTL's combinational paths, so each changes its state at once)."""
