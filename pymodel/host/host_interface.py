"""Golden-model twin of the host interface, stepped one cycle at a time.

Written from the contract (``docs/host_interface.md``, the lead's
``host_interface_contract.md``), not from the RTL: the two directions are "free from"
cycles, a TLP's effects are scheduled into per-cycle tables when it starts, and the
queues are Python deques. Imports only the spec layer.
"""

from collections import deque
from dataclasses import dataclass

from spec.host import (
    HOST_COUNTERS,
    ID_BITS,
    MAX_READ_WORDS,
    MMIO_NBYTES_BITS,
    WORD_BYTES,
    check_profile,
)

__all__ = ["HostInterfaceModel", "StepResult", "tlp_cycles"]

_MASK32 = (1 << 32) - 1


#: The details of each trace event, in the order :meth:`HostInterfaceModel._note` takes
#: their values (``d``: the cycles the TLP occupies its direction).
_NOTE_DETAILS = {"rd_tlp": ("addr", "words", "d"), "wr_tlp": ("addr", "words", "bytes", "d"),
                 "cpl": ("addr", "words", "d"), "mmio_tlp": ("addr", "nbytes", "d")}

_BYTE_MASKS = {}


def _byte_mask(be):
    """The bit mask of the bytes a byte enable ``be`` selects in a word (cached: a
    run uses a few distinct enables)."""
    mask = _BYTE_MASKS.get(be)
    if mask is None:
        mask = _BYTE_MASKS[be] = sum(0xFF << (8 * k) for k in range(WORD_BYTES)
                                     if be >> k & 1)
    return mask


