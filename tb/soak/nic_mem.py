"""The NIC's loads and atomics in ``make soak --mix``: each chunk's commands and the
checks of its outcome that do not use the model (tb/soak/cocotb_nic_mem_soak.py).

NicMemTop runs with ``link_retry``: these chunks run over faulty reliable links at the
soak's fault rates, as the stores of :mod:`tb.soak.cocotb_nic_soak` (a mix's writes).
Every node's memory of ``words`` 64-byte words is laid out for the chunk:

- words ``0 .. SOURCE - 1``: the loads' source, which nothing writes during the chunk;
- words ``SOURCE .. SOURCE + ATOMIC - 1``: one 8-byte slot per atomic addressed to the
  node, each atomic its own;
- the rest: where the node's own commands land their answers, each command its own words
  (a load's ``ceil(length / 64)``, an atomic's one).

So each command's outcome follows from the initial memories alone, whatever order the
targets serve the requesters in (docs/nic.md, "Loads and atomics": a load lands the
target's bytes, FETCH_ADD adds modulo 2**64 and CMP_SWAP swaps when the compare value
equals the old one, both returning the old value at the landing address).
"""

import json
import os
import random
import time
from pathlib import Path

from analysis.scenarios.mix import op_sequence
from pymodel.fabric.faulty_link import rate_per_65535
from spec.formats.nic_mem import MEM_WIDTH, MemOp

#: A command's fields (those of :data:`tb.nic.cocotb_nic_mem.CMD_FIELDS`, which imports
#: cocotb).
CMD_FIELDS = ("op", "dst", "addr", "length", "laddr", "a", "b")

__all__ = ["SOURCE", "ATOMIC", "LOAD_SIZES", "chunk_commands", "chunk_memories",
           "chunk_checks", "soak_nic_mem", "NIC_MEM_TOP", "NIC_MEM_CHUNK"]

#: Words of the loads' source and of the atomics' slots in every memory.
SOURCE, ATOMIC = 512, 128
#: Load lengths (bytes): the edges of one and of several beats up to the top's
#: ``max_payload`` of 256 (the loads of tests/test_cosim_nic_mem.py's mix span the same).
LOAD_SIZES = (1, 8, 63, 64, 65, 128, 200, 256)
_M64 = (1 << 64) - 1


def chunk_memories(nodes, words, seed, chunk):
    """Every node's memory at the start of a chunk: random words of ``(seed, chunk)``."""
    rng = random.Random(f"nic-mem-soak-{seed}-{chunk}")
    return {p: [rng.getrandbits(8 * MEM_WIDTH) for _ in range(words)] for p in range(nodes)}


