"""Sizes and counter names of the pipelined responder, shared by the RTL and its twin.

# Ref: docs/rdma.md "The responder" for the stages and checks, "Per-QP transport state
# and recovery" for the counters.

Why the defaults are what they are (cycles of the 1 GHz clock, 64-byte beats)
-----------------------------------------------------------------------------
The requester sends one 128-byte RDMA WRITE ONLY frame (206 bytes: 4 beats) every 4
cycles. With context hits every stage of the responder needs at most 2 cycles for such a
frame (the payload writer: 2 words; the ACK sender: 2 beats), so it keeps up with room to
spare and drains a backlog at 1/2 - 1/4 = 1/4 frame per cycle.

A context miss stops the verify stage until the fill returns. Over the host interface's
``pcie`` profile a fill takes 1 cycle in the fill FIFO, 1 in the read queue, 560 of read
latency and 2 of completion (64 bytes + 20 bytes of overhead at 63 bytes per cycle): the
frame that missed is verified about 565 cycles after its lookup, and a few cycles more
when the up direction is busy with a write TLP. Meanwhile frames keep arriving every 4
cycles: about 142 frames of 128 bytes, each holding one header entry or verify job and 2
beats of the payload FIFO (its beats 2 and 3; beats 0 and 1 travel with the header).

* :data:`RX_BEATS` = 512 payload beats: a frame's first beat needs room for the largest
  frame's :data:`REST_MAX` = 64 payload beats, so (512 - 64) / 2 = 224 frames of 128
  bytes fit, 1.6 times the 142 of a PCIe miss.
* :data:`RX_FRAMES` = 64 header entries plus :data:`JOBS` = 192 verify jobs: 256 frames
  between the link and the verify stage (a frame moves from the first to the second one
  cycle after it is whole, as long as its lookup is taken). The lookups run up to 192
  frames ahead of the verify stage, which is what lets several fills be outstanding.
* The small FIFOs between the other stages only decouple them (each stage moves at most
  one item per cycle): 4 entries each.

The payload FIFO is the binding limit at 128 bytes; at 4096-byte frames (66 beats every
66 cycles) a 565-cycle miss needs about 9 frames = 576 beats, so a PCIe miss at the wire
rate with the largest MTU needs ``rx_beats`` of 640 or more (not the default).
"""

import dataclasses

from spec.checks import check_power_of_two
from spec.formats.roce import PSN_BITS, QPN_BITS
from spec.rdma import DROP_REASONS, MAX_FRAME_BEATS, SEQUENCE_COUNTERS

__all__ = ["ResponderSizes", "SIZE_LIMITS", "REST_MAX", "HEAD_BYTES", "MAX_FRAME_BEATS",
           "RESP_GROUP",
           "DROP_REASONS", "SEQUENCE_COUNTERS", "RESPONDER_COUNTERS", "HIGH_WATER",
           "RX_BEATS", "RX_FRAMES", "JOBS", "SR_WINDOW", "MR_CACHE_RANGE", "MR_READ_ID",
           "MR_CACHE_COUNTERS", "check_mr_cache", "MrTableShape", "MrTableFields",
           "check_mr_table",
           "mr_table_base", "READ_DATA_ID",
           "READ_COUNTERS", "READ_WORDS_RANGE", "check_read_words", "build_counters",
           "read_packets",
           "IRD", "ATOMIC_QPS", "saved_atomic_bits"]

#: Beats of one frame that go to the payload FIFO at most: every beat but the first two
#: (those travel in the header entry), of a frame of at most MAX_FRAME_BEATS beats.
REST_MAX = MAX_FRAME_BEATS - 2
#: Bytes of frame beats 0 and 1 that the header entry hands on to the payload writer:
#: beat 0 from byte 54 (the end of a header without RETH) and all of beat 1.
HEAD_BYTES = 64 - 54 + 64

#: The QP-context fields the verify stage owns (its dynamic group in the context cache).
RESP_GROUP = ("expected_psn", "nak_sent", "msn", "resp_va", "resp_left")

