"""Seeded mutation fuzzing of the NIC's memory receiver (loads and atomics): the scenario.

A chunk (:func:`nic_mem_chunk`) is played on :class:`rtl.tops.nic_mem_top.NicMemTop`
(and its twin :class:`pymodel.nic.mem_system.NicMemSystemModel`): every node's ``raw``
player sends one-beat memory frames (``pymodel.nic.mem_frames.build_mem_frame``) and
mutants of them, with the :class:`analysis.scenarios.mutator.Mutator` over every leaf
field of the memory header (:func:`spec.formats.nic_mem.mem_layout`), while every node's
command player issues a few valid loads and atomics of its own, whose responses must
land. The valid frames are LOAD, FETCH & ADD and COMPARE & SWAP requests (some beyond
the memory or misaligned: answered ERROR) and RESPONSEs for requests never made (their
tags are not outstanding, or not from that node: dropped). The frames are sent from the
node their ``src`` field names (modulo the nodes), so that a valid request's response
goes back to its sender's receiver (which asked for none).

The FCS is added by the NIC's transmitter (:class:`rtl.nic.mem_tx.MemTx`) to every raw
frame, so the only fix is ``fcs`` (the mutated frame reaches the receiver with a good
FCS: bad-FCS frames are the NicRxTop fuzz's, :mod:`analysis.scenarios.fuzz`); a mutant
that with its FCS is longer than a beat (64 bytes) is drawn again: the raw player's
frames are one beat, FCS included (a longer one takes a second beat, and a credit the
transmitter did not check for: a credit error, the frame lost at the switch). Pure
function of ``(seed, chunk)``.
"""

import dataclasses
import random
import zlib

from analysis.scenarios.mutator import Mutator, header_fields
from pymodel.nic.mem_frames import build_mem_frame, parse_mem_header, request_payload
from spec.formats.nic import Framing
from spec.formats.nic_mem import MEM_WIDTH, MemOp, mem_header_bytes, mem_layout

__all__ = ["NicMemChunk", "nic_mem_chunk", "MEM_FRAME_KINDS", "mem_frame_kind",
           "MEM_FUZZ_WEIGHTS", "MEM_MIX", "mem_fields", "CMDS_PER_NODE"]

#: Mutation weights: those of the other receivers' fuzz (analysis.scenarios.fuzz).
MEM_FUZZ_WEIGHTS = dict(valid=1, bitflip=4, field=8, truncate=2, extend=2, duplicate=1,
                        reorder=1)
#: The valid raw frames' mix: loads, fetch-and-adds, compare-and-swaps, responses.
MEM_MIX = dict(load=0.3, fetch_add=0.2, cmp_swap=0.15, response=0.35)
#: Frame kinds by the ``op`` field (spec.formats.nic_mem.MemOp).
MEM_FRAME_KINDS = {MemOp.LOAD.value: "load", MemOp.FETCH_ADD.value: "fetch_add",
                   MemOp.CMP_SWAP.value: "cmp_swap", MemOp.RESPONSE.value: "response"}
#: Valid loads and atomics each node's command player issues per chunk (their responses
#: must all land: nothing lost under the fuzz).
CMDS_PER_NODE = 4


def mem_fields(framing):
    """The memory header's fields of ``framing``: the MACs and the EtherType (IEEE 802.3
    byte arrays) in network order, our own fields little endian."""
    return header_fields(mem_layout(framing),
                         lambda name, width: name in ("dst_mac", "src_mac", "ethertype"))


def mem_frame_kind(framing, frame):
    """The kind of a memory frame by its ``op`` field (:data:`MEM_FRAME_KINDS`),
    ``"short"`` shorter than the header, ``"other"`` for another op."""
    if len(frame) < mem_header_bytes(framing):
        return "short"
    return MEM_FRAME_KINDS.get(parse_mem_header(framing, frame)["mem"]["op"], "other")


@dataclasses.dataclass
class NicMemChunk:
    """One chunk: ``frames`` (:class:`Mutant` s, FCS included, in sending order),
    ``sender`` (the node whose raw player sends each), ``cmds`` (``{node: [cmd dict]}``,
    ``mem_cmd_layout`` fields), ``landing`` (``{node: [(first byte, bytes)]}``: where the
    commands' responses may land), ``fuzz_frames``."""
    frames: list
    sender: list
    cmds: dict
    landing: dict
    fuzz_frames: int

    def raws(self):
        """``{node: [(data, nbytes, first, last)]}``: the one-beat frames without FCS
        each raw player sends."""
        out = {}
        for m, p in zip(self.frames, self.sender, strict=True):
            body = m.frame[:-4]
            out.setdefault(p, []).append((int.from_bytes(body, "little"), len(body), 1, 1))
        return out


