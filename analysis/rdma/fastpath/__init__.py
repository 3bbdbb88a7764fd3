"""Fast path of the pipelined RDMA engine: a point's metrics from closed forms.

:func:`rdma_fast_point` gives the metrics of :func:`analysis.rdma.point.rdma_point` (the
cycle-level model of the engine) without stepping cycles: it lays out the run the verbs
model would post (items, doorbells, signalled WQEs, ACK requests, context hits, misses
and write-backs at both ends), counts every host-interface transaction, wire beat and
control action of it exactly (:data:`EXACT_KEYS`), takes latency and completion from the
chain of one message through the stages on an idle engine, and the steady-state ii as
the largest of the resources' per-message cycles (host-interface directions, read tags,
framer, responder writer), or, when QPs share cache entries, from the recurrence of
messages waiting for their cache entry (Little's law on the entries: an entry held from
the miss until the message's record reaches the completion unit, or with ``windows`` 0
until its ACK), or, when the engine reads WQEs and payloads from host memory, from the
order in which host interface A serves the run's doorbells and completions (a run of a
few hundred messages ends before the steady state, and the window of its ii sees the
phases before it). Timing figures stay within :data:`TOLERANCES` of the cycle model
(tests/test_fastpath.py). Regimes it does not cover raise ``ValueError`` (use the cycle
model): fewer than :data:`MIN_MESSAGES` messages, ACK coalescing that would meet
transport timeouts, a responder receive buffer that would overflow behind a context
miss or behind a short run's context fills at node B.

The parts, each a module of this package:

- :mod:`~analysis.rdma.fastpath.params`: the point's parameters, shared arithmetic;
- :mod:`~analysis.rdma.fastpath.frames`: a message's frames and an ACK;
- :mod:`~analysis.rdma.fastpath.host_timing`: TLP shapes and the host interface's
  directions;
- :mod:`~analysis.rdma.fastpath.scenario`: the run's layout (items, ACK requests,
  context hits and misses) and its steady-state window;
- :mod:`~analysis.rdma.fastpath.totals`: exact counts of every transaction;
- :mod:`~analysis.rdma.fastpath.chain`: one message through requester, wire, responder,
  ACK and CQE on an idle engine;
- :mod:`~analysis.rdma.fastpath.bounds`: the rate as the slowest resource;
- :mod:`~analysis.rdma.fastpath.regimes`: the rate with shared (held or pinned)
  contexts or one message
  in flight;
- :mod:`~analysis.rdma.fastpath.flow`: the rate of a short run with every doorbell posted;
- :mod:`~analysis.rdma.fastpath.inflight`: the state in flight;
- :mod:`~analysis.rdma.fastpath.checks`: the regimes refused;
- :mod:`~analysis.rdma.fastpath.point`: the run driver, :func:`rdma_fast_point`.
"""

from analysis.rdma.fastpath.bounds import rdma_bounds
from analysis.rdma.fastpath.flow import FLOW_MAX_MESSAGES
from analysis.rdma.fastpath.point import EXACT_KEYS, MIN_MESSAGES, TOLERANCES, rdma_fast_point

__all__ = ["rdma_fast_point", "rdma_bounds", "EXACT_KEYS", "TOLERANCES", "MIN_MESSAGES",
           "FLOW_MAX_MESSAGES"]
