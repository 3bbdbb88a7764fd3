"""Transactions of the NIC environment: a store command with its intended error, and the
end-of-stimulus marker.

pyuvm has no constraint solver, so :meth:`StoreItem.randomize` draws every field from a
``random.Random`` (seeded by the test) and keeps the draw only when every constraint of
:meth:`StoreItem.constraints` holds (rejection sampling, a bounded number of tries).

Error kinds and the receiver counter each must raise (``docs/nic.md``, NicRx)::

    none           -> frames_ok        good store, delivered
    fcs            -> drop_fcs         one downlink beat of the frame corrupted
    wrong_dst      -> drop_dst         a node id no node has (routed by the reset table)
    misaligned     -> drop_malformed   addr not a multiple of the datapath width
    length_lie     -> drop_malformed   header length != payload, visible to the receiver
    out_of_window  -> drop_addr        addr + length beyond the local memory
    unauthorised   -> drop_window      inside the memory, but some segment outside the
                                       window of its source at that receiver
                                       (``NicConfig.windows``)
"""

import dataclasses

from pyuvm import uvm_sequence_item

from pymodel.nic.system import Store
from spec.formats.nic import MAX_LENGTH, padded_bytes

__all__ = ["StoreItem", "NicRunItem", "ERROR_KINDS", "EXPECTED_DROP", "MAX_SIZE",
           "edge_sizes", "lie_visible", "Stimulus", "CommandObs", "FrameObs", "UplinkObs",
           "WriteObs", "NodeObs", "RunObs"]

#: Every error kind a store item can carry (``none`` is a good store).
ERROR_KINDS = ("none", "fcs", "wrong_dst", "misaligned", "length_lie", "out_of_window",
               "unauthorised")
#: The NicRx counter (:data:`spec.nic.COUNTERS`) each kind must raise.
EXPECTED_DROP = {"none": "frames_ok", "fcs": "drop_fcs", "wrong_dst": "drop_dst",
                 "misaligned": "drop_malformed", "length_lie": "drop_malformed",
                 "out_of_window": "drop_addr", "unauthorised": "drop_window"}
#: Largest store a sequence makes (bytes).
MAX_SIZE = 4096


def edge_sizes(max_payload, limit=MAX_SIZE):
    """The sizes the size draw favours: 1, around 64 and 128, around ``max_payload``
    (one segment, exactly full, one byte into a second), two full segments, ``limit``."""
    mp = max_payload
    return sorted({s for s in (1, 63, 64, 65, 127, 128, 129, mp - 1, mp, mp + 1, 2 * mp,
                               limit) if 1 <= s <= limit})


def lie_visible(framing, max_payload, length, nbytes):
    """Whether a segment whose header says ``length`` but carries ``nbytes`` is malformed
    to the receiver: it checks the frame's byte count against ``length`` (after the L2
    padding, so a lie hidden in the padding is not seen; docs/nic.md) and the range."""
    return (length == 0 or length > max_payload
            or padded_bytes(framing, length) != padded_bytes(framing, nbytes))


