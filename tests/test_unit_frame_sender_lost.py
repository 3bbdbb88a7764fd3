"""The frame sender's ``lost_frames`` counter (a requester with reads,
:data:`spec.rdma_read_req.SENDER_COUNTERS`) on its own, in the Amaranth simulator: the
two chains' outputs are driven by the test, so that the clashes the sender's rules
never allow can be made, and the count is checked against the frames the stimulus
damages (a WRITE frame with a beat offered in a cycle the request framer's beat was)."""

from types import SimpleNamespace

from amaranth import Module, Signal
from amaranth.sim import Simulator

from rtl.rdma.req.frame_sender import FrameSender


def _chain():
    """A chain's output as the counter sees it: ``o.valid``, ``o.ready``,
    ``o.payload.last``."""
    return SimpleNamespace(o=SimpleNamespace(valid=Signal(), ready=Signal(),
                                             payload=SimpleNamespace(last=Signal())))


def _run(write_beats, request_beats):
    """``write_beats``: per cycle None or ``last`` (bool) of the WRITE chain's beat;
    ``request_beats``: per cycle whether the request framer sends a beat. Returns the
    counter after the last cycle."""
    m = Module()
    fcs, rq = _chain(), _chain()
    sender = SimpleNamespace(lost_frames=Signal(32))
    FrameSender._lost_frames(sender, m, fcs, rq)
    out = []

    async def bench(ctx):
        for w, r in zip(write_beats, request_beats, strict=True):
            ctx.set(fcs.o.valid, w is not None)
            ctx.set(fcs.o.ready, 1)
            ctx.set(fcs.o.payload.last, bool(w))
            ctx.set(rq.o.valid, r)
            await ctx.tick()
        ctx.set(fcs.o.valid, 0)
        ctx.set(rq.o.valid, 0)
        await ctx.tick()
        out.append(ctx.get(sender.lost_frames))

    sim = Simulator(m)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return out[0]


def test_frames_apart_count_nothing():
    # A 3-beat WRITE frame, a 2-beat request after it, another WRITE frame.
    w = [False, False, True, None, None, False, True]
    r = [0, 0, 0, 1, 1, 0, 0]
    assert _run(w, r) == 0


def test_each_damaged_write_frame_counts_once():
    # Frame 1: clash on its middle beat; frame 2: clean; frame 3: clash on two beats,
    # the last among them; frame 4: a one-beat frame clashing.
    frames = [([False, False, True], [0, 1, 0]), ([False, True], [0, 0]),
              ([False, False, True], [1, 0, 1]), ([True], [1])]
    w = [b for beats, _ in frames for b in beats]
    r = [x for _, clash in frames for x in clash]
    damaged = sum(any(clash) for _, clash in frames)
    assert _run(w, r) == damaged
