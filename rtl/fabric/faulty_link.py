"""A link that drops, corrupts and duplicates whole frames from a seeded pattern.

The fault model, its decision rule and its timing are described in ``docs/faults.md``;
the golden model is :class:`pymodel.fabric.faulty_link.FaultyLinkModel`. Settings,
counters and fault-word constants: :mod:`spec.fabric`.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.gf2 import matrix_of
from rtl.fabric.link import DelayLine
from spec.checks import check_int
from spec.fabric import (
    CORRUPT_BEAT_SHIFT,
    FAULT_KINDS,
    SIDE_SEED_XOR,
    SIDE_WORDS,
    TAG_SEED_XOR,
    TAG_WORDS,
    WORD_STEPS,
    WORDS_PER_FRAME,
)
from spec.formats.link_retry import tagged_packet_layout, tagged_packet_signature
from spec.formats.packet import check_width
from spec.lfsr import lfsr_next
from spec.ports import faulty_link_signatures

__all__ = ["FaultyLink"]


def _lfsr_power(steps):
    """GF(2) rows of the LFSR advanced ``steps`` times (elaboration time only)."""
    def advance(state):
        for _ in range(steps):
            state = lfsr_next(state)
        return state
    return matrix_of(advance, 16, 16)


def _apply_rows(rows, value):
    return Cat(*[(value & row).xor() for row in rows])


def _staged_layout(layout):
    """A beat between the fault stage and the output stage, with its duplicate mark."""
    return data.StructLayout({"beat": layout, "dup": 1})


class FaultyLink(wiring.Component):
    """A :class:`rtl.fabric.link.Link` that damages whole frames from a seeded pattern.

    Parameters
    ----------
    width : int
        Datapath width in bytes (:data:`spec.formats.packet.SUPPORTED_WIDTHS`).
    latency : int
        Cycles from a beat on ``i`` to the same beat on ``o`` while no copy is being sent
        (1 to 1024), as for ``Link``.
    max_frame_beats : int
        Beats of the frame buffer that holds a frame to be sent twice (1 to 4096). A frame
        picked for duplication that is longer is sent once and sets ``too_long``.
    fifo_depth : int
        Beats that may wait behind a copy being sent (1 to 4096). A beat that finds the
        FIFO full is lost: ``lost`` counts it and ``overflow`` sticks.
    tag_bits : int
        Bits of a sideband ``tag`` carried with every beat (0 to 32, default none): the
        preamble's sequence number of the link-level retry
        (:func:`spec.formats.link_retry.tagged_packet_layout`). Tags are dropped and
        duplicated with their beats, and damaged only by the tag fault (``tag_rate``).
    side_bits : int
        Bits of a reverse sideband (0 to 32, default none): the ACK/NAKs of the
        link-level retry, which the link can drop or damage (``ack_drop_rate``,
        ``ack_corrupt_rate``).

    Ports
    -----
    i : In(tagged_packet_signature(width, tag_bits))
        Always ready (a wire can not push back). Frames must be well formed (``first`` ..
        ``last``, not interleaved, ``nbytes`` 1..width); a beat without ``first`` belongs
        to the frame of the last ``first`` beat (no fault before the first one).
    o : Out(tagged_packet_signature(width, tag_bits))
        Registered. ``valid`` for one cycle per beat; ``o.ready`` is ignored.
    settings : In(SettingsSignature), counters : Out(CountersSignature)
        The settings and the counters and flags below, as members of these two ports
        (:meth:`port_signatures`).
    seed : In(16)
        Start of the fault pattern; 0 is read as 1. Read in the first cycle after reset.
    drop_rate, corrupt_rate, dup_rate : In(16)
        A frame starts a fault of that kind with probability ``rate / 65535``: 0 never,
        65535 every frame, 66 about 1.0e-3.
    drop_burst, corrupt_burst, dup_burst : In(8)
        Frames hit by each fault that a random draw starts (the frame itself and the
        ``burst - 1`` frames after it); 0 is read as 1.
    frames_in : Out(32)
        ``first`` beats accepted on ``i``.
    dropped, corrupted, duplicated : Out(32)
        Frames dropped; frames sent with a flipped bit (not counting dropped ones);
        frames whose copy was started (updated when the original's last beat is loaded
        into ``o``).
    lost : Out(32)
        Beats lost to a full FIFO. ``overflow`` : Out(1) sticks when one is lost.
    too_long : Out(1)
        Sticks when a frame picked for duplication was longer than ``max_frame_beats``.
    tag_rate : In(16), tag_corrupted : Out(32)
        With ``tag_bits``: a frame's tag gets one bit flipped, on every beat of the frame
        (the frame has one tag, in its preamble), with probability ``tag_rate / 65535``;
        the frames sent so (dropped ones not counted).
    side_i : In(stream.Signature(side_bits, always_ready=True)), side_o : Out(...)
        With ``side_bits``: the sideband, combinational from ``side_i`` to ``side_o``
        (the caller adds the delay). Each item is dropped (``ack_drop_rate``) or, if not,
        sent with one bit flipped (``ack_corrupt_rate``); ``acks_dropped`` and
        ``acks_corrupted`` count them.

    Decision rule
    -------------
    A 16-bit Galois LFSR (:mod:`spec.lfsr`) starts at ``seed``
    and advances ``WORDS_PER_FRAME * WORD_STEPS`` steps at each ``first`` beat only, so
    the faults of frame ``n`` depend on ``(settings, n)`` and not on timing. Frame ``n``
    reads the words ``w[k]``, the state after ``16 * k`` further steps (``k`` = 0 drop,
    1 corrupt, 2 duplicate, 3 bit position). For each kind: if a burst of it is still
    open the frame is hit (one frame fewer left), else the frame is hit when
    ``w[kind] <= rate`` and a burst of ``burst - 1`` further frames opens. A dropped frame
    is neither corrupted nor duplicated nor counted as such.

    The tag and sideband faults use LFSRs of their own (:data:`spec.fabric.TAG_SEED_XOR`,
    :data:`spec.fabric.SIDE_SEED_XOR`), so the frame faults of a seed do not change when
    they are turned on. The tag LFSR advances at each ``first`` beat (words: draw, bit
    position); the sideband LFSR at each ``side_i`` item (words: drop draw, corrupt
    draw, bit position); a position word ``w`` picks bit ``(w * bits) >> 16``.

    Faults
    ------
    drop
        No beat of the frame enters the link.
    corrupt
        Beat ``j = w[3] >> 12`` of the frame (or its last beat if it is shorter) gets
        data bit ``p = w[3] mod 8*width`` flipped; if byte ``p // 8`` is not valid in that
        beat, bit ``p mod 8`` of its last valid byte is flipped instead. Length and flags
        are unchanged.
    duplicate
        The frame as sent (corruption included) is written to the frame buffer while it
        leaves; the copy is sent in the cycles right after the original's last beat. Beats
        that reach the output meanwhile wait in order in the FIFO and leave one per cycle
        after the copy. So a beat accepted in cycle ``c`` leaves in cycle
        ``max(c + latency, t + 1)``, where ``t`` is the cycle of the beat or copy beat
        before it on ``o``.
    """

    def __init__(self, width, latency, max_frame_beats=64, fifo_depth=64, tag_bits=0,
                 side_bits=0):
        self.width = check_width(width, self)
        self.tag_bits = check_int(self, "tag_bits", tag_bits, 0, 32)
        self.side_bits = check_int(self, "side_bits", side_bits, 0, 32)
        self.layout = tagged_packet_layout(width, tag_bits)
        self.latency = check_int(self, "link latency (cycles)", latency, 1, 1024)
        self.max_frame_beats = check_int(self, "max_frame_beats", max_frame_beats, 1, 4096)
        self.fifo_depth = check_int(self, "fifo_depth", fifo_depth, 1, 4096)
        sig = tagged_packet_signature(width, tag_bits)
        settings, counters = self.port_signatures(bool(tag_bits), bool(side_bits))
        ports = {"i": In(sig), "o": Out(sig), "settings": In(settings),
                 "counters": Out(counters)}
        if side_bits:
            side = stream.Signature(side_bits, always_ready=True)
            ports.update({"side_i": In(side), "side_o": Out(side)})
        super().__init__(ports)

    #: The signatures of the ``settings`` and ``counters`` ports:
    #: :func:`spec.ports.faulty_link_signatures`.
    port_signatures = staticmethod(faulty_link_signatures)

    def elaborate(self, platform):
        m = Module()
        if self.side_bits:
            self._side_stage(m)
        staged = self._fault_stage(m)
        if self.latency > 1:
            # The wire: a delay line of ``latency - 1`` cycles (registers when short, a
            # memory when long; rtl.fabric.link.DelayLine), the output stage the last.
            line = DelayLine(data.StructLayout({"valid": 1,
                                                "payload": _staged_layout(self.layout)}),
                             self.latency - 1)
            m.submodules.wire = line
            m.d.comb += [line.i.valid.eq(staged[0]), line.i.payload.eq(staged[1])]
            staged = (line.o.valid, line.o.payload)
        self._output_stage(m, *staged)
        return m

    def _fault_stage(self, m):
        """Decide at each ``first`` beat, drop or flip combinationally; return the
        ``(valid, payload)`` of the beat that enters the delay line."""
        w = self.width
        beat = self.i.payload
        m.d.comb += self.i.ready.eq(1)
        first = Signal()
        m.d.comb += first.eq(self.i.valid & beat.first)

        # The pattern: the state in use is the seed until the first frame is decided.
        started = Signal()
        state = Signal(16)
        cur = Signal(16)
        seed = self.settings.seed
        m.d.comb += cur.eq(Mux(started, state, Mux(seed == 0, 1, seed)))
        words = [Signal(16, name=f"word{k}") for k in range(WORDS_PER_FRAME)]
        for k, word in enumerate(words):
            m.d.comb += word.eq(_apply_rows(_lfsr_power(k * WORD_STEPS), cur))
        advance = _lfsr_power(WORDS_PER_FRAME * WORD_STEPS)
        m.d.sync += [started.eq(1),
                     state.eq(Mux(first, _apply_rows(advance, cur), cur))]

        # Per kind: a new draw or the rest of a burst; held for the frame's other beats.
        st = self.settings
        draws = {"drop": (st.drop_rate, st.drop_burst),
                 "corrupt": (st.corrupt_rate, st.corrupt_burst),
                 "dup": (st.dup_rate, st.dup_burst)}
        f = self.counters
        hit = {}
        for k, kind in enumerate(FAULT_KINDS):
            rate, burst = draws[kind]
            left = Signal(8, name=f"{kind}_left")
            held = Signal(name=f"{kind}_held")
            drawn = Signal(name=f"{kind}_drawn")
            new = Signal(name=f"{kind}_new")
            m.d.comb += [
                drawn.eq(words[k] <= rate),
                new.eq((left != 0) | drawn),
            ]
            restart = Mux(drawn, Mux(burst == 0, 0, burst - 1), 0)
            m.d.sync += [
                left.eq(Mux(first, Mux(left != 0, left - 1, restart), left)),
                held.eq(Mux(first, new, held)),
            ]
            hit[kind] = (new, Mux(first, new, held))
        drop = hit["drop"][1]
        corrupt = hit["corrupt"][1] & ~drop
        dup = hit["dup"][1] & ~drop

        # Where the flip lands: beat j of the frame (or its last), data bit p.
        position = Signal(16)
        index = Signal(4)                   # beat index within the frame, wraps
        flipped = Signal()
        m.d.sync += position.eq(Mux(first, words[3], position))
        pos = Mux(first, words[3], position)
        bits_log2 = (8 * w).bit_length() - 1
        j = pos[CORRUPT_BEAT_SHIFT:CORRUPT_BEAT_SHIFT + 4]
        p = pos[:bits_log2]
        idx = Mux(first, 0, index)
        done = Mux(first, 0, flipped)
        flip = Signal()
        m.d.comb += flip.eq(self.i.valid & corrupt & ~done & ((idx == j) | beat.last))
        lane = p[3:]
        lane_ok = Signal(bits_log2 - 3)
        m.d.comb += lane_ok.eq(Mux(lane < beat.nbytes, lane, beat.nbytes - 1))
        bit = Cat(p[:3], lane_ok)
        mask = Signal(8 * w)
        m.d.comb += mask.eq(Mux(flip, Const(1, 8 * w) << bit, 0))
        with m.If(self.i.valid):
            m.d.sync += [index.eq(idx + 1), flipped.eq(done | flip)]

        out = Signal(_staged_layout(self.layout))
        valid = Signal()
        m.d.comb += [
            valid.eq(self.i.valid & ~drop),
            out.beat.eq(beat),
            out.beat.data.eq(beat.data ^ mask),
            out.dup.eq(dup),
        ]
        if self.tag_bits:
            tag_mask = self._tag_faults(m, first, drop, hit["drop"][0])
            m.d.comb += out.beat.tag.eq(beat.tag ^ tag_mask)
        with m.If(first):
            m.d.sync += [
                f.frames_in.eq(f.frames_in + 1),
                f.dropped.eq(f.dropped + hit["drop"][0]),
                f.corrupted.eq(f.corrupted + (hit["corrupt"][0] & ~hit["drop"][0])),
            ]
        return valid, out

    def _pattern(self, m, name, xor, advance_when, nwords):
        """An LFSR of its own started at ``seed ^ xor`` (0 read as 1), advanced
        ``nwords * WORD_STEPS`` steps in each cycle ``advance_when``; returns its words."""
        started = Signal(name=f"{name}_started")
        state = Signal(16, name=f"{name}_state")
        cur = Signal(16, name=f"{name}_cur")
        start = Signal(16, name=f"{name}_start")
        m.d.comb += [start.eq(self.settings.seed ^ xor),
                     cur.eq(Mux(started, state, Mux(start == 0, 1, start)))]
        words = [Signal(16, name=f"{name}_word{k}") for k in range(nwords)]
        for k, word in enumerate(words):
            m.d.comb += word.eq(_apply_rows(_lfsr_power(k * WORD_STEPS), cur))
        advance = _lfsr_power(nwords * WORD_STEPS)
        m.d.sync += [started.eq(1),
                     state.eq(Mux(advance_when, _apply_rows(advance, cur), cur))]
        return words

    def _tag_faults(self, m, first, drop, drop_new):
        """The tag fault: decided at each first beat, held for the frame; returns the
        mask XORed into the tag of the beat on ``i``."""
        words = self._pattern(m, "tag", TAG_SEED_XOR, first, TAG_WORDS)
        hit_new = Signal()
        pos_new = Signal(range(self.tag_bits))
        m.d.comb += [hit_new.eq(words[0] <= self.settings.tag_rate),
                     pos_new.eq((words[1] * self.tag_bits) >> 16)]
        hit_r = Signal()
        pos_r = Signal(range(self.tag_bits))
        m.d.sync += [hit_r.eq(Mux(first, hit_new, hit_r)), pos_r.eq(Mux(first, pos_new, pos_r))]
        hit = Mux(first, hit_new, hit_r)
        pos = Mux(first, pos_new, pos_r)
        mask = Signal(self.tag_bits)
        m.d.comb += mask.eq(Mux(hit & ~drop, Const(1, self.tag_bits) << pos, 0))
        with m.If(first):
            f = self.counters
            m.d.sync += f.tag_corrupted.eq(f.tag_corrupted + (hit_new & ~drop_new))
        return mask

    def _side_stage(self, m):
        """The sideband: ``side_i`` to ``side_o`` combinationally, dropped or with one
        bit flipped per the sideband pattern."""
        n = self.side_bits
        item = self.side_i.valid
        words = self._pattern(m, "side", SIDE_SEED_XOR, item, SIDE_WORDS)
        drop = Signal()
        flip = Signal()
        pos = Signal(range(n))
        m.d.comb += [
            drop.eq(words[0] <= self.settings.ack_drop_rate),
            flip.eq(~drop & (words[1] <= self.settings.ack_corrupt_rate)),
            pos.eq((words[2] * n) >> 16),
            self.side_o.valid.eq(item & ~drop),
            self.side_o.payload.eq(self.side_i.payload
                                   ^ Mux(flip, Const(1, n) << pos, 0)),
        ]
        f = self.counters
        m.d.sync += [f.acks_dropped.eq(f.acks_dropped + (item & drop)),
                     f.acks_corrupted.eq(f.acks_corrupted + (item & flip))]

    def _output_stage(self, m, x_valid, x):
        """The output register, fed by a running copy, else the FIFO head, else ``x``."""
        depth, fb_depth = self.fifo_depth, self.max_frame_beats
        lay, f = self.layout, self.counters
        m.submodules.fifo = fifo = memory.Memory(shape=_staged_layout(lay), depth=depth,
                                                 init=[])
        m.submodules.frame = frame = memory.Memory(shape=lay, depth=fb_depth, init=[])
        f_rd, f_wr = fifo.read_port(domain="comb"), fifo.write_port()
        b_rd, b_wr = frame.read_port(domain="comb"), frame.write_port()

        count = Signal(range(depth + 1))
        rd_ptr = Signal(range(depth))
        wr_ptr = Signal(range(depth))
        copying = Signal()
        copy_idx = Signal(range(fb_depth))
        copy_end = Signal(range(fb_depth))
        fb_next = Signal(range(fb_depth + 1))

        pop, bypass, send, push, lose = (Signal(name=n) for n in
                                         ("pop", "bypass", "send", "push", "lose"))
        sent = Signal(_staged_layout(lay))
        fb_idx = Signal(range(fb_depth + 1))
        fits, start_copy = Signal(), Signal()
        m.d.comb += [
            pop.eq(~copying & (count != 0)),
            bypass.eq(~copying & (count == 0) & x_valid),
            send.eq(pop | bypass),
            sent.eq(Mux(pop, f_rd.data, x)),
            push.eq(x_valid & ~bypass & (count - pop < depth)),
            lose.eq(x_valid & ~bypass & (count - pop >= depth)),
            f_rd.addr.eq(rd_ptr),
            f_wr.addr.eq(wr_ptr), f_wr.data.eq(x), f_wr.en.eq(push),
            fb_idx.eq(Mux(sent.beat.first, 0, fb_next)),
            fits.eq(fb_idx < fb_depth),
            b_wr.addr.eq(fb_idx), b_wr.data.eq(sent.beat), b_wr.en.eq(send & fits),
            b_rd.addr.eq(copy_idx),
            start_copy.eq(send & sent.dup & sent.beat.last & fits),
        ]

        def wrap(ptr):
            return Mux(ptr == depth - 1, 0, ptr + 1)

        m.d.sync += [
            self.o.valid.eq(copying | send),
            self.o.payload.eq(Mux(copying, b_rd.data, sent.beat)),
            rd_ptr.eq(Mux(pop, wrap(rd_ptr), rd_ptr)),
            wr_ptr.eq(Mux(push, wrap(wr_ptr), wr_ptr)),
            count.eq(count - pop + push),
            fb_next.eq(Mux(send, Mux(fits, fb_idx + 1, fb_depth), fb_next)),
            copying.eq(Mux(copying, copy_idx != copy_end, start_copy)),
            copy_idx.eq(Mux(copying, copy_idx + 1, 0)),
            copy_end.eq(Mux(start_copy, fb_idx, copy_end)),
            f.duplicated.eq(f.duplicated + start_copy),
            f.lost.eq(f.lost + lose),
            f.overflow.eq(f.overflow | lose),
            f.too_long.eq(f.too_long | (send & sent.dup & sent.beat.last & ~fits)),
        ]
