"""Twin of :class:`rtl.nic.store_segmenter.StoreSegmenter`: long stores cut into frames."""

from pymodel.nic.store import Store

__all__ = ["StoreSegmenterModel", "cut"]


def cut(store, max_payload):
    """The segments of ``store``: a cut every ``max_payload`` bytes of payload; segment
    ``k`` goes to ``addr + k * max_payload`` with the header length
    ``min(rem, max_payload)``, ``rem`` starting at ``length`` and losing ``max_payload``
    (13-bit wrap) per segment; the segment with ``rem <= max_payload`` (for an honest
    store its last) carries the store's ``ack_req``, the others none."""
    out, rem = [], store.length
    for k in range(0, max(len(store.payload), 1), max_payload):
        out.append(Store(store.dst, store.addr + k, store.payload[k:k + max_payload],
                         min(rem, max_payload), ack_req=store.ack_req and rem <= max_payload))
        rem = (rem - max_payload) % (1 << 13)
    return out


class StoreSegmenterModel:
    """Store commands in, store commands of at most ``max_payload`` bytes out.

    The segmenter has zero latency and no bubble (its beats pass through, a ``first``
    and ``last`` added every ``max_payload / width`` beats), so its twin works a command
    at a time: ``step(c, side)`` with ``side["i"]`` the command whose first beat is
    accepted in cycle ``c`` returns ``{"o": [segments]}`` (:func:`cut`), the commands
    its ``o`` carries from that cycle on, back to back.
    """

    def __init__(self, width, max_payload):
        self.width, self.max_payload = width, max_payload

    def step(self, c, side):
        store = side.get("i")
        return {"o": None if store is None else cut(store, self.max_payload)}

    def commit(self):
        pass
