"""Index arithmetic of :class:`rtl.rdma.context_cache.ContextCache`: the check of its
ways, the entry of a QP and the tree pseudo-LRU of a set (Amaranth values)."""

from amaranth import Cat, Const, Mux

from spec.checks import reject
from spec.rdma_engine import CACHE_WAYS

__all__ = ["check_ways", "entry_of", "plru_victim", "plru_touch"]


def check_ways(owner, ways, entries=None):
    """``ways`` checked: one of :data:`CACHE_WAYS` (and at most ``entries``)."""
    if isinstance(ways, bool) or ways not in CACHE_WAYS:
        reject(owner, f"QP-context cache ways (cache_ways) must be one of {CACHE_WAYS}, "
                      f"not {ways!r}")
    if entries is not None and ways > entries:
        reject(owner, f"QP-context cache ways (cache_ways) {ways} must divide the "
                      f"{entries} entries")
    return ways


def plru_victim(bits, ways):
    """The way a tree pseudo-LRU state ``bits`` (``ways - 1`` bits, node ``k`` of the
    binary tree at bit ``k - 1``, children ``2k`` and ``2k + 1``; a bit 0 points left)
    names as least recently used: walk from the root along the bits. An Amaranth
    value of ``log2(ways)`` bits."""
    wbits = (ways - 1).bit_length()
    node = Const(1, 1)
    for _ in range(wbits):
        node = Cat(bits.bit_select((node - 1).as_unsigned(), 1), node)
    return node[:wbits]


def plru_touch(bits, way, ways):
    """The tree pseudo-LRU state ``bits`` after an access to ``way``: every node on the
    path from the root to ``way`` points away from it."""
    wbits = (ways - 1).bit_length()
    out = []
    for k in range(1, ways):
        depth = k.bit_length() - 1
        on_path = (Cat(way, Const(1, 1)) >> (wbits - depth)) == k
        out.append(Mux(on_path, ~way[wbits - 1 - depth], bits[k - 1]))
    return Cat(*out)


def entry_of(qpn, cache_log2, ibits):
    """The cache entry of ``qpn`` when ``2**cache_log2`` entries are in use (an Amaranth
    value of ``ibits`` bits): its low ``cache_log2`` bits."""
    mask = ((Const(1, ibits + 1) << cache_log2) - 1)[:ibits]
    return qpn[:ibits] & mask
