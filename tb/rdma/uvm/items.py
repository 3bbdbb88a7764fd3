"""Transactions of the RDMA environment: an RDMA WRITE work request with its intended
error, the QP it is posted on, the end-of-stimulus marker, and what the monitor reports.

pyuvm has no constraint solver, so :meth:`WriteItem.randomize` draws every field from a
``random.Random`` (seeded by the test) and keeps the draw only when every constraint of
:meth:`WriteItem.constraints` holds (rejection sampling, a bounded number of tries).

Error kinds, how each is made, and the responder counter it must raise (``docs/rdma.md``,
"Responder checks"). Kinds marked *inject* are played through the ``inject`` player: the
item's own frames (as the requester would send them) plus one bad copy of one of them;
the others are posted as WQEs and rung through the doorbell player::

    none           doorbell  a good WRITE                                  frames_ok
    access_rkey    doorbell  rkey of an empty MR entry or with a wrong key  access_nak
    access_right   doorbell  target in an MR without the remote-write right access_nak
    access_bounds  doorbell  target runs past the MR's end or starts before access_nak
    access_align   doorbell  remote VA not 64-byte aligned                  access_nak
    fcs_bad        inject    a copy with one bit flipped, FCS left as is    fcs_bad
    truncated      inject    a copy cut short or lengthened, FCS redone     truncated
    malformed      inject    a copy with a bad UDP port, opcode, BTH TVer or
                             EtherType; ICRC and FCS redone                 malformed
    icrc_bad       inject    a copy with a bit of its ICRC or payload flipped,
                             FCS redone                                     icrc_bad
    unknown_qp     inject    a copy sent to a QPN whose context is invalid  unknown_qp
    psn_nak        inject    a copy whose PSN is ahead of the expected one  psn_nak

Bad copies never change the responder's state (they are dropped or NAKed), so the
item's own frames that follow are still accepted. The requester-side kinds are one
frame long (size at most the path MTU): after a NAK the requester moves on, so a
second frame of the message would meet a PSN error instead.
"""

import dataclasses

from pyuvm import uvm_sequence_item

__all__ = ["QpSpec", "WriteItem", "RdmaRunItem", "RunObs", "ERROR_KINDS", "WIRE_KINDS",
           "ACCESS_KINDS", "VARIANTS", "EXPECTED_COUNTER", "MAX_SIZE", "QP_TABLE",
           "edge_sizes", "size_limit", "frame_lengths"]

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
#: The responder counter (:data:`spec.rdma.RESPONDER_COUNTERS`) each kind must raise.
EXPECTED_COUNTER = {k: ("frames_ok" if k == "none" else "access_nak" if k in ACCESS_KINDS
                        else k) for k in ERROR_KINDS}