#: Selective repeat (the responder's run-time port ``selective``): PSNs after the expected
#: one that the verify stage tracks per cache entry, one bit each (docs/recovery.md,
#: "RDMA: selective repeat"). IRN (Mittal et al., SIGCOMM 2018, "Revisiting network
#: support for RDMA") keeps such a bitmap per QP and caps a QP's packets in flight at the
#: bandwidth-delay product so that the bitmap covers them. Here a loss is NAKed and its
#: message resent after the requester's PCIe reads (WQE and payload, 2 x 560 cycles,
#: :data:`spec.host.PROFILES`): a QP sending a 128-byte frame every 4 cycles alone would
#: send ~280 frames meanwhile, 8 QPs in turn ~35 each; 32 bits (a word per entry) cover
#: the shared case. This engine has no per-QP send cap: a requester whose window reaches
#: further than SR_WINDOW PSNs past the loss goes back N instead.
SR_WINDOW = 32

#: The MR table in host memory behind an on-chip MR cache (the responder's ``mr_cache``
#: parameter): 0 keeps today's on-chip table (the default); otherwise the cache's
#: entries, a power of two in this range. A real RNIC keeps its memory-protection table
#: in host memory behind such a cache: mlx5 keeps its MKey contexts (``mlx5_ifc_mkc_bits``,
#: 64 bytes, include/linux/mlx5/mlx5_ifc.h) in ICM, host memory the device caches, so an
#: MKey miss costs a PCIe read; here one MR is one 64-byte host word (:data:`MR_LAYOUT
#: <spec.formats.roce.MR_LAYOUT>`), and a miss a one-word read.
MR_CACHE_RANGE = (2, 256)
#: ``id`` of the responder's MR reads on its host read port (context fills use 0): the
#: read data carries it back, so that each word goes to the context cache or the MR cache.
MR_READ_ID = 1
#: The MR cache's counters (ports of the responder when ``mr_cache`` > 0, not part of
#: :data:`RESPONDER_COUNTERS`, so that rows without the option keep their keys):
#: FIRST/ONLY frames verified (each looks its rkey up once), and MR reads issued.
MR_CACHE_COUNTERS = ("mr_lookups", "mr_misses")


def check_mr_cache(mr_cache):
    """``mr_cache`` if it is 0 or a power of two in :data:`MR_CACHE_RANGE`, else
    ``ValueError`` naming ``mr_cache``."""
    return check_power_of_two("mr_cache", mr_cache, *MR_CACHE_RANGE, "MR cache entries",
                              zero="the on-chip MR table")


@dataclasses.dataclass(frozen=True)
class MrTableShape:
    """The responder's MR table as built, one value for the responder, its verify stage
    and their twins. ``entries``: the MRs (entry ``rkey % entries``; a power of two from
    2 to 256, the tops' parameter ``mr_entries``). ``cache``: 0, the table on chip (the
    default, the design of every figure); else the table in host memory
    (:func:`mr_table_base`) behind a direct-mapped MR cache of ``cache`` lines (the tops'
    parameter ``mr_cache``, :func:`check_mr_cache`). :meth:`of` builds it from a top's
    parameters and :meth:`params` gives them back (the tops' defaults); ``ValueError``
    naming the parameter for a bad field."""
    entries: int = 16
    cache: int = 0

    def __post_init__(self):
        check_power_of_two("mr_entries", self.entries, 2, 256, "MR table entries")
        check_mr_cache(self.cache)

    @property
    def in_host(self):
        """Whether the table is in host memory, behind an MR cache."""
        return bool(self.cache)

    @classmethod
    def of(cls, params):
        """The shape of a top's parameters ``params`` (a mapping)."""
        return cls(params["mr_entries"], params["mr_cache"])

    def params(self):
        """The tops' parameters of this shape (:meth:`of` reads them)."""
        return dict(mr_entries=self.entries, mr_cache=self.cache)

    def check_reads(self, read_words):
        """``ValueError`` if a responder with RDMA READ (``read_words`` > 0) would have
        this table in host memory: READ and the atomics need it on chip."""
        if read_words and self.cache:
            raise ValueError("read_words (RDMA READ and atomics) needs the on-chip MR "
                             "table (mr_cache 0)")


@dataclasses.dataclass(frozen=True)
class MrTableFields:
    """The MR table's fields of a configuration of the tops' parameters (the base of the
    golden model's :class:`pymodel.rdma.engine_config.EngineConfig`), with
    :class:`MrTableShape`'s defaults: ``mr_entries`` and ``mr_cache``, the parameters of
    :meth:`MrTableShape.of`. :attr:`mr_shape` is the shape they give (``ValueError``
    naming the field for a bad one)."""
    mr_entries: int = MrTableShape.entries
    mr_cache: int = MrTableShape.cache

    @property
    def mr_shape(self):
        """The responders' MR table as built (:class:`MrTableShape`)."""
        return MrTableShape(self.mr_entries, self.mr_cache)


