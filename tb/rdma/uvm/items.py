"""Transactions of the RDMA environment: an RDMA WRITE work request with its intended
error and the way the host posts it, the QP it is posted on, the end-of-stimulus
marker, and what the monitor reports.

pyuvm has no constraint solver, so :meth:`WriteItem.randomize` draws every field from a
``random.Random`` (seeded by the test) and keeps the draw only when every constraint of
:meth:`WriteItem.constraints` holds (rejection sampling, a bounded number of tries).

Error kinds, how each is made, and the responder counter it must raise (``docs/rdma.md``,
"Responder checks"). Kinds marked *inject* are played through the ``inject`` player: the
item's own frames (as the requester would send them) plus one bad copy of one of them;
the others are posted by the host driver and announced by MMIO::

    none           host    a good WRITE                                    frames_ok
    access_rkey    host    rkey of an empty MR entry or with a wrong key    access_nak
    access_right   host    target in an MR without the remote-write right   access_nak
    access_bounds  host    target runs past the MR's end or starts before   access_nak
    access_align   host    remote VA not 64-byte aligned                    access_nak
    fcs_bad        inject  a copy with one bit flipped, FCS left as is      fcs_bad
    truncated      inject  a copy cut short or lengthened, FCS redone       truncated
    malformed      inject  a copy with a bad UDP port, opcode, BTH TVer or
                           EtherType; ICRC and FCS redone                   malformed
    icrc_bad       inject  a copy with a bit of its ICRC or payload flipped,
                           FCS redone                                       icrc_bad
    unknown_qp     inject  a copy sent to a QPN whose context is invalid    unknown_qp
    psn_nak        inject  a copy whose PSN is ahead of the expected one    psn_nak

Bad copies never change the responder's state (they are dropped or NAKed), so the
item's own frames that follow are still accepted. An access error fails on the
message's first frame (the RETH is checked there); the responder NAKs it and consumes
its PSN, so the QP goes on with its next message, and the message's later frames fail
too (no message in progress: ``access_nak`` each, their NAKs unexpected at the
requester).

How the host posts an item (host path only; ``docs/rdma.md``, the optimisation knobs of
:data:`spec.rdma_engine.RUNG_KNOBS` per work request):

- ``bf``: the WQE is written by MMIO (BlueFlame), which rings for it, instead of being
  read from the send queue after a doorbell; it announces this WQE alone.
- ``inline``: the payload travels in the WQE (at most :data:`MAX_INLINE_WORDS` words, and
  the QP's send-queue slots must hold them: :func:`inline_limit`), not read from memory.
- ``ring``: a doorbell follows the WQE (False: the next WQE of the QP rings for both:
  doorbell batching). ``signalled``: the WQE asks for a CQE; an unsignalled one writes
  none unless it fails (a later signalled CQE of its QP covers it).
- ``gap``: cycles between the release of the host's previous MMIO write and the one
  that announces this item (the MMIO player's release cycles).
"""

import dataclasses

from pyuvm import uvm_sequence_item

from spec.rdma_engine import MAX_INLINE_WORDS

__all__ = ["QpSpec", "WriteItem", "RdmaRunItem", "RunObs", "ERROR_KINDS", "WIRE_KINDS",
           "ACCESS_KINDS", "VARIANTS", "EXPECTED_COUNTER", "MAX_SIZE", "QP_TABLE",
           "GAP_BINS", "edge_sizes", "inline_edges", "inline_limit", "size_limit",
           "frame_lengths"]

#: Every error kind an item can carry (``none`` is a good WRITE).
ERROR_KINDS = ("none", "access_rkey", "access_right", "access_bounds", "access_align",
               "fcs_bad", "truncated", "malformed", "icrc_bad", "unknown_qp", "psn_nak")
#: Kinds made by injecting a bad copy of one of the item's frames.
WIRE_KINDS = ("fcs_bad", "truncated", "malformed", "icrc_bad", "unknown_qp", "psn_nak")
#: Kinds made by a bad WQE or MR (the responder NAKs them with a remote access error).
ACCESS_KINDS = ("access_rkey", "access_right", "access_bounds", "access_align")
#: How each kind is made (drawn per item, see the module docstring).
VARIANTS = {
    "none": ("-",), "access_rkey": ("wrong_key", "empty_entry"), "access_right": ("-",),
    "access_bounds": ("above", "below"), "access_align": ("-",), "fcs_bad": ("-",),
    "truncated": ("short", "long"), "malformed": ("dport", "opcode", "tver", "ethertype"),
    "icrc_bad": ("icrc", "payload"), "unknown_qp": ("-",), "psn_nak": ("ahead",),
}
#: The responder counter (:data:`spec.rdma_responder.RESPONDER_COUNTERS`) each kind
#: must raise.
EXPECTED_COUNTER = {k: ("frames_ok" if k == "none" else "access_nak" if k in ACCESS_KINDS
                        else k) for k in ERROR_KINDS}