#: Largest message a sequence makes (bytes): ``docs/rdma.md`` tests 1 B to 16 KiB.
MAX_SIZE = 16384
#: QP contexts per node (the table at ``qpc_base``): QPNs are below this.
QP_TABLE = 4096

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
    path MTU (``2**pmtu_log2`` bytes) and the first PSN (the same on both sides)."""
    qpn_a: int
    qpn_b: int
    pmtu_log2: int
    psn: int

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
        Bytes, 1 .. :func:`size_limit` of the QP's MTU.
    error, variant : str
        One of :data:`ERROR_KINDS` and how it is made (:data:`VARIANTS`).
    ring : bool
        Ring the doorbell after posting (False: the next WQE of the same QP rings for
        both; the last WQE of a QP always rings). Doorbell path only.
    gap, stall_seed : int
        The doorbell (and injection) player's seeded stall pattern: ``gap`` idle cycles
        out of 256. One pattern per run: every item carries the same (the driver checks).
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
        self.ring = True
        self.gap, self.stall_seed, self.fault_pick = 0, 1, 0
        self.payload = bytes(1)

    # -- what the item means ----------------------------------------------------------
    @property
    def path(self):
        """``"inject"`` for :data:`WIRE_KINDS`, else ``"doorbell"``."""
        return "inject" if self.error in WIRE_KINDS else "doorbell"

    def frames(self):
        """Frame lengths (bytes with ICRC and FCS) the requester makes of it."""
        return frame_lengths(self.size, self.qp.pmtu_log2)

    def outcomes(self):
        """The responder counter each frame raises (the item's own frames, then the bad
        copy's), worked out from the item alone; the scoreboard holds the RTL's counters
        against their sum as well as against the golden model."""
        n = len(self.frames())
        if self.error == "none":
            return ["frames_ok"] * n
        if self.error in ACCESS_KINDS:
            return ["access_nak"]
        return ["frames_ok"] * n + [self.error]

    def acks(self):
        """ACK/NAK frames the responder sends for it: one per message (an ACK, or the
        NAK of an access error), plus the NAK of a PSN-ahead copy."""
        return 1 + (self.error == "psn_nak")

    def constraints(self, cfg):
        """Name -> whether it holds. Every one must hold for a drawn item."""
        qp = self.qp
        return {
            "QPNs in the context table": 0 <= qp.qpn_a < QP_TABLE and 0 <= qp.qpn_b < QP_TABLE,
            "path MTU 256..4096": 8 <= qp.pmtu_log2 <= 12,
            "PSN is 24 bits": 0 <= qp.psn < 1 << 24,
            "size in 1..size_limit": 1 <= self.size <= size_limit(qp.pmtu_log2),
            "payload has size bytes": len(self.payload) == self.size,
            "error is a known kind": self.error in ERROR_KINDS,
            "variant of the kind": self.variant in VARIANTS.get(self.error, ()),
            "access errors are one frame": (self.error not in ACCESS_KINDS
                                            or self.size <= qp.mtu),
            "gap is a stall rate": 0 <= self.gap < 256,
            "stall seed in 1..65535": 0 < self.stall_seed < 1 << 16,
        }

    # -- randomisation ----------------------------------------------------------------
    def randomize(self, rng, cfg, *, qp, error="none", gap=0, stall_seed=1, ring=None,
                  accept=None, tries=1000):
        """Draw size, variant, ring and fault pick from ``rng`` under
        :meth:`constraints`; ``qp``, ``error``, ``gap`` and ``stall_seed`` are the
        caller's, and ``ring`` too unless None (then 60 % True). ``accept`` is an extra
        constraint of the sequence (its budget). Raises ``RuntimeError`` naming the
        constraints that failed when ``tries`` draws fail.
        """
        failed = []
        for _ in range(tries):
            self._draw(rng, qp, error, gap, stall_seed)
            if ring is not None:
                self.ring = ring
            failed = [n for n, ok in self.constraints(cfg).items() if not ok]
            if not failed and accept is not None and not accept(self):
                failed = ["accept (the sequence's budget)"]
            if not failed:
                self.payload = rng.randbytes(self.size)
                return self
        raise RuntimeError(f"{self.get_name()}: no draw met the constraints in {tries} "
                           f"tries; the last failed {failed}")

    def _draw(self, rng, qp, error, gap, stall_seed):
        self.qp, self.error, self.gap, self.stall_seed = qp, error, gap, stall_seed
        limit = qp.mtu if error in ACCESS_KINDS else size_limit(qp.pmtu_log2)
        r = rng.random()
        if r < 0.55:
            self.size = rng.choice([s for s in edge_sizes(qp.pmtu_log2) if s <= limit])
        elif r < 0.85:
            self.size = rng.randint(1, min(qp.mtu, limit))
        else:
            self.size = rng.randint(1, limit)
        self.payload = bytes(self.size)          # the bytes are drawn once accepted
        self.variant = rng.choice(VARIANTS.get(error, ("-",)))
        self.ring = rng.random() < 0.6
        self.fault_pick = rng.getrandbits(16)

    def convert2string(self):
        v = f"/{self.variant}" if self.variant != "-" else ""
        return (f"{self.get_name()}: qp {self.qp.qpn_a}->{self.qp.qpn_b} mtu {self.qp.mtu} "
                f"{self.size} B {self.error}{v}{'' if self.ring else ' (no ring)'}")

    def __str__(self):
        return self.convert2string()


class RdmaRunItem(uvm_sequence_item):
    """End of stimulus: the driver plans the runs of every queued item, runs them on the
    bench (one reset each) and only then calls ``item_done``. ``qps``: the sequence's QP
    set (each gets contexts); ``bad_qpn``: a responder QPN without a context."""

    def __init__(self, name="run"):
        super().__init__(name)
        self.qps, self.bad_qpn = (), None


# -- what the monitor publishes -------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RunObs:
    """Everything the recorders, counters and memories hold after one bench run.

    ``ab``/``ba``: ``(raw beats, cycles)`` of each link; ``written``/``completed``:
    ``(QPNs, cycles)``; ``doorbells``: the doorbell accept cycles; ``req``/``resp``: the
    counters; ``links``: each link's counters and flags; ``mem_a``/``mem_b``: whole host
    memories; ``end``: the cycle (``now``) at the end; ``hang``: the timeout message or
    None; ``overflows``: recorders that had more items than room.
    """
    index: int
    kind: str
    ab: tuple
    ba: tuple
    written: tuple
    completed: tuple
    doorbells: tuple
    req: dict
    resp: dict
    links: dict
    mem_a: tuple
    mem_b: tuple
    end: int
    hang: object
    overflows: tuple
