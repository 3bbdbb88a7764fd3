"""One requester's loads and atomics toward up to 4,096 targets, on the fabric of
:class:`rtl.tops.nic_mem_top.NicMemTop`: the golden model alone (no RTL top has that
many nodes).

What is modelled, block by block the twins of :class:`pymodel.nic.mem_system.
NicMemSystemModel` (the RTL's twins, composed and stepped as there): node 0's requester,
tag table, transmitter, receiver, responder and memory; per target its receiver,
responder, transmitter, credit return and memory (a target's requester and tag table
stay idle: it issues nothing); the links' latency, the switch's FIFOs, round robin and
hop (:class:`pymodel.fabric.switch_sparse.SparseSwitchModel`, equal to
:class:`~pymodel.fabric.switch.SwitchModel` on these beats) and the credits. A target
is stepped only while it holds something (a beat, a request, a credit on its way); an
idle target's step changes nothing, so leaving it out changes no cycle.

What is not: node ids wider than 8 bits. The requester's frames, its tag entries and
the targets' checks carry 8-bit ids (:func:`spec.nic_mem.tag_entry_bits`), so target
``t`` (1 to ``peers``) answers as node :func:`wire_id` ``(t)``, and each beat carries its
switch egress port beside it (the route table's verdict, as a 16-bit id's table would
give it; docs/nic.md, "4,096 destinations"). Beyond 255 targets two targets share a wire
id; the requester's check of a response's source compares those 8 bits. A design with
4,096 targets would widen the entry's node field to 12 bits: 4 bits more per
outstanding operation, not counted by the model (it has no state per target).

Up to 15 targets the run equals :class:`NicMemSystemModel`'s with ``peers + 1`` nodes,
node 0 issuing: every beat, write, landing and cycle (tests/test_nic_mem_fanout.py);
that model equals the RTL (tests/test_cosim_nic_mem.py).
"""

from pymodel.fabric.switch_sparse import SparseSwitchModel
from pymodel.nic.credit_return import CreditReturnModel
from pymodel.nic.local_memory import LocalMemoryModel
from pymodel.nic.mem_requester import MemRequesterModel
from pymodel.nic.mem_responder import MemResponderModel
from pymodel.nic.mem_rx import MemRxModel
from pymodel.nic.mem_tx import MemTxModel
from pymodel.nic.tag_table import TagTableModel
from spec.fabric_profiles import fabric_profile, nic_top_credits, switch_hop_latency
from spec.formats.nic import Framing
from spec.formats.nic_mem import MEM_WIDTH
from spec.nic_mem import (
    MEM_TOP_DEFAULTS,
    TARGET_LEVEL_READS,
    check_tags,
    check_target,
    default_tags,
    request_queue_depth,
)

__all__ = ["NicMemFanoutModel", "MAX_PEERS", "wire_id"]

#: Most targets of a run (the issue's 4,096 peers).
MAX_PEERS = 4096


def wire_id(peer):
    """The 8-bit node id target ``peer`` (1 to :data:`MAX_PEERS`) answers as: 1 to 255,
    round robin (node 0 is the requester)."""
    return 1 + (peer - 1) % 255


class _Target:
    """One target's blocks (created at its first request)."""

    def __init__(self, m, peer, words):
        wid = wire_id(peer)
        self.rx = MemRxModel(m.framing, wid, m.mem_words, m.max_payload)
        self.rs = MemResponderModel(m.framing, wid, m.mem_words, m.max_payload, m.queue,
                                    *m.target)
        self.tx = MemTxModel(m.credits)
        self.mem = LocalMemoryModel(m.mem_words, words)
        self.cr = CreditReturnModel(m.lat)
        self.step = None

    def idle(self):
        rx, rs, tx = self.rx, self.rs, self.tx
        return not (rx.pend or rx.tail is not None or rx.left or rx.descq
                    or rs.q or rs.fl or tx.spill is not None or tx.busy or self.cr.busy())