def nic_mem_chunk(seed, chunk, frames, framing, nodes, mem_words, max_payload, tags,
                  cmds_per_node=CMDS_PER_NODE):
    """``frames`` raw fuzz frames spread over ``nodes`` senders and ``cmds_per_node``
    valid commands per node (loads of 1 to ``max_payload`` bytes and atomics to the
    next node, landing in the top ``cmds_per_node * max_payload`` bytes of the issuer's
    memory). Deterministic in ``(seed, chunk)``."""
    framing = Framing(framing)
    rng = random.Random(f"nic-mem-fuzz-{seed}-{chunk}-{framing.value}-{nodes}")
    mem_bytes = mem_words * MEM_WIDTH
    h = mem_header_bytes(framing)
    if cmds_per_node * max_payload > mem_bytes // 2:
        raise ValueError(f"mem_words must hold the landing area of {cmds_per_node} "
                         f"commands of {max_payload} bytes in its upper half, not "
                         f"{mem_words}")

    def forbid(frame):          # a raw frame and its FCS fill one beat at most
        return not 1 <= len(frame) <= MEM_WIDTH

    def refresh(body, fix):
        return body + zlib.crc32(body).to_bytes(4, "little")

    mut = Mutator(rng, mem_fields(framing), refresh, ("fcs",), MEM_FUZZ_WEIGHTS, forbid)
    valid = []
    kinds, weights = zip(*MEM_MIX.items(), strict=True)
    for _ in range(frames):
        src = rng.randrange(nodes)
        dst = rng.choice([q for q in range(nodes) if q != src])
        kind = rng.choices(kinds, weights)[0]
        if kind == "load":
            n = rng.choice((1, 8, 63, 64, 65, max_payload, rng.randint(1, max_payload)))
            addr = rng.randrange(mem_bytes + 512)           # some beyond the memory
            body = build_mem_frame(framing, src, dst, MemOp.LOAD, rng.randrange(tags), n,
                                   addr)
        elif kind in ("fetch_add", "cmp_swap"):
            op = MemOp.FETCH_ADD if kind == "fetch_add" else MemOp.CMP_SWAP
            addr = 8 * rng.randrange(mem_bytes // 8 + 8) + (rng.choice((1, 4))
                                                             if rng.random() < 0.1 else 0)
            body = build_mem_frame(framing, src, dst, op, rng.randrange(tags), 8, addr,
                                   request_payload(op, rng.getrandbits(64),
                                                   rng.getrandbits(64)))
        else:
            n = rng.choice((0, 8, 16, 64 - 4 - h))
            body = build_mem_frame(framing, src, dst, MemOp.RESPONSE,
                                   rng.randrange(1 << 11), n, 0, rng.randbytes(n),
                                   status=rng.choice((0, 0, 1)))
        valid.append(refresh(body, "fcs"))
    fuzz = mut.stream(valid)[:frames]
    sender = []
    for m in fuzz:
        body = m.frame[:-4]
        sender.append(parse_mem_header(framing, body)["src"] % nodes if len(body) >= h
                      else rng.randrange(nodes))
    cmds, landing = {}, {}
    for p in range(nodes):
        cmds[p], landing[p] = [], []
        for k in range(cmds_per_node):
            laddr = mem_bytes - (k + 1) * max_payload
            op = rng.choice((MemOp.LOAD, MemOp.FETCH_ADD, MemOp.CMP_SWAP))
            if op is MemOp.LOAD:
                n = rng.randint(1, max_payload)
                addr = rng.randrange(mem_bytes // 2 - n)
            else:
                n, addr = 8, 8 * rng.randrange(mem_bytes // 16)
            cmds[p].append(dict(op=op.value, dst=(p + 1) % nodes, addr=addr, length=n,
                                laddr=laddr, a=rng.getrandbits(64), b=rng.getrandbits(64)))
            landing[p].append((laddr, n))
    return NicMemChunk(fuzz, sender, cmds, landing, len(fuzz))
