"""The rate in the two regimes where messages wait on each other, not on a resource.

:func:`_pinned`: QPs share context-cache entries, so an item that misses waits until
the entry's previous QP is done with it (at most ``cache_entries`` QPs held): with
window state per QP (``windows`` above 0, the default) until the record of its last
item in flight reached the completion unit, with ``windows`` 0 until its messages
retired.
:func:`_serial`: one message in flight (the ``serial`` knob), each chain starting from
the host interfaces as the one before left them. Both return cycles per message over
:func:`~analysis.rdma.fastpath.scenario._window`.
"""

from analysis.rdma.fastpath.chain import _chain
from analysis.rdma.fastpath.host_timing import _Host
from analysis.rdma.fastpath.params import _W, _not_covered
from analysis.rdma.fastpath.scenario import _window


def _pinned(s, run, ii):
    """The rate when context-cache entries are shared: the front takes an item whose
    entry holds another QP only when that QP is done with the entry, so at most
    ``cache_entries`` QPs are in flight between the front and the point where their
    entry is freed. With window state per QP (``s.windows`` above 0) an entry is held
    from the miss through the fill, the WQE read, the sequencer and the payload reads
    until the frame sender took the QP's last frame and its record reached the
    completion unit (``query.done``, the cycle after the take; the front sees it the
    cycle after that); with ``windows`` 0 until the QP's last message in flight
    retired (its window is in the entry: the entry is pinned). Items are taken in
    order, each at least ``ii`` cycles per message after the one before; returns the
    steady-state cycles per message over :func:`_window` of the sending order, or
    ``ii`` when no item waits."""
    p = s.prof
    if s.qps <= s.cache:
        return ii                           # every QP has an entry of its own
    chains = {}

    def chain(j):
        key = (run.miss_a[j], run.wb_a[j], run.miss_b[j], run.wb_b[j])
        if key not in chains:
            c = _chain(s, 0, _Host(p), _Host(p), *key, 0, 0, True, True,
                       [0] * (1 + s.n_inline))
            free = c["frames"][-1]["take"] + 1 if s.windows else c["retire"]
            chains[key] = (free, c["frames"][-1]["first"])
        return chains[key]

    owner, done = {}, {}                    # entry -> (qp, cycle its QP is done with it)
    t, last_len = 0, 0
    sends = []
    waited = False
    for q, msgs in run.items[1:]:           # the warm-up item went alone, before
        e = q % s.cache
        t += ii * last_len
        if e in owner and owner[e] != q:
            if done[e] + 1 > t:
                t, waited = done[e] + 1, True
        free, first = chain(msgs[0])
        for k, _ in enumerate(msgs):
            sends.append(t + first + k * ii)
        owner[e], done[e] = q, t + free + (len(msgs) - 1) * ii
        last_len = len(msgs)
    if not waited:
        return ii
    lo, hi = _window(run.n)
    # sends[] lacks the warm-up message (position 0 of the cycle model's list).
    return (sends[hi - 1] - sends[lo - 1]) / (hi - lo)


def _serial(s, run):
    """The rate with one message in flight (``serial``): the front takes the next
    work item in the cycle after the completion unit retired the previous message, and
    each message's chain (:func:`_chain`) starts from the host interfaces as the one
    before left them (its CQE write can delay the next read request). Returns the
    cycles per message over :func:`_window`."""
    if s.ring_every != 1 or not all(run.ack):
        raise _not_covered("one message at a time needs a doorbell and an ACK per "
                           "message")
    lo, hi = _window(run.n)
    mrrs = s.prof.max_read_request // _W
    wqe_of = {first: a for a, _, first in reversed(run.wqe_reads)}
    # The host interfaces' state relative to the front's take: the cycles each
    # direction stays busy, the kind that started last. A message's chain depends only
    # on that, its contexts and its buffers' offsets, so equal cases are computed once.
    state = (0, "wr", 0, "mmio", 0, "wr", 0, "mmio")
    t_f, sends, memo = 0, {}, {}
    for x in range(1, hi + 1):
        j = run.order[x]
        key = (run.miss_a[j], run.wb_a[j], run.miss_b[j], run.wb_b[j], run.signalled[j],
               (run.pay_base + j * s.words) % mrrs, wqe_of.get(j, 0) % mrrs, state)
        if key not in memo:
            ha, hb = _Host(s.prof), _Host(s.prof)
            (ha.up.free, ha.up.last, ha.dn.free, ha.dn.last,
             hb.up.free, hb.up.last, hb.dn.free, hb.dn.last) = state
            c = _chain(s, 0, ha, hb, *key[:4], key[6], key[5], key[4], True,
                       [0] * (1 + s.n_inline))
            nxt = c["retire"] + 1
            after = tuple(v if isinstance(v, str) else max(0, v - nxt)
                          for v in (ha.up.free, ha.up.last, ha.dn.free, ha.dn.last,
                                    hb.up.free, hb.up.last, hb.dn.free, hb.dn.last))
            memo[key] = (nxt, c["frames"][-1]["first"], after)
        nxt, send, state = memo[key]
        sends[x] = t_f + send
        t_f += nxt
    return (sends[hi] - sends[lo]) / (hi - lo)
