"""A trace's messages between one pair of GPUs, in order: what a two-node top replays.

The co-simulation tops connect one sender to one receiver, so a replay takes the
messages that GPU ``src`` sends to one destination (its first, by default), in the
trace's order (phase by phase, data before flags), each row expanded to ``count``
messages, at most ``limit`` of them. The sizes are replayed as RDMA WRITEs (or NIC
stores) back to back; the dependencies between phases are not (they wait for compute
that the tops do not model), which the caller says where it reports the replay.
"""

import numpy as np

__all__ = ["pair_messages"]


def pair_messages(trace, src=0, dst=None, limit=32):
    """``(dst, sizes)``: the byte sizes of the first ``limit`` messages (at least 1) that
    GPU ``src`` sends to ``dst`` (default: the first destination it sends to) in
    ``trace``. Raises ``ValueError`` naming ``src``, ``dst`` or ``limit`` when out of
    range or when the pair exchanges nothing."""
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an int of at least 1, not {limit!r}")
    c = trace.columns
    if not 0 <= src < trace.gpus:
        raise ValueError(f"src must be a GPU of the trace (0..{trace.gpus - 1}), not {src!r}")
    mine = c["src"] == src
    if not mine.any():
        raise ValueError(f"GPU src={src} sends nothing in this trace")
    if dst is None:
        dst = int(c["dst"][np.flatnonzero(mine)[0]])
    rows = np.flatnonzero(mine & (c["dst"] == dst))
    if not len(rows):
        raise ValueError(f"GPU src={src} sends nothing to dst={dst!r}")
    sizes = []
    for i in rows:
        sizes += [int(c["bytes"][i])] * min(int(c["count"][i]), limit - len(sizes))
        if len(sizes) == limit:
            break
    return dst, sizes
