"""Twin of :class:`rtl.nic.completion_keyed.CompletionKeyed`: a receiver's completion
generator keyed by destination. The receiver stands for many destination ids
(docs/nic.md, "4,096 destinations") and keeps, for each, the state a receiver of its
own would keep for the one sender, in a memory; the counterpart of
:class:`pymodel.nic.completion_gen.CompletionGenModel`'s per-source registers."""

from collections import deque

from pymodel.nic.frames import build_completion
from pymodel.packet import pack_beat
from spec.formats.nic import COMPLETION_COUNT_BITS, CompletionStatus, completion_bytes

__all__ = ["CompletionKeyedModel", "keyed_entry_bits"]

_MASK = (1 << COMPLETION_COUNT_BITS) - 1


def keyed_entry_bits(coalesce):
    """Bits of one destination's entry: count and dropped (2 x 16), pending
    (``bits(coalesce)``), the dropped, ack-request and queued flags."""
    return 2 * COMPLETION_COUNT_BITS + coalesce.bit_length() + 3


class CompletionKeyedModel:
    """The generator of a receiver standing for ``destinations`` ids (entry ``d`` for
    destination id ``d``), tracking the frames of one sender, ``sender``.

    ``offer``/``step``/``busy`` as :class:`~pymodel.nic.completion_gen.
    CompletionGenModel`'s; an event ``side["ev"]`` is NicRx's ``(src, dropped, ack_req,
    dst)``, counted at entry ``dst`` when ``src`` is ``sender`` and ``dst <
    destinations`` (ignored otherwise). One read-modify-write port a cycle, taken in
    this order:

    1. an event: its entry's count, dropped, pending (saturating at ``coalesce``) and
       flags; the entry becomes ready (its id into the ready FIFO, its ``queued`` flag
       set, once) when pending reaches ``coalesce`` or the frame asked (``ack_req``);
       ``(dst, c, count)`` goes into the age FIFO;
    2. with no completion frame held and an id in the ready FIFO: the completion of its
       entry (``src`` its id, ``dst`` the sender; status DROPPED if a frame was dropped
       since the last one), its pending and flags cleared;
    3. the age FIFO's head ``(d, t, n)`` once ``c - t >= flush_idle``: when entry ``d``
       has counted no frame since (its count is still ``n``), has pending frames and is
       not queued, it becomes ready (the idle flush, exact: no scan).

    The age FIFO holds one item per frame still younger than ``flush_idle`` cycles (or
    waiting behind the port); the ready FIFO at most one per destination.
    """

    def __init__(self, width, framing, destinations, coalesce, flush_idle, node_id,
                 sender=0, id_bits=16):
        if not isinstance(destinations, int) or isinstance(destinations, bool) \
                or destinations < 1:
            raise ValueError(f"destinations must be a positive integer, not "
                             f"{destinations!r}")
        self.w, self.framing, self.destinations = width, framing, destinations
        self.coalesce, self.flush_idle, self.node_id = coalesce, flush_idle, node_id
        self.sender, self.id_bits = sender, id_bits
        self.nbeats = -(-completion_bytes(framing) // width)
        n = destinations
        self.count, self.dropped, self.pending = [0] * n, [0] * n, [0] * n
        self.dflag, self.asked, self.queued = [False] * n, [False] * n, [False] * n
        self.ready, self.ages = deque(), deque()
        self.age_peak = self.ready_peak = 0
        self.ack_req_seen = 0
        self.frame = None
        self.started = False
        self.busy_until = None
        self.cpl_sent = 0
        self.sent = []

    def offer(self, c):
        return self.frame if self.frame is not None and not self.started else None

    def busy(self):
        return self.frame is not None or bool(self.ready) or bool(self.ages)

    def _wire(self, src, status, count, dropped):
        raw = build_completion(self.framing, src, self.sender, status, count, dropped,
                               id_bits=self.id_bits)
        w = self.w
        n = -(-len(raw) // w)
        return [pack_beat(w, int.from_bytes(raw[k * w:(k + 1) * w], "little"),
                          min(w, len(raw) - k * w), int(k == 0), int(k == n - 1))
                for k in range(n)]

    def _make_ready(self, d):
        self.queued[d] = True
        self.ready.append(d)
        self.ready_peak = max(self.ready_peak, len(self.ready))

    def step(self, c, side):
        if side.get("started"):
            self.started = True
            self.busy_until = c + self.nbeats - 1
            self.cpl_sent += 1
        ev = side.get("ev")
        if ev is not None and ev[0] == self.sender and ev[3] < self.destinations:
            _, drop, req, d = ev[0], bool(ev[1]), bool(ev[2]), ev[3]
            self.ack_req_seen += req
            self.count[d] = (self.count[d] + 1) & _MASK
            self.dropped[d] = (self.dropped[d] + drop) & _MASK
            self.pending[d] = min(self.pending[d] + 1, self.coalesce)
            self.dflag[d] = self.dflag[d] or drop
            self.asked[d] = self.asked[d] or req
            if (self.pending[d] >= self.coalesce or self.asked[d]) and not self.queued[d]:
                self._make_ready(d)
            self.ages.append((d, c, self.count[d]))
            self.age_peak = max(self.age_peak, len(self.ages))
        elif self.frame is None and self.ready:
            d = self.ready.popleft()
            status = int(CompletionStatus.DROPPED) if self.dflag[d] else 0
            self.frame = self._wire(d, status, self.count[d], self.dropped[d])
            self.sent.append((c, d, status, self.count[d], self.dropped[d]))
            self.started = False
            self.pending[d], self.dflag[d], self.asked[d] = 0, False, False
            self.queued[d] = False
        elif self.ages and c - self.ages[0][1] >= self.flush_idle:
            d, _, n = self.ages.popleft()
            if n == self.count[d] and self.pending[d] and not self.queued[d]:
                self._make_ready(d)
        if self.started and c == self.busy_until:
            self.frame = None
            self.started = False
        return {}

    def commit(self):
        pass
