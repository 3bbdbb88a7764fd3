"""The pipelined RDMA engine's definitions: register offsets, context field groups,
read ids, sizes, defaults and counter names.

Imported by the RTL stages (:mod:`rtl.rdma.req`, :mod:`rtl.rdma.resp`), their twins
(:mod:`pymodel.rdma.req`, :mod:`pymodel.rdma.resp`) and the testbenches. Wire and host
formats: :mod:`spec.formats.roce`; the frames' sizes and the links: :mod:`spec.rdma`.
Times are in cycles of the 1 GHz clock (one cycle is 1 ns).
"""

import dataclasses

from spec.checks import check_power_of_two
from spec.formats.roce import QPC_BYTES_CHOICES, QPC_DYNAMIC_FIELDS
from spec.rdma_responder import RESP_GROUP as _RESP_GROUP
from spec.rdma_responder import RESPONDER_COUNTERS as _RESPONDER_COUNTERS
from spec.rdma_responder import MrTableShape, ResponderSizes

__all__ = [
    "DOORBELL_OFFSET", "BLUEFLAME_OFFSET", "MODIFY_QP_OFFSET", "INTAKE_COUNTERS", "CACHE_COUNTERS",
    "RD_FILL", "RD_WQE", "RD_PAYLOAD", "FETCH_GROUP", "MAX_PREFETCH", "SEQ_GROUP",
    "MAX_INLINE_WORDS", "COMPLETION_COUNTERS", "REWIND_QUEUE", "RETRY_LIMIT_RANGE", "TIMEOUT_BITS",
    "TIMEOUT_RANGE", "SIM_TIMEOUT",
    "REQUESTER_SIZES", "REQUESTER_DEFAULTS", "MISS_QUEUE_RANGE", "CACHE_WAYS",
    "CACHE_ENTRIES_RANGE", "ContextCacheShape", "check_cache_ways",
    "check_cache_shape", "FIFO_DEPTHS",
    "check_ways_windows",
    "REQUESTER_COUNTERS", "RUNG_KNOBS",
    "ACK_COALESCE", "LADDER", "RESPONDER_DEFAULTS", "RESPONDER_COUNTERS", "TOP_DEFAULTS",
    "HOST_DEPTH", "QPC_LOG2_BITS", "QPC_MAX_WORDS",
]

# -- Host interface use -----------------------------------------------------------------

#: Register offset of the doorbell: one 8-byte write of ``qpn`` (bytes 0-2) and the send
#: queue's new tail ``sq_tail`` (bytes 3-4), the producer index of the next WQE slot.
DOORBELL_OFFSET = 0x0000
#: Register offset of the WQE-by-MMIO buffer: the host writes a whole WQE (its header
#: word, then its inline data words), which also rings the doorbell for it.
#: Ref: rdma-core, providers/mlx5 (``MLX5_BF_OFFSET``): mlx5's BlueFlame buffer is at
#: this offset of the doorbell page.
BLUEFLAME_OFFSET = 0x0800
#: Register offset of the QP modify command: one 8-byte write of ``qpn`` (bytes 0-2)
#: that moves the QP to RTS (``ibv_modify_qp(qp, {qp_state = IBV_QPS_RTS})``; the IBTA
#: path from Error is Reset, Init, RTR, RTS, folded here into one command that keeps the
#: QP's PSNs and send-queue indices). It travels in order with the QP's doorbells: WQEs
#: rung before it are flushed if the QP was in ERR, WQEs rung after it are sent. Real
#: RNICs take modify_qp as a command to firmware (mlx5: a command-interface mailbox); a
#: register of the doorbell page stands for it here.
MODIFY_QP_OFFSET = 0x0100
#: Read ids (the ``id`` of the host interface's reads): context fills, WQE reads,
#: payload reads.
RD_FILL, RD_WQE, RD_PAYLOAD = 0, 1, 2

# -- Stages ---------------------------------------------------------------------------------