#: Largest message a sequence makes (bytes): ``docs/rdma.md`` tests 1 B to 16 KiB.
MAX_SIZE = 16384
#: QP contexts per node (the table at ``qpc_base`` = 0): QPNs are below this.
QP_TABLE = 4096
#: Gap bins (cycles before an announcement is released): back to back, short, about one
#: host round trip, longer than a message takes alone. ``(name, lo, hi)``.
GAP_BINS = (("0", 0, 0), ("1-63", 1, 63), ("64-511", 64, 511), ("512+", 512, 2047))

_RETH_FRAME = 70 + 8          # Eth + IPv4 + UDP + BTH + RETH, then ICRC + FCS
_PLAIN_FRAME = 54 + 8         # Eth + IPv4 + UDP + BTH, then ICRC + FCS


def size_limit(pmtu_log2):
    """The largest message drawn on a QP: four full segments, at most :data:`MAX_SIZE`."""
    return min(MAX_SIZE, 4 << pmtu_log2)


def edge_sizes(pmtu_log2):
    """The sizes the draw favours on a QP of path MTU ``2**pmtu_log2``: 1, around 64,
    around the MTU, around two MTUs, and the largest (four MTUs)."""
    mtu = 1 << pmtu_log2
    return sorted({1, 63, 64, 65, mtu - 1, mtu, mtu + 1, 2 * mtu - 1, 2 * mtu, 2 * mtu + 1,
                   size_limit(pmtu_log2)})


def inline_limit(stride_log2):
    """The largest inline payload (bytes) a QP whose send-queue slots are
    ``2**stride_log2`` words holds: the slot less its header word, at most
    :data:`MAX_INLINE_WORDS` words."""
    return 64 * min((1 << stride_log2) - 1, MAX_INLINE_WORDS)


def inline_edges(limit):
    """The inline sizes the draw favours: around each word boundary up to ``limit``."""
    return sorted({s for w in range(1, limit // 64 + 1) for s in (64 * w - 1, 64 * w,
                                                                  64 * w + 1)
                   if 1 <= s <= limit} | {1})


def frame_lengths(size, pmtu_log2):
    """Bytes (with ICRC and FCS) of each frame of a ``size``-byte WRITE, in order."""
    mtu, out, left = 1 << pmtu_log2, [], size
    while True:
        seg = min(left, mtu)
        out.append((_RETH_FRAME if not out else _PLAIN_FRAME) + seg + (-seg % 4))
        left -= seg
        if not left:
            return out


@dataclasses.dataclass(frozen=True)
class QpSpec:
    """A connected QP pair: ``qpn_a`` on the requester, ``qpn_b`` on the responder, the
    path MTU (``2**pmtu_log2`` bytes), the first PSN (the same on both sides) and the
    send queue's slot size (``2**stride_log2`` words: 0 holds no inline data)."""
    qpn_a: int
    qpn_b: int
    pmtu_log2: int
    psn: int
    stride_log2: int = 0

    @property
    def mtu(self):
        return 1 << self.pmtu_log2


