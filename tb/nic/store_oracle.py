"""What the stores alone say the NIC's memories hold: the model-free oracle of the
per-peer retry's scenarios (tb/nic/cocotb_nic_peer.py, tests/test_nic_peer_retry_model.py)."""

import random

from pymodel.nic.store import Store

__all__ = ["oracle", "payload", "mixed_stores"]


def payload(k, n):
    """``n`` payload bytes of store ``k`` (distinct per store)."""
    return bytes((k * 7 + i + 1) & 0xFF for i in range(n))


def mixed_stores(nodes, seed, count=12):
    """Each node's ``count`` stores of 8 to 64 bytes to random other nodes, each at an
    address of its own (node ``q`` from word ``60 q``), so that a memory's final content
    does not depend on the order the stores land in."""
    rng = random.Random(seed)
    return {q: [Store((q + 1 + rng.randrange(nodes - 1)) % nodes, q * 960 + 64 * k,
                      payload(q * 100 + k, rng.choice([8, 16, 40, 64])))
                for k in range(count)] for q in range(nodes)}


def oracle(stores, nodes, w, mem_words):
    """Each node's memory (``mem_words`` words of ``w`` bytes, from zero) and its count of
    written words, from ``stores`` (per sender, lists of ``Store``) alone: every store
    lands once, at its address, in its destination (the scenarios' stores never write
    the same bytes twice)."""
    mem = {q: [0] * mem_words for q in range(nodes)}
    words = dict.fromkeys(range(nodes), 0)
    for ss in stores.values():
        for s in ss:
            for i, byte in enumerate(s.payload):
                a = s.addr + i
                mem[s.dst][a // w] |= byte << (8 * (a % w))
            words[s.dst] += -(-len(s.payload) // w)
    return mem, words
