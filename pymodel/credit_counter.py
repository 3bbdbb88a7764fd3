"""Twin of :class:`rtl.common.credit_counter.CreditCounter`."""

__all__ = ["CreditCounterModel"]


class CreditCounterModel:
    """Per-link credit count with the RTL's saturation and sticky error flags."""

    def __init__(self, max_credits):
        if (not isinstance(max_credits, int) or isinstance(max_credits, bool)
            or not 1 <= max_credits <= 65535):
            raise ValueError(f"max_credits must be 1 to 65535, not {max_credits!r}")
        self.max_credits = max_credits
        self.credits = max_credits
        self.underflow = False
        self.overflow = False

    @property
    def available(self):
        return self.credits != 0

    def cycle(self, take=False, give=0):
        """One clock edge; returns the count before the edge (what ``credits`` shows)."""
        shown = self.credits
        taken = bool(take) and self.available
        if take and not self.available:
            self.underflow = True
        total = self.credits - taken + give
        if total > self.max_credits:
            self.overflow = True
            total = self.max_credits
        self.credits = total
        return shown
