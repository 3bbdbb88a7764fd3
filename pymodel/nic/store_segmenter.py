"""Twin of :class:`rtl.nic.store_segmenter.StoreSegmenter`: long stores cut into frames."""

from pymodel.nic.store import cut

__all__ = ["StoreSegmenterModel", "cut"]


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
