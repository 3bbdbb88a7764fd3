"""State bits per QP (RDMA) and per peer and per link (NIC), from the layouts and the
components' own signals and memories: no figure here is a literal."""

from .catalogue import NIC, RDMA, build

__all__ = ["state_bits"]

_MR = RDMA["mr_entries"]


def _field_bits(layout, reserved=False):
    return sum(field.width for name, field in layout
               if name.startswith("resv") == reserved)


def state_bits():
    """State per QP (RDMA) and per peer and per link (NIC), from the layouts and the
    components' own signals: no figure here is a literal."""
    from amaranth import Elaboratable, Shape
    from amaranth.lib import memory

    from rtl.nic.window_table import SOURCES, window_table_bits
    from rtl.rdma.context_cache import ContextCache
    from rtl.rdma.req.ack_queue import AckQueue
    from rtl.rdma.req.completion import CompletionUnit
    from rtl.rdma.req.qp_front import QpFront
    from rtl.tops.area_wrappers import nic_part
    from spec.checks import silence
    from spec.formats.roce import HOST_WORD_BYTES, MR_LAYOUT, QPC_BYTES_DEFAULT, QPC_LAYOUT
    from spec.rdma_engine import REQUESTER_DEFAULTS, ContextCacheShape
    from spec.rdma_read_req import ORD_DEFAULT
    from spec.rdma_read_req import slot_bits as read_slot_bits
    from spec.rdma_responder import RESP_GROUP

    def memories(component):
        """name -> (width, depth) of the memories that ``component``'s elaboration holds
        (read from the Module's named submodules; Amaranth is pinned at 0.5)."""
        m = component.elaborate(None)
        silence(component, m)                     # elaborated here only to be looked at
        mems = {}
        for name, (sub, _) in m._named_submodules.items():
            silence(sub)
            if isinstance(sub, memory.Memory):
                mems[name] = (Shape.cast(sub.shape).width, sub.depth)
        return mems

    def count(obj, cls, seen):
        """Instances of ``cls`` held by ``obj`` (through attributes and lists)."""
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            return sum(count(o, cls, seen) for o in obj)
        if isinstance(obj, cls):
            return 1
        if isinstance(obj, Elaboratable):
            return sum(count(o, cls, seen) for o in vars(obj).values())
        return 0

    cache_mems = memories(build("qpc_cache_16"))
    entry_bits = sum(width for width, _ in cache_mems.values())
    resp_cache_mems = memories(ContextCache(16, 1 << 15, {"resp": RESP_GROUP}))
    resp_entry_bits = sum(width for width, _ in resp_cache_mems.values())
    records = REQUESTER_DEFAULTS["records"]
    # The engine's window slots (0: one per cache entry, the slot is the entry).
    slots = REQUESTER_DEFAULTS["windows"]
    comp = CompletionUnit(ContextCacheShape(16), records, windows=slots)
    front = QpFront(16)
    comp_mems, front_mems = memories(comp), memories(front)
    # Per cache entry outside the cache: the front's item count and the completion
    # unit's count of items done and ERR QPN (with ``windows`` 0 also the window
    # pointers, counts, timer start and retry count of the entry's QP).
    per_entry = [w for w, d in list(comp_mems.values()) + list(front_mems.values())
                 if d == 16]
    entry_state = sum(per_entry)
    # Per window slot (one per QP of the QP space by default): the window's head and
    # tail record, count, timer start, retry count and pinned bit, held whether the
    # QP's context is cached or not.
    slot_bits = sum(w for w, d in comp_mems.values() if slots and d == slots) \
        if slots != 16 else 0
    record_bits = sum(w for w, d in comp_mems.values() if d == records)
    # Per window slot at the ACK queue: the slot's pending (coalesced) event and its
    # valid bit (memories of a word per slot), and its place in the queue of slots (a
    # FIFO of slot numbers with room for every slot: one slot number per slot).
    ack_mems = memories(AckQueue(16, windows=slots))
    ack_slot_bits = (sum(w for w, d in ack_mems.values() if d == slots)
                     + (slots - 1).bit_length()) if slots else 0
    tx = nic_part("tx", **dict(NIC, framing="compact"))
    cret = nic_part("credit_return", **dict(NIC, framing="compact"))
    switch = nic_part("switch", **dict(NIC, framing="compact"))
    counter_bits = len(tx.credits) + len(tx.underflow) + len(tx.overflow)
    table_width, table_depth = memories(switch)["table"]
    return {
        "rdma": {
            "qp_context_host_bits": 8 * QPC_BYTES_DEFAULT,
            "qp_context_word_bits": Shape.cast(QPC_LAYOUT).width,
            "qp_context_field_bits": _field_bits(QPC_LAYOUT),
            "qp_context_reserved_bits": _field_bits(QPC_LAYOUT, reserved=True),
            "host_word_bits": 8 * HOST_WORD_BYTES,
            "cache_entry_bits": entry_bits,
            "cache_entry_parts": {k: w for k, (w, _) in cache_mems.items()},
            "resp_cache_entry_bits": resp_entry_bits,
            "resp_cache_entry_parts": {k: w for k, (w, _) in resp_cache_mems.items()},
            "on_chip_bits_per_cached_qp": entry_bits + resp_entry_bits + entry_state,
            "entry_state_bits": entry_state,
            "window_slot_bits": slot_bits,
            "ack_slot_bits": ack_slot_bits,
            "window_slots": slots,
            "window_record_bits": record_bits,
            "window_records": records,
            "mr_entry_bits": Shape.cast(MR_LAYOUT).width,
            "mr_entries": _MR,
            # The requester's state per outstanding READ or atomic: a slot of the
            # response intake's table with its row of the age matrix, at ORD_DEFAULT
            # slots (the intake is not in the engine yet: docs/rdma.md).
            "read_op_bits": read_slot_bits(RDMA["depth"], ORD_DEFAULT),
            "read_op_slots": ORD_DEFAULT,
        },
        "nic": {
            "per_peer_bits": 0,
            "link_credits": tx.max_credits,
            "credit_counter_bits": counter_bits,
            "credit_return_bits": cret.latency,
            "per_link_bits": counter_bits + cret.latency,
            "switch_table_entries": table_depth,
            "switch_table_bits_per_entry": table_width,
            "switch_table_bits": table_width * table_depth,
            "switch_ports": switch.ports,
            # The receiver's window table: one (base, size) entry per source node id (not
            # per connection or per peer in use): fixed, whatever the peers.
            "window_table_sources": SOURCES,
            "window_table_bits": window_table_bits(NIC["mem_words"]),
        },
    }

