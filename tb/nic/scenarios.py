"""Seeded store scenarios for the NIC top, shared by the cocotb tests and the headline.

Sizes: the edge sizes of :data:`EDGE_SIZES`, ``max_payload`` - 1, + 0, + 1 and twice it
(stores longer than ``max_payload`` are segmented by the NIC), up to the smaller of the
window and 4096 bytes. ``pair``: ``messages`` stores of ``msg_bytes`` from node 0 to 1;
``fanout``: the same, round robin to nodes 1 .. ``peers`` (default nodes - 1);
``remap``: like ``all_to_all`` with node ids that only the switch-table writes of
:func:`table_writes` route (played one per cycle from cycle 0, so the first frames race
them: a frame whose head reaches the switch before its entry is written goes by the
reset table and is dropped as a wrong destination, where the model says so); ``edges``:
every size once from node 0 to 1;
``all_to_all``: ``count`` stores of random sizes from every node to random nodes
(itself included); ``hotspot``: every other node to node 0; ``bad``: frames with every
kind of fault (sizes up to ``max_payload``).

Each returns ``(stores, node_ids, faults)``: ``stores[p]`` the :class:`Store` list of
node ``p``, ``node_ids[p]`` its node id, ``faults[p]`` downlink beat numbers to corrupt.
"""

import random

from pymodel.nic.system import Store

__all__ = ["build_scenario", "table_writes", "EDGE_SIZES"]

EDGE_SIZES = (1, 2, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
              511, 512, 1023, 1024, 1025, 1500, 1501, 2047, 2048, 4095, 4096)


def _addr(rng, width, window, length):
    return width * rng.randrange(0, (window - length) // width + 1)


def _payload(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def table_writes(node_ids, ports):
    """Switch-table writes ``(node, port)`` that route each node id to its own port
    (none for ids the reset table, ``node mod ports``, already routes)."""
    return [(n, p) for p, n in enumerate(node_ids) if n % ports != p]


def build_scenario(kind, *, nodes, width, window, max_payload, seed, count=8,
                   msg_bytes=128, messages=16, peers=None):
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
    else:
        raise ValueError(f"scenario kind {kind!r} is not known")
    return stores, node_ids, faults
