"""Cycle-exact twin of :class:`rtl.tops.nic_mem_top.NicMemTop`: request and response
frames, memory writes, landed responses, counters and final memories.

Composes the twins of the memory-operation blocks (one per RTL file:
:class:`~pymodel.nic.tag_table.TagTableModel`, :class:`~pymodel.nic.mem_requester.
MemRequesterModel`, :class:`~pymodel.nic.mem_responder.MemResponderModel`,
:class:`~pymodel.nic.mem_rx.MemRxModel`, :class:`~pymodel.nic.mem_tx.MemTxModel`,
:class:`~pymodel.nic.local_memory.LocalMemoryModel`) with the fabric's
(:class:`~pymodel.fabric.switch.SwitchModel`, the links' latency or, with
``link_retry``, a :class:`~pymodel.fabric.reliable_link.ReliableLinkModel` per wire,
:class:`~pymodel.nic.credit_return.CreditReturnModel`), cycle by cycle. Nothing from
``rtl/``: the layouts and sizing rules come from :mod:`spec`.
"""

from dataclasses import replace

from pymodel.fabric.faulty_link import FaultSettings
from pymodel.fabric.reliable_link import ReliableLinkModel
from pymodel.fabric.switch import SwitchModel
from pymodel.nic.credit_return import CreditReturnModel
from pymodel.nic.local_memory import LocalMemoryModel
from pymodel.nic.mem_requester import MemRequesterModel
from pymodel.nic.mem_responder import MemResponderModel
from pymodel.nic.mem_rx import MemRxModel
from pymodel.nic.mem_tx import MemTxModel
from pymodel.nic.tag_table import TagTableModel
from pymodel.packet import pack_beat, unpack_beat
from pymodel.stall import stall_pattern
from spec.fabric_profiles import fabric_profile, nic_top_credits, switch_hop_latency
from spec.formats.nic import Framing
from spec.formats.nic_mem import MEM_WIDTH, mem_frame_beats
from spec.nic_mem import (
    MEM_TOP_DEFAULTS,
    TARGET_LEVEL_READS,
    check_tags,
    check_target,
    default_tags,
    request_queue_depth,
)

__all__ = ["NicMemSystemModel"]


