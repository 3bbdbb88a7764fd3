"""Seeded store scenarios for the NIC top, shared by the cocotb tests and the headline.

Sizes: the edge sizes of :data:`EDGE_SIZES`, ``max_payload`` - 1, + 0, + 1 and twice it
(stores longer than ``max_payload`` are segmented by the NIC), up to the smaller of the
window and 4096 bytes. ``pair``: ``messages`` stores of ``msg_bytes`` from node 0 to 1;
``fanout``: the same, round robin to nodes 1 .. ``peers`` (default nodes - 1);
``remap``: like ``all_to_all`` with node ids that only the switch-table writes of
:func:`table_writes` route (played one per cycle from cycle 0, so the first frames race
them: a frame whose head reaches the switch before its entry is written goes by the
reset table and is dropped as a wrong destination, where the model says so); ``edges``:
every size once from node 0 to 1; ``destinations`` (with ``destinations`` D, a
NicTop built with as many): ``messages`` stores of ``msg_bytes`` from node 0 (id D)
to the destination ids by ``popularity`` (:func:`analysis.load.traffic.qp_sequence`:
round robin 0, 1, .., D - 1, 0, .. by default, or Zipf 0.99 over the ids); the other
nodes have ids D + p, and :func:`destination_table_writes` route every id;
``windows``: per-source receive windows (:func:`window_writes` gives the table writes,
:func:`window_intent` what each frame must do, independently of the model): stores
inside, exactly at both edges, one byte over the end, below and straddling the base,
from a source with an empty window, past 2**32, good after bad, and a window changed
while frames arrive;
``spoof``: node 3 is configured with node 1's id (a forger: its frames carry source 1)
and stores to nodes 0, 1 and 2 into regions that nobody else writes, while nodes 0, 1
and 2 store to each other; :func:`source_writes` tells the switch which port each id may
use, :func:`spoof_intent` what must arrive (independently of the model);
``all_to_all``: ``count`` stores of random sizes from every node to random nodes
(itself included); ``hotspot``: every other node to node 0; ``bad``: frames with every
kind of fault (sizes up to ``max_payload``).

Each returns ``(stores, node_ids, faults)``: ``stores[p]`` the :class:`Store` list of
node ``p``, ``node_ids[p]`` its node id, ``faults[p]`` downlink beat numbers to corrupt.
"""

import random

from pymodel.nic.system import Store

__all__ = ["build_scenario", "table_writes", "window_writes", "window_intent",
           "source_writes", "spoof_intent", "mark_last_queued", "one_at_a_time",
           "EDGE_SIZES", "FORGER"]

EDGE_SIZES = (1, 2, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
              511, 512, 1023, 1024, 1025, 1500, 1501, 2047, 2048, 4095, 4096)


