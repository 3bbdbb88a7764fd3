"""Response sender of a responder that executes RDMA READ: ACK/NAK frames and READ
RESPONSE frames, in the order the verify stage decided them."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.ack_framer import AckFramer
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.read_framer import ReadResponseFramer
from spec.checks import reject
from spec.formats.packet import packet_signature
from spec.formats.roce import HOST_WORD_BITS, PSN_BITS, QPN_BITS, OpCode, Syndrome, bswap
from spec.host import wr_layout
from spec.rdma_responder import check_read_words
from spec.rdma_stages import ack_layout, read_layout

__all__ = ["ResponseSender", "response_counters"]


def response_counters():
    """The counters of this stage, in port order."""
    return ("acks", "read_frames")


class ResponseSender(wiring.Component):
    """Send one ACKNOWLEDGE frame per ACK job, the READ RESPONSE frames of each READ job
    and execute and answer each atomic job, one job at a time in FIFO order.

    Parameters
    ----------
    depth : int
        Host-memory words (``addr`` of the reads).
    read_words : int
        Depth of the READ data FIFO (``data``'s FIFO, which the responder owns): reads
        are issued only for words that fit.

    Ports
    -----
    i : In(stream.Signature(ack_layout(reads=True)))
        ACK/NAK jobs (``read`` = 0) and READ jobs (``read`` = 1), from the verify stage.
    rd : Out(stream.Signature(read_layout(depth)))
        Reads of READ data: one per response packet, ``ceil(bytes / 64)`` words from word
        ``va / 64 + k * MTU / 64`` for packet ``k`` (none for a zero-length READ). The
        responder presents them on its host read port behind MR reads and context fills.
    data : In(stream.Signature(HOST_WORD_BITS))
        The READ data words, in read order (the READ data FIFO's read side).
    writes_idle : In(1)
        No payload write is on its way to ``host.wr`` (the responder's write-job and
        payload-word FIFOs are empty at the start of the cycle): every WRITE decided
        before the READ has been handed to the host interface.
    o : Out(packet_signature(64))
        The frames with ICRC and FCS; ``ready`` is honoured.
    wr : Out(stream.Signature(wr_layout(depth)))
        An atomic's write of its new value (the responder puts it into its payload-word
        FIFO).
    save_valid, save_qpn, save_psn, save_orig : Out
        An atomic executed in this cycle: its QPN, PSN and original value.
    acks, read_frames : Out(32)
        ACK jobs taken; READ RESPONSE frames begun (descriptors taken by the framer).

    Timing
    ------
    An ACK job at the head of ``i`` leaves as :class:`~rtl.rdma.resp.ack.AckSender`'s do
    (beat 0 in the cycle it is taken), once no READ RESPONSE frame is in progress (the
    framer's ``busy``). A READ job of ``n`` packets (:func:`spec.rdma_responder.
    read_packets` of its ``length`` and ``pmtu_log2``) at the head: packet ``k``'s read
    is presented on ``rd`` once packets ``0 .. k - 1``'s were taken and its words fit
    (words owed, that is issued and not yet framed, plus its own at most ``read_words``),
    packet 0's only in a cycle with ``writes_idle`` (a READ sees the data of the WRITEs
    before it: the host interface does not let a read pass a posted write, as PCIe's
    ordering rules require, PCIe Base Specification section 2.4.1);
    a zero-length packet takes no read and counts as issued in the cycle it would have
    been presented. Packet ``k``'s descriptor goes to the
    :class:`~rtl.rdma.read_framer.ReadResponseFramer` from the cycle after its read was
    taken, once the framer takes it (see its timing: no gap between frames): opcode
    ONLY when ``n`` is 1, else FIRST, MIDDLE ... LAST; PSN ``psn + k``; AETH (FIRST,
    LAST, ONLY) syndrome ACK with the job's MSN; ``min(MTU, length - k * MTU)`` payload
    bytes. The job leaves ``i`` in the cycle its last descriptor is taken. The frames go
    through one :class:`~rtl.rdma.icrc_inserter.IcrcInserter` and
    :class:`~rtl.common.fcs_inserter.FcsInserter` (zero latency; one extra beat when a
    frame's last beat is full), so a frame's beats leave back to back while its words
    are in the FIFO and ``o.ready`` is high.

    An atomic job (``atomic``) is one packet: its read is one word (``va / 64``, after
    ``writes_idle`` as above); in the first cycle in which that word is at the data
    FIFO's head, the framer is not busy (the words before it are framed) and ``wr`` is
    ready, it is *executed*: the original value is the word's 8 bytes at ``va % 64``
    (little endian, the host's order), the new one ``orig + swap`` modulo 2**64 (FETCH &
    ADD) or ``swap`` if ``orig == compare`` else ``orig`` (COMPARE & SWAP; IBTA Vol 1
    9.4.5); the new value is written on ``wr`` (one word, those 8 bytes enabled), the
    word popped, and ``save_*`` carries (QPN, PSN, original) to the verify stage for one
    cycle. From the next cycle its ATOMIC ACKNOWLEDGE (opcode 0x12, AETH ACK with the
    job's MSN, AtomicAckETH the original value big endian) is described to the framer
    like a READ RESPONSE ONLY of 8 bytes, whose word comes from a register, not the
    FIFO. A replayed atomic (``replay``) reads and writes nothing: its ACKNOWLEDGE,
    with ``swap`` as the original value, is described once its (empty) read counts as
    issued.
    """

    def __init__(self, depth, read_words, header="roce"):
        self.header = header
        try:
            if not check_read_words(read_words):
                raise ValueError("read_words must be positive for a ResponseSender")
        except ValueError as error:
            reject(self, str(error))
        self.depth, self.read_words = depth, read_words
        ports = {"i": In(stream.Signature(ack_layout(reads=True))),
                 "rd": Out(stream.Signature(read_layout(depth))),
                 "data": In(stream.Signature(HOST_WORD_BITS)),
                 "writes_idle": In(1),
                 "wr": Out(stream.Signature(wr_layout(depth))),
                 "save_valid": Out(1), "save_qpn": Out(QPN_BITS), "save_psn": Out(PSN_BITS),
                 "save_orig": Out(64),
                 "o": Out(packet_signature(64))}
        ports.update({name: Out(32) for name in response_counters()})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.ack_framer = af = AckFramer(self.header)
        m.submodules.read_framer = rf = ReadResponseFramer(self.header)
        m.submodules.icrc = icrc = IcrcInserter(header=self.header)
        m.submodules.fcs = fcs = FcsInserter(64)
        wiring.connect(m, icrc.o, fcs.i)
        wiring.connect(m, fcs.o, wiring.flipped(self.o))
        job = self.i.payload
        is_read = self.i.valid & (job.read | job.atomic)    # a job of the READ path

        # ACK jobs: the ACK framer, while no READ RESPONSE frame is in progress.
        m.d.comb += [af.i.payload[name].eq(job[name]) for name in ack_layout().members]
        m.d.comb += af.i.valid.eq(self.i.valid & ~job.read & ~job.atomic & ~rf.busy)
        with m.If(rf.busy):
            wiring.connect(m, rf.o, icrc.i)
        with m.Else():
            wiring.connect(m, af.o, icrc.i)
        with m.If(af.i.valid & af.i.ready):
            m.d.comb += self.i.ready.eq(1)
            m.d.sync += self.acks.eq(self.acks + 1)

        # READ jobs: the packets' reads, then their descriptors.
        n = Signal(33)              # packets of the head job (an atomic: one)
        m.d.comb += n.eq(Mux((job.length == 0) | job.atomic, 1,
                             ((job.length - 1) >> job.pmtu_log2) + 1))
        issued = Signal(33)         # packets of the head job whose read was taken
        framed = Signal(33)         # packets of the head job whose descriptor was taken
        owed = Signal(range(self.read_words + 1))     # words issued, not yet framed
        mtu = Signal(14)
        m.d.comb += mtu.eq(1 << job.pmtu_log2)

        def packet_bytes(k):
            left = Signal(33, name="left")
            m.d.comb += left.eq(job.length - (k << job.pmtu_log2))
            return Mux(left > mtu, mtu, left)

        rd_bytes = Signal(14)
        m.d.comb += rd_bytes.eq(packet_bytes(issued))
        rd_words = Signal(8)        # an atomic reads its word, a replayed one nothing
        m.d.comb += rd_words.eq(Mux(job.atomic, ~job.replay, (rd_bytes + 63) >> 6))
        popped = Signal()
        m.d.comb += popped.eq(self.data.valid & self.data.ready)
        can_issue = Signal()
        m.d.comb += can_issue.eq(is_read & (issued < n)
                                 & (owed + rd_words <= self.read_words)
                                 & ((issued != 0) | self.writes_idle))
        m.d.comb += [
            self.rd.payload.addr.eq((job.va >> 6) + ((issued << job.pmtu_log2) >> 6)),
            self.rd.payload.words.eq(rd_words),
            self.rd.valid.eq(can_issue & (rd_words != 0)),
        ]
        took = Signal()             # the packet at ``issued`` counts as issued
        m.d.comb += took.eq(can_issue & ((rd_words == 0) | self.rd.ready))
        m.d.sync += owed.eq(owed + Mux(took, rd_words, 0) - popped)
        with m.If(took):
            m.d.sync += issued.eq(issued + 1)

        # Atomics: once its word is at the data FIFO's head and the framer idle (the words
        # before it framed), compute, write the new value, save the original.
        executed = Signal()         # the head atomic was executed
        frame_atomic = Signal()     # the frame in progress is an ATOMIC ACKNOWLEDGE
        ack_word = Signal(64)       # its AtomicAckETH (wire order)
        word, orig, new = Signal(HOST_WORD_BITS), Signal(64), Signal(64)
        at = job.va[3:6]
        m.d.comb += [word.eq(self.data.payload), orig.eq(word.word_select(at, 64)),
                     new.eq(Mux(job.cmp, Mux(orig == job.compare, job.swap, orig),
                                orig + job.swap))]
        execute = Signal()
        m.d.comb += execute.eq(is_read & job.atomic & ~job.replay & (issued == 1) & ~executed
                               & ~rf.busy & self.data.valid & self.wr.ready)
        m.d.comb += [
            self.wr.valid.eq(execute), self.wr.payload.addr.eq(job.va >> 6),
            self.wr.payload.data.eq(new << (at * 64)),
            self.wr.payload.be.eq(Const(0xFF, 64) << (at * 8)), self.wr.payload.last.eq(1),
            self.save_valid.eq(execute), self.save_qpn.eq(job.src_qp),
            self.save_psn.eq(job.psn), self.save_orig.eq(orig),
        ]
        kept = Signal(64)           # the executed atomic's original value
        with m.If(execute):
            m.d.sync += [executed.eq(1), kept.eq(orig)]

        d = rf.i_seg.payload
        f_bytes = Signal(14)
        m.d.comb += f_bytes.eq(packet_bytes(framed))
        single, at_last = Signal(), Signal()
        m.d.comb += [single.eq(n == 1), at_last.eq(framed + 1 == n)]
        m.d.comb += [
            d.opcode.as_value().eq(Mux(
                job.atomic, OpCode.RC_ATOMIC_ACKNOWLEDGE.value,
                Mux(single, OpCode.RC_RDMA_READ_RESPONSE_ONLY.value,
                                       Mux(framed == 0, OpCode.RC_RDMA_READ_RESPONSE_FIRST.value,
                                           Mux(at_last, OpCode.RC_RDMA_READ_RESPONSE_LAST.value,
                                               OpCode.RC_RDMA_READ_RESPONSE_MIDDLE.value))))),
            d.dmac.eq(job.dmac), d.smac.eq(job.smac), d.sip.eq(job.sip), d.dip.eq(job.dip),
            d.src_qp.eq(job.src_qp), d.dest_qp.eq(job.dest_qp), d.psn.eq(job.psn + framed),
            d.syndrome.eq(Syndrome.ACK.value), d.msn.eq(job.msn),
            d.length.eq(Mux(job.atomic, 8, f_bytes)),
            rf.i_seg.valid.eq(is_read & (framed < issued)
                              & (~job.atomic | job.replay | executed)),
        ]
        with m.If(frame_atomic):
            m.d.comb += [rf.i_data.valid.eq(1), rf.i_data.payload.eq(ack_word),
                         self.data.ready.eq(execute)]
        with m.Else():
            m.d.comb += [rf.i_data.valid.eq(self.data.valid),
                         rf.i_data.payload.eq(self.data.payload),
                         self.data.ready.eq(rf.i_data.ready | execute)]
        with m.If(rf.i_seg.valid & rf.i_seg.ready):
            m.d.sync += [framed.eq(framed + 1), frame_atomic.eq(job.atomic),
                         ack_word.eq(bswap(Mux(job.replay, job.swap, kept), 8))]
            with m.If(~job.atomic):
                m.d.sync += self.read_frames.eq(self.read_frames + 1)
            with m.If(at_last):
                m.d.comb += self.i.ready.eq(1)
                m.d.sync += [framed.eq(0), issued.eq(0), executed.eq(0)]
        return m