def tlp_cycles(payload, overhead, bytes_per_cycle, words=0):
    """Cycles a TLP occupies its direction: ``ceil((payload + overhead) / bpc)``, at least
    one, and at least one per word it carries."""
    return max(1, words, -(-(payload + overhead) // bytes_per_cycle))


@dataclass(slots=True)
class StepResult:
    """What happened in one cycle (see :meth:`HostInterfaceModel.step`)."""

    rd_req_taken: bool = False
    wr_taken: bool = False
    mmio_in_taken: bool = False
    rd_data: dict | None = None
    mmio: dict | None = None
    marked: int | None = None


class _Chunk:
    """A read request TLP in flight: holds a tag until its last completion starts."""

    __slots__ = ("due", "pieces")

    def __init__(self, due, pieces):
        self.due, self.pieces = due, pieces


class HostInterfaceModel:
    """The host interface in Python, cycle for cycle.

    Parameters
    ----------
    profile : spec.host.HostProfile
    depth : int
        Host-memory words (a power of two).
    mem : dict, optional
        Initial host memory, ``{word address: 512-bit int}`` (absent words are 0).

    Attributes
    ----------
    counters : dict
        :data:`spec.host.HOST_COUNTERS`, exact through the last cycle stepped.
    mem : dict
        The host memory, written by posted writes.
    trace : list or None
        Set to a list to collect ``(cycle, event, details)``: ``rd_tlp``, ``wr_tlp``,
        ``cpl``, ``mmio_tlp`` at the cycle each TLP starts, with its occupancy ``d``.
    """

    def __init__(self, profile, depth, mem=None):
        self.p = check_profile(profile)
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"host memory depth (words) must be a power of two, not "
                             f"{depth!r}")
        self.depth = depth
        self.mem = dict(mem or {})
        self.counters = dict.fromkeys(HOST_COUNTERS, 0)
        self.trace = None
        self._c = -1
        p = profile
        self._mrrs_words = p.max_read_request // WORD_BYTES
        self._rcb_words = p.rcb // WORD_BYTES
        self._wr_limit = min(p.max_payload // WORD_BYTES, p.wr_fifo_words)
        # The 32-bit wrap of the counters (see the end of :meth:`step`): no counter grows
        # by more than ``_growth`` a cycle (a busy or wait cycle, a TLP: one a direction,
        # its overhead and payload bytes, the tags in use), so the largest one is looked
        # for only from ``_wrap_check``, the first cycle it could have passed 2**32.
        self._growth = max(1, p.tags, p.req_overhead, p.cpl_overhead, p.mmio_overhead,
                           WORD_BYTES * max(self._wr_limit, self._rcb_words),
                           1 << MMIO_NBYTES_BITS)
        self._wrap_check = 0
        self._rd_d = tlp_cycles(0, p.req_overhead, p.bytes_per_cycle)    # a read request's
        # Reads: engine reads waiting to be issued, as [addr, words, id, words issued].
        self._reads = deque()
        self._chunks = deque()            # _Chunk, oldest first; len() = tags in use
        # Writes: words held in the write buffer, the TLP being gathered, whole TLPs.
        self._wr_held = 0
        self._gather = []
        self._tlps = deque()
        # The two directions: first free cycle, the kind that started last.
        self._up_free, self._up_last = 0, "wr"
        self._dn_free, self._dn_last = 0, "mmio"
        # Scheduled effects of started TLPs, by cycle.
        self._mem_reads = {}              # cycle -> (addr, id, last): read issued then
        self._rd_out = {}                 # cycle -> rd_data word
        self._mem_writes = {}             # cycle -> (addr, data, be)
        # Host writes: words to take (cycle, slot), buffer slots [visible_from, word].
        self._takes = deque()
        self._mmio = deque()
        self._mmio_used = 0               # words held or reserved

    # -- the cycle -----------------------------------------------------------------------
    def step(self, c, rd_req=None, wr=None, mmio_in=None, mmio_ready=True):
        """Advance to cycle ``c`` (strictly increasing; cycles skipped since the last call
        must be ones without inputs, at most up to :meth:`next_event`).

        ``rd_req``, ``wr``, ``mmio_in`` are what the device and the host present in this
        cycle (dicts of their layout's fields, or None); ``mmio_ready`` is the device's
        ``mmio.ready``. Returns a :class:`StepResult`: which inputs were taken, the word
        on ``rd_data`` and the word presented on ``mmio`` (taken if ``mmio_ready``).
        Raises ``ValueError`` on inputs the contract forbids.
        """
        if c <= self._c:
            raise ValueError(f"cycles must increase: {c} after {self._c}")
        if c > self._c + 1:
            self._skip_to(c)
        if (rd_req is None and wr is None and mmio_in is None and not self._mem_reads
                and not self._rd_out and not self._mem_writes and not self._takes
                and not self._mmio and not self._reads and not self._tlps
                and not self._chunks):
            return self._quiet(c)
        p, cnt = self.p, self.counters
        res = StepResult()
        # Registered state at the start of the cycle.
        reads, chunks = self._reads, self._chunks
        rd_ready = len(reads) < p.rd_queue
        wr_ready = self._wr_held < p.wr_fifo_words
        tag_free = len(chunks) < p.tags
        room = p.mmio_fifo_words - self._mmio_used

        if self._rd_out:
            res.rd_data = self._rd_out.pop(c, None)

        # up: read request or posted write TLP.
        if c >= self._up_free:
            if reads and not tag_free:
                cnt["tag_wait_cycles"] += 1
            if reads or self._tlps:
                kind = _pick("rd", bool(reads) and tag_free, "wr", bool(self._tlps),
                             self._up_last)
                if kind == "rd":
                    self._start_read(c)
                elif kind == "wr":
                    self._start_write(c)
        if c < self._up_free:
            cnt["up_busy_cycles"] += 1

        # down: completion or host write.
        if c >= self._dn_free:
            can_cpl = bool(chunks) and chunks[0].due <= c
            can_mmio = False
            if mmio_in is not None and mmio_in["first"] and not self._takes:
                n = self._mmio_words(mmio_in)
                can_mmio = n <= room
            if can_cpl or can_mmio:
                kind = _pick("cpl", can_cpl, "mmio", can_mmio, self._dn_last)
                if kind == "cpl":
                    self._start_cpl(c)
                else:
                    self._start_mmio(c, mmio_in)
        if c < self._dn_free:
            cnt["dn_busy_cycles"] += 1

        # A completion's memory read (perhaps of a completion started just now) sees the
        # memory before this cycle's write; its word is on rd_data in the next cycle.
        if self._mem_reads:
            read = self._mem_reads.pop(c, None)
            if read is not None:
                addr, rid, last = read
                self._rd_out[c + 1] = {"data": self.mem.get(addr, 0), "id": rid,
                                       "last": last}

        # Host write words taken in this cycle.
        if self._takes and self._takes[0][0] == c:
            _, slot = self._takes.popleft()
            if mmio_in is None:
                raise ValueError(f"cycle {c}: the host withdrew a word of a write it "
                                 f"started")
            slot[1] = dict(mmio_in)
            res.mmio_in_taken = True

        # The posted write of this cycle; a word leaves the write buffer.
        if self._mem_writes:
            write = self._mem_writes.pop(c, None)
            if write is not None:
                addr, data, be, mark, tag = write
                if mark:
                    res.marked = tag
                old = self.mem.get(addr, 0)
                mask = _byte_mask(be)
                self.mem[addr] = (old & ~mask) | (data & mask)
                self._wr_held -= 1

        # The device side of mmio.
        if self._mmio and self._mmio[0][0] <= c:
            res.mmio = dict(self._mmio[0][1])
            if mmio_ready:
                self._mmio.popleft()
                self._mmio_used -= 1

        # Engine inputs, seen by the schedulers from the next cycle.
        if rd_req is not None and rd_ready:
            self._accept_read(rd_req)
            res.rd_req_taken = True
        if wr is not None and wr_ready:
            self._accept_write(wr)
            res.wr_taken = True

        if len(chunks) > cnt["tags_max"]:
            cnt["tags_max"] = len(chunks)
        if c >= self._wrap_check:
            self._wrap(c)
        self._c = c
        return res

    def _quiet(self, c):
        """:meth:`step` of a cycle without inputs in which nothing is queued, scheduled
        or in flight (no read, write, completion, host word or TLP): nothing starts or
        arrives; only the directions still busy with a TLP count the cycle."""
        cnt = self.counters
        if c < self._up_free:
            cnt["up_busy_cycles"] += 1
        if c < self._dn_free:
            cnt["dn_busy_cycles"] += 1
        if c >= self._wrap_check:
            self._wrap(c)
        self._c = c
        return StepResult()

    def _wrap(self, c):
        """Wrap the counters to 32 bits (none is negative) and set the next cycle in which
        one may pass 2**32: the largest one grows by at most ``_growth`` a cycle."""
        cnt = self.counters
        top = max(cnt.values())
        if top > _MASK32:
            for name in cnt:
                cnt[name] &= _MASK32
            top = max(cnt.values())
        self._wrap_check = c + 1 + (_MASK32 - top) // self._growth

    def mmio_head(self, c):
        """The word the interface presents on ``mmio`` in cycle ``c`` (before
        :meth:`step` of that cycle), or None: what a device decides ``ready`` on."""
        if self._mmio and self._mmio[0][0] <= c:
            return dict(self._mmio[0][1])
        return None

    def next_event(self, c):
        """The earliest cycle after ``c`` in which something can happen without new
        inputs (a TLP start, a scheduled read, write, word or commit, a presented ``mmio``
        word, or the last busy cycle of a direction), or None when idle. Stepping only
        at these cycles keeps every output and counter exact."""
        p = self.p
        soon = [k for k in (*self._mem_reads, *self._rd_out, *self._mem_writes) if k > c]
        if self._takes:
            soon.append(self._takes[0][0])
        if self._mmio:
            soon.append(max(c + 1, self._mmio[0][0]))
        if (self._reads and len(self._chunks) < p.tags) or self._tlps:
            soon.append(max(c + 1, self._up_free))
        if self._chunks:
            soon.append(max(c + 1, self._chunks[0].due, self._dn_free))
        for free in (self._up_free, self._dn_free):
            if free - 1 > c:
                soon.append(free - 1)
        return min(soon) if soon else None

    # -- starts --------------------------------------------------------------------------
    def _start_read(self, c):
        p = self.p
        head = self._reads[0]
        addr, words, rid, done = head
        a = (addr + done) % self.depth
        n = min(words - done, self._mrrs_words - a % self._mrrs_words)
        head[3] = done + n
        last = head[3] == words
        if last:
            self._reads.popleft()
        pieces, off = deque(), 0
        while off < n:
            b = (a + off) % self.depth
            k = min(n - off, self._rcb_words - b % self._rcb_words)
            off += k
            pieces.append((b, k, rid, last and off == n))
        self._chunks.append(_Chunk(c + p.read_latency, pieces))
        d = self._rd_d                  # tlp_cycles(0, p.req_overhead, p.bytes_per_cycle)
        self._up_free, self._up_last = c + d, "rd"
        self.counters["up_rd_tlps"] += 1
        self.counters["up_overhead_bytes"] += p.req_overhead
        self._note(c, "rd_tlp", a, n, d)

    def _start_write(self, c):
        p = self.p
        words = self._tlps.popleft()
        payload = sum(4 * -(-w[2].bit_count() // 4) for w in words)
        d = tlp_cycles(payload, p.req_overhead, p.bytes_per_cycle, len(words))
        for j, word in enumerate(words):
            self._mem_writes[c + j] = word
        self._up_free, self._up_last = c + d, "wr"
        self.counters["up_wr_tlps"] += 1
        self.counters["up_payload_bytes"] += payload
        self.counters["up_overhead_bytes"] += p.req_overhead
        self._note(c, "wr_tlp", words[0][0], len(words), payload, d)

    def _start_cpl(self, c):
        p = self.p
        chunk = self._chunks[0]
        addr, n, rid, last = chunk.pieces.popleft()
        if not chunk.pieces:
            self._chunks.popleft()           # the tag is free from the next cycle
        d = tlp_cycles(WORD_BYTES * n, p.cpl_overhead, p.bytes_per_cycle, n)
        for j in range(n):
            self._mem_reads[c + d - n + j] = ((addr + j) % self.depth, rid,
                                              last and j == n - 1)
        self._dn_free, self._dn_last = c + d, "cpl"
        self.counters["dn_cpl_tlps"] += 1
        self.counters["dn_payload_bytes"] += WORD_BYTES * n
        self.counters["dn_overhead_bytes"] += p.cpl_overhead
        self._note(c, "cpl", addr, n, d)

    def _start_mmio(self, c, first):
        p = self.p
        n, nbytes = self._mmio_words(first), first["nbytes"]
        d = tlp_cycles(nbytes, p.mmio_overhead, p.bytes_per_cycle, n)
        for j in range(n):
            slot = [c + d - n + 2 + j, None]     # enters at s+d-n+1+j, visible after
            self._mmio.append(slot)
            self._takes.append((c + j, slot))
        self._mmio_used += n
        self._dn_free, self._dn_last = c + d, "mmio"
        self.counters["dn_mmio_tlps"] += 1
        self.counters["dn_payload_bytes"] += nbytes
        self.counters["dn_overhead_bytes"] += p.mmio_overhead
        self._note(c, "mmio_tlp", first["addr"], nbytes, d)

    # -- inputs --------------------------------------------------------------------------
    def _accept_read(self, req):
        addr, words, rid = req["addr"], req["words"], req["id"]
        if not 0 <= addr < self.depth or not 1 <= words <= MAX_READ_WORDS \
                or not 0 <= rid < 1 << ID_BITS:
            raise ValueError(f"bad read request {req!r}")
        self._reads.append([addr, words, rid, 0])

    def _accept_write(self, wr):
        if not 0 <= wr["addr"] < self.depth:
            raise ValueError(f"bad write address {wr['addr']!r}")
        self._wr_held += 1
        self._gather.append((wr["addr"], wr["data"], wr["be"], wr.get("mark", 0),
                             wr.get("tag", 0)))
        if wr["last"] or len(self._gather) == self._wr_limit:
            self._tlps.append(self._gather)
            self._gather = []

    def _mmio_words(self, word):
        nbytes = word["nbytes"]
        n = -(-nbytes // WORD_BYTES)
        if not 1 <= nbytes < 1 << MMIO_NBYTES_BITS or n > self.p.mmio_fifo_words:
            raise ValueError(f"host write of {nbytes!r} bytes: must be 1 to "
                             f"{min((1 << MMIO_NBYTES_BITS) - 1, 64 * self.p.mmio_fifo_words)}")
        return n

    # -- bookkeeping ---------------------------------------------------------------------
    def _skip_to(self, c):
        """Account for the cycles ``self._c + 1 .. c - 1``, which had no inputs."""
        first = self._c + 1
        if first >= c:
            return
        nxt = self.next_event(self._c)
        if nxt is not None and nxt < c:
            raise ValueError(f"cycle {nxt} has an event; it can not be skipped to {c}")
        cnt = self.counters
        cnt["up_busy_cycles"] += max(0, min(c, self._up_free) - first)
        cnt["dn_busy_cycles"] += max(0, min(c, self._dn_free) - first)
        if self._reads and len(self._chunks) >= self.p.tags:
            cnt["tag_wait_cycles"] += c - max(first, self._up_free)
            cnt["tag_wait_cycles"] &= _MASK32     # (the sum may be negative)
        self._wrap_check = 0                      # (grown by more than a cycle's worth)

    def _note(self, c, event, *values):
        """Trace ``(c, event, {detail: value})``, the details named by
        :data:`_NOTE_DETAILS` (no dict is built while there is no trace)."""
        if self.trace is not None:
            self.trace.append((c, event, dict(zip(_NOTE_DETAILS[event], values,
                                                  strict=True))))


def _pick(a, can_a, b, can_b, last):
    """Round robin between two kinds: the one eligible, or the one not started last."""
    if can_a and can_b:
        return b if last == a else a
    return a if can_a else (b if can_b else None)
