"""Scoreboard of the NIC environment: the golden model on what was driven, against what
the monitor saw; and its deliberately broken twin for the negative test.

Two oracles, checked in ``check_phase`` with :class:`tb.scoreboard.Scoreboard`:

1. :class:`pymodel.nic.system.NicSystemModel` run on the driven stores, stall patterns,
   faults and window-table writes (``NicConfig.window_writes``): every uplink beat and
   its cycle, every frame (bytes, first and last cycle), every command accept cycle,
   every memory write and its cycle, every credit arrival, each node's counters and
   whole memory, the credit-error flag.
2. The items' own intent (:meth:`StoreItem.outcomes`): each node's counters equal the
   sum of what its frames should raise, and a store is delivered (all its frames
   written) exactly when it carries no error.

Then "nothing left over" (every observation consumed, both FIFOs empty) and "checked at
least one message". A summary per test goes to ``scoreboard.json`` in the run folder
(before any assertion, so a failing test leaves it too).
"""

import hashlib
from collections import defaultdict

from pymodel.packet import unpack_beat
from spec.nic import COUNTERS
from tb.uvm_common import RESULTS_FILE, ScoreboardBase, drain

from .items import (
    CommandObs,
    FrameObs,
    NodeObs,
    RunObs,
    Stimulus,
    StoreItem,
    UplinkObs,
    WriteObs,
)

__all__ = ["NicScoreboard", "BrokenScoreboard", "RESULTS_FILE"]


def _frames(width, beats, stamps):
    """``(start, end, bytes)`` of each whole frame in a beat list."""
    out, cur, start = [], b"", None
    for beat, cyc in zip(beats, stamps, strict=True):
        data, nb, first, last = unpack_beat(width, beat)
        if first:
            cur, start = b"", cyc
        cur += data.to_bytes(width, "little")[:nb]
        if last:
            out.append((start, cyc, cur))
    return out


def _frame_key(start, end, data):
    """What a frame is compared by: its cycles, length and a digest of its bytes (the
    bytes themselves are compared beat by beat)."""
    return (start, end, len(data), hashlib.sha1(data).hexdigest()[:12])


