"""Wall time of the phases of a cocotb test (the line ``make bench`` reads)."""

import time

__all__ = ["Phases"]


class Phases:
    """Wall time of each phase of the test, logged at the end in one line (``phases
    (s): name value, ...``) that ``make bench`` reads."""

    def __init__(self):
        self.marks = [("", time.perf_counter())]

    def mark(self, name, at=None):
        self.marks.append((name, time.perf_counter() if at is None else at))

    def line(self):
        return "phases (s): " + ", ".join(
            f"{name} {t - self.marks[k][1]:.3f}"
            for k, (name, t) in enumerate(self.marks[1:]))
