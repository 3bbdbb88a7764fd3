"""The port kinds that recur between blocks, one :class:`~amaranth.lib.wiring.Signature`
each (as :mod:`amaranth.lib.memory` gives ``ReadPort.Signature``).

# Ref: the Amaranth 0.5 interface model (amaranth.lib.wiring: Signature, connect,
# Member.array); docs/rdma.md ("The pipelined requester", "The pipelined responder").

Each signature is written from the side that starts a transfer: the stage that reads the
context cache, the engine that reads and writes host memory, the block whose counters
they are. That side has ``Out(sig)``, the other ``In(sig)`` (or ``In(sig).array(n)`` for
several ports of one kind); ``wiring.connect`` joins them. All ports here are
combinational: a read's ``data`` belongs to the ``addr`` of the same cycle.
"""

from collections.abc import Mapping

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.fabric import COUNTERS, FLAGS, RETRY_LINK_COUNTERS, RETRY_SETTINGS, SETTINGS
from spec.formats.roce import QPC_LAYOUT, QPN_BITS
from spec.host import COUNTER_BITS, rd_data_layout, rd_req_layout, wr_layout
from spec.nic import CPL_GEN_COUNTERS, CPL_PEER_PORTS, CPL_TRK_COUNTERS

__all__ = ["CacheReadSignature", "CacheGroupSignature", "FillQuerySignature",
           "CompletionQuerySignature", "CacheProbeSignature", "HostDmaSignature",
           "CountersSignature", "SettingsSignature", "PortView", "faulty_link_signatures",
           "completion_signatures", "PlayerControlSignature", "RecorderControlSignature",
           "ports_by_name", "peer_retry_signature", "PEER_RETRY_COUNTERS",
           "PEER_RETRY_PORTS"]


class CacheReadSignature(wiring.Signature):
    """A static read port of the QP-context cache: the reader puts a cache entry on
    ``addr`` and sees that entry's context word (as read from host memory) on ``data``
    in the same cycle."""

    def __init__(self, entries):
        self.entries = entries
        super().__init__({"addr": Out(range(entries)), "data": In(QPC_LAYOUT)})

    def __repr__(self):
        return f"CacheReadSignature({self.entries})"


class CacheGroupSignature(wiring.Signature):
    """The port of the one stage that owns a group of dynamic QP-context fields: it reads
    entry ``addr``'s current values on ``data`` (same cycle) and, with ``we``, writes
    ``wdata`` to that entry (seen from the next cycle on). ``layout``: the group's
    :func:`spec.rdma_stages.group_layout`."""

    def __init__(self, entries, layout):
        self.entries, self.layout = entries, layout
        super().__init__({"addr": Out(range(entries)), "data": In(layout),
                          "we": Out(1), "wdata": Out(layout)})

    def __repr__(self):
        return f"CacheGroupSignature({self.entries}, {self.layout!r})"


class FillQuerySignature(wiring.Signature):
    """Is cache entry ``entry`` filled (``ready``: not waiting for its fill data)? Same
    cycle."""

    def __init__(self, entries):
        self.entries = entries
        super().__init__({"entry": Out(range(entries)), "ready": In(1)})

    def __repr__(self):
        return f"FillQuerySignature({self.entries})"


class CompletionQuerySignature(wiring.Signature):
    """The requester front's question to the completion unit about the lookup it
    presents, answered in the same cycle. Out: the lookup's cache ``entry`` and ``qpn``,
    and the QP the cache holds in that entry (``victim_valid``, ``victim_qpn``). In:
    items of the entry done (``done``, modulo ``2**count_bits``); ``keep``: the entry's
    QP must not be evicted for this lookup (the looked-up QP's window slot holds another
    QP's messages, or the cached QP's window is pinned); ``victim_open``: the cached QP
    has messages waiting for their ACK; ``err``: this cycle's ERR notice is for the
    entry."""

    def __init__(self, entries, count_bits):
        self.entries, self.count_bits = entries, count_bits
        super().__init__({"entry": Out(range(entries)), "qpn": Out(QPN_BITS),
                          "victim_valid": Out(1), "victim_qpn": Out(QPN_BITS),
                          "done": In(count_bits), "keep": In(1), "victim_open": In(1),
                          "err": In(1)})

    def __repr__(self):
        return f"CompletionQuerySignature({self.entries}, {self.count_bits})"


class CacheProbeSignature(wiring.Signature):
    """Is QP ``qpn``'s context in the context cache and filled (``present``)? Same
    cycle. ``entry``: the cache entry whose tag is ``qpn`` (with one way, the QP's only
    possible entry; when no way holds it, the first entry of its set)."""

    def __init__(self):
        super().__init__({"qpn": Out(QPN_BITS), "present": In(1), "entry": In(8)})

    def __repr__(self):
        return "CacheProbeSignature()"