class WriteItem(uvm_sequence_item):
    """One RDMA WRITE work request.

    Fields
    ------
    qp : QpSpec
        The QP it is posted on.
    size : int
        Bytes, 1 .. :func:`size_limit` of the QP's MTU (:func:`inline_limit` inline).
    error, variant : str
        One of :data:`ERROR_KINDS` and how it is made (:data:`VARIANTS`).
    bf, inline, ring, signalled : bool
        How the host posts it (module docstring); an inject item is posted plainly
        (doorbell, payload in memory, rung, signalled).
    gap : int
        Cycles between the previous MMIO write's release and this item's announcement
        (0 .. 2047; only an announcing item, ``ring`` or ``bf``, has one).
    fault_pick : int
        Which frame of the message the bad copy is made of (inject kinds), and which bit.
    payload : bytes
        ``size`` random bytes.
    """

    def __init__(self, name="write"):
        super().__init__(name)
        self.qp = QpSpec(1, 1, 12, 0)
        self.size = 1
        self.error, self.variant = "none", "-"
        self.bf = self.inline = False
        self.ring = self.signalled = True
        self.gap, self.fault_pick = 0, 0
        self.payload = bytes(1)

    # -- what the item means ----------------------------------------------------------
    @property
    def path(self):
        """``"inject"`` for :data:`WIRE_KINDS`, else ``"host"``."""
        return "inject" if self.error in WIRE_KINDS else "host"

    @property
    def announces(self):
        """Whether an MMIO write (a doorbell or the WQE itself) follows this WQE."""
        return self.ring or self.bf

    @property
    def wqe_path(self):
        """How the engine gets WQE and payload: ``doorbell|blueflame / memory|inline``."""
        return (f"{'blueflame' if self.bf else 'doorbell'}/"
                f"{'inline' if self.inline else 'memory'}")

    def frames(self):
        """Frame lengths (bytes with ICRC and FCS) the requester makes of it."""
        return frame_lengths(self.size, self.qp.pmtu_log2)

    def outcomes(self):
        """The responder counter each frame raises (the item's own frames, then the bad
        copy's), worked out from the item alone; the scoreboard holds the RTL's counters
        against their sum as well as against the golden model."""
        n = len(self.frames())
        if self.error in ACCESS_KINDS:
            return ["access_nak"] * n
        return ["frames_ok"] * n + ([] if self.error == "none" else [self.error])

    def acks(self, ack_req=True):
        """ACK/NAK frames the responder sends for it: an ACK when its last frame asks for
        one (``ack_req``), a NAK per frame of an access error, plus the NAK of a
        PSN-ahead copy."""
        if self.error in ACCESS_KINDS:
            return len(self.frames())
        return int(ack_req) + (self.error == "psn_nak")

    def cqe(self):
        """Whether it writes a CQE: signalled, or failed (an error always completes)."""
        return self.signalled or self.error in ACCESS_KINDS

    def constraints(self, cfg):
        """Name -> whether it holds. Every one must hold for a drawn item."""
        qp = self.qp
        inject = self.path == "inject"
        return {
            "QPNs in the context table": 0 <= qp.qpn_a < QP_TABLE and 0 <= qp.qpn_b < QP_TABLE,
            "path MTU 256..4096": 8 <= qp.pmtu_log2 <= 12,
            "PSN is 24 bits": 0 <= qp.psn < 1 << 24,
            "slot of 1, 2 or 4 words": qp.stride_log2 in (0, 1, 2),
            "size in 1..size_limit": 1 <= self.size <= size_limit(qp.pmtu_log2),
            "payload has size bytes": len(self.payload) == self.size,
            "error is a known kind": self.error in ERROR_KINDS,
            "variant of the kind": self.variant in VARIANTS.get(self.error, ()),
            "inline fits the QP's slot": (not self.inline
                                          or self.size <= inline_limit(qp.stride_log2)),
            "a WQE by MMIO announces itself": not self.bf or self.ring,
            "an access error announces itself": self.error not in ACCESS_KINDS or self.ring,
            "injected items are posted plainly": (not inject or (
                self.ring and self.signalled and not self.bf and not self.inline)),
            "gap in 0..2047": 0 <= self.gap <= GAP_BINS[-1][2],
            "only an announcement has a gap": self.announces or self.gap == 0,
        }

    # -- randomisation ----------------------------------------------------------------
    def randomize(self, rng, cfg, *, qp, error="none", accept=None, tries=1000, **fixed):
        """Draw size, variant, the posting flags, gap and fault pick from ``rng`` under
        :meth:`constraints`; ``qp`` and ``error`` are the caller's, and so is any of
        ``variant``, ``bf``, ``inline``, ``ring``, ``signalled``, ``gap`` given in
        ``fixed``. An
        inject item is posted plainly. ``accept`` is an extra constraint of the sequence
        (its budget). Raises ``RuntimeError`` naming the constraints that failed when
        ``tries`` draws fail.
        """
        unknown = set(fixed) - {"variant", "bf", "inline", "ring", "signalled", "gap"}
        if unknown:
            raise TypeError(f"randomize: unknown field(s) {sorted(unknown)}")
        failed = []
        for _ in range(tries):
            self._draw(rng, qp, error, fixed)
            failed = [n for n, ok in self.constraints(cfg).items() if not ok]
            if not failed and accept is not None and not accept(self):
                failed = ["accept (the sequence's budget)"]
            if not failed:
                self.payload = rng.randbytes(self.size)
                return self
        raise RuntimeError(f"{self.get_name()}: no draw met the constraints in {tries} "
                           f"tries; the last failed {failed}")

    def _draw(self, rng, qp, error, fixed):
        self.qp, self.error = qp, error
        if error in WIRE_KINDS:
            flags = dict(bf=False, inline=False, ring=True, signalled=True, gap=0)
        else:
            flags = dict(bf=rng.random() < 0.25,
                         inline=qp.stride_log2 > 0 and rng.random() < 0.4,
                         ring=rng.random() < 0.6, signalled=rng.random() < 0.6,
                         gap=_draw_gap(rng))
        flags.update(fixed)
        if error in ACCESS_KINDS and "ring" not in fixed:
            # Its QP enters ERR and flushes every later WQE: the plan starts a new run
            # for what follows on the QP, at an announcement (tb.rdma.uvm.plan).
            flags["ring"] = True
        self.bf, self.inline, self.signalled = flags["bf"], flags["inline"], flags["signalled"]
        self.ring = flags["ring"] or self.bf
        self.gap = flags["gap"] if self.announces else 0
        if self.inline:
            limit = inline_limit(qp.stride_log2)
            edges = inline_edges(limit) if limit else [1]
        else:
            limit, edges = size_limit(qp.pmtu_log2), edge_sizes(qp.pmtu_log2)
        r = rng.random()
        if r < 0.55:
            self.size = rng.choice(edges)
        elif r < 0.85:
            self.size = rng.randint(1, min(qp.mtu, limit))
        else:
            self.size = rng.randint(1, max(1, limit))
        self.payload = bytes(self.size)          # the bytes are drawn once accepted
        self.variant = fixed.get("variant") or rng.choice(VARIANTS.get(error, ("-",)))
        self.fault_pick = rng.getrandbits(16)

    def convert2string(self):
        v = f"/{self.variant}" if self.variant != "-" else ""
        flags = [f for f, on in (("bf", self.bf), ("inline", self.inline),
                                 ("no ring", not self.ring),
                                 ("unsignalled", not self.signalled)) if on]
        return (f"{self.get_name()}: qp {self.qp.qpn_a}->{self.qp.qpn_b} mtu {self.qp.mtu} "
                f"{self.size} B {self.error}{v}" + (f" ({', '.join(flags)})" if flags else "")
                + (f" gap {self.gap}" if self.gap else ""))

    def __str__(self):
        return self.convert2string()


