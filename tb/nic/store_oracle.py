"""What the stores alone say the NIC's memories hold: the model-free oracle of the
per-peer retry's scenarios (tb/nic/cocotb_nic_peer.py, tests/test_nic_peer_retry_model.py)."""

__all__ = ["oracle"]


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