#: Counters of the doorbell intake, in port order.
INTAKE_COUNTERS = ("doorbells", "bf_writes", "mmio_dropped", "qp_modifies")
#: Counters of a context cache, in port order (``fills_max``: most fills outstanding).
CACHE_COUNTERS = ("lookups", "misses", "writebacks", "fills_max")
#: The context field the WQE fetch stage owns: the next send-queue slot to fetch.
FETCH_GROUP = ("sq_head",)
#: Most WQEs one WQE read fetches (the ``prefetch`` parameter's upper bound and its
#: default: one WQE read fetches a whole batch of the ladder's doorbell batching by 16,
#: Kalia et al., ATC 2016; docs/rdma.md "The optimisations").
MAX_PREFETCH = 16
#: The context fields the sequencer owns: the next PSN, the ACK-coalescing counts and
#: the QP state (:class:`spec.formats.roce.QpState`: ERR from the completion unit's
#: notice, RTS from a modify command), so that the state is written back with the
#: context on eviction and read again at its next fill.
SEQ_GROUP = ("next_psn", "ack_msgs", "ack_frames", "state")
assert set(FETCH_GROUP + SEQ_GROUP + _RESP_GROUP) <= set(QPC_DYNAMIC_FIELDS), \
    "every context group is in the dynamic word"
#: Bits of a cache's run-time port ``qpc_log2``: a context is ``2**qpc_log2`` host words
#: (0 to 4, :data:`spec.formats.roce.QPC_BYTES_CHOICES`).
QPC_LOG2_BITS = 3
#: Most host words of one context (a context of 1024 bytes).
QPC_MAX_WORDS = max(QPC_BYTES_CHOICES) // 64
#: Most inline payload words a WQE may carry: a WQE is at most 4 words (256 bytes).
#: Ref: rdma-core, providers/mlx5: the BlueFlame buffer size (``bf->buf_size``) is 256.
MAX_INLINE_WORDS = 3
#: Counters of the completion unit, in port order.
COMPLETION_COUNTERS = ("ack_unexpected", "seq_naks", "timeouts", "rewinds", "retired",
                       "records_max", "qp_errors", "flushed", "recovery_fills")
#: Accepted retry limits (the 3-bit ``retry_cnt`` of ``ibv_modify_qp``).
RETRY_LIMIT_RANGE = (0, 7)
#: Bits of the run-time transport timeout (cycles): up to 2**31 - 1 cycles, 2.1 s at
#: 1 GHz, which covers the IBTA transport timer up to LocalAckTimeout = 19 (4.096 us *
#: 2**19 = 2.1 s) and the deployed defaults (``REQUESTER_DEFAULTS["timeout"]``); the
#: completion unit's timer starts are 32 bits (``now - start`` modulo 2**32 is exact for
#: any timeout below 2**31). Ref: IBTA Vol 1 section 9.7.6.1.3 (timeout = 4.096 us *
#: 2**LocalAckTimeout).
TIMEOUT_BITS = 31
#: Accepted transport timeouts (cycles).
TIMEOUT_RANGE = (64, (1 << TIMEOUT_BITS) - 1)
#: The short transport timeout (cycles) that simulated runs which lose frames (the fault
#: tests, the soak, the scenarios with loss) pass explicitly (a top's ``ack_timeout``
#: port, a model ``Config``'s ``timeout``), and the scale of the scenario generators'
#: ACK spans: 4096 cycles (4.1 us), about three round trips of a message over PCIe with
#: a context miss at the responder, so no loss-free run of those times out, while a
#: lossy run is not idle for a second of simulated time at each tail loss. The
#: default (``REQUESTER_DEFAULTS["timeout"]``) is a deployed one.
SIM_TIMEOUT = 4096

# -- The requester ----------------------------------------------------------------------------

