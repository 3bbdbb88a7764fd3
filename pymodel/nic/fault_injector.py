"""Twin of :class:`rtl.nic.fault_injector.FaultInjector`: chosen beats corrupted."""

__all__ = ["FaultInjectorModel"]


class FaultInjectorModel:
    """Beats pass through with zero latency; beat ``n`` (counted from 0) has byte lane 0
    inverted when ``n`` is in ``faults``.

    ``step(c, side)``: ``side["i"]`` is the beat of cycle ``c`` (a tuple whose first item
    is the data, or None); returns ``{"o": beat}``, the same tuple with the data changed
    when the beat is a chosen one.
    """

    def __init__(self, faults=()):
        self.faults = set(faults)
        self.count = 0

    def step(self, c, side):
        beat = side.get("i")
        if beat is None:
            return {"o": None}
        if self.count in self.faults:
            beat = (beat[0] ^ 0xFF, *beat[1:])
        self.count += 1
        return {"o": beat}

    def commit(self):
        pass