class NicMemFanoutModel:
    """``peers`` targets (1 to :data:`MAX_PEERS`) and the top's other parameters (those
    of :class:`NicMemSystemModel`, checked alike; ``ValueError`` names a bad one);
    :meth:`run` plays node 0's commands."""

    def __init__(self, peers, framing="compact", fabric="board", tags=None,
                 mem_words=MEM_TOP_DEFAULTS["mem_words"],
                 max_payload=MEM_TOP_DEFAULTS["max_payload"], target_latency=0,
                 target_reads=TARGET_LEVEL_READS):
        if not isinstance(peers, int) or isinstance(peers, bool) \
                or not 1 <= peers <= MAX_PEERS:
            raise ValueError(f"peers must be an integer from 1 to {MAX_PEERS}, not "
                             f"{peers!r}")
        profile = fabric_profile(fabric)
        self.peers, self.framing, self.fabric = peers, Framing(framing), profile.name
        self.tags = default_tags(fabric) if tags is None else check_tags(tags)
        self.mem_words, self.max_payload = mem_words, max_payload
        self.target = check_target(target_latency, target_reads)
        self.lat = profile.link
        self.hop = switch_hop_latency(profile)
        self.credits = nic_top_credits(profile, MEM_WIDTH, max_payload)
        self.queue = request_queue_depth(peers + 1, self.tags)

    def run(self, cmds, mem=None, max_cycles=10_000_000):
        """Play ``cmds`` (node 0's commands: dicts of ``mem_cmd_layout`` fields, ``dst``
        the target 1 to ``peers``; ``ValueError`` names one outside), the memories
        starting as ``mem[p]`` (word lists; default zero). Returns node 0's ``tx`` beats
        ``(cycle, beat)``, ``wr`` writes ``(cycle, addr, be)``, ``rsp`` landed responses
        ``(cycle, tag, status, op)``, ``cmd_stamps``, ``issued`` (``(tag, target, op)``
        of each request sent, in order), ``counters`` (node 0's receiver's; the targets'
        responders' summed), ``peak`` (busy tags), ``mem`` (node 0's and each target's
        that was asked), ``cycles`` and ``credit_errors``."""
        for cmd in cmds:
            if not 1 <= cmd["dst"] <= self.peers:
                raise ValueError(f"a command's dst must be a target from 1 to "
                                 f"{self.peers}, not {cmd['dst']!r}")
        mem, lat, n = mem or {}, self.lat, self.peers + 1
        tt = TagTableModel(self.tags)
        idle_tt = TagTableModel(self.tags)          # a target's: it takes no tag
        rq = MemRequesterModel(self.framing, 0, self.mem_words)
        rs = MemResponderModel(self.framing, 0, self.mem_words, self.max_payload,
                               self.queue, *self.target)
        rx = MemRxModel(self.framing, 0, self.mem_words, self.max_payload)
        tx, cr = MemTxModel(self.credits), CreditReturnModel(lat)
        mem0 = LocalMemoryModel(self.mem_words, mem.get(0))
        sw = SparseSwitchModel(n, self.framing, self.credits, width=MEM_WIDTH,
                               hop_latency=self.hop)
        targets, active = {}, set()
        res = {key: [] for key in ("tx", "wr", "rsp", "cmd_stamps", "issued")}
        up, down = {}, {}
        k, dest, c, quiet = 0, 0, 0, 0

        def wake(t):
            if t not in targets:
                targets[t] = _Target(self, t, mem.get(t))
            active.add(t)

        while True:
            if c >= max_cycles:
                raise RuntimeError("model did not finish: raise max_cycles")
            arriving = down.pop(c, {})
            for t in arriving:
                if t:
                    wake(t)
            # Node 0: the requester's offer, the transmitter's merge.
            land = rx.writer(c)
            cmd = dict(cmds[k], dst=wire_id(cmds[k]["dst"])) if k < len(cmds) else None
            tag = tt.free_tag()
            rqo = rq.step(c, {"cmd": cmd, "tag": tag})
            rso = rs.offer(c, tx.credits, land["wr"] is not None, mem0)
            txo = tx.step(c, {"rsp": rso, "req": rqo["o"], "raw": None,
                              "give": cr.output(c)})
            taken = txo["taken"]
            if taken == "req":
                dest = cmds[k]["dst"]
                res["cmd_stamps"].append(c)
                res["issued"].append((tag, dest, cmds[k]["op"]))
                k += 1
            if txo["o"] is not None:
                res["tx"].append((c, txo["o"]))
                up.setdefault(c + lat, {})[0] = (*txo["o"], dest)
            wr0 = land["wr"] or (rso.get("wr") if taken == "rsp" else None)
            # The targets: each answers toward node 0.
            for t in sorted(active):
                g = targets[t]
                lt = g.rx.writer(c)
                gso = g.rs.offer(c, g.tx.credits, lt["wr"] is not None, g.mem)
                gxo = g.tx.step(c, {"rsp": gso, "req": None, "raw": None,
                                    "give": g.cr.output(c)})
                if gxo["o"] is not None:
                    up.setdefault(c + lat, {})[t] = (*gxo["o"], 0)
                rsp = gxo["taken"] == "rsp"
                g.step = (rsp, lt["wr"] or (gso.get("wr") if rsp else None))
            egress, pops = sw.cycle(c, up.pop(c, {}))
            for o, beat in egress.items():
                down.setdefault(c + 1 + lat, {})[o] = beat[:4]
            for p in pops:
                if p:
                    wake(p)
                    targets[p].cr.step(c, {"i": 1})
                else:
                    cr.step(c, {"i": 1})
            # Clock edge: node 0's receiver, responder, tag table, memory.
            rxo = rx.step(c, {"beat": arriving.get(0), "tt": tt})
            rs.step(c, {"taken": taken == "rsp", "req": rxo["req"]})
            done = land["done"]
            tt.step(c, {"take": rqo["entry"] if taken == "req" else None,
                        "answer": rxo["answer"], "release": done[0] if done else None})
            mem0.step(c, {"wr": wr0})
            if wr0 is not None:
                res["wr"].append((c, wr0[0], wr0[2]))
            if done is not None:
                res["rsp"].append((c, *done))
            for t in sorted(active):
                g = targets[t]
                rsp, wr = g.step or (False, None)
                g.step = None
                gxo = g.rx.step(c, {"beat": arriving.get(t), "tt": idle_tt})
                g.rs.step(c, {"taken": rsp, "req": gxo["req"]})
                g.mem.step(c, {"wr": wr})
            active = {t for t in active if not targets[t].idle()}
            busy = (up or down or not sw.idle() or active or cr.busy() or k < len(cmds)
                    or rs.q or rs.fl or tx.spill or tx.busy
                    or rx.pend or rx.tail is not None or rx.left or rx.descq)
            quiet = 0 if busy else quiet + 1
            if quiet > 8:
                break
            c += 1
        counters = dict(rx.counters)
        for key in ("req_ok", "req_err", "drop_full"):
            counters[key] = sum(getattr(g.rs, key) for g in targets.values())
        res.update(counters=counters, peak=tt.peak, outstanding=tt.outstanding, cycles=c,
                   mem={0: mem0.words, **{t: g.mem.words for t, g in targets.items()}},
                   credit_errors=tx.credit_error or any(g.tx.credit_error
                                                        for g in targets.values()))
        return res
