"""Scoreboard of the RDMA environment: the golden model on each planned run, against what
the monitor saw; and its deliberately broken twin for the negative test.

Two oracles per run, checked in ``check_phase`` with :class:`tb.scoreboard.Scoreboard`:

1. :func:`pymodel.rdma.engine.simulate` on the run's images, MR table, doorbells,
   injected frames and stall pattern: every beat on both links and its cycle, every
   remote-write and CQE strobe (QPN, cycle), every doorbell accept cycle, every counter
   of both engines, both whole host memories (so every CQE and every payload byte); no
   hang, no recorder overflow, the run outlasting the model's last event. Every frame
   the engines sent is also decoded by scapy with FCS, IP checksum and ICRC recomputed by
   zlib (:func:`tb.rdma.wirecheck.frame_problems`, no code shared with the RTL).
2. The items' own intent (:meth:`WriteItem.outcomes`, :meth:`WriteItem.acks`),
   independent of the model: the responder's ``frames_ok`` and drop counters and ACK
   count equal the items' sum; in the doorbell run every item has exactly one CQE (by
   ``wr_id``) with its status (success, or remote access error for an access kind), QPN
   and length, the requester counted its doorbells and frames and no unexpected ACK;
   the payload of every good item (and of every inject item: its own frames are all
   accepted) is in host memory B at its target, and the targets of the rejected rkey,
   right and alignment errors are still zero.

Then "nothing left over" (every run observed and compared, both FIFOs empty) and
"checked at least one message". A summary per test goes to ``scoreboard.json`` in the
run folder (before any assertion, so a failing test leaves it too).
"""

from collections import Counter

from spec.formats.roce import CqeStatus
from spec.rdma import DROP_REASONS, REQUESTER_COUNTERS, RESPONDER_COUNTERS
from tb.rdma.testbench import wire_beats
from tb.rdma.wirecheck import frame_problems
from tb.uvm_common import RESULTS_FILE, ScoreboardBase, drain

from .items import ACCESS_KINDS, RunObs, WriteItem
from .plan import RunPlan, payload_at, read_cqes, whole_frames

__all__ = ["RdmaScoreboard", "BrokenScoreboard", "RESULTS_FILE"]

#: Responder counters the intent oracle predicts.
OUTCOMES = ("frames_ok",) + DROP_REASONS


