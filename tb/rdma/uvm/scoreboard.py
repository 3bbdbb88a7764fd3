"""Scoreboard of the RDMA environment: the golden model on each planned run, against what
the monitor saw; and its deliberately broken twin for the negative test.

Two oracles per run, checked in ``check_phase`` with :class:`tb.scoreboard.Scoreboard`:

1. :func:`pymodel.rdma.system.simulate` on the run's images, MR table, MMIO words and
   release cycles, injected frames and run-time ports: every beat on both links and its
   cycle, every ``written`` and ``completed`` mark (tag, cycle), the cycle each MMIO word
   was taken, every counter of both engines, both host interfaces and both links, both
   whole host memories (so every CQE and every payload byte); no hang, no recorder
   overflow, the run outlasting the model's last event. Every frame the engines sent is
   also decoded by scapy with FCS, IP checksum and ICRC recomputed by zlib
   (:func:`tb.rdma.wirecheck.wire_problems`, no code shared with the RTL).
2. The items' own intent, independent of the model (:meth:`WriteItem.outcomes`,
   :meth:`WriteItem.acks`, :meth:`WriteItem.cqe`, :func:`.plan.intended_ack_req`):

   - the responder's ``frames_ok``, drop and sequence counters equal the items' sum, and
     its ACK frames (decoded by scapy) are as many ACKs, remote-access NAKs and PSN NAKs
     as the items and the coalescing rule say;
   - posted run: every item's frames are on the A->B link once, with its QP, PSNs,
     opcodes, RETH, payload bytes and AckReq on its last frame as intended; the
     requester counted the doorbells, WQEs by MMIO, frames and CQE writes intended, no
     resend, no timeout, and at most one unexpected ACK per NAK of an access error's
     later frames; the CQ holds exactly the intended CQEs, in posting order *per QP* (RC
     orders completions within a QP only): ``wr_id``, status, byte count, send-queue
     index, and none for an unsignalled WQE that succeeded; in a serial run, no work
     item's first frame leaves before the last ACK/NAK of every earlier one;
   - the payload of every item that lands (every one but an access error) is in host
     memory B at its target, and the targets of rejected rkey, right and alignment
     errors are still zero.

Then "nothing left over" (every run observed and compared, both FIFOs empty) and
"checked at least one message". A summary per test goes to ``scoreboard.json`` in the
run folder (before any assertion, so a failing test leaves it too).
"""

from collections import Counter

from spec.fabric import COUNTERS as LINK_COUNTERS
from spec.fabric import FLAGS as LINK_FLAGS
from spec.formats.roce import CqeStatus
from spec.rdma import DROP_REASONS, LINKS, SEQUENCE_COUNTERS
from tb.rdma.testbench import wire_beats
from tb.rdma.wirecheck import wire_problems
from tb.uvm_common import RESULTS_FILE, ScoreboardBase, drain

from .frames import decode, frames_with_cycles
from .items import ACCESS_KINDS, RunObs, WriteItem
from .plan import RunPlan, payload_at, read_cqes

__all__ = ["RdmaScoreboard", "BrokenScoreboard", "check_model", "check_intent", "RESULTS_FILE",
           "OUTCOMES"]

#: Responder counters the intent oracle predicts.
OUTCOMES = ("frames_ok",) + DROP_REASONS + SEQUENCE_COUNTERS
_M24 = (1 << 24) - 1


def _opcodes(n):
    return ["WRITE_ONLY"] if n == 1 else \
        ["WRITE_FIRST"] + ["WRITE_MIDDLE"] * (n - 2) + ["WRITE_LAST"]


# -- oracle 1: the golden model ---------------------------------------------------------
def check_model(sb, tag, want, obs):
    """Compare the run ``obs`` with the model's results ``want`` on ``sb``."""
    for link, name in (("ab", "A->B"), ("ba", "B->A")):
        beats, stamps = wire_beats(want, link)
        got = getattr(obs, link)
        sb.compare(f"{tag}: {name} beats", got[0], beats)
        sb.compare(f"{tag}: {name} beat cycles", got[1], stamps, fmt=str)
    for name in ("written", "completed"):
        tags, cycles = getattr(obs, name)
        sb.compare(f"{tag}: {name} (cycle, tag)", list(zip(cycles, tags, strict=True)),
                   list(want[name]), fmt=str)
    sb.compare(f"{tag}: MMIO accept cycles", obs.mmio, want["mmio_stamps"], fmt=str)
    for block in ("req", "resp", "host_a", "host_b"):
        for n, value in obs.counters[block].items():
            sb.equal(f"{tag}: {block} {n}", value, want[block][n])
    for link in LINKS:
        for n in LINK_COUNTERS + LINK_FLAGS:
            sb.equal(f"{tag}: link {link} {n}", obs.counters["links"][link][n],
                     want["links"][link][n])
    for name, got, words in (("A", obs.mem_a, want["mem_a"]),
                             ("B", obs.mem_b, want["mem_b"])):
        bad = [a for a in range(len(got)) if got[a] != words.get(a, 0)]
        sb.equal(f"{tag}: host memory {name} words that differ (first 8)", bad[:8], [])
    sb.equal(f"{tag}: hang", obs.hang, None)
    sb.equal(f"{tag}: recorder overflows", obs.overflows, ())
    last = max([c for c, _ in want["written"] + want["completed"]]
               + [c[-1] for c, _ in want["wire_ab"] + want["wire_ba"]] + [0])
    sb.equal(f"{tag}: run outlasts the model's last event", obs.end > last, True)