class HostDmaSignature(wiring.Signature):
    """An engine's DMA port into a host interface of ``depth`` host-memory words: read
    requests out (``rd_req``), read completion words in (``rd_data``, in request order),
    posted writes out (``wr``). Layouts: :func:`spec.host.rd_req_layout`,
    :func:`spec.host.rd_data_layout`, :func:`spec.host.wr_layout`."""

    def __init__(self, depth):
        self.depth = depth
        super().__init__({
            "rd_req": Out(stream.Signature(rd_req_layout(depth))),
            "rd_data": In(stream.Signature(rd_data_layout())),
            "wr": Out(stream.Signature(wr_layout(depth))),
        })

    def __repr__(self):
        return f"HostDmaSignature({self.depth})"


class CountersSignature(wiring.Signature):
    """A block's counters, ``Out(width)`` each, named by ``names`` in that order (they
    count since reset and wrap), and its 1-bit flags ``flags``. The block and the top
    that exports them both have ``Out(sig)``; the top joins them with
    ``wiring.connect(m, block.x, wiring.flipped(top.x))``."""

    def __init__(self, names, width=COUNTER_BITS, flags=()):
        self.names, self.width, self.flags = tuple(names), width, tuple(flags)
        if set(self.names) & set(self.flags):
            raise ValueError(f"names both counters and flags: "
                             f"{sorted(set(self.names) & set(self.flags))}")
        super().__init__({**{n: Out(width) for n in self.names},
                          **{n: Out(1) for n in self.flags}})

    def __repr__(self):
        return f"CountersSignature({self.names!r}, {self.width}, flags={self.flags!r})"


class SettingsSignature(wiring.Signature):
    """A block's run-time settings, ``{name: bits}``, written from the side that sets
    them (``Out(bits)`` each): the block has ``In(sig)``. Settings are set before reset
    and held through a run."""

    def __init__(self, fields):
        self.fields = dict(fields)
        super().__init__({n: Out(bits) for n, bits in self.fields.items()})

    def __repr__(self):
        return f"SettingsSignature({self.fields!r})"


class PlayerControlSignature(wiring.Signature):
    """The control of a stimulus player of ``depth`` items
    (:class:`rtl.sim.stream_player.StreamPlayer`), written from the side that sets it
    (the testbench): ``count`` items to play and the :class:`~rtl.common.stall_pattern.StallPattern`
    that withholds ``valid`` (``stall_seed``, ``stall_rate``), set before reset and held
    through a run; ``done``: all ``count`` items were transferred. The harness top has
    ``In(sig)`` per player; the player declares these ports one by one (a
    :class:`PortView` of ``sig.flip()`` joins them)."""

    def __init__(self, depth):
        self.depth = depth
        super().__init__({"count": Out(range(depth + 1)), "stall_seed": Out(16),
                          "stall_rate": Out(8), "done": In(1)})

    def __repr__(self):
        return f"PlayerControlSignature({self.depth})"


class RecorderControlSignature(wiring.Signature):
    """The control of a result recorder of ``depth`` items
    (:class:`rtl.sim.stream_recorder.StreamRecorder`), written from the side that sets it
    (the testbench): ``expect`` items to wait for and the
    :class:`~rtl.common.stall_pattern.StallPattern` that withholds ``ready`` (``stall_seed``,
    ``stall_rate``), set before reset and held through a run; ``count`` items recorded
    (items beyond ``depth`` are taken, not stored, and set ``overflow``), ``done``:
    ``count >= expect``. The harness top has ``In(sig)`` per recorder; the recorder
    declares these ports one by one (a :class:`PortView` of ``sig.flip()`` joins
    them)."""

    def __init__(self, depth):
        self.depth = depth
        super().__init__({"expect": Out(range(depth + 1)), "stall_seed": Out(16),
                          "stall_rate": Out(8), "count": In(range(depth + 1)),
                          "done": In(1), "overflow": In(1)})

    def __repr__(self):
        return f"RecorderControlSignature({self.depth})"


def ports_by_name(interface, member=None):
    """``{name: value}`` of the port members of ``interface`` (a component, or an
    interface such as a :class:`PortView`), read through its signature's ``flatten``
    (members that are signatures, and arrays, are left out); with ``member``, the ports
    of that signature member instead. For a block that reaches its own ports by a name
    from spec/ or a parameter, such as the counters it increments."""
    depth = 1 if member is None else 2
    return {path[-1]: value for path, _, value in interface.signature.flatten(interface)
            if len(path) == depth and isinstance(path[-1], str)
            and (member is None or path[0] == member)}


