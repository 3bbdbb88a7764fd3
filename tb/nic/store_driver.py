"""NIC bus models with the queue API of the field (cocotbext-eth's sources and sinks:
``send/send_nowait/recv/recv_nowait/empty/idle/wait``), backed by the top's RTL players
and recorders so that no Python code runs once per cycle.

A :class:`StoreSource` queues store commands and loads them all into its RTL player in
one VPI pass (:meth:`StoreSource.load`, before reset); the player then issues them at
full speed (or with its seeded stalls), each store no earlier than its ``release``
cycle (open-loop arrivals; 0: at once). A :class:`FrameMonitor` reads what an RTL
recorder saw on a link, once, after the run, and hands it out as frames. Both stamp
every message with the cycles of its first and last beat, which is what the cycle
reports read.
"""

import dataclasses
from collections import deque

from cocotb.triggers import RisingEdge

from pymodel.packet import unpack_beat
from spec.formats.nic import store_cmd_layout

__all__ = ["StoreSource", "FrameMonitor", "Frame"]


@dataclasses.dataclass
class Frame:
    """A frame seen on a link: its bytes and the cycles of its first and last beat."""
    data: bytes
    start: int
    end: int


class StoreSource:
    """Store commands into the RTL player ``name`` of a :class:`tb.harness.Harness`.

    ``send_nowait(store)`` / ``await send(store)`` queue a
    :class:`pymodel.nic.system.Store`; :meth:`load` writes the queue into the player
    (call it before :meth:`Harness.reset`: sending after that raises, because the
    player's memory is loaded once). ``empty()`` and ``idle()`` are true once the player
    has issued every beat; ``await wait()`` returns then. After the run,
    :meth:`stamps` gives each store's ``(start, end)``: the cycles its first and last
    command beats were accepted.
    """

    def __init__(self, harness, name, width, stall=(1, 0), id_bits=8):
        self.harness, self.name, self.width, self.stall = harness, name, width, stall
        self.id_bits = id_bits
        self.layout = store_cmd_layout(width, id_bits)
        self.queue = deque()
        self.stores = []                      # loaded, in order
        self._spans = []                      # (first beat, last beat) per store
        self.loaded = False

    def send_nowait(self, store):
        if self.loaded:
            raise RuntimeError(f"{self.name}: stores must be sent before load(); the RTL "
                               "player is filled once, before reset")
        self.queue.append(store)

    async def send(self, store):
        self.send_nowait(store)

    def count(self):
        """Stores queued or loaded."""
        return len(self.queue) + len(self.stores)

    def items(self):
        """The player words of the queued stores (flat ``store_cmd_layout`` values)."""
        out = []
        for s in self.queue:
            for data, nb, first, last in s.beats(self.width):
                out.append(self.layout.const({
                    "dst": s.dst, "addr": s.addr, "length": s.length,
                    "ack_req": int(s.ack_req), "data": data,
                    "nbytes": nb, "first": first, "last": last}).as_bits())
        return out

    def releases(self):
        """The release cycle of each player word of the queued stores: a store's
        ``release`` on its first beat, 0 (offered at once) on the others."""
        return [s.release if k == 0 else 0 for s in self.queue
                for k in range(len(s.beats(self.width)))]

    def load(self):
        """Write every queued store into the (timed) player, with the seeded stall
        pattern and each store's release cycle on its first beat (all of them, zeros
        included: a player reused by a later run keeps no old release)."""
        items, release, k = self.items(), self.releases(), 0
        for s in self.queue:
            n = len(s.beats(self.width))
            self._spans.append((k, k + n - 1))
            k += n
        self.stores += list(self.queue)
        self.queue.clear()
        self.harness.load_player(self.name, items, self.stall, release=release)
        self.loaded = True

    def _done(self):
        return bool(int(self.harness.port(f"{self.name}__done").value))

    def empty(self):
        return not self.queue and (not self.loaded or self._done())

    def idle(self):
        return self.empty()

    async def wait(self):
        done = self.harness.port(f"{self.name}__done")
        while self.loaded and not int(done.value):
            await RisingEdge(done)

    def beat_stamps(self):
        """The accept cycle of every command beat (read from the player in one pass)."""
        total = self._spans[-1][1] + 1 if self._spans else 0
        return self.harness.played_stamps(self.name, total)

    def stamps(self):
        """``(start, end)`` cycles of each loaded store."""
        beats = self.beat_stamps()
        return [(beats[a], beats[b]) for a, b in self._spans]


class FrameMonitor:
    """Frames an RTL recorder (``name``, packet beats) saw on a link.

    ``arm(n)`` tells the recorder to expect ``n`` beats (its ``done`` rises then).
    After the run, ``recv_nowait()`` pops the next :class:`Frame` (``IndexError``
    when none is left, like an empty queue), ``await recv()`` waits for the recorder's
    ``done`` first, ``empty()`` says whether frames are left. ``beats()`` gives the raw
    ``(items, stamps)`` for beat-level comparisons.
    """

    def __init__(self, harness, name, width):
        self.harness, self.name, self.width = harness, name, width
        self.queue = None

    def arm(self, beats, stall=(1, 0)):
        self.harness.arm_recorder(self.name, beats, stall)

    def beats(self):
        return self.harness.recorded(self.name)

    def _collect(self):
        if self.queue is None:
            self.queue = deque()
            cur, start = b"", None
            for beat, stamp in zip(*self.beats(), strict=True):
                data, nb, first, last = unpack_beat(self.width, beat)
                if first:
                    cur, start = b"", stamp
                cur += data.to_bytes(self.width, "little")[:nb]
                if last:
                    self.queue.append(Frame(cur, start, stamp))
        return self.queue

    def recv_nowait(self):
        q = self._collect()
        if not q:
            raise IndexError(f"{self.name}: no frame left")
        return q.popleft()

    async def recv(self):
        await self.wait()
        return self.recv_nowait()

    def empty(self):
        return not self._collect()

    def idle(self):
        return bool(int(self.harness.port(f"{self.name}__done").value))

    async def wait(self):
        done = self.harness.port(f"{self.name}__done")
        while not int(done.value):
            await RisingEdge(done)

    def frames(self):
        """Every frame left, in order (drains the queue)."""
        q = self._collect()
        out = list(q)
        q.clear()
        return out
