"""The peak of the state a sender holds in flight, from per-message start and end cycles.

Used for the NIC's ``inflight_bits`` (docs/results.md): a store holds its frames' beats in
the switch's ingress buffer, covered by the sender's credits, from the cycle it is
accepted until its completion (the credit of its last beat back at the sender). The same
function reduces the RTL's stamps and the model's, so the two are compared on equal terms.
"""

__all__ = ["peak_in_flight"]


def peak_in_flight(starts, ends, weights):
    """The largest sum of ``weights`` over the messages in flight at any cycle: message
    ``k`` is in flight in the cycles ``starts[k] <= t < ends[k]``. Raises ``ValueError``
    for lists of different lengths or a message that ends before it starts."""
    starts, ends, weights = list(starts), list(ends), list(weights)
    if not len(starts) == len(ends) == len(weights):
        raise ValueError("starts, ends and weights must have one entry per message")
    events = []
    for s, e, w in zip(starts, ends, weights, strict=True):
        if e < s:
            raise ValueError(f"a message ends (cycle {e}) before it starts (cycle {s})")
        events.append((s, 1, w))
        events.append((e, 0, -w))        # at the same cycle an end comes before a start
    level = peak = 0
    for _, _, w in sorted(events):
        level += w
        peak = max(peak, level)
    return peak
