"""In-order comparison of RTL results with the golden model; every mismatch is reported."""

__all__ = ["Scoreboard"]


class Scoreboard:
    """Compare named sequences item by item and keep every difference.

    ``compare(what, rtl, model)`` checks lengths and each item; ``check()`` raises an
    ``AssertionError`` listing the first differences, or passes when all matched and at
    least one item was checked.
    """

    def __init__(self, log=None):
        self.log = log
        self.mismatches = []
        self.checked = 0

    def compare(self, what, rtl, model, fmt=hex):
        rtl, model = list(rtl), list(model)
        if rtl == model and set(map(type, model)) <= {int}:
            # Equal lists of ints, compared in C: no item differs (an int equals itself,
            # so list equality, which takes an item for equal to itself, is exact here).
            self.checked += len(rtl)
            return self
        if len(rtl) != len(model):
            self.mismatches.append(f"{what}: RTL has {len(rtl)} items, model {len(model)}")
        for k, (a, b) in enumerate(zip(rtl, model, strict=False)):
            self.checked += 1
            if a != b:
                show = fmt if isinstance(a, int) and isinstance(b, int) else repr
                self.mismatches.append(f"{what}[{k}]: RTL {show(a)} != model {show(b)}")
        return self

    def equal(self, what, rtl, model):
        self.checked += 1
        if rtl != model:
            self.mismatches.append(f"{what}: RTL {rtl!r} != model {model!r}")
        return self

    def check(self):
        if self.log:
            self.log.info("scoreboard: %d items checked, %d mismatches",
                          self.checked, len(self.mismatches))
        assert self.checked > 0, "scoreboard checked nothing"
        assert not self.mismatches, (f"{len(self.mismatches)} mismatches:\n  "
                                     + "\n  ".join(self.mismatches[:20]))
