"""One sender's messages through its ephemeral context pool, cycle by cycle.

The datapath of a message (posting, framing, the wire, the responder, the ACK and the
CQE) is the RDMA engine's at its best rung with its context on chip; it enters here as
three figures of that engine (:class:`Datapath`): the cycles between two messages sent
back to back, and the latency and completion of a message sent alone. What this model
adds is the context store: every message needs the context toward its destination, and
:class:`pymodel.ephemeral.pool.ContextPoolModel` (the twin of the RTL pool, stepped
every cycle) opens, finds and closes those contexts.

Rules (docs/ephemeral.md):

- Messages are posted in order and sent in order. Message ``k`` is presented to the pool
  from cycle ``ready_k = sent_{k-1} + ii`` (message 0 from cycle 0); it is sent in the
  cycle its lookup is taken (a hit or an open) and waits while the pool is full.
- A message asks for an ACK when it is the ``ack_every``-th of its context since the
  last that asked, or when none of the next ``lookahead`` posted messages goes to its
  destination (its context's last for now). The messages of a context from one request
  to the next are a *run*; the first message of a run counts as outstanding in the pool
  (``count`` 1), and the ACK of the run's last message (its request) reaches the sender
  ``completion`` cycles after that message was sent (the pool's ``done``; cumulative: it
  acknowledges the whole run). So a context with a message not yet acknowledged, asked
  for or not, never closes.
- A context closes when the pool's scan finds it idle for ``idle`` cycles with nothing
  outstanding; the sender then sends a CLOSE frame, which frees the receiver's context
  ``one_way`` cycles later. The receiver's context toward this sender opened on the
  first message's arrival (``latency`` cycles after it was sent).

:class:`pymodel.ephemeral.sender.SenderModel` (the twin of
:class:`rtl.ephemeral.sender.EphemeralSender`) is the rules above around the pool, stepped
one cycle at a time (the "last for now" bit comes
with each posted message, :func:`ack_requests` computes it from the posting queue).
:func:`run_flow` runs it and returns the send cycles, the waits and the pool's figures; the receive
side's contexts are the intervals ``[first arrival, CLOSE arrival]`` (their most at once
is the receiver pool this sender needs at its peers, and by symmetry what each node
needs when every node sends as this one does).
"""

import dataclasses

from pymodel.ephemeral.sender import SenderModel
from spec.ephemeral import EPHEMERAL_DEFAULTS, check_ephemeral

__all__ = ["Datapath", "FlowResult", "run_flow", "ack_requests", "max_overlap"]


@dataclasses.dataclass(frozen=True)
class Datapath:
    """The engine's figures the flow uses (cycles): ``ii`` between two messages sent back
    to back (a whole number), ``latency`` (sent to the payload in the remote memory) and
    ``completion`` (sent to the ACK at the sender) of a message alone, ``one_way`` the
    node-to-node delay (a CLOSE frame's trip)."""
    ii: int
    latency: int
    completion: int
    one_way: int

    def __post_init__(self):
        for name in ("ii", "latency", "completion", "one_way"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"datapath {name} must be a positive whole number of "
                                 f"cycles, not {v!r}")


@dataclasses.dataclass
class FlowResult:
    """What one run gives: per message the cycle it was sent and whether it asked for an
    ACK; the pool's counters, its most contexts at once (``send_max``), the receive
    contexts' most at once (``recv_max``), the CLOSE frames (one per context closed),
    and the cycle the last context closed (``end``)."""
    sent: list
    asked: list
    waits: list
    counters: dict
    send_max: int
    recv_max: int
    closes: int
    end: int


def ack_requests(dests, lookahead):
    """Per message, whether it is its context's last for now: none of the next
    ``lookahead`` messages goes to its destination (it then asks for an ACK; the
    ``ack_every`` count is kept by :func:`run_flow` as it goes)."""
    nxt, last = [None] * len(dests), {}
    for k in range(len(dests) - 1, -1, -1):
        nxt[k] = last.get(dests[k])
        last[dests[k]] = k
    return [n is None or n - k > lookahead for k, n in enumerate(nxt)]


def max_overlap(intervals):
    """The most closed intervals ``[a, b]`` that hold a point at once."""
    events = sorted([(a, 0) for a, _ in intervals] + [(b, 1) for _, b in intervals])
    cur = best = 0
    for _, kind in events:
        cur += 1 if kind == 0 else -1
        best = max(best, cur)
    return best


def run_flow(dests, datapath, pool_entries=EPHEMERAL_DEFAULTS["pool_entries"],
             idle=EPHEMERAL_DEFAULTS["idle"], ack_every=EPHEMERAL_DEFAULTS["ack_every"],
             lookahead=EPHEMERAL_DEFAULTS["lookahead"]):
    """Send ``dests`` (a destination per message, in order) through a pool of
    ``pool_entries`` contexts (:class:`SenderModel`, every message offered as soon as
    the one before it is sent); see the module docstring. ``ValueError`` names a bad
    knob."""
    check_ephemeral(pool_entries, idle, ack_every, lookahead)
    if not dests:
        raise ValueError("dests must name at least one message's destination")
    dp = datapath
    last_for_now = ack_requests(dests, lookahead)
    sender = SenderModel(pool_entries, idle, ack_every, dp.ii, dp.completion)
    n = len(dests)
    sent, asked, waits = [None] * n, [False] * n, [0] * n
    opened_at = {}                  # destination -> first arrival of the open context
    recv = []                       # receive contexts: [first arrival, CLOSE arrival]
    k, ready, cycle, closes = 0, 0, 0, 0
    while k < n or sender.busy():
        event, closed = sender.cycle((dests[k], last_for_now[k]) if k < n else None)
        if closed is not None:
            closes += 1
            recv.append((opened_at.pop(closed), cycle + dp.one_way))
        if event is not None:
            _, ask, opened = event
            if opened:
                opened_at[dests[k]] = cycle + dp.latency
            sent[k], asked[k], waits[k] = cycle, ask, cycle - ready
            k += 1
            ready = cycle + dp.ii
        cycle += 1
    pool = sender.pool
    return FlowResult(sent=sent, asked=asked, waits=waits, counters=dict(pool.count),
                      send_max=pool.used_max, recv_max=max_overlap(recv), closes=closes,
                      end=cycle)