class RdmaScoreboard(ScoreboardBase):
    """Fed by ``driven`` (the driver's ``ap``) and ``observed`` (the monitor's ``ap``);
    :meth:`expected` (called with the model's results and the run's plan) is the hook
    :class:`BrokenScoreboard` corrupts one value in."""

    CFG_KEY = "RDMA_CFG"

    def compare_run(self, sb, plan, obs, items):
        """Both oracles on one run; returns the number of frames checked."""
        tag = f"{plan.kind} run"
        want = self.expected(plan.model(), plan)
        ab, ab_at = wire_beats(want, "ab")
        ba, ba_at = wire_beats(want, "ba")
        sb.compare(f"{tag}: A->B beats", obs.ab[0], ab)
        sb.compare(f"{tag}: A->B beat cycles", obs.ab[1], ab_at, fmt=str)
        sb.compare(f"{tag}: B->A beats", obs.ba[0], ba)
        sb.compare(f"{tag}: B->A beat cycles", obs.ba[1], ba_at, fmt=str)
        sb.compare(f"{tag}: written (qpn, cycle)", list(zip(*obs.written, strict=True)),
                   [(q, c) for c, q in want["written"]], fmt=str)
        sb.compare(f"{tag}: completed (qpn, cycle)", list(zip(*obs.completed, strict=True)),
                   [(q, c) for c, q in want["completed"]], fmt=str)
        sb.compare(f"{tag}: doorbell accept cycles", obs.doorbells, want["doorbell_stamps"],
                   fmt=str)
        for n in REQUESTER_COUNTERS:
            sb.equal(f"{tag}: requester {n}", obs.req[n], want["req"][n])
        for n in RESPONDER_COUNTERS:
            sb.equal(f"{tag}: responder {n}", obs.resp[n], want["resp"][n])
        for link, counters in want["links"].items():
            for n, v in counters.items():
                sb.equal(f"{tag}: link {link} {n}", obs.links[link][n], v)
        for name, got, words in (("A", obs.mem_a, want["mem_a"]),
                                 ("B", obs.mem_b, want["mem_b"])):
            bad = [a for a in range(len(got)) if got[a] != words.get(a, 0)]
            sb.equal(f"{tag}: host memory {name} words that differ (first 8)", bad[:8], [])
        sb.equal(f"{tag}: hang", obs.hang, None)
        sb.equal(f"{tag}: recorder overflows", obs.overflows, ())
        last = max([c for c, _ in want["written"] + want["completed"]]
                   + [c[-1] for c, _ in want["wire_ab"] + want["wire_ba"]] + [0])
        sb.equal(f"{tag}: run outlasts the model's last event", obs.end > last, True)
        frames_ab = whole_frames(obs.ab[0])
        frames_ba = whole_frames(obs.ba[0])
        sent = frames_ba + (frames_ab if plan.kind == "doorbell" else [])
        for k, frame in enumerate(sent):
            sb.equal(f"{tag}: independent check of frame {k}", frame_problems(frame), [])

        # Oracle 2: the items' intent.
        mine = [items[k] for k in plan.items]
        intent = Counter(dict.fromkeys(OUTCOMES, 0))
        for it in mine:
            intent.update(it.outcomes())
        for n in OUTCOMES:
            sb.equal(f"{tag}: intent {n}", obs.resp[n], intent[n])
        sb.equal(f"{tag}: intent ACK/NAK frames", obs.resp["acks"],
                 sum(it.acks() for it in mine))
        if plan.kind == "doorbell":
            sb.equal(f"{tag}: intent doorbells", obs.req["doorbells"], len(plan.doorbells))
            sb.equal(f"{tag}: intent frames sent", obs.req["frames"],
                     sum(len(it.frames()) for it in mine))
            sb.equal(f"{tag}: intent CQE writes", obs.req["cqe_writes"], len(mine))
            sb.equal(f"{tag}: intent unexpected ACKs", obs.req["ack_unexpected"], 0)
            cqes = {c["wr_id"]: c for c in read_cqes(obs.mem_a, plan, len(mine))}
            sb.equal(f"{tag}: intent CQEs (one per wr_id)", sorted(cqes),
                     sorted(plan.wr_ids.values()))
            for k in plan.items:
                it, c = items[k], cqes.get(plan.wr_ids[k])
                status = (CqeStatus.REM_ACCESS_ERR if it.error in ACCESS_KINDS
                          else CqeStatus.SUCCESS).value
                got = None if c is None else (c["status"], c["qpn"], c["byte_len"])
                sb.equal(f"{tag}: intent CQE of {it.get_name()} (status, qpn, length)", got,
                         (status, it.qp.qpn_a, it.size))
        for k in plan.items:
            it = items[k]
            raddr, _ = plan.targets[k]
            if it.error not in ACCESS_KINDS:
                sb.equal(f"{tag}: intent payload of {it.get_name()} at 0x{raddr:x}",
                         payload_at(obs.mem_b, raddr, it.size) == it.payload, True)
            elif it.error != "access_bounds":
                sb.equal(f"{tag}: intent target of {it.get_name()} untouched",
                         payload_at(obs.mem_b, raddr, it.size) == bytes(it.size), True)
        return len(frames_ab) + len(frames_ba)

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
            sb.equal(f"{plan.kind} run: observed kind", obs.kind, plan.kind)
            frames += self.compare_run(sb, plan, obs, items)
        left = len(observed) - len(runs) + max(0, len(runs) - len(plans))
        writes = sum(o.resp["words"] for o in runs)
        kinds = sorted({m.split(":")[0] + ":" + m.split(":")[1].split("[")[0]
                        for m in sb.mismatches if ":" in m})
        if kinds:
            self.logger.error("mismatching: %s", "; ".join(kinds))
        good = any(it.error == "none" for it in items)
        self.finish(sb, {
            "items": len(items), "errors": dict(Counter(it.error for it in items)),
            "runs": [p.kind for p in plans], "frames": frames, "words": writes,
            "cycles": [o.end for o in runs]}, left=left,
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
            want["resp"]["frames_ok"] += 1
            self.logger.warning("broken on purpose: model frames_ok of the %s run raised "
                                "to %d", plan.kind, want["resp"]["frames_ok"])
        return want