#: Default sizes and settings (the requester's keyword parameters besides its context
#: cache's shape). ``wqe_words``/``payload_words``: the fetched-WQE and
#: payload FIFOs, in 64-byte words: with PCIe reads of about 560 cycles and a message
#: every 4 to 6 cycles, about 100 to 140 messages are being fetched at once (Little's
#: law), so 256 WQE words and 512 payload words (two per 128-byte message) keep the
#: pipeline from waiting for room. ``records``: messages read and not yet acknowledged,
#: all QPs (the WQE fetch stage reads no WQE whose record the pool could not hold): from
#: the WQE read to the ACK a message spends two PCIe reads (about 1,130 cycles), its
#: frame and the round trip, about 1,300 cycles, so at 4.5 cycles a message (doorbell
#: batching) about 290 are in flight (Little's law); 512 keep the pool from limiting
#: the rate (with 256 the batching rung's ii went from 4.55 to 4.89 cycles).
#: ``timeout``: the transport timeout in cycles, 2**30 (1.07 s at 1 GHz): 4.096 us *
#: 2**18, the IBTA local ACK timeout at LocalAckTimeout = 18 (IBTA Vol 1 section
#: 9.7.6.1.3), NCCL's default ``NCCL_IB_TIMEOUT`` of 18 (NVIDIA/nccl v2.19.1,
#: src/transport/net_ib.cc, ``NCCL_PARAM(IbTimeout, "IB_TIMEOUT", 18)``), next to UCX's
#: ``UCX_RC_TIMEOUT`` of 1.0 s (openucx/ucx, src/uct/ib/rc/base/rc_iface.c,
#: ``{"TIMEOUT", "1.0s", "Transport timeout"}``). A deployed RC timer is set far above the
#: round trip, as a last resort: NAKs repair losses, the timer only a loss at a window's
#: tail. Runs that lose frames in simulation pass a short one (:data:`SIM_TIMEOUT`).
#: ``windows``: slots of the per-QP window table (each QP's window head, tail, count,
#: timer and retries, in the slot ``qpn % windows``; docs/rdma.md, "Window state per
#: QP"). 4096 by default, one slot per QP of the engine's QP space (the host's context
#: table holds QPs 0 to 4095, ``pymodel.rdma.verbs``): the window state lives apart from
#: the QP context, so a context may be evicted once its frames have left while its
#: messages wait for their ACK, the split SRNIC argues for (Wang et al., "SRNIC: A
#: Scalable Architecture for RDMA NICs", NSDI 2023: the small per-connection state the
#: transport needs on every ACK kept on chip, the context cached). 70 bits a slot with
#: 512 records, 35 KiB at 4096 slots; the timer scan visits one slot a cycle, so an
#: expiry is seen up to 4096 cycles after it is due. A power of two from the cache's
#: entries up shares a slot between QPs equal modulo ``windows`` (they take turns); 0
#: keeps one slot per cache entry (the slot is the QP's entry, and a QP's context stays
#: pinned in the cache until its last message is acknowledged, so with more QPs than
#: entries the rate follows the round trip: 16 entries a round trip).
#: ``miss_queue``: work items whose context fill is on its way that may step aside so
#: that items of present contexts pass them (:class:`rtl.rdma.req.miss_queue.MissQueue`;
#: docs/rdma.md, "Non-blocking context misses"); 0 (no side queue, an item waits at the
#: head of the ``fetch`` FIFO for its fill) keeps the published figures, which were
#: measured without one.
REQUESTER_SIZES = dict(prefetch=MAX_PREFETCH, wqe_words=256, payload_words=512,
                       records=512, timeout=1 << 30, retry_limit=7, windows=4096,
                       miss_queue=0)
#: Rewinds that may be pending at once (decided, their walk not yet ended), each of
#: another QP's window. A rewind walks one record a cycle and waits for its own QP's
#: work in the pipeline (a round of the pipeline, some hundred cycles over PCIe), so a
#: few pending cover the QPs that lose frames in one such stretch; a ninth waits (its
#: NAK at the head of the ACK queue, its timer until the scan comes back). 8 is a
#: choice, not a measured optimum: the NAK storm tests (four to eight QPs losing frames
#: at once) never fill it.
REWIND_QUEUE = 8
#: The range of ``miss_queue``. Up to 64: each side-queued item holds a context fill in
#: flight, and the cache's fill-order FIFO and the ``rd_fill`` FIFO bound those; past a
#: round trip's worth of misses (the ``fetch`` FIFO's Little's-law sizing below) a deeper
#: side queue only holds items longer.
MISS_QUEUE_RANGE = (0, 64)
#: The associativities a context cache can be built with (``cache_ways``, ways per set).
CACHE_WAYS = (1, 2, 4, 8)
#: The entries a context cache can be built with (a power of two).
CACHE_ENTRIES_RANGE = (16, 256)


def check_cache_ways(ways, entries, what="entries"):
    """``ways`` if it is one of :data:`CACHE_WAYS` and divides ``entries``, else
    ``ValueError`` naming ``cache_ways``."""
    if isinstance(ways, bool) or ways not in CACHE_WAYS or entries % ways:
        raise ValueError(f"cache_ways must be one of {CACHE_WAYS} and divide the "
                         f"{entries} {what}, not {ways!r}")
    return ways