def _bytes(words, addr, n):
    first = addr // MEM_WIDTH
    raw = b"".join(w.to_bytes(MEM_WIDTH, "little")
                   for w in words[first:first + 2 + n // MEM_WIDTH])
    return raw[addr % MEM_WIDTH:addr % MEM_WIDTH + n]


def chunk_commands(rng, weights, nodes, words, count, mem):
    """``count`` commands per node, loads and atomics by the weights ``(R, A)`` of a mix
    (:func:`analysis.scenarios.mix.op_sequence`), each to a random other node. Returns
    ``(cmds, expect)``: ``cmds`` ``{node: [{op, dst, addr, length, laddr, a, b}]}`` (the
    commands of the model and of :func:`tb.nic.cocotb_nic_mem.load_nodes`) and per node
    ``[(kind, laddr, answer bytes)]``, with ``expect["slots"]`` ``{(node, byte address):
    final 8 bytes}``, all derived from ``mem`` (the initial memories). ``ValueError`` if
    the chunk's answers or atomics do not fit the layout."""
    if words <= SOURCE + ATOMIC:
        raise ValueError(f"mem_words must be over {SOURCE + ATOMIC}, not {words}")
    cmds, expect, slots, next_slot = {}, {}, {}, dict.fromkeys(range(nodes), 0)
    for p in range(nodes):
        seq = op_sequence((0, *weights), count, rng)
        cursor = SOURCE + ATOMIC
        cmds[p], expect[p] = [], []
        for op in seq:
            dst = rng.choice([q for q in range(nodes) if q != p])
            if op == "read":
                n = rng.choice(LOAD_SIZES)
                addr = MEM_WIDTH * rng.randrange(0, SOURCE - n // MEM_WIDTH - 1)
                need = -(-n // MEM_WIDTH)
                cmd = [MemOp.LOAD.value, dst, addr, n, MEM_WIDTH * cursor, 0, 0]
                answer = _bytes(mem[dst], addr, n)
            else:
                k = next_slot[dst]
                if k >= ATOMIC * MEM_WIDTH // 8:
                    raise ValueError(f"more than {ATOMIC * MEM_WIDTH // 8} atomics to node "
                                     f"{dst} in a chunk")
                next_slot[dst] += 1
                addr = MEM_WIDTH * SOURCE + 8 * k
                old = int.from_bytes(_bytes(mem[dst], addr, 8), "little")
                operand = rng.getrandbits(64)
                need = 1
                if k % 2:                # COMPARE & SWAP, equal to the old value every other
                    compare = old if k % 4 == 1 else old ^ 1
                    cmd = [MemOp.CMP_SWAP.value, dst, addr, 8, MEM_WIDTH * cursor, compare,
                           operand]
                    new = operand if compare == old else old
                else:
                    cmd = [MemOp.FETCH_ADD.value, dst, addr, 8, MEM_WIDTH * cursor, operand, 0]
                    new = (old + operand) & _M64
                slots[(dst, addr)] = new.to_bytes(8, "little")
                answer = old.to_bytes(8, "little")
            if cursor + need > words:
                raise ValueError(f"node {p}: the answers of {count} commands do not fit "
                                 f"{words - SOURCE - ATOMIC} words")
            cmds[p].append(dict(zip(CMD_FIELDS, cmd, strict=True)))
            expect[p].append(("load" if op == "read" else "atomic", MEM_WIDTH * cursor,
                              answer))
            cursor += need
    expect["slots"] = slots
    return cmds, expect


def chunk_checks(cmds, expect, initial, mems, landed, statuses, outstanding):
    """The model-free checks of a chunk on the design's results: ``mems`` and ``initial``
    (``{node: words}`` after and before), ``landed`` (``{node: responses landed}``),
    ``statuses`` (``{node: [status of each landed response]}``), ``outstanding``
    (``{node: busy tags}``). Returns ``(figures, violations)``: ``loads``, ``atomics``
    and how many passed (``loads_ok``, ``atomics_ok``: the right answer at the landing
    address, and for an atomic its slot as executed once), ``lost`` (commands without a
    response landed OK) and ``corrupted_bytes`` (bytes that differ from the expected
    answers, slots, or the initial memory elsewhere)."""
    fig = dict(loads=0, atomics=0, loads_ok=0, atomics_ok=0, lost=0, corrupted_bytes=0)
    bad = []
    slots = expect["slots"]
    for p, lst in cmds.items():
        allowed = set()
        for cmd, (kind, laddr, answer) in zip(lst, expect[p], strict=True):
            have = _bytes(mems[p], laddr, len(answer))
            wrong = sum(a != b for a, b in zip(have, answer, strict=True))
            ok = wrong == 0
            if kind == "atomic":
                final = _bytes(mems[cmd["dst"]], cmd["addr"], 8)
                ok = ok and final == slots[(cmd["dst"], cmd["addr"])]
            fig[kind + "s"] += 1
            fig[kind + "s_ok"] += int(ok)
            fig["corrupted_bytes"] += wrong
            if not ok and len(bad) < 16:
                bad.append(f"node {p}: {kind} {sorted(cmd.items())} answered "
                           f"{have.hex()} at {laddr:#x}, not {answer.hex()}")
            allowed.update(range(laddr, laddr + -(-len(answer) // MEM_WIDTH) * MEM_WIDTH))
        landed_ok = sum(1 for s in statuses[p] if s == 0)
        fig["lost"] += len(lst) - min(landed_ok, len(lst))
        if landed[p] != len(lst) or landed_ok != len(lst) or outstanding[p]:
            bad.append(f"node {p}: {landed_ok} of its {len(lst)} commands answered OK "
                       f"({landed[p]} responses), {outstanding[p]} tags still busy")
        allowed.update(a + k for (q, a) in slots if q == p for k in range(8))
        before = b"".join(w.to_bytes(MEM_WIDTH, "little") for w in initial[p])
        after = b"".join(w.to_bytes(MEM_WIDTH, "little") for w in mems[p])
        changed = [k for k in range(len(before)) if before[k] != after[k]
                   and k not in allowed]
        if changed:
            fig["corrupted_bytes"] += len(changed)
            bad.append(f"node {p}: {len(changed)} bytes outside every answer and slot "
                       f"changed (first at {changed[0]:#x})")
    for (q, a), want in slots.items():
        final = _bytes(mems[q], a, 8)
        if final != want:
            fig["corrupted_bytes"] += sum(x != y for x, y in zip(final, want, strict=True))
            bad.append(f"node {q}: atomic slot {a:#x} is {final.hex()}, not {want.hex()}")
    return fig, bad


#: The NIC's loads and atomics (a mix's R and A): NicMemTop of 4 nodes on the board
#: fabric (its default tags) with link retry on all 8 wires, 2,048-word memories (the
#: layout of this module: 512 words of load source, 128 of atomic slots, the rest for
#: the answers), commands per node per chunk at most (the players' depth; 256 answers of
#: up to 4 words fit the 1,408 answer words), and the recorders' depth (a node's request
#: beats and the beats of the answers it sends: 256 + 3 x 256 / 3 x 5 = 1,536 on
#: average; 4,096 leaves room for a busy node).
NIC_MEM_TOP = dict(nodes=4, framing="compact", fabric="board", mem_words=2048,
                   max_payload=256, link_retry=True)
NIC_MEM_CHUNK = 256
NIC_MEM_EVENTS = 4096


def soak_nic_mem(args, messages):
    """The NIC's loads and atomics of the mix: ``messages`` commands in chunks of up to
    ``NIC_MEM_CHUNK`` per node on NicMemTop with link retry, its wires faulted at the
    rates of ``args`` (those of the stores' wires), each chunk compared with the model
    and checked without it (tb/soak/cocotb_nic_mem_soak.py)."""
    from rtl.tops.nic_mem_top import NicMemTop
    from tb.cosim import BUILD, CosimFailure, run_cosim

    weights = args.mix[1:]
    per_node = -(-messages // 4)
    plan = [min(NIC_MEM_CHUNK, per_node - k) for k in range(0, per_node, NIC_MEM_CHUNK)]
    design = NicMemTop(**NIC_MEM_TOP, items=NIC_MEM_CHUNK, raws=1, events=NIC_MEM_EVENTS)
    token = f"{os.getpid()}-{time.time_ns()}"   # tells this run's figures from older ones
    print(f"nic_mem: {4 * per_node} loads and atomics (R:A {weights[0]}:{weights[1]}) in "
          f"{len(plan)} chunks on NicMemTop with link retry over faulty wires, each "
          "compared with the model (Verilator -O2; progress in the simulator's log)",
          flush=True)
    test_id = f"seed{args.seed}_mix" + "_".join(map(str, args.mix))
    faults = {k: rate_per_65535(getattr(args, k))
              for k in ("drop_rate", "corrupt_rate", "dup_rate", "tag_rate", "ack_drop_rate",
                        "ack_corrupt_rate")}
    params = dict(top=NIC_MEM_TOP, seed=args.seed, plan=plan, mix=list(weights), token=token,
                  faults=faults)
    try:
        run = run_cosim(design, name="nic_mem_soak_top",
                        test_module="tb.soak.cocotb_nic_mem_soak", sim="verilator",
                        test_id=test_id, params=params, opt="-O2")
        paths = [Path(run) / "soak_nic_mem.json"]
    except CosimFailure as exc:          # the figures say why (mismatches, lost, hangs)
        print(f"nic_mem: FAILED ({exc})", flush=True)
        paths = sorted(BUILD.glob(f"cosim/verilator/nic_mem_soak_top-*/{test_id}/"
                                  "soak_nic_mem.json"))
    for path in paths:
        out = json.loads(path.read_text())
        if out.get("token") == token:
            return out
    return dict(messages=0, lost=4 * per_node, corrupted_bytes=0, hangs=1,
                chunks=len(plan), chunks_compared=0, mismatches=0, per_chunk=[])
