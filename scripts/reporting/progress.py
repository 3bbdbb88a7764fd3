"""A one-line progress bar for the long steps of the report."""

import sys
import time

__all__ = ["Progress"]


class Progress:
    """A one-line progress bar on stderr (a plain line per step when not a terminal)."""

    def __init__(self, total, title):
        self.total, self.title, self.done, self.t0 = total, title, 0, time.time()
        self.tty = sys.stderr.isatty()

    def step(self, what):
        self.done += 1
        frac = self.done / max(self.total, 1)
        bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
        line = (f"{self.title} [{bar}] {self.done}/{self.total} "
                f"{time.time() - self.t0:6.1f} s  {what}")
        if self.tty:
            sys.stderr.write("\r" + line[:150].ljust(150))
            if self.done == self.total:
                sys.stderr.write("\n")
        elif self.total <= 40 or self.done % max(1, self.total // 20) == 0 \
                or self.done == self.total:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