class NicScoreboard(ScoreboardBase):
    """Fed by ``driven`` (the driver's ``ap``) and ``observed`` (the monitor's ``ap``);
    :meth:`expected` is the hook :class:`BrokenScoreboard` corrupts one value in."""

    CFG_KEY = "NIC_CFG"

    def check_phase(self):
        cfg, n = self.cfg, self.cfg.nodes
        driven, observed = drain(self.driven), drain(self.observed)
        items = [d for d in driven if isinstance(d, StoreItem)]
        stims = [d for d in driven if isinstance(d, Stimulus)]
        assert len(stims) == 1, f"expected one Stimulus from the driver, got {len(stims)}"
        stim = stims[0]
        assert items, "the driver drove no store"

        by_src = {p: [it for it in items if it.src == p] for p in range(n)}
        want = cfg.model().run({p: [it.store() for it in by_src[p]] for p in range(n)},
                               stim.node_ids, stim.stalls, stim.faults,
                               window_writes=cfg.window_writes())
        want = self.expected(want)

        obs = defaultdict(list)
        for o in observed:
            obs[type(o)].append(o)
        used = 0
        sb = self.scoreboard()
        for p in range(n):
            up = [o for o in obs[UplinkObs] if o.port == p]
            used += len(up)
            sb.equal(f"tx{p} recordings", len(up), 1)
            beats, stamps = (up[0].beats, up[0].stamps) if up else ((), ())
            sb.compare(f"tx{p} beats", beats, want["tx"][p][0])
            sb.compare(f"tx{p} beat cycles", stamps, want["tx"][p][1], fmt=str)
            frames = [o for o in obs[FrameObs] if o.port == p]
            used += len(frames)
            sb.compare(f"tx{p} frames (start, end, bytes, digest)",
                       [_frame_key(f.start, f.end, f.data) for f in frames],
                       [_frame_key(*f) for f in _frames(cfg.width, *want["tx"][p])])
            cmds = sorted((o for o in obs[CommandObs] if o.src == p), key=lambda o: o.index)
            used += len(cmds)
            sb.equal(f"cmd{p} stores", len(cmds), len(by_src[p]))
            sb.compare(f"cmd{p} accept cycles", [c for o in cmds for c in o.stamps],
                       want["cmd_stamps"][p], fmt=str)
            wr = [o for o in obs[WriteObs] if o.port == p]
            used += len(wr)
            sb.compare(f"wr{p} writes (word, byte enables)", [(o.addr, o.be) for o in wr],
                       want["wr"][p][0])
            sb.compare(f"wr{p} cycles", [o.cycle for o in wr], want["wr"][p][1], fmt=str)
            node = [o for o in obs[NodeObs] if o.port == p]
            used += len(node)
            sb.equal(f"node{p} reports", len(node), 1)
            if node:
                sb.compare(f"cr{p} credit cycles", node[0].credits, want["cr"][p], fmt=str)
                for c in COUNTERS:
                    sb.equal(f"{c}{p}", node[0].counters[c], want["counters"][p][c])
                sb.compare(f"mem{p}", node[0].memory, want["mem"][p])
        runs = obs[RunObs]
        used += len(runs)
        sb.equal("run reports", len(runs), 1)
        if runs:
            run = runs[0]
            sb.equal("hang", run.hang, None)
            sb.equal("recorder overflows", run.overflows, ())
            sb.equal("credit errors", run.credit_errors, int(want["credit_errors"]))
            last = max([c for p in range(n) for c in want["wr"][p][1] + want["cr"][p]],
                       default=0)
            sb.equal("run outlasts the model's last event", run.end > last, True)

        # Oracle 2: the items' intent, against the RTL counters and the model's delivery.
        intent = {p: dict.fromkeys(COUNTERS, 0) for p in range(n)}
        for it in items:
            for reason in it.outcomes(cfg):
                intent[cfg.port_of(it.dst)][reason] += 1
        for o in obs[NodeObs]:
            for c in COUNTERS:
                if o.counters[c] != intent[o.port][c]:
                    sb.mismatches.append(f"intent {c}{o.port}: RTL {o.counters[c]} != "
                                         f"the items' {intent[o.port][c]}")
        stores = iter(want["stores"])         # the model's stores: source by source
        for p in range(n):
            for it in by_src[p]:
                delivered = next(stores)["remote_write"] is not None
                if delivered != (it.error == "none"):
                    sb.mismatches.append(f"intent {it}: delivered={delivered} (model)")

        left = len(observed) - used
        frames_seen = len(obs[FrameObs])
        writes_seen = len(obs[WriteObs])
        kinds = sorted({m.split("[")[0].split(":")[0] for m in sb.mismatches})
        if kinds:
            self.logger.error("mismatching: %s", ", ".join(kinds))
        good = any(it.error == "none" for it in items)
        self.finish(sb, {
            "items": len(items),
            "errors": {e: sum(it.error == e for it in items)
                       for e in sorted({it.error for it in items})},
            "frames": frames_seen, "writes": writes_seen,
            "faults": len(stim.targets), "cycles": runs[0].end if runs else None,
            "model_cycles": want["cycles"]}, left=left,
            musts=[(frames_seen > 0, "no frame was checked"),
                   (writes_seen > 0 or not good,
                    "good stores were driven but no write was checked")])


class BrokenScoreboard(NicScoreboard):
    """The negative test's scoreboard: one expected value off by one (``frames_ok`` of
    the first node that received a good frame), so that exactly one comparison fails.
    A test using it must fail; it is marked ``expect_fail``."""

    def expected(self, want):
        for p, counters in want["counters"].items():
            if counters["frames_ok"]:
                counters["frames_ok"] += 1
                self.logger.warning("broken on purpose: model frames_ok%d raised to %d",
                                    p, counters["frames_ok"])
                break
        return want
