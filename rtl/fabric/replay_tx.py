"""The sending end of the link-level retry: sequence tags, replay buffer, go-back-N."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int, reject
from spec.fabric import TX_COUNTERS
from spec.formats.link_retry import SEQ_BITS, ack_layout, tagged_packet_signature
from spec.formats.packet import check_width, packet_signature

__all__ = ["ReplayTx"]


class ReplayTx(wiring.Component):
    """Keep every frame until the receiver acknowledges it; send again from a lost one.

    Parameters
    ----------
    width : int
        Datapath bytes.
    depth : int
        Beats of the replay buffer (a power of two, 4 to 4096). It bounds the beats sent
        and not yet acknowledged, so it should hold a round trip of the link plus the
        longest frame (``ReliableLink`` sizes it).
    timeout : int
        Cycles without progress, while frames wait for their acknowledgement, after which
        the sender goes back to the oldest of them (2 to 65535).
    max_frame_beats : int
        The longest frame (1 to ``depth / 2``): a frame starts entering only when the
        buffer has room for this many beats, so a frame once started always completes
        (a rewind waits for the end of the frame being sent).

    Ports
    -----
    i : In(packet_signature(width))
        Frames from the client. ``ready`` is high, between frames, while the buffer has
        room for ``max_frame_beats`` beats and, inside a frame, for one beat; it depends
        on registers only. Longer frames than ``max_frame_beats`` may wait forever.
    o : Out(tagged_packet_signature(width))
        To the link: one beat a cycle at most, ``tag`` = the frame's sequence number
        (frames are numbered from 0 in the order they entered ``i``, modulo
        ``2**SEQ_BITS``) and its check bit (:mod:`spec.formats.link_retry`). ``o.ready``
        is ignored (a link is always ready).
    ack : In(stream.Signature(ack_layout, always_ready=True))
        ACK/NAK from the receiver (``seq`` = its next expected frame). One whose check
        bit fails is ignored (counted in ``acks_bad``), as if it had been lost: the
        timer covers it.
    frames, resent_frames, resent_beats, naks, timeouts, replay_cycles, acks_bad : Out(32)
        Frames taken on ``i``; frames and beats sent again; NAKs that moved the sender
        back; timeouts; cycles lost to recovery (a rewind is pending, or the beat at the
        send position was sent before); ACK/NAKs ignored for a failed check.

    Behaviour and timing
    --------------------
    A beat taken on ``i`` in cycle ``c`` can be sent from ``c + 1``; beats leave in
    order, one a cycle, as long as there are beats not yet sent. ``acked`` is the oldest
    frame not acknowledged and ``sent`` the first frame never sent. An ACK or NAK with
    ``acked < seq <= sent`` releases the frames before ``seq`` (a stale one, outside
    that range, changes nothing). A NAK with ``acked <= seq < sent`` (after its release)
    asks for a rewind, and so does the timer: it counts the cycles in which frames wait
    for their acknowledgement and no rewind is pending, restarts on every release and
    every rewind, and asks for a rewind when it reaches ``timeout``. A rewind waits for
    the end of the frame being sent, then takes one cycle in which nothing is sent: the
    next beat sent is the first beat of frame ``acked`` (counting a release in the
    rewind cycle itself), and from there every frame is sent again in order. An ACK that
    releases frames the sender is still sending again (it arrived after a rewind) moves
    it the same way, at the next frame boundary, past them.
    """

    def __init__(self, width, depth, timeout, max_frame_beats):
        self.width = check_width(width, self)
        self.depth = check_int(self, "replay buffer depth (beats)", depth, 4, 4096)
        if depth & (depth - 1):
            reject(self, f"replay buffer depth must be a power of two, not {depth!r}")
        self.max_frame_beats = check_int(self, "max_frame_beats", max_frame_beats, 1,
                                         depth // 2)
        self.timeout = check_int(self, "retry timeout (cycles)", timeout, 2, 65535)
        ports = {
            "i": In(packet_signature(width)),
            "o": Out(tagged_packet_signature(width)),
            "ack": In(stream.Signature(ack_layout, always_ready=True)),
        }
        ports.update({name: Out(32) for name in TX_COUNTERS})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        d = self.depth
        abits = d.bit_length() - 1
        pbits = abits + 1                      # positions modulo 2 * depth
        mask = (1 << SEQ_BITS) - 1
        m.submodules.beats = beats = memory.Memory(shape=self.i.payload.shape(), depth=d,
                                                   init=[])
        m.submodules.ends = ends = memory.Memory(shape=pbits, depth=d, init=[])
        b_wr, b_rd = beats.write_port(), beats.read_port(domain="comb")
        e_wr, e_rd = ends.write_port(), ends.read_port(domain="comb")

        wr = Signal(pbits)           # next position written
        rd = Signal(pbits)           # next position sent
        hw = Signal(pbits)           # first position never sent
        ack_ptr = Signal(pbits)      # first position of frame ``acked``
        in_seq = Signal(SEQ_BITS)    # number of the frame entering
        tx_seq = Signal(SEQ_BITS)    # number of the frame of the beat at ``rd``
        acked = Signal(SEQ_BITS)
        sent = Signal(SEQ_BITS)
        mid = Signal()               # a frame is partly sent
        pending = Signal()           # a rewind is due at the next frame boundary
        timer = Signal(range(self.timeout + 1))

        # Input. Room is counted from the oldest beat still needed: the oldest not
        # acknowledged, or the send position if an ACK has overtaken it.
        behind = Signal()
        take = Signal()
        in_mid = Signal()
        need = Mux(in_mid, 1, self.max_frame_beats)
        m.d.comb += [
            behind.eq(((hw - rd)[:pbits]) > ((hw - ack_ptr)[:pbits])),
            self.i.ready.eq(((wr - Mux(behind, rd, ack_ptr))[:pbits]) <= d - need),
            take.eq(self.i.valid & self.i.ready),
            b_wr.addr.eq(wr[:abits]), b_wr.data.eq(self.i.payload), b_wr.en.eq(take),
            e_wr.addr.eq(in_seq[:abits]), e_wr.data.eq(wr + 1),
            e_wr.en.eq(take & self.i.payload.last),
        ]
        with m.If(take):
            m.d.sync += [wr.eq(wr + 1), in_mid.eq(~self.i.payload.last)]
            with m.If(self.i.payload.last):
                m.d.sync += [in_seq.eq(in_seq + 1), self.frames.eq(self.frames + 1)]

        # ACK/NAK: release, and a rewind request.
        ev = self.ack.payload
        ahead = Signal(SEQ_BITS)
        span = Signal(SEQ_BITS)
        release = Signal()
        nak = Signal()
        ack_ok = Signal()
        m.d.comb += [
            ack_ok.eq(self.ack.valid & ~self.ack.payload.as_value().xor()),
            ahead.eq((ev.seq - acked) & mask),
            span.eq((sent - acked) & mask),
            release.eq(ack_ok & (ahead != 0) & (ahead <= span)),
            nak.eq(ack_ok & ev.nak & (ahead < span)),
            e_rd.addr.eq((ev.seq - 1)[:abits]),
        ]
        new_ack_ptr = Mux(release, e_rd.data, ack_ptr)
        new_acked = Mux(release, ev.seq, acked)
        m.d.sync += [ack_ptr.eq(new_ack_ptr), acked.eq(new_acked)]
        with m.If(nak):
            m.d.sync += self.naks.eq(self.naks + 1)
        with m.If(self.ack.valid & ~ack_ok):
            m.d.sync += self.acks_bad.eq(self.acks_bad + 1)

        # Output.
        rewind = Signal()
        send = Signal()
        beat = Signal(self.i.payload.shape())
        m.d.comb += [
            rewind.eq((pending | behind) & ~mid),
            send.eq((rd != wr) & ~rewind),
            b_rd.addr.eq(rd[:abits]),
            beat.eq(Mux(send, b_rd.data, 0)),     # zeros, not a stale word, when idle
            self.o.valid.eq(send),
            self.o.payload.data.eq(beat.data), self.o.payload.nbytes.eq(beat.nbytes),
            self.o.payload.first.eq(beat.first), self.o.payload.last.eq(beat.last),
            self.o.payload.tag.eq(Cat(tx_seq, tx_seq.xor())),
        ]
        again = Signal()
        m.d.comb += again.eq(rd != hw)
        with m.If(rewind):
            m.d.sync += [rd.eq(new_ack_ptr), tx_seq.eq(new_acked)]
        with m.Elif(send):
            m.d.sync += [rd.eq(rd + 1), mid.eq(~beat.last),
                         hw.eq(Mux(again, hw, rd + 1))]
            with m.If(beat.last):
                m.d.sync += tx_seq.eq(tx_seq + 1)
                with m.If(~again):
                    m.d.sync += sent.eq(sent + 1)
            with m.If(again):
                m.d.sync += self.resent_beats.eq(self.resent_beats + 1)
                with m.If(beat.first):
                    m.d.sync += self.resent_frames.eq(self.resent_frames + 1)

        # Timer and rewind requests.
        waiting = Signal()
        expire = Signal()
        m.d.comb += [waiting.eq((new_acked != sent) & ~pending),
                     expire.eq(waiting & (timer == self.timeout - 1))]
        with m.If(rewind | release | ~waiting | expire):
            m.d.sync += timer.eq(0)
        with m.Else():
            m.d.sync += timer.eq(timer + 1)
        with m.If(expire):
            m.d.sync += self.timeouts.eq(self.timeouts + 1)
        m.d.sync += pending.eq(Mux(rewind, 0, pending | nak | expire))
        with m.If(pending | again):
            m.d.sync += self.replay_cycles.eq(self.replay_cycles + 1)
        return m
