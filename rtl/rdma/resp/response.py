"""Response sender of a responder that executes RDMA READ: ACK/NAK frames and READ
RESPONSE frames, in the order the verify stage decided them."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.common.fcs_inserter import FcsInserter
from rtl.rdma.ack_framer import AckFramer
from rtl.rdma.icrc_inserter import IcrcInserter
from rtl.rdma.read_framer import ReadResponseFramer
from spec.checks import reject
from spec.formats.packet import packet_signature
from spec.formats.roce import HOST_WORD_BITS, OpCode, Syndrome
from spec.rdma_responder import check_read_words
from spec.rdma_stages import ack_layout, read_layout

__all__ = ["ResponseSender", "response_counters"]


def response_counters():
    """The counters of this stage, in port order."""
    return ("acks", "read_frames")


class ResponseSender(wiring.Component):
    """Send one ACKNOWLEDGE frame per ACK job, and the READ RESPONSE frames of each READ
    job, one job at a time in FIFO order.

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
    o : Out(packet_signature(64))
        The frames with ICRC and FCS; ``ready`` is honoured.
    acks, read_frames : Out(32)
        ACK jobs taken; READ RESPONSE frames begun (descriptors taken by the framer).

    Timing
    ------
    An ACK job at the head of ``i`` leaves as :class:`~rtl.rdma.resp.ack.AckSender`'s do
    (beat 0 in the cycle it is taken), once no READ RESPONSE frame is in progress (the
    framer's ``busy``). A READ job of ``n`` packets (:func:`spec.rdma_responder.
    read_packets` of its ``length`` and ``pmtu_log2``) at the head: packet ``k``'s read
    is presented on ``rd`` once packets ``0 .. k - 1``'s were taken and its words fit
    (words owed, that is issued and not yet framed, plus its own at most ``read_words``);
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
        is_read = self.i.valid & job.read

        # ACK jobs: the ACK framer, while no READ RESPONSE frame is in progress.
        m.d.comb += [af.i.payload[name].eq(job[name]) for name in ack_layout().members]
        m.d.comb += af.i.valid.eq(self.i.valid & ~job.read & ~rf.busy)
        with m.If(rf.busy):
            wiring.connect(m, rf.o, icrc.i)
        with m.Else():
            wiring.connect(m, af.o, icrc.i)
        with m.If(af.i.valid & af.i.ready):
            m.d.comb += self.i.ready.eq(1)
            m.d.sync += self.acks.eq(self.acks + 1)

        # READ jobs: the packets' reads, then their descriptors.
        n = Signal(33)              # packets of the head job
        m.d.comb += n.eq(Mux(job.length == 0, 1,
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
        rd_words = Signal(8)
        m.d.comb += rd_words.eq((rd_bytes + 63) >> 6)
        popped = Signal()
        m.d.comb += popped.eq(self.data.valid & self.data.ready)
        can_issue = Signal()
        m.d.comb += can_issue.eq(is_read & (issued < n)
                                 & (owed + rd_words <= self.read_words))
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

        d = rf.i_seg.payload
        f_bytes = Signal(14)
        m.d.comb += f_bytes.eq(packet_bytes(framed))
        single, at_last = Signal(), Signal()
        m.d.comb += [single.eq(n == 1), at_last.eq(framed + 1 == n)]
        m.d.comb += [
            d.opcode.as_value().eq(Mux(single, OpCode.RC_RDMA_READ_RESPONSE_ONLY.value,
                                       Mux(framed == 0, OpCode.RC_RDMA_READ_RESPONSE_FIRST.value,
                                           Mux(at_last, OpCode.RC_RDMA_READ_RESPONSE_LAST.value,
                                               OpCode.RC_RDMA_READ_RESPONSE_MIDDLE.value)))),
            d.dmac.eq(job.dmac), d.smac.eq(job.smac), d.sip.eq(job.sip), d.dip.eq(job.dip),
            d.src_qp.eq(job.src_qp), d.dest_qp.eq(job.dest_qp), d.psn.eq(job.psn + framed),
            d.syndrome.eq(Syndrome.ACK.value), d.msn.eq(job.msn), d.length.eq(f_bytes),
            rf.i_seg.valid.eq(is_read & (framed < issued)),
        ]
        wiring.connect(m, wiring.flipped(self.data), rf.i_data)
        with m.If(rf.i_seg.valid & rf.i_seg.ready):
            m.d.sync += [framed.eq(framed + 1), self.read_frames.eq(self.read_frames + 1)]
            with m.If(at_last):
                m.d.comb += self.i.ready.eq(1)
                m.d.sync += [framed.eq(0), issued.eq(0)]
        return m