class StoreItem(uvm_sequence_item):
    """One store command of node ``src``.

    Fields
    ------
    src : int
        Sending node (its command player).
    dst : int
        Node id in the header (0..255); a node id no node has makes ``wrong_dst``.
    size : int
        Payload bytes, 1..4096 (stores above ``max_payload`` are segmented by the NIC).
    addr : int
        Remote byte address (aligned and inside the window unless the error says not).
    length : int
        Header length field (``size`` unless ``length_lie``).
    gap : int
        Stall rate (0..255 out of 256) of ``src``'s command player: the idle cycles
        before each store are what this seeded pattern gives (``stall_seed``), which
        the model reproduces. One pattern per player: every item of a source carries
        the same ``gap`` and ``stall_seed`` (the driver checks).
    error : str
        One of :data:`ERROR_KINDS`. Good stores (``none``, ``fcs``) stay inside their
        source's window at the destination (``NicConfig.windows``).
    fault_pick : int
        For ``fcs``: which segment and which of its downlink beats the driver corrupts.
    payload : bytes
        ``size`` random bytes.
    """

    def __init__(self, name="store"):
        super().__init__(name)
        self.src = self.dst = self.addr = self.gap = self.fault_pick = 0
        self.size = self.length = self.stall_seed = 1
        self.error = "none"
        self.payload = bytes(1)

    # -- what the item means ----------------------------------------------------------
    def store(self):
        """The :class:`pymodel.nic.system.Store` to send."""
        return Store(self.dst, self.addr, self.payload, self.length)

    def segments(self, cfg):
        """The frames' stores after the NIC's segmenter."""
        return self.store().segments(cfg.width, cfg.max_payload)

    def outcomes(self, cfg):
        """The NicRx counter each of the item's frames must raise, in segment order,
        worked out from the item alone (the receiver's order of checks: FCS, then
        malformed, then destination, then the memory bound, then the source's window;
        docs/nic.md). The scoreboard holds the
        RTL's counters against these as well as against the golden model."""
        segs = self.segments(cfg)
        hit = self.fault_pick % len(segs) if self.error == "fcs" else None
        port, src = cfg.port_of(self.dst), cfg.node_ids[self.src]
        out = []
        for k, s in enumerate(segs):
            if k == hit:
                out.append("drop_fcs")
            elif (s.addr % cfg.width
                  or lie_visible(cfg.framing, cfg.max_payload, s.length, len(s.payload))):
                out.append("drop_malformed")
            elif s.dst not in cfg.node_ids:
                out.append("drop_dst")
            elif s.addr + s.length > cfg.window:
                out.append("drop_addr")
            elif not cfg.inside(port, src, s.addr, s.length):
                out.append("drop_window")
            else:
                out.append("frames_ok")
        return out

    def constraints(self, cfg):
        """Name -> whether it holds. Every one must hold for a drawn item."""
        segs = self.segments(cfg)
        kind = self.error
        aligned = self.addr % cfg.width == 0
        fits = all(s.addr + s.length <= cfg.window for s in segs)
        lies = any(lie_visible(cfg.framing, cfg.max_payload, s.length, len(s.payload))
                   for s in segs)
        unknown = self.dst not in cfg.node_ids
        port = cfg.port_of(self.dst)
        authorised = (0 <= self.src < cfg.nodes
                      and all(cfg.inside(port, cfg.node_ids[self.src], s.addr, s.length)
                              for s in segs))
        # A malformed frame is dropped before its window is looked at: a misaligned or
        # lying store may or may not also run past the window.
        window_matters = kind not in ("misaligned", "length_lie")
        # The source's window is looked at last: it matters for stores that pass every
        # other check (a wrong_dst or out_of_window store may or may not be inside it).
        source_matters = kind in ("none", "fcs", "unauthorised")
        return {
            "src is a node": 0 <= self.src < cfg.nodes,
            "size in 1..MAX_SIZE, inside the window": 1 <= self.size <= min(MAX_SIZE,
                                                                             cfg.window),
            "payload has size bytes": len(self.payload) == self.size,
            "dst is a byte": 0 <= self.dst < 256,
            "gap is a stall rate": 0 <= self.gap < 256,
            "stall seed in 1..65535": 0 < self.stall_seed < 1 << 16,
            "addr is 32 bits": 0 <= self.addr < 1 << 32,
            "error is a known kind": kind in ERROR_KINDS,
            "dst unknown iff wrong_dst": unknown == (kind == "wrong_dst"),
            "misaligned iff misaligned": (not aligned) == (kind == "misaligned"),
            "length field in range": 0 <= self.length <= MAX_LENGTH,
            "length != size iff length_lie": (self.length != self.size) == (kind ==
                                                                          "length_lie"),
            "a lie the receiver sees iff length_lie": lies == (kind == "length_lie"),
            "out of window iff out_of_window": (not window_matters
                                                or (not fits) == (kind == "out_of_window")),
            "outside its source's window iff unauthorised": (
                not source_matters or (not authorised) == (kind == "unauthorised")),
        }

    # -- randomisation ----------------------------------------------------------------
    def randomize(self, rng, cfg, *, error="none", src=None, port=None, gap=0,
                  stall_seed=1, accept=None, tries=1000):
        """Draw every field from ``rng`` under :meth:`constraints`.

        ``error``, ``gap``, ``stall_seed`` are fixed by the caller; ``src`` and ``port``
        (the switch port the frame leaves by) too when given, else uniform. ``accept``
        is an extra constraint of the sequence (its budget). Raises ``RuntimeError``
        naming the constraints that failed when ``tries`` draws all fail.
        """
        failed = []
        for _ in range(tries):
            self._draw(rng, cfg, error, src, port, gap, stall_seed)
            failed = [n for n, ok in self.constraints(cfg).items() if not ok]
            if not failed and accept is not None and not accept(self):
                failed = ["accept (the sequence's budget)"]
            if not failed:
                self.payload = rng.randbytes(self.size)
                return self
        raise RuntimeError(f"{self.get_name()}: no draw met the constraints in {tries} "
                           f"tries; the last failed {failed}")

    def _draw(self, rng, cfg, error, src, port, gap, stall_seed):
        w, window, n = cfg.width, cfg.window, cfg.nodes
        limit = min(MAX_SIZE, window)
        self.error, self.gap, self.stall_seed = error, gap, stall_seed
        self.src = rng.randrange(n) if src is None else src
        port = rng.randrange(n) if port is None else port
        r = rng.random()
        if r < 0.55:
            self.size = rng.choice(edge_sizes(cfg.max_payload, limit))
        elif r < 0.85:
            self.size = rng.randint(1, min(cfg.max_payload, limit))
        else:
            self.size = rng.randint(1, limit)
        self.payload = bytes(self.size)          # the bytes are drawn once accepted
        if error == "wrong_dst":                 # routed to ``port``, owned by no node
            self.dst = port + n * rng.randint(1, (255 - port) // n)
        else:
            self.dst = cfg.node_ids[port]
        room = max(window - self.size, 0) // w
        base, size = cfg.windows().get((port, cfg.node_ids[self.src]), (0, cfg.mem_words))
        win_lo, win_hi = base * w, (base + size) * w
        if error in ("none", "fcs") and win_hi - win_lo >= self.size:
            self.addr = win_lo + w * rng.randint(0, (win_hi - win_lo - self.size) // w)
        elif error == "unauthorised":          # in the memory, not inside the window
            outside = [a for a in range(0, window - self.size + 1, w)
                       if a < win_lo or a + self.size > win_hi]
            self.addr = rng.choice(outside) if outside else 0
        elif error == "misaligned":
            slack = max(window - self.size - (w - 1), 0) // w
            self.addr = w * rng.randint(0, slack) + rng.randint(1, w - 1)
        elif error == "out_of_window":
            lo = max(-(-(window - self.size + 1) // w), 0)
            self.addr = w * rng.randint(lo, window // w + 16)
        else:
            self.addr = w * rng.randint(0, room)
        self.length = self.size
        if error == "length_lie":
            r = rng.random()
            if r < 0.6:
                self.length = self.size + rng.choice((-1, 1)) * rng.randint(1, 8)
            elif r < 0.8:
                self.length = rng.randint(cfg.max_payload + 1, MAX_LENGTH)
            else:
                self.length = rng.randint(0, MAX_LENGTH)
        self.fault_pick = rng.getrandbits(16) if error == "fcs" else 0

    def convert2string(self):
        lie = f" length={self.length}" if self.length != self.size else ""
        return (f"{self.get_name()}: {self.src}->{self.dst} {self.size} B @0x{self.addr:x}"
                f"{lie} gap={self.gap} {self.error}")

    def __str__(self):
        return self.convert2string()


class NicRunItem(uvm_sequence_item):
    """End of stimulus: the driver loads every queued store into the players, releases
    reset and runs; ``item_done`` comes once the run has drained."""

    def __init__(self, name="run"):
        super().__init__(name)


# -- what the agent publishes ---------------------------------------------------------
# Plain records written to the analysis ports: the driver's ``ap`` carries every
# StoreItem it queued and, at the run, one Stimulus; the monitor's ``ap`` carries the rest.

@dataclasses.dataclass(frozen=True)
class Stimulus:
    """What the driver loaded besides the stores: the players' stall patterns, the fault
    lists, the node ids, and which item each fault aims at (``(item, port, beat)``)."""
    stalls: dict
    faults: dict
    node_ids: tuple
    targets: tuple = ()


@dataclasses.dataclass(frozen=True)
class CommandObs:
    """Accept cycles of the command beats of store ``index`` of node ``src``."""
    src: int
    index: int
    stamps: tuple


@dataclasses.dataclass(frozen=True)
class FrameObs:
    """A frame on uplink ``port``: its bytes (FCS included), first and last beat cycle."""
    port: int
    data: bytes
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class UplinkObs:
    """Every raw beat (``packet_layout`` value) on uplink ``port`` and its cycle."""
    port: int
    beats: tuple
    stamps: tuple


@dataclasses.dataclass(frozen=True)
class WriteObs:
    """One local-memory write of node ``port``: word address, byte enables, cycle."""
    port: int
    addr: int
    be: int
    cycle: int


@dataclasses.dataclass(frozen=True)
class NodeObs:
    """Node ``port`` after the run: receiver counters, credit arrival cycles, memory."""
    port: int
    counters: dict
    credits: tuple
    memory: tuple


@dataclasses.dataclass(frozen=True)
class RunObs:
    """The run: end cycle, timeout message (or None), sticky credit error, recorders
    that overflowed."""
    end: int
    hang: object
    credit_errors: int
    overflows: tuple