# -- oracle 2: the items' intent ---------------------------------------------------------
def check_intent(sb, tag, plan, obs, items):
    """Compare the run ``obs`` with the intent of ``items`` (the test's) on ``sb``;
    returns the number of frames checked."""
    mine = [(k, items[k]) for k in plan.items]
    ab = frames_with_cycles(*obs.ab)
    ba = frames_with_cycles(*obs.ba)
    sent = ba + (ab if plan.kind == "posted" else [])
    for j, problems in wire_problems([frame for _, _, frame in sent]):
        sb.equal(f"{tag}: independent check of frame {j}", problems, [])
    intent = Counter(dict.fromkeys(OUTCOMES, 0))
    for _, it in mine:
        intent.update(it.outcomes())
    for n in OUTCOMES:
        sb.equal(f"{tag}: intent responder {n}", obs.resp[n], intent[n])
    acks = {"ACK": sum(plan.ack_req[k] for k, it in mine if it.error not in ACCESS_KINDS),
            "NAK_REMOTE_ACCESS": sum(len(it.frames()) for _, it in mine
                                     if it.error in ACCESS_KINDS),
            "NAK_PSN_SEQUENCE": sum(it.error == "psn_nak" for _, it in mine)}
    seen = Counter(decode(f).syndrome for _, _, f in ba)
    sb.equal(f"{tag}: intent ACK/NAK frames by syndrome", dict(seen),
             {s: n for s, n in acks.items() if n})
    sb.equal(f"{tag}: intent responder acks", obs.resp["acks"],
             sum(it.acks(plan.ack_req[k]) for k, it in mine))
    if plan.kind == "posted":
        _intent_requester(sb, tag, plan, obs, mine, ab, ba)
    for k, it in mine:
        raddr, _ = plan.targets[k]
        if it.error not in ACCESS_KINDS:
            sb.equal(f"{tag}: intent payload of {it.get_name()} at 0x{raddr:x}",
                     payload_at(obs.mem_b, raddr, it.size) == it.payload, True)
        elif it.error != "access_bounds":
            sb.equal(f"{tag}: intent target of {it.get_name()} untouched",
                     payload_at(obs.mem_b, raddr, it.size) == bytes(it.size), True)
    return len(ab) + len(ba)


def _intent_requester(sb, tag, plan, obs, mine, ab, ba):
    """The requester's side of a posted run: counters, frames on the wire, CQEs."""
    req = obs.req
    kinds = Counter(kind for _, _, kind in plan.announcements)
    access = [it for _, it in mine if it.error in ACCESS_KINDS]
    for name, value in (("doorbells", kinds["doorbell"]),
                        ("bf_writes", kinds["blueflame"]), ("mmio_dropped", 0),
                        ("frames", sum(len(it.frames()) for _, it in mine)),
                        ("retransmissions", 0), ("timeouts", 0),
                        ("cqe_writes", sum(it.cqe() for _, it in mine))):
        sb.equal(f"{tag}: intent requester {name}", req[name], value)
    # The NAK of an access error's first frame may come back before the message is
    # recorded (a long frame still being sent): then a later frame's NAK retires it. So
    # at most the NAKs of the later frames are unexpected, and none without them.
    later = sum(len(it.frames()) - 1 for it in access)
    sb.equal(f"{tag}: intent requester ack_unexpected <= {later}",
             isinstance(req["ack_unexpected"], int) and req["ack_unexpected"] <= later, True)
    # Every item's frames, once each, as intended.
    wire = {}
    for first, _, f in ab:
        d = decode(f)
        wire.setdefault((d.dest_qp, d.psn), []).append((first, d))
    sb.equal(f"{tag}: intent A->B frames", len(ab),
             sum(len(it.frames()) for _, it in mine))
    start = {}
    for k, it in mine:
        n = len(it.frames())
        got = [wire.get((it.qp.qpn_b, (plan.psns[k] + j) & _M24), []) for j in range(n)]
        once = all(len(g) == 1 for g in got)
        sb.equal(f"{tag}: intent frames of {it.get_name()} sent once",
                 [len(g) for g in got], [1] * n)
        if not once:
            continue
        start[k] = got[0][0][0]
        d = [g[0][1] for g in got]
        raddr, rkey = plan.targets[k]
        sb.equal(f"{tag}: intent opcodes of {it.get_name()}", [x.opcode for x in d],
                 _opcodes(n))
        sb.equal(f"{tag}: intent AckReq of {it.get_name()}", [x.ack_req for x in d],
                 [False] * (n - 1) + [plan.ack_req[k]])
        sb.equal(f"{tag}: intent RETH of {it.get_name()}", d[0].reth,
                 (raddr, rkey, it.size))
        sb.equal(f"{tag}: intent payload on the wire of {it.get_name()}",
                 b"".join(x.payload for x in d) == it.payload, True)
    # The CQEs: exactly the intended ones, in posting order per QP.
    want_cqes = sum(it.cqe() for _, it in mine)
    cqes = read_cqes(obs.mem_a, plan, want_cqes + 1)
    sb.equal(f"{tag}: intent CQEs written", len(cqes), want_cqes)
    per_qp, intended = {}, {}
    for c in cqes:
        per_qp.setdefault(c["qpn"], []).append(
            (c["wr_id"], c["status"], c["byte_len"], c["sq_index"]))
    for k, it in mine:
        if it.cqe():
            status = CqeStatus.REM_ACCESS_ERR if it.error in ACCESS_KINDS \
                else CqeStatus.SUCCESS
            intended.setdefault(it.qp.qpn_a, []).append(
                (plan.wr_ids[k], status.value, it.size, plan.sq_index[k]))
    sb.equal(f"{tag}: intent CQEs per QP, in posting order", per_qp, intended)
    if plan.knobs.serial and len(start) == len(mine):
        _intent_serial(sb, tag, plan, mine, start, ba)