def check_mr_table(mr):
    """The :class:`MrTableShape` a block is given as ``mr``: the default shape for None,
    else ``mr`` itself if it is one; ``ValueError`` naming ``mr`` otherwise."""
    if mr is None:
        return MrTableShape()
    if not isinstance(mr, MrTableShape):
        raise ValueError(f"mr must be an MrTableShape (spec.rdma_responder), not {mr!r}")
    return mr


def mr_table_base(depth, mr_entries):
    """Word address of the MR table in a host memory of ``depth`` words when ``mr_cache``
    > 0: its last ``mr_entries`` words (MR ``rkey % mr_entries`` at ``mr_table_base +
    rkey % mr_entries``), above every buffer a scenario allocates from the bottom."""
    return depth - mr_entries


#: ``id`` of the responder's reads of RDMA READ data (context fills 0, MR reads
#: :data:`MR_READ_ID`): the read data carries it back to the READ data FIFO.
READ_DATA_ID = 2
#: The responder's ``read_words`` parameter: 0 (the default) builds a responder without
#: RDMA READ (a READ request is ``malformed``, as any opcode it does not execute), else
#: the depth in 64-byte words of the FIFO that holds READ data between its host read
#: and its response frame, a power of two in this range. At least one response packet of
#: the largest path MTU (4096 bytes, 64 words) must fit. Reads are issued only for words
#: that fit (read data has no backpressure), so ``read_words`` bounds the READ data in
#: flight: at the ``pcie`` profile's 560-cycle reads (:data:`spec.host.PROFILES`) 256
#: words keep about 256 / 560 words a cycle (29 B/cycle) coming (Little's law).
READ_WORDS_RANGE = (64, 1024)
#: Counters of the READ and atomic path (ports of the responder when ``read_words`` > 0,
#: not part of :data:`RESPONDER_COUNTERS`, so that rows without READ keep their keys):
#: READ requests executed (first time or repeated), READ RESPONSE frames sent, atomics
#: executed, repeated atomics answered from their saved result.
READ_COUNTERS = ("read_reqs", "read_frames", "atomics", "atomic_replays")
#: Saved atomic results (the responder's resources for atomics, IBTA's responder
#: resources, the IRD): per QP the QPN, PSN and original value of that QP's last ``IRD``
#: atomics executed, replaced in turn; a repeated atomic (PSN behind the expected one)
#: found among its QP's is answered with the saved value and not executed again, one not
#: found is dropped (IBTA Vol 1 section 9.7.5.1.1 and o9-28: a duplicate atomic must not
#: be executed again; Linux rxe drops one whose resource it no longer holds, rxe_resp.c
#: ``duplicate_request``). The rule: a result may be discarded once its QP's requester
#: can no longer repeat it. A requester repeats only operations it still waits for, at
#: most its ORD of them per QP, and completes them in order, so when a QP's atomic is
#: followed by ``IRD`` >= ORD later atomics of the same QP it has completed. 16, as
#: the ORD of the requester (:data:`spec.rdma_read_req.ORD_DEFAULT`) and the responder
#: resources mlx5 reports per QP (``max_qp_rd_atom`` 16 in ``ibv_devinfo -v`` of ConnectX
#: adapters; Linux mlx5 sets it to ``1 << log_max_ra_req_qp``,
#: drivers/infiniband/hw/mlx5/main.c; rxe keeps ``max_dest_rd_atomic`` resources per QP,
#: rxe_resp.c).
IRD = 16
#: Rows of the saved results: QP ``qpn`` keeps its ``IRD`` results in row ``qpn %
#: ATOMIC_QPS``, one row per QP of the engine's QP space (4096, as the requester's
#: ``windows``, :data:`spec.rdma_engine.TOP_DEFAULTS`). Each result carries the QPN bits
#: above the row (a tag), so QPs equal modulo ``ATOMIC_QPS`` share a row's ``IRD`` results
#: and never read each other's.
ATOMIC_QPS = 4096


def saved_atomic_bits():
    """The bits of one QP's saved atomic results as built in rtl/rdma/resp/verify.py:
    ``IRD`` results of (valid, the QPN bits above the row, PSN, the 64-bit original value)
    and the row's next-slot pointer."""
    tag = QPN_BITS - (ATOMIC_QPS - 1).bit_length()
    return IRD * (1 + tag + PSN_BITS + 64) + (IRD - 1).bit_length()