def _draw_gap(rng):
    """Back to back seven times in ten, else uniform in one of the other gap bins."""
    r = rng.random()
    if r < 0.7:
        return 0
    _, lo, hi = GAP_BINS[1] if r < 0.85 else GAP_BINS[2] if r < 0.95 else GAP_BINS[3]
    return rng.randint(lo, hi)


class RdmaRunItem(uvm_sequence_item):
    """End of stimulus: the driver plans the runs of every queued item, runs them on the
    bench (one reset each) and only then calls ``item_done``. ``qps``: the sequence's QP
    set (each gets contexts); ``bad_qpn``: a responder QPN without a context;
    ``knobs``: the :class:`~tb.rdma.uvm.config.RunKnobs` of the runs."""

    def __init__(self, name="run"):
        super().__init__(name)
        self.qps, self.bad_qpn, self.knobs = (), None, None


# -- what the monitor publishes -------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RunObs:
    """Everything the recorders, counters and memories hold after one bench run.

    ``ab``/``ba``: ``(raw beats, cycles)`` of each link; ``written``/``completed``:
    ``(tags, cycles)``; ``mmio``: the cycle each MMIO word was taken; ``counters``:
    ``{block: {name: value}}`` for ``req``, ``resp``, ``host_a``, ``host_b`` and
    ``links`` (``{link: {name: value}}``); ``mem_a``/``mem_b``: whole host memories;
    ``end``: the cycle (``now``) at the end; ``hang``: the timeout message or None;
    ``overflows``: recorders that had more items than room.
    """
    index: int
    kind: str
    ab: tuple
    ba: tuple
    written: tuple
    completed: tuple
    mmio: tuple
    counters: dict
    mem_a: tuple
    mem_b: tuple
    end: int
    hang: object
    overflows: tuple

    @property
    def req(self):
        return self.counters["req"]

    @property
    def resp(self):
        return self.counters["resp"]