def faulty_link_signatures(tag=False, side=False):
    """The signatures of a :class:`rtl.fabric.faulty_link.FaultyLink`'s ``settings``
    port (:data:`spec.fabric.SETTINGS`) and ``counters`` port
    (:data:`spec.fabric.COUNTERS`, flags :data:`spec.fabric.FLAGS`); with ``tag``,
    ``tag_rate`` and ``tag_corrupted`` too; with ``side``, the ACK/NAK rates and
    counters (:data:`spec.fabric.RETRY_SETTINGS`,
    :data:`spec.fabric.RETRY_LINK_COUNTERS`)."""
    settings, counters = dict(SETTINGS), list(COUNTERS)
    if tag:
        settings["tag_rate"] = RETRY_SETTINGS["tag_rate"]
        counters.append(RETRY_LINK_COUNTERS[0])
    if side:
        settings.update({n: RETRY_SETTINGS[n] for n in ("ack_drop_rate", "ack_corrupt_rate")})
        counters += RETRY_LINK_COUNTERS[1:]
    return SettingsSignature(settings), CountersSignature(counters, flags=FLAGS)


def completion_signatures(peers, poll=False):
    """The counter ports of one node's end-to-end completion, as its blocks declare them:
    the completion generator's (``cpl_sent``, ``ack_req_seen``; a
    :class:`CountersSignature`) and the
    outstanding tracker's (``cpl_ok``, ``cpl_bad``: 32 bits; and per destination
    ``outstanding``, ``completed``, ``dropped``, ``timeouts``: an
    ``ArrayLayout(16, peers)`` each, element ``d`` for destination ``d``;
    :data:`spec.nic.CPL_COUNTERS`, :data:`spec.nic.CPL_PEER_PORTS`). With ``poll`` (a
    tracker of many destinations, :class:`rtl.nic.tracker_memory.TrackerMemory`) the
    per-destination members are one destination's: ``poll`` In(16), its id, and the
    four Out(16). Returns ``(gen, tracker)``."""
    gen = CountersSignature(CPL_GEN_COUNTERS)
    if poll:
        tracker = wiring.Signature({**{n: Out(COUNTER_BITS) for n in CPL_TRK_COUNTERS},
                                    "poll": In(16),
                                    **{n: Out(16) for n in CPL_PEER_PORTS}})
        return gen, tracker
    per_peer = data.ArrayLayout(16, peers)
    tracker = wiring.Signature({**{n: Out(COUNTER_BITS) for n in CPL_TRK_COUNTERS},
                                **{n: Out(per_peer) for n in CPL_PEER_PORTS}})
    return gen, tracker


def peer_retry_signature(peers):
    """The per-peer retry's ports of one node (:class:`rtl.tops.nic_top.NicTop` with
    ``peer_retry``): the sender's ``ack_ok``, ``ack_bad``, ``refused`` (32 bits) and per
    destination ``next_psn``, ``una``, ``timeouts``, ``resent``, the receiver's check's
    per source ``expected``, ``gaps``, ``duplicates`` (``ArrayLayout(16, peers)``)."""
    per_peer = data.ArrayLayout(16, peers)
    return wiring.Signature({**{n: Out(COUNTER_BITS) for n in PEER_RETRY_COUNTERS},
                             **{n: Out(per_peer) for n in PEER_RETRY_PORTS}})


#: :func:`peer_retry_signature`'s members.
PEER_RETRY_COUNTERS = ("ack_ok", "ack_bad", "refused")
PEER_RETRY_PORTS = ("next_psn", "una", "timeouts", "resent", "expected", "gaps",
                    "duplicates")


class PortView:
    """Ports of ``component`` that it declares one by one, presented as one interface
    of ``signature`` (seen from ``component``'s side), so that ``wiring.connect`` joins
    them as that port kind: for a block whose counters several of its stages drive (they
    stay separate ports of the block). ``prefix`` is prepended to each member's name to
    find its port. ``component`` may also be a mapping of names to ports. Raises
    ``TypeError`` naming a member the component lacks."""

    def __init__(self, signature, component, prefix=""):
        self.signature = signature
        for name in signature.members:
            if isinstance(component, Mapping):
                port = component.get(prefix + name)
            else:
                port = getattr(component, prefix + name, None)
            if port is None:
                raise TypeError(f"{type(component).__name__} has no port "
                                f"{prefix + name!r} for {signature!r}")
            setattr(self, name, port)