class NicMemSystemModel:
    """The top's parameters (those of :class:`rtl.tops.nic_mem_top.NicMemTop`, checked);
    :meth:`run` plays one scenario."""

    def __init__(self, nodes=MEM_TOP_DEFAULTS["nodes"], framing="compact", fabric="board",
                 tags=None, mem_words=MEM_TOP_DEFAULTS["mem_words"],
                 max_payload=MEM_TOP_DEFAULTS["max_payload"], target_latency=0,
                 target_reads=TARGET_LEVEL_READS, link_retry=False):
        profile = fabric_profile(fabric)
        self.framing = Framing(framing)
        if not isinstance(nodes, int) or not 2 <= nodes <= 16:
            raise ValueError(f"nodes must be an integer from 2 to 16, not {nodes!r}")
        self.nodes, self.fabric = nodes, profile.name
        self.tags = default_tags(fabric) if tags is None else check_tags(tags)
        self.mem_words, self.max_payload = mem_words, max_payload
        self.target = check_target(target_latency, target_reads)
        if not isinstance(link_retry, bool):
            raise ValueError(f"link_retry must be True or False, not {link_retry!r}")
        self.link_retry = link_retry
        self.lat = profile.link
        self.hop = switch_hop_latency(profile)
        self.credits = nic_top_credits(profile, MEM_WIDTH, max_payload, link_retry)
        self.queue = request_queue_depth(nodes, self.tags)

    def run(self, cmds, node_ids=None, raws=None, mem=None, stalls=None,
            max_cycles=1_000_000, link_settings=None):
        """Play ``cmds[p]`` (lists of ``mem_cmd_layout`` field dicts) and ``raws[p]``
        (lists of one-beat frames ``(data, nbytes, first, last)``) from each node, the
        local memories starting as ``mem[p]`` (word lists; default zero), ``stalls[p]``
        the ``(seed, rate)`` of node ``p``'s command player (its valid withheld where
        the pattern stalls, cycle by cycle from 0). With ``link_retry``,
        ``link_settings`` (a :class:`FaultSettings`; default no faults) are the top's
        ``flt`` ports: wire ``2p`` (uplink of ``p``) and ``2p + 1`` (its downlink) use
        seed + wire. Returns a dict
        of per-node ``tx`` beats ``(cycle, beat)``, ``wr`` writes ``(cycle, addr, be)``,
        ``rsp`` landed responses ``(cycle, tag, status, op)``, ``cmd_stamps`` (the cycle
        each command was taken), ``counters``, ``mem``, ``peak`` (busy tags), and
        ``cycles``, ``credit_errors``, ``links`` (``{"up<p>"/"down<p>": the counter
        ports}``, empty without ``link_retry``)."""
        n, lat = self.nodes, self.lat
        node_ids = list(range(n)) if node_ids is None else node_ids
        raws, mem = raws or {}, mem or {}
        stall = {p: stall_pattern(*stalls[p], max_cycles) for p in (stalls or {})}
        tts = [TagTableModel(self.tags) for _ in range(n)]
        rqs = [MemRequesterModel(self.framing, node_ids[p], self.mem_words) for p in range(n)]
        rss = [MemResponderModel(self.framing, node_ids[p], self.mem_words, self.max_payload,
                                 self.queue, *self.target) for p in range(n)]
        rxs = [MemRxModel(self.framing, node_ids[p], self.mem_words, self.max_payload)
               for p in range(n)]
        txs = [MemTxModel(self.credits) for _ in range(n)]
        mems = [LocalMemoryModel(self.mem_words, mem.get(p)) for p in range(n)]
        crs = [CreditReturnModel(lat) for _ in range(n)]
        sw = SwitchModel(n, self.framing, self.credits, self.link_retry, width=MEM_WIDTH,
                         hop_latency=self.hop)
        links = {}
        if self.link_retry:
            base = link_settings or FaultSettings()
            longest = mem_frame_beats(self.framing, self.max_payload)
            for p in range(n):
                for j, side in enumerate(("up", "down")):
                    links[side, p] = ReliableLinkModel(
                        MEM_WIDTH, lat, longest,
                        replace(base, seed=(base.seed + 2 * p + j) & 0xFFFF))
        k, kr = [0] * n, [0] * n
        res = {key: {p: [] for p in range(n)} for key in ("tx", "wr", "rsp", "cmd_stamps")}
        up, down = {}, [{} for _ in range(n)]
        c = quiet = 0
        while True:
            if c >= max_cycles:
                raise RuntimeError("model did not finish: raise max_cycles")
            land = [rxs[p].writer(c) for p in range(n)]
            step = []
            for p in range(n):
                pc = cmds.get(p, [])
                cmd = pc[k[p]] if k[p] < len(pc) and not (p in stall and stall[p][c]) \
                    else None
                rqo = rqs[p].step(c, {"cmd": cmd, "tag": tts[p].free_tag()})
                pr = raws.get(p, [])
                raw = pr[kr[p]] if kr[p] < len(pr) else None
                rso = rss[p].offer(c, txs[p].credits, land[p]["wr"] is not None, mems[p])
                ready = not links or links["up", p].ready()
                txo = txs[p].step(c, {"rsp": rso, "req": rqo["o"], "raw": raw,
                                      "give": crs[p].output(c), "ready": ready})
                if txo["o"] is not None:
                    res["tx"][p].append((c, txo["o"]))
                    up.setdefault(c if links else c + lat, {})[p] = txo["o"]
                taken = txo["taken"]
                if taken == "req":
                    res["cmd_stamps"][p].append(c)
                    k[p] += 1
                elif taken == "raw":
                    kr[p] += 1
                wr = land[p]["wr"] or (rso.get("wr") if taken == "rsp" else None)
                step.append((taken, rqo["entry"] if taken == "req" else None, wr))
            if links:
                egress, pops = self._reliable(c, sw, links, up.pop(c, {}), down)
            else:
                egress, pops = sw.cycle(c, up.pop(c, {}))
            for o, beat in egress.items():
                down[o][c + 1 + lat] = beat[:4]
            for p in pops:
                crs[p].step(c, {"i": 1})
            for p in range(n):
                taken, entry, wr = step[p]
                rxo = rxs[p].step(c, {"beat": down[p].pop(c, None), "tt": tts[p]})
                rss[p].step(c, {"taken": taken == "rsp", "req": rxo["req"]})
                done = land[p]["done"]
                tts[p].step(c, {"take": entry, "answer": rxo["answer"],
                                "release": done[0] if done else None})
                mems[p].step(c, {"wr": wr})
                if wr is not None:
                    res["wr"][p].append((c, wr[0], wr[2]))
                if done is not None:
                    res["rsp"][p].append((c, *done))
            busy = (up or any(down) or not sw.idle() or any(cr.busy() for cr in crs)
                    or any(k[p] < len(cmds.get(p, [])) for p in range(n))
                    or any(kr[p] < len(raws.get(p, [])) for p in range(n))
                    or any(rs.q or rs.fl for rs in rss) or any(tx.spill or tx.busy for tx in txs)
                    or any(rx.pend or rx.tail is not None or rx.left or rx.descq
                           for rx in rxs) or any(lk.busy() for lk in links.values()))
            quiet = 0 if busy else quiet + 1
            if quiet > 8:
                break
            c += 1
        counters = {}
        for p in range(n):
            counters[p] = dict(rxs[p].counters, req_ok=rss[p].req_ok, req_err=rss[p].req_err,
                               drop_full=rss[p].drop_full)
        res.update(counters=counters, mem={p: mems[p].words for p in range(n)},
                   peak={p: tts[p].peak for p in range(n)},
                   outstanding={p: tts[p].outstanding for p in range(n)}, cycles=c,
                   credit_errors=any(tx.credit_error for tx in txs),
                   links={f"{side}{p}": lk.all_counters() for (side, p), lk in links.items()})
        return res

    @staticmethod
    def _reliable(c, sw, links, sent, down):
        """Cycle ``c`` of the fabric with ``link_retry``: the beats ``sent`` on the
        uplinks in ``c`` through their reliable links into the switch, whose egress
        waits for each downlink's ``ready``; what the downlinks deliver in ``c`` goes to
        ``down[o][c]`` (the receivers take it in the same cycle). Returns no egress
        beats for the plain path and the switch's credit pops."""
        n = len(down)
        arrivals = {}
        for p in range(n):
            beat = sent.get(p)
            out = links["up", p].cycle(c, None if beat is None else pack_beat(MEM_WIDTH, *beat))
            if out is not None:
                arrivals[p] = unpack_beat(MEM_WIDTH, out)
        ready = [links["down", o].ready() for o in range(n)]
        left, pops = sw.cycle(c, arrivals, ready=ready)
        for o in range(n):
            b = left.get(o)
            out = links["down", o].cycle(c, None if b is None else pack_beat(MEM_WIDTH, *b[:4]))
            if out is not None:
                down[o][c] = unpack_beat(MEM_WIDTH, out)
        return {}, pops