@dataclasses.dataclass(frozen=True)
class ContextCacheShape:
    """The geometry of a QP-context cache as built, one value for the blocks that size
    themselves by it: the requester and the responder (each builds its
    :class:`rtl.rdma.context_cache.ContextCache` of this shape), the requester's
    completion unit (its window slots and probes) and their twins.

    ``entries``: the entries built (a power of two in :data:`CACHE_ENTRIES_RANGE`; the
    run-time port ``cache_log2`` says how many are in use). ``ways``: ways per set
    (:data:`CACHE_WAYS`); 1, a direct-mapped cache, by default: the design every figure
    of docs/rdma.md was measured with (more ways cost a tag comparator per way and
    ``ways - 1`` pseudo-LRU bits per set; docs/rdma.md, "Associative context cache").
    Both engines of a top have one shape, built by :meth:`of` from the top's parameters
    ``cache_entries`` and ``cache_ways``. ``ValueError`` naming the parameter for a bad
    field (:func:`check_cache_ways`)."""
    entries: int = 16
    ways: int = 1

    def __post_init__(self):
        check_power_of_two("cache_entries", self.entries, *CACHE_ENTRIES_RANGE,
                           "QP-context cache entries")
        check_cache_ways(self.ways, self.entries)

    @classmethod
    def of(cls, params):
        """The shape of a top's parameters ``params`` (a mapping with ``cache_entries``,
        the entries built, and ``cache_ways``)."""
        return cls(params["cache_entries"], params["cache_ways"])


def check_cache_shape(cache):
    """The :class:`ContextCacheShape` a block is given as ``cache``: the default shape for
    None, else ``cache`` itself if it is one; ``ValueError`` naming ``cache`` otherwise."""
    if cache is None:
        return ContextCacheShape()
    if not isinstance(cache, ContextCacheShape):
        raise ValueError(f"cache must be a ContextCacheShape (spec.rdma_engine), not "
                         f"{cache!r}")
    return cache


def check_ways_windows(knobs):
    """``ValueError`` unless the requester's ``windows`` of ``knobs`` (a point's fields and
    the requester's sizes) hold a cache of its ``cache_ways``: with ``windows`` 0 a
    window slot is a cache entry, so the cache is direct mapped."""
    if knobs["cache_ways"] > 1 and knobs["windows"] == 0:
        raise ValueError(f"cache_ways {knobs['cache_ways']} needs windows > 0 (with "
                         f"windows 0 a window slot is a cache entry)")


#: The requester's build parameters as the tops take them: its sizes and its context
#: cache's ways (:class:`ContextCacheShape`, with the tops' ``cache_entries``).
REQUESTER_DEFAULTS = dict(REQUESTER_SIZES, cache_ways=ContextCacheShape().ways)


#: Depths of the FIFOs between the requester's stages. ``batch`` and ``segs`` hold the
#: descriptors of WQE reads and payload reads while their data is on its way, ``fetch``
#: the work items whose context fills are on their way, ``bf`` the words of WQEs written
#: by MMIO until the sequencer takes them (three words for a 128-byte inline WQE): over
#: PCIe (about 565 cycles a read) at one message every 4 to 6 cycles, about 100 to 140
#: of each are outstanding (Little's law), so ``batch`` and ``fetch`` are 128 deep and
#: ``bf`` 512 words. A payload read's descriptor stays in ``segs`` from its read to its
#: frame (about 570 to 600 cycles), and with doorbell batching a one-word WRITE goes out
#: every 3 cycles (its 3 wire beats): about 200 outstanding, so ``segs`` is 256, the
#: read tags of the ``pcie`` profile (more reads can not be out at once). At 128 the
#: descriptors, not the link or the host interface, set the batching rung's rate at
#: small sizes (one message per 128 / 590 cycles), below the pipelined rung's at one
#: word. The others only decouple neighbouring stages.
FIFO_DEPTHS = dict(items=16, bf=512, fetch=128, resend=4, batch=128, jobs=16, inline=16,
                   segs=256, recs=16, cqes=16, rd_fill=4, rd_wqe=4, rd_pay=4, wr_wb=4,
                   wr_cqe=4)
#: Counters of the requester, in port order.
REQUESTER_COUNTERS = (INTAKE_COUNTERS + ("items", "ctx_stalls", "evict_inflight")
                      + CACHE_COUNTERS
                      + ("wqe_reads", "wqes", "wqe_words_max", "sequenced", "doorbell_err_qp",
                         "payload_reads", "payload_words_max", "frames", "retransmissions")
                      + COMPLETION_COUNTERS + ("cqe_writes", "acks", "ack_dropped",
                                               "ack_lost", "ack_wait_cycles",
                                               "ack_coalesced"))

# -- Optimisations and the headline ladder ------------------------------------------------

