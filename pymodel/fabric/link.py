"""Twin of :class:`rtl.fabric.link.Link`."""

__all__ = ["LinkModel"]


class LinkModel:
    """A beat sent in cycle ``c`` arrives in cycle ``c + latency``; nothing is lost."""

    def __init__(self, latency):
        if not isinstance(latency, int) or not 1 <= latency <= 4096:
            raise ValueError(f"link latency (cycles) must be an integer from 1 to 4096, "
                             f"not {latency!r}")
        self.latency = latency

    def arrivals(self, sent):
        """``[(cycle, beat), ...]`` sent -> the same beats with their arrival cycles."""
        return [(c + self.latency, b) for c, b in sent]
