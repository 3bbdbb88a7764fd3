"""Sizing rules, counter names and defaults of the NIC's memory operations (loads and
atomics). Wire formats: :mod:`spec.formats.nic_mem`; design: docs/nic.md, "Loads and
atomics".

Imported by the RTL top (:class:`rtl.tops.nic_mem_top.NicMemTop`), its golden model
(:mod:`pymodel.nic.mem_system`) and the testbench.
"""

from spec.fabric_profiles import fabric_profile, round_trip
from spec.formats.nic_mem import MAX_TAGS, TAG_BITS, MemOp
from spec.host import ON_DIE

__all__ = ["MEM_COUNTERS", "MEM_RX_COUNTERS", "MEM_RESP_COUNTERS", "MEM_OPS", "OP_NAMES",
           "default_tags", "check_tags", "tag_entry_bits", "TAG_MARGIN", "MEM_TOP_DEFAULTS",
           "request_queue_depth", "TARGET_LEVEL_LATENCY", "TARGET_LEVEL_READS",
           "MAX_TARGET_LATENCY", "MAX_TARGET_READS", "check_target"]

#: The level field's read latency of the target memory (cycles): the engine's responder
#: reads the ``on_die`` host memory of its load and READ rows in this many cycles.
#: Ref: spec.host.ON_DIE.read_latency (an assumption stated there: HBM as an engine
#: with its own port into the memory system sees it).
TARGET_LEVEL_LATENCY = ON_DIE.read_latency
#: Reads of the target memory in flight at the level field: what the engine's responder
#: keeps in flight at that host. Ref: docs/rdma.md, "RDMA READ and atomics at the
#: requester": one READ every 152 to 154 cycles against 300-cycle host reads, so by
#: Little's law 300 / 153 = 2 reads in flight (its atomics fence: one).
TARGET_LEVEL_READS = 2
#: Bounds of the target memory's parameters (a choice: the largest host read latency
#: of spec.host's profiles is 560, and 16 slots is more than any engine figure needs).
MAX_TARGET_LATENCY = 4096
MAX_TARGET_READS = 16


def check_target(target_latency, target_reads):
    """``(target_latency, target_reads)`` if each is an int in its range (0 to
    :data:`MAX_TARGET_LATENCY`, 1 to :data:`MAX_TARGET_READS`); ``ValueError`` naming
    the one that is not."""
    for name, v, lo, hi in (("target_latency", target_latency, 0, MAX_TARGET_LATENCY),
                            ("target_reads", target_reads, 1, MAX_TARGET_READS)):
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {v!r}")
    return target_latency, target_reads

#: Per-node counters of NicMemTop (ports ``cnt_rx[p].<name>`` and ``cnt_resp[p].<name>``,
#: the receiver's and the responder's): the receiver's drops by
#: reason (bad FCS; malformed: wrong size, opcode, op or EtherType; another node's
#: frame; a response whose tag is not outstanding, from another node than the one asked,
#: or whose length is not the one asked),
#: then the responses landed at the requester (OK, ERROR) and the requests answered by
#: the responder (OK, ERROR: out of bounds, misaligned or a bad length), and the
#: requests dropped at a full request queue (only a node that sends more requests than
#: it has tags can fill it).
MEM_RX_COUNTERS = ("drop_fcs", "drop_malformed", "drop_dst", "drop_tag", "rsp_ok",
                   "rsp_err")
MEM_RESP_COUNTERS = ("req_ok", "req_err", "drop_full")
MEM_COUNTERS = MEM_RX_COUNTERS + MEM_RESP_COUNTERS

#: ``--op`` of ``make sim ARGS="--design nic ..."``: stores (the NicTop points), loads,
#: or atomics (fetch-and-add; NicMemTop).
MEM_OPS = ("write", "load", "atomic")
#: The request op of each ``--op`` value that is a memory operation.
OP_NAMES = {"load": MemOp.LOAD, "atomic": MemOp.FETCH_ADD}

#: Cycles added to the fabric's round trip when sizing the tag table: the blocks' own
#: cycles (the target's verdict and queue, the requester's verdict, queue and the
#: response's beats) are a few; 16 keeps the rule a round number above them.
TAG_MARGIN = 16

#: Defaults of NicMemTop: 4 nodes, 16 KB local memories, 256-byte loads at most (the
#: largest UALink request, Ref: UALink 200G 1.0 Specification (2025): 64 to 256-byte
#: requests).
MEM_TOP_DEFAULTS = dict(nodes=4, mem_words=256, max_payload=256)


def default_tags(fabric):
    """Tags of a requester on ``fabric`` by Little's law: requests in flight = rate x
    time. At the requester's peak rate, one request frame a cycle (a request is one
    64-byte beat), over the profile's round trip (:func:`spec.fabric_profiles.
    round_trip`) plus :data:`TAG_MARGIN`, rounded up to a power of two and capped at
    :data:`spec.formats.nic_mem.MAX_TAGS` (2,048: UALink 1.0's 11-bit tag)."""
    need = round_trip(fabric_profile(fabric)) + TAG_MARGIN
    return min(MAX_TAGS, 1 << (need - 1).bit_length())


def check_tags(tags):
    """``tags`` if it is an int from 1 to :data:`MAX_TAGS`; ``ValueError`` naming it."""
    if not isinstance(tags, int) or isinstance(tags, bool) or not 1 <= tags <= MAX_TAGS:
        raise ValueError(f"tags must be an integer from 1 to {MAX_TAGS} (an {TAG_BITS}-bit "
                         f"tag), not {tags!r}")
    return tags


def tag_entry_bits(mem_words):
    """Requester state per outstanding operation (one tag-table entry): the busy and
    pending bits, the local word address where the data lands (``bits(mem_words - 1)``),
    the length (13), the op (3) and the node asked (8)."""
    return 2 + max(1, (mem_words - 1).bit_length()) + 13 + 3 + 8


def request_queue_depth(nodes, tags):
    """Requests a target's queue holds: every tag of every other node, so that it never
    fills (a requester has at most ``tags`` requests outstanding)."""
    return max(2, (nodes - 1) * tags)