#: What the host and the engine do per message, and their defaults (no optimisation):
#: ``serial`` (1: one message in flight at a time, the engine's front waits until
#: everything is done), ``ring_every`` (doorbell batching: one doorbell per that many WQEs
#: of a QP), ``bf`` (each WQE written by MMIO into the BlueFlame buffer, which rings for
#: it: no WQE read), ``inline`` (the payload carried in the WQE: no payload read; the
#: send queue's slots grow to 256 bytes), ``signal_every`` (one signalled WQE, with a
#: CQE, per that many; the last WQE of a run is always signalled), ``ack_every`` and
#: ``ack_frames`` (ACK coalescing: AckReq on the last frame of every n-th message, or
#: after m frames; 0 and 1: every message).
RUNG_KNOBS = dict(serial=0, ring_every=1, bf=0, inline=0, signal_every=1, ack_every=1,
                  ack_frames=0)
#: ACK coalescing of the ladder's last rung: AckReq on every 16th message, and at least
#: every 64 frames (Linux rxe asks for an ACK at least every 64 packets).
ACK_COALESCE = dict(ack_every=16, ack_frames=64)
#: The optimisation ladder of the ``make sim`` headline: each rung adds one optimisation
#: that real RNICs use. Unsignalled: one CQE per 64 WQEs (UCX's default for its RC
#: transports). Doorbell batching: 16 WQEs per doorbell.
LADDER = (
    ("sequential", dict(serial=1)),
    ("pipelined", dict()),
    ("+doorbell batching 16", dict(ring_every=16)),
    ("+WQE by MMIO, inline", dict(bf=1, inline=1)),
    ("+unsignalled 1/64", dict(bf=1, inline=1, signal_every=64)),
    ("+ACK coalescing", dict(bf=1, inline=1, signal_every=64, **ACK_COALESCE)),
)

# -- The responder and the top ---------------------------------------------------------------

#: The responder's sizes (:class:`spec.rdma_responder.ResponderSizes`, with the reasoning
#: behind each) and counters, in port order.
RESPONDER_DEFAULTS = dataclasses.asdict(ResponderSizes())
RESPONDER_COUNTERS = _RESPONDER_COUNTERS

#: Host-memory words of each node in the co-simulation (4 MiB): room for 4096 QP
#: contexts of the default 256 bytes (1 MiB, :data:`spec.formats.roce.QPC_BYTES_DEFAULT`),
#: their send queues with 256-byte slots (WQEs with inline data, 1 MiB), a CQ and the
#: payload buffers of a few thousand messages.
HOST_DEPTH = 1 << 16
#: Default parameters of :class:`rtl.tops.rdma_top.RdmaTop`. ``cache_entries``: the
#: context caches' capacity; the run-time port ``cache_log2`` says how many are in use
#: (16 to 256), so that one build serves every cache size. ``host``: the host-interface
#: profile of both nodes (:data:`spec.host.PROFILES`). ``link_latency``: 6 cycles one way,
#: the node-to-node delay of the NIC headline (2-cycle link, 2-cycle switch, 2-cycle
#: link), so that both designs are measured on the same terms. ``mmio``, ``inject``:
#: player depths (MMIO words, injected beats); ``wire_beats``, ``events``: recorder
#: depths. ``header``: the framing, ``"roce"`` (Ethernet/IPv4/UDP) or ``"scaleup"`` (the
#: 10-byte scale-up header of :mod:`spec.formats.scaleup`); RoCEv2 is the default, the
#: protocol the engine implements (IBTA Annex A17). Node B's MR table: the parameters of
#: :class:`spec.rdma_responder.MrTableShape` (its defaults: 16 MRs, on chip). The
#: requester's and the responder's sizes as above. ``read_words``: 0, node B's responder
#: without RDMA READ and atomics (the design of every figure); else the words of its READ data FIFO
#: (:data:`spec.rdma_responder.READ_WORDS_RANGE`; docs/rdma.md, "RDMA READ and atomics
#: at the responder"). ``reads``: 0, node A's requester without RDMA READ and atomics
#: (the design of every figure); else the slots of its table of outstanding READs and
#: atomics (:data:`spec.rdma_read_req.SLOTS_RANGE`; docs/rdma.md, "RDMA READ and atomics
#: at the requester").
TOP_DEFAULTS = dict(cache_entries=256, depth=HOST_DEPTH, host="pcie", link_latency=6,
                    header="roce", read_words=0, reads=0, **MrTableShape().params(),
                    mmio=8192, inject=1024, wire_beats=16384, events=4096,
                    **REQUESTER_DEFAULTS, **RESPONDER_DEFAULTS)