def _addr(rng, width, window, length):
    return width * rng.randrange(0, (window - length) // width + 1)


def _payload(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def mark_last_queued(stores):
    """The issuer's ack requests (spec.formats.nic, "Ack request"): per node, a copy of
    its stores with ``ack_req`` on each store that no store of the same node follows
    in the same batch. A batch is the stores of one release cycle (a store released
    later was not queued behind it when it was issued): the last store of each release,
    so the last store of a node's list always. The RDMA scenarios' host asks the same
    way on a QP's last message (:func:`analysis.scenarios.rdma.coalesced_ack_requests`).
    Returns ``{node: [Store]}``; the stores given are not changed."""
    out = {}
    for p, ss in stores.items():
        out[p] = [Store(s.dst, s.addr, s.payload, s.length, s.release,
                        ack_req=k + 1 == len(ss) or ss[k + 1].release != s.release)
                  for k, s in enumerate(ss)]
    return out


def one_at_a_time(stores, spacing):
    """Per node, a copy of its stores with store ``k`` released in cycle ``k * spacing``
    (its ``ack_req`` kept): with ``spacing`` at least the cycles one store keeps the top
    busy, each store goes alone into an idle NIC, as a latency run posts its messages.
    ``ValueError`` names a ``spacing`` that is not a positive cycle count. Returns
    ``{node: [Store]}``; the stores given are not changed."""
    if not isinstance(spacing, int) or isinstance(spacing, bool) or spacing < 1:
        raise ValueError(f"spacing must be a positive number of cycles, not {spacing!r}")
    return {p: [Store(s.dst, s.addr, s.payload, s.length, k * spacing, ack_req=s.ack_req)
                for k, s in enumerate(ss)] for p, ss in stores.items()}


def delayed(stores, setup):
    """Per node, a copy of its stores with every release ``setup`` cycles later (the
    stores of a top with ``destinations`` wait for the switch table's setup writes,
    :func:`destination_table_writes`). Returns ``{node: [Store]}``."""
    return {p: [Store(s.dst, s.addr, s.payload, s.length, s.release + setup,
                      ack_req=s.ack_req) for s in ss] for p, ss in stores.items()}


def table_writes(node_ids, ports):
    """Switch-table writes ``(node, port)`` that route each node id to its own port
    (none for ids the reset table, ``node mod ports``, already routes; an id that two
    ports claim goes to the first)."""
    first = {}
    for p, n in enumerate(node_ids):
        first.setdefault(n, p)
    return [(n, p) for n, p in first.items() if n % ports != p]


#: The ``spoof`` scenario's forging node (it claims node 1's id).
FORGER = 3


def destination_table_writes(destinations, nodes):
    """The switch-table writes of a top with ``destinations``, at setup (docs/nic.md,
    "4,096 destinations"): each node's own id ``destinations + p`` to its port ``p``,
    then every destination id ``d`` to the receiver ``1 + d mod (nodes - 1)`` that
    stands for it."""
    return ([(destinations + p, p) for p in range(nodes)]
            + [(d, 1 + d % (nodes - 1)) for d in range(destinations)])


def source_writes(kind, node_ids):
    """The switch's source-table writes ``(node, port)`` of scenario ``kind``: for
    ``spoof``, each id may enter only at the first port that has it (so the forger's
    frames are spoofed); none (every id allowed everywhere) for the others."""
    if kind != "spoof":
        return []
    first = {}
    for p, n in enumerate(node_ids):
        first.setdefault(n, p)
    return list(first.items())


def spoof_intent(stores, node_ids, *, width, max_payload):
    """What the ``spoof`` scenario must do, from the scenario alone (not the model):
    ``(memories, spoofed)``: each receiver port's expected memory bytes as
    ``{port: [(addr, payload)]}`` (the legitimate stores, in order per source) and the
    number of forged frames (segments), all of which the switch must drop."""
    owner = {}
    for p, n in enumerate(node_ids):
        owner.setdefault(n, p)
    mem, spoofed = {}, 0
    for p, lst in stores.items():
        for s in lst:
            segs = s.segments(width, max_payload)
            if owner[node_ids[p]] != p:
                spoofed += len(segs)
                continue
            port = owner[s.dst]
            mem.setdefault(port, []).extend((g.addr, g.payload) for g in segs)
    return mem, spoofed


def _window_plan(nodes, mem_words, width):
    """The ``windows`` scenario's table writes ``{receiver: [(src, base, size)]}``
    (words, played one per cycle from cycle 0) and the cycle of the racing write."""
    q = max(mem_words // 16, 1)            # a window unit: 1/16 of the memory
    plan = {p: [] for p in range(nodes)}
    plan[1] = [(0, q, 2 * q),               # 0 -> 1: the words [q, 3q)
               (2, 5 * q, 0),               # 2 -> 1: an empty window (unauthorised)
               (3, mem_words - 4 * q, 4 * q)]   # 3 -> 1: up to the end of the memory
    plan[0] = [(3, 0, 1),                   # 3 -> 0: one word at address 0
               (2, 4 * q, 0), (2, 4 * q, q)]    # rewritten: the last write wins
    # 0 -> 3: the whole memory (the power-up value, rewritten) until the last cycle of
    # the player, then nothing: the first frames race the write.
    race = 15
    plan[3] = [(0, 0, mem_words)] * race + [(0, 0, 0)]
    return plan, race


def window_writes(kind, *, nodes, mem_words, width):
    """Window-table writes of scenario ``kind``: ``{receiver: [(src, base, size)]}``,
    words; none (the power-up windows: the whole memory) but for ``windows``."""
    if kind != "windows":
        return {}
    return _window_plan(nodes, mem_words, width)[0]


def window_intent(stores, node_ids, writes, *, width, mem_words, max_payload,
                  link_latency):
    """What each frame of a scenario must do, worked out from the scenario alone (not
    from the model).

    A frame's first beat reaches a receiver in cycle ``2 * link_latency + 2`` at the
    earliest (two links and the switch's two cycles), so the table writes of the cycles
    before are in place for every frame; each later write may or may not be.

    Returns ``{receiver port: [(addr, payload, verdict)]}``, one entry per frame
    (segment), each source's frames in order: ``verdict`` is ``"ok"`` (inside every
    window its source can have had), ``"drop_addr"`` (beyond the memory),
    ``"drop_window"`` (inside none) or ``"race"`` (inside some only).
    """
    window = mem_words * width
    settle = 2 * link_latency + 2
    out = {}
    for p, lst in stores.items():
        src = node_ids[p]
        for s in lst:
            port = node_ids.index(s.dst)
            cur, held = (0, mem_words), []
            for c, (x, b, z) in enumerate(writes.get(port, ())):
                if x == src:
                    if c >= settle:
                        held.append(cur)
                    cur = (b, z)
            held.append(cur)
            for seg in s.segments(width, max_payload):
                lo, hi = seg.addr, seg.addr + seg.length
                inside = [b * width <= lo and hi <= (b + z) * width for b, z in held]
                if hi > window:
                    verdict = "drop_addr"
                elif all(inside):
                    verdict = "ok"
                else:
                    verdict = "race" if any(inside) else "drop_window"
                out.setdefault(port, []).append((seg.addr, seg.payload, verdict))
    return out


def _windows_stores(stores, rng, nodes, width, window, max_payload):
    """The stores of the ``windows`` scenario (the windows are :func:`_window_plan`'s:
    unit ``u`` = 1/16 of the memory). Regions written by different sources of one
    receiver are disjoint, and a bad store comes after the good ones it overlaps, so
    that any byte it wrote would show in the final memory."""
    if nodes < 4 or window < 16 * 2 * width or max_payload < 2 * width:
        raise ValueError("the windows scenario needs 4 nodes, a memory of at least 32 "
                         "words and max_payload of at least 2 words")
    w, u, top = width, window // 16, 1 << 32

    def put(src, dst, addr, n):
        stores[src].append(Store(dst, addr, _payload(rng, n)))

    for k in range(8):                   # 0 -> 3: small stores racing the window write
        put(0, 3, k * w, w)
    # 0 -> 1, window [u, 3u).
    put(0, 1, u, min(2 * u + max_payload, window - u))   # segments in, then out
    put(0, 1, u, 2 * u if 2 * u <= max_payload else max_payload)   # from the base
    put(0, 1, 3 * u - 4 * w, 4 * w)      # up to the end
    put(0, 1, u + 4 * w, 4 * w)          # inside
    put(0, 1, 3 * u - w, w)              # exactly the last word
    put(0, 1, 3 * u - w, w + 1)          # one byte over the end
    put(0, 1, u + w, min(2 * u - w + 1, max_payload))   # over the end (or inside)
    put(0, 1, 3 * u, 1)                  # just above
    put(0, 1, u - w, w)                  # just below the base
    put(0, 1, u - w, 2 * w)              # straddling the base
    put(0, 1, top - w, 2 * w)            # addr + length past 2**32
    put(0, 1, top - w, min(u + 2 * w, max_payload))   # ... ending in the window mod 2**32
    put(0, 1, top - max_payload, max_payload)     # ... ending at 2**32 exactly (0 mod)
    put(0, 1, u + 8 * w, 3 * w)          # good after bad
    # 2 -> 1: an empty window; 2 -> 0: the rewritten window [4u, 5u).
    put(2, 1, 6 * u, 4 * w)
    put(2, 1, 5 * u, w)
    put(2, 0, 4 * u, min(u, max_payload))          # from the base
    put(2, 0, 5 * u - w, w)              # the last word
    put(2, 0, 4 * u - w, 2 * w)          # straddling the base
    put(2, 0, 5 * u, 1)                  # just above
    put(2, 0, 4 * u + 2 * w, w)          # good after bad
    # 3 -> 1: the window [12u, 16u), up to the memory's end; 3 -> 0: the word 0.
    put(3, 1, 12 * u, min(4 * u, max_payload))
    put(3, 1, window - w, w)             # the memory's last word
    put(3, 1, window - w, w + 1)         # past the memory and the window: drop_addr
    put(3, 1, 12 * u - w, w)             # just below the base
    put(3, 1, 14 * u, w)                 # good after bad
    put(3, 0, 0, w)                      # the whole one-word window
    put(3, 0, 0, w + 1)                  # one byte over
    put(3, 0, w, 1)                      # just above
    put(3, 0, 0, 1)                      # good after bad
    # 1: windows never written (power-up: the whole memory).
    put(1, 1, 8 * u, 100)
    put(1, 0, 8 * u, 4 * w)
    put(1, 2, 0, min(window, 4096))      # the whole memory, several segments


def build_scenario(kind, *, nodes, width, window, max_payload, seed, count=8,
                   msg_bytes=128, messages=16, peers=None, destinations=None,
                   popularity="round_robin"):
    rng = random.Random(seed)
    node_ids = list(range(nodes))
    stores = {p: [] for p in range(nodes)}
    faults = {p: [] for p in range(nodes)}
    limit = min(window, 4096)
    edges = sorted({s for s in EDGE_SIZES + (max_payload - 1, max_payload, max_payload + 1,
                                             2 * max_payload, 2 * max_payload + 1)
                    if 1 <= s <= limit})
    sizes = [s for s in edges if s <= max_payload]
    if kind == "pair":
        for k in range(messages):
            addr = (k * msg_bytes) % (window - window % msg_bytes) // width * width
            stores[0].append(Store(1, addr, _payload(rng, msg_bytes)))
    elif kind == "destinations":                  # node 0 -> ids 0, 1, ..., D - 1, 0, ...
        if not destinations:
            raise ValueError("scenario 'destinations' needs destinations, not "
                             f"{destinations!r}")
        from analysis.load.traffic import qp_sequence

        node_ids = [destinations + p for p in range(nodes)]
        ids = qp_sequence(popularity, destinations, messages, seed)
        for k in range(messages):
            addr = (k * msg_bytes) % (window - window % msg_bytes) // width * width
            stores[0].append(Store(ids[k], addr, _payload(rng, msg_bytes)))
    elif kind == "fanout":                        # node 0 -> 1, 2, ..., peers, 1, ...
        for k in range(messages):
            dst = 1 + k % (peers or nodes - 1)
            addr = (k * msg_bytes) % (window - window % msg_bytes) // width * width
            stores[0].append(Store(dst, addr, _payload(rng, msg_bytes)))
    elif kind == "remap":                         # node ids the reset table does not route
        node_ids = [0x41 + 5 * p for p in range(nodes)]  # id mod nodes != port
        for p in range(nodes):
            for _ in range(count):
                n = rng.choice(sizes)
                stores[p].append(Store(node_ids[rng.randrange(nodes)],
                                       _addr(rng, width, window, n), _payload(rng, n)))
    elif kind == "edges":
        for n in edges:                           # every edge size once, node 0 -> 1
            stores[0].append(Store(1, _addr(rng, width, window, n), _payload(rng, n)))
    elif kind == "all_to_all":
        for p in range(nodes):
            for _ in range(count):
                n = rng.choice(edges)
                stores[p].append(Store(rng.randrange(nodes), _addr(rng, width, window, n),
                                       _payload(rng, n)))
    elif kind == "hotspot":
        for p in range(1, nodes):
            for _ in range(count):
                n = rng.choice(sizes)
                stores[p].append(Store(0, _addr(rng, width, window, n), _payload(rng, n)))
    elif kind == "bad":
        node_ids[nodes - 1] = nodes + 7           # frames routed to the last port: wrong dst
        for p in range(nodes):
            for k in range(count):
                n = rng.choice(sizes)
                dst = rng.randrange(nodes - 1)
                addr = _addr(rng, width, window, n)
                length = None
                flavour = k % 6
                if flavour == 1:
                    dst = nodes - 1                   # wrong destination
                elif flavour == 2 and n > 1:
                    addr += 1 if addr + n < window else -1   # misaligned: malformed
                elif flavour == 3:
                    length = min(n + rng.randrange(1, 9), max_payload)  # header lies
                    if length == n:
                        length = n - 1 if n > 1 else None
                elif flavour == 4:
                    addr = window                         # runs past the window
                stores[p].append(Store(dst, addr, _payload(rng, n), length))
            faults[p] = sorted(rng.sample(range(0, 8 * count), 3))
    elif kind == "windows":
        _windows_stores(stores, rng, nodes, width, window, max_payload)
    elif kind == "spoof":
        if nodes != 4:
            raise ValueError("the spoof scenario needs nodes = 4")
        node_ids[FORGER] = 1                      # claims node 1's id
        half = window // 2                        # legitimate stores below, forged above
        for k in range(count):
            for p, dst in ((0, 2), (1, 0), (1, 2), (2, 0)):
                n = rng.choice(sizes)
                addr = _addr(rng, width, half // 4, n) + (half // 4) * p
                stores[p].append(Store(dst, addr, _payload(rng, n)))
            n = rng.choice(sizes)
            stores[FORGER].append(Store(k % 3, half + _addr(rng, width, half, n),
                                        _payload(rng, n)))
    else:
        raise ValueError(f"scenario kind {kind!r} is not known")
    return stores, node_ids, faults
