"""Host-interface timing: the TLPs of a DMA read or write and the directions' schedule.

Shapes (pure): :func:`_read_shape` cuts a read at MRRS and RCB boundaries,
:func:`_wr_tlps` cuts a responder frame's write at MPS; :func:`_cpl_cycles`,
:func:`_rq_cycles` and :func:`_tag_hold` are the cycles a completion, a read request
and a read tag take on an idle interface (docs/host_interface.md, "Timing").
Schedule (stateful): :class:`_Host` is one node's interface seen by one message at a
time, two :class:`_Dir` directions each a serial resource with its first free cycle
and the kind of TLP that started last (round robin between a waiting read request and
a posted write); :func:`_fill` places a context miss's fill read and write-back.
"""

from functools import lru_cache

from analysis.rdma.fastpath.params import _W, _cdiv, _tlp


@lru_cache(maxsize=65536)
def _read_shape(prof, offset, words):
    """A DMA read of ``words`` words starting ``offset`` words past an MRRS boundary:
    ``((piece words, ...), ...)``, one tuple per read request TLP (MRRS chunk), one entry
    per completion (RCB piece)."""
    mrrs, rcb = prof.max_read_request // _W, prof.rcb // _W
    chunks, a, left = [], offset, words
    while left:
        n = min(left, mrrs - a % mrrs)
        pieces, b, k = [], a, n
        while k:
            m = min(k, rcb - b % rcb)
            pieces.append(m)
            b += m
            k -= m
        chunks.append(tuple(pieces))
        a += n
        left -= n
    return tuple(chunks)


def _cpl_cycles(prof, n):
    return _tlp(_W * n, prof.cpl_overhead, prof.bytes_per_cycle, n)


def _rq_cycles(prof):
    return _tlp(0, prof.req_overhead, prof.bytes_per_cycle)


def _wr_tlps(prof, nbytes):
    """Posted write TLPs of one responder frame of ``nbytes`` payload bytes (one write,
    cut at MPS): ``[(words, payload bytes), ...]``."""
    limit = min(prof.max_payload // _W, prof.wr_fifo_words)
    words = _cdiv(nbytes, _W)
    out = []
    for first in range(0, words, limit):
        k = min(limit, words - first)
        tail = nbytes - _W * (first + k - 1)         # bytes of the TLP's last word
        out.append((k, _W * (k - 1) + 4 * _cdiv(min(tail, _W), 4)))
    return out


def _tag_hold(prof, chunk):
    """Cycles a read request TLP of ``chunk`` (its pieces' words) holds its tag on an
    idle interface: the latency, its completions but the last, one more cycle."""
    return prof.read_latency + sum(_cpl_cycles(prof, n) for n in chunk[:-1]) + 1


class _Dir:
    """One direction of a host interface: its first free cycle and the kind of TLP that
    started last (the schedulers alternate when both kinds wait)."""

    def __init__(self, last):
        self.free, self.last = 0, last

    def start(self, ready, d, kind):
        s = max(ready, self.free)
        self.free, self.last = s + d, kind
        return s

    def pair(self, ready_rd, d_rd, ready_wr, d_wr):
        """A read request and a posted write that both wait: ``(read start, write
        start)``, in the order the round robin gives them."""
        if max(ready_rd, self.free) == max(ready_wr, self.free) and self.last == "rd":
            w = self.start(ready_wr, d_wr, "wr")
            return self.start(ready_rd, d_rd, "rd"), w
        r = self.start(ready_rd, d_rd, "rd")
        return r, self.start(ready_wr, d_wr, "wr")


class _Host:
    """A host interface seen by one message at a time: ``up`` and ``dn``."""

    def __init__(self, prof):
        self.p = prof
        self.up, self.dn = _Dir("wr"), _Dir("mmio")
        self.tags = []                       # per request TLP: cycles its tag is held

    def read(self, a, addr, words, first_start=None):
        """A read accepted in cycle ``a``: the cycles its words are on ``rd_data``, and
        the start of its last request TLP. ``first_start`` forces the first TLP's start
        (when :meth:`_Dir.pair` placed it)."""
        p = self.p
        out, last = [], None
        mrrs = p.max_read_request // _W
        for i, chunk in enumerate(_read_shape(p, addr % mrrs, words)):
            if i == 0 and first_start is not None:
                s = first_start
            else:
                s = self.up.start(a + 1, _rq_cycles(p), "rd")
            last = s
            due = s + p.read_latency
            for n in chunk:
                d = _cpl_cycles(p, n)
                c = self.dn.start(due, d, "cpl")
                out += [c + d - n + 1 + j for j in range(n)]
            self.tags.append(c + 1 - s)          # free from the cycle after its last
        return out, last


def _fill(host, t, wb, one_word_wr, words=1):
    """A context miss whose fill read (of the context's ``words`` words) and (with
    ``wb``) write-back are pushed in cycle ``t``: the cycle the fill's last word is on
    ``rd_data`` (the fill is done then)."""
    p = host.p
    if wb:
        s_rd, _ = host.up.pair(t + 2, _rq_cycles(p), t + 2, one_word_wr)
    else:
        s_rd = host.up.start(t + 2, _rq_cycles(p), "rd")
    got, _ = host.read(t + 1, 0, words, first_start=s_rd)
    return got[-1]