def check_read_words(read_words):
    """``read_words`` if it is 0 or a power of two in :data:`READ_WORDS_RANGE`, else
    ``ValueError`` naming ``read_words``."""
    lo, hi = READ_WORDS_RANGE
    if (not isinstance(read_words, int) or isinstance(read_words, bool)
            or not (read_words == 0 or lo <= read_words <= hi)
            or read_words & (read_words - 1)):
        raise ValueError(f"read_words must be 0 (no RDMA READ) or a power of two from {lo} "
                         f"to {hi} (READ data FIFO words), not {read_words!r}")
    return read_words


def build_counters(mr, read_words):
    """The counters a responder of MR table ``mr`` (:class:`MrTableShape`) and
    ``read_words`` has besides :data:`RESPONDER_COUNTERS`: ``{"mr": MR_CACHE_COUNTERS}``
    with an MR cache, ``{"read": READ_COUNTERS}`` with RDMA READ, in that order (a top's
    ports ``resp_<key>``); ``ValueError`` naming a bad parameter
    (:func:`check_read_words`, :meth:`MrTableShape.check_reads`)."""
    out = {}
    check_read_words(read_words)
    check_mr_table(mr).check_reads(read_words)
    if mr.in_host:
        out["mr"] = MR_CACHE_COUNTERS
    if read_words:
        out["read"] = READ_COUNTERS
    return out


def read_packets(dma_length, pmtu_log2):
    """READ RESPONSE packets (and PSNs) of an RDMA READ of ``dma_length`` bytes at a path
    MTU of ``2**pmtu_log2`` bytes: ``ceil(dma_length / MTU)``, and 1 for a zero-length
    READ (one READ RESPONSE ONLY without payload). Ref: IBTA Vol 1 section 9.7.4.1.3
    (the responder segments READ data at the path MTU) and 9.5 (a READ request
    consumes one PSN per response packet)."""
    return max(1, -(-dma_length >> pmtu_log2))


RX_BEATS = 512
RX_FRAMES = 64
JOBS = 192

#: High-water marks (most entries ever held): payload beats, header entries, verify jobs.
HIGH_WATER = ("rx_beats_max", "rx_frames_max", "jobs_max")
#: Every counter port of the responder, in port order.
RESPONDER_COUNTERS = (("frames_ok", "acks", "words", "lookups", "misses", "writebacks",
                       "fills_max") + DROP_REASONS + SEQUENCE_COUNTERS + HIGH_WATER
                      + ("sr_placed",))

#: ``field: (low, high)`` of every size.
SIZE_LIMITS = dict(rx_beats=(REST_MAX, 1 << 16), rx_frames=(1, 4096), jobs=(1, 1024),
                   write_jobs=(1, 64), ack_jobs=(1, 64), words=(1, 64), fills=(1, 64),
                   writebacks=(1, 64))


@dataclasses.dataclass(frozen=True)
class ResponderSizes:
    """FIFO depths of the responder (entries). See the module docstring for the defaults.

    ``rx_beats``: payload beats (frame beats 2 and later); ``rx_frames``: header entries
    (whole frames received, not yet looked up); ``jobs``: frames looked up, not yet
    verified; ``write_jobs``: verified frames waiting for the payload writer;
    ``ack_jobs``: ACK/NAKs waiting for the ACK sender; ``words``: payload words waiting
    for the write arbiter; ``fills``: context fill reads waiting for ``rd_req``;
    ``writebacks``: context write-backs waiting for the write arbiter.
    """
    rx_beats: int = RX_BEATS
    rx_frames: int = RX_FRAMES
    jobs: int = JOBS
    write_jobs: int = 4
    ack_jobs: int = 4
    words: int = 4
    fills: int = 4
    writebacks: int = 4

    @classmethod
    def of(cls, sizes):
        """A ``ResponderSizes`` from a dict of fields (missing ones: the defaults).

        Raises ``ValueError`` naming an unknown field or a value out of
        :data:`SIZE_LIMITS`.
        """
        for name, value in sizes.items():
            if name not in SIZE_LIMITS:
                raise ValueError(f"unknown responder size {name!r} (sizes: "
                                 f"{', '.join(SIZE_LIMITS)})")
            low, high = SIZE_LIMITS[name]
            if not isinstance(value, int) or isinstance(value, bool) \
                    or not low <= value <= high:
                raise ValueError(f"responder size {name!r} must be an integer from {low} "
                                 f"to {high}, not {value!r}")
        return cls(**sizes)