def _intent_serial(sb, tag, plan, mine, start, ba):
    """One work item at a time: each announcement's first frame leaves after the last
    ACK/NAK frame answering any earlier one."""
    owner = {}
    for k, it in mine:
        for j in range(len(it.frames())):
            owner[(it.qp.qpn_a, (plan.psns[k] + j) & _M24)] = k
    answered = {}
    for _, last, f in ba:
        d = decode(f)
        k = owner.get((d.dest_qp, d.psn))
        if k is not None:
            answered[k] = max(answered.get(k, 0), last)
    early, done = [], -1
    for j, (_, ks, _) in enumerate(plan.announcements):
        first = min(start[k] for k in ks)
        if first <= done:
            early.append(j)
        done = max([done] + [answered.get(k, 1 << 62) for k in ks])
    sb.equal(f"{tag}: intent serial: work items that started before the earlier ones "
             f"were answered", early, [])


class RdmaScoreboard(ScoreboardBase):
    """Fed by ``driven`` (the driver's ``ap``) and ``observed`` (the monitor's ``ap``);
    :meth:`expected` (called with the model's results and the run's plan) is the hook
    :class:`BrokenScoreboard` corrupts one value in."""

    CFG_KEY = "RDMA_CFG"

    def expected(self, want, plan):
        return want

    # -- the end of the test ------------------------------------------------------------
    def check_phase(self):
        driven, observed = drain(self.driven), drain(self.observed)
        items = [d for d in driven if isinstance(d, WriteItem)]
        plans = [d for d in driven if isinstance(d, RunPlan)]
        runs = [o for o in observed if isinstance(o, RunObs)]
        assert items, "the driver drove no work request"
        sb = self.scoreboard()
        sb.equal("runs observed", len(runs), len(plans))
        frames = 0
        for plan, obs in zip(plans, runs, strict=False):
            tag = f"{plan.kind} run"
            sb.equal(f"{tag}: observed kind", obs.kind, plan.kind)
            check_model(sb, tag, self.expected(plan.model(), plan), obs)
            frames += check_intent(sb, tag, plan, obs, items)
        left = len(observed) - len(runs) + max(0, len(runs) - len(plans))
        writes = sum(o.resp["words"] for o in runs)
        kinds = sorted({m.split(":")[0] + ":" + m.split(":")[1].split("[")[0]
                        for m in sb.mismatches if ":" in m})
        if kinds:
            self.logger.error("mismatching: %s", "; ".join(kinds))
        good = any(it.error == "none" for it in items)
        self.finish(sb, {
            "items": len(items), "errors": dict(Counter(it.error for it in items)),
            "runs": [p.kind for p in plans], "knobs": [str(p.knobs) for p in plans],
            "frames": frames, "words": writes, "cycles": [o.end for o in runs]}, left=left,
            musts=[(frames > 0, "no frame was checked"),
                   (writes > 0 or not good,
                    "good WRITEs were driven but no payload write was checked")])


class BrokenScoreboard(RdmaScoreboard):
    """The negative test's scoreboard: one expected value off by one (the responder's
    ``frames_ok`` of the first run that accepted a frame), so that exactly one comparison
    fails. A test using it must fail; it is marked ``expect_fail``."""

    broken = False

    def expected(self, want, plan):
        if not self.broken and want["resp"]["frames_ok"]:
            self.broken = True
            want = dict(want, resp=dict(want["resp"], frames_ok=want["resp"]["frames_ok"] + 1))
            self.logger.warning("broken on purpose: model frames_ok of the %s run raised "
                                "to %d", plan.kind, want["resp"]["frames_ok"])
        return want
