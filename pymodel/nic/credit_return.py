"""Twin of :class:`rtl.nic.credit_return.CreditReturn`: credits delayed like the link."""

__all__ = ["CreditReturnModel"]


class CreditReturnModel:
    """Carry the credits freed in cycle ``c`` to the sender in cycle ``c + latency``.

    :meth:`output` is what ``o`` carries in cycle ``c`` (freed in ``c - latency``: it does
    not depend on anything of cycle ``c``, so a sender can be stepped first);
    ``step(c, side)`` takes ``side["i"]``, the credits freed in ``c``, and returns
    ``{}``. Cycles must be stepped in increasing order.
    """

    def __init__(self, latency):
        if not isinstance(latency, int) or isinstance(latency, bool) or latency < 1:
            raise ValueError(f"credit return latency must be at least 1 cycle, not "
                             f"{latency!r}")
        self.latency = latency
        self._due = {}                   # cycle -> credits arriving then

    def output(self, c):
        """The credits arriving in cycle ``c`` (each is output once)."""
        return self._due.pop(c, 0) if self._due else 0

    def step(self, c, side):
        n = side.get("i")
        if n:
            due = c + self.latency
            self._due[due] = self._due.get(due, 0) + n
        return {}

    def busy(self):
        """Credits still on their way."""
        return bool(self._due)

    def commit(self):
        pass
