"""Header-check stage of the responder: frame checks, field extraction, context lookup."""

import operator
from functools import reduce

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.rdma.context_cache import CACHE_LOG2_BITS
from rtl.rdma.eth_ip_udp import framing_param
from spec.checks import check_int, reject
from spec.formats.roce import (
    ATOMIC_ETH_LAYOUT,
    BTH_BYTES,
    ETHERTYPE_IPV4,
    ICRC_BYTES,
    IP_PROTO_UDP,
    IPV4_BYTES,
    QPN_BITS,
    RETH_BYTES,
    ROCE_UDP_PORT,
    UDP_BYTES,
    WRITE_RETH_HEADER,
    OpCode,
    bswap,
    header_bytes,
)
from spec.formats.scaleup import SU_WRITE_RETH_HEADER, Header, ScaleUpType
from spec.ports import ports_by_name
from spec.rdma_responder import SIZE_LIMITS
from spec.rdma_stages import header_entry_layout, verify_job_layout

__all__ = ["HeaderCheck", "inflight_bits"]

#: Bytes of the AtomicETH (IBTA Vol 1 section 9.3.4).
ATOMIC_ETH_BYTES = header_bytes(ATOMIC_ETH_LAYOUT)
HEADER_COUNTERS = ("fcs_bad", "truncated", "malformed", "icrc_bad", "jobs_max")


def inflight_bits(jobs):
    """Width of the per-entry frame counters: frames between the lookup and the end of
    the verify stage are at most ``jobs``, so counting modulo ``2 * jobs`` or more is
    exact."""
    return (jobs).bit_length() + 1


class HeaderCheck(wiring.Component):
    """Check each stored frame and look its QP context up, one frame per cycle.

    Parameters
    ----------
    entries : int
        Entries of the context cache; ``2**cache_log2`` of them are in use (the port,
        as the cache's); a frame's entry is the cache's ``entry`` for its lookup.
    jobs : int
        Depth of the verify-job FIFO this stage writes.

    Ports
    -----
    i : In(stream.Signature(header_entry_layout()))
        Header entries, from the receive stage's header FIFO.
    o : Out(stream.Signature(verify_job_layout()))
        One verify job per frame, in order, to the verify stage.
    o_level : In(range(jobs + 1))
        The verify-job FIFO's level (for ``jobs_max``).
    lookup : Out(stream.Signature({"qpn": QPN_BITS}))
        To the context cache's ``req`` (``ready``: the lookup is taken in this cycle).
    entry : In(range(entries))
        From the cache: ``lookup``'s entry (the hit entry, or the entry a miss fills),
        combinational; the job carries it to the verify stage.
    victim_busy : Out(1)
        For ``lookup``'s entry: frames of it were looked up and are not through the
        verify stage yet (they must not lose their context to an eviction).
    done_addr : Out(range(entries)), done_data : In(inflight_bits(jobs))
        Read of the verify stage's count of frames done for an entry.
    fcs_bad, truncated, malformed, icrc_bad : Out(32)
        Frames rejected, counted in the cycle they leave this stage.
    jobs_max : Out(32)
        Highest verify-job FIFO level seen at the start of a cycle.

    Timing
    ------
    In a cycle where ``i`` has an entry and ``o`` has room, the checks are made in the
    order of today's responder: FCS (``fcs_bad``), then frame length against the IP
    total length, or a frame of more than MAX_FRAME_BEATS beats (``truncated``), then
    IPv4/UDP 4791/BTH version/WRITE opcode and a frame of at least two beats
    (``malformed``), then ICRC (``icrc_bad``). A rejected frame leaves in that cycle as
    a job with ``check`` = 0 (only ``rest`` set). A frame that passes presents its QPN
    on ``lookup``; when the cache takes it (a hit, or a miss whose fill it could issue)
    the frame leaves in that cycle as a job with ``check`` = 1 and its entry's count of
    frames looked up goes up by one (seen from the next cycle). Otherwise nothing moves
    and the same frame tries again in the next cycle. ``victim_busy`` is
    ``looked_up[e] != done[e]`` for the lookup's entry ``e``. Each frame spends one
    cycle here at best: a job written in cycle ``c`` can be verified in ``c + 1``.

    ``header="scaleup"`` (:mod:`spec.formats.scaleup`): ``truncated`` when the frame
    length is not 10 + the scale-up ``length`` + 4 (FCS); ``malformed`` when ``type`` is
    not BTH, the BTH version is not 0, the opcode not a WRITE or ``length`` leaves no
    payload (a one-beat frame is allowed); the job's ``data`` is frame bytes 22..127.

    ``reads`` (a responder that executes RDMA READ): a READ request (opcode 0x0C, BTH +
    RETH, no payload: its length is exactly the headers and ICRC) passes the header check
    too, with ``read``, ``reth`` and ``last`` set in its job; without ``reads`` it is
    ``malformed``, as every opcode but the WRITEs. Likewise COMPARE & SWAP and FETCH &
    ADD (0x13, 0x14: BTH + the 28-byte AtomicETH, no payload), with ``atomic`` (and
    ``cmp``) and ``last`` set.
    """

    def __init__(self, entries, jobs, header="roce", reads=False):
        self.framing = framing_param(self, header)
        self.reads = bool(reads)
        check_int(self, "QP-context cache entries", entries, 16, 256)
        if entries & (entries - 1):
            reject(self, f"QP-context cache entries must be a power of two, not {entries!r}")
        check_int(self, "verify jobs (jobs)", jobs, *SIZE_LIMITS["jobs"])
        self.entries, self.jobs = entries, jobs
        ports = {
            "i": In(stream.Signature(header_entry_layout())),
            "o": Out(stream.Signature(verify_job_layout(self.framing.head_bytes,
                                                        self.reads))),
            "o_level": In(range(jobs + 1)),
            "lookup": Out(stream.Signature(data.StructLayout({"qpn": QPN_BITS}))),
            "victim_busy": Out(1),
            "entry": In(range(entries)),
            "done_addr": Out(range(entries)),
            "cache_log2": In(CACHE_LOG2_BITS, init=(entries - 1).bit_length()),
            "done_data": In(inflight_bits(jobs)),
        }
        ports.update({name: Out(32) for name in HEADER_COUNTERS})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        e = self.i.payload
        scaleup = self.framing.header is Header.SCALEUP
        hdr = Signal(SU_WRITE_RETH_HEADER if scaleup else WRITE_RETH_HEADER)
        m.d.comb += hdr.eq(Cat(e.b0, e.b1)[:len(hdr.as_value())])
        opcode = hdr.bth.opcode
        ip_len = Signal(16)       # RoCEv2: the IPv4 total length; scale-up: ``length``
        m.d.comb += ip_len.eq(bswap(hdr.su.length if scaleup else hdr.ip.total_length, 2))
        reth, is_write, last = Signal(), Signal(), Signal()
        read, atomic, cmp = Signal(), Signal(), Signal()
        m.d.comb += [
            reth.eq((opcode == OpCode.RC_RDMA_WRITE_FIRST)
                    | (opcode == OpCode.RC_RDMA_WRITE_ONLY)),
            is_write.eq(reth | (opcode == OpCode.RC_RDMA_WRITE_MIDDLE)
                        | (opcode == OpCode.RC_RDMA_WRITE_LAST)),
            last.eq((opcode == OpCode.RC_RDMA_WRITE_LAST)
                    | (opcode == OpCode.RC_RDMA_WRITE_ONLY)),
        ]
        overhead = Signal(16)
        outer = 0 if scaleup else IPV4_BYTES + UDP_BYTES
        size_ok = None
        if self.reads:
            # (The same WRITE terms, and READ and atomic requests: no payload.)
            wreth = Signal()
            m.d.comb += [
                read.eq(opcode == OpCode.RC_RDMA_READ_REQUEST),
                cmp.eq(opcode == OpCode.RC_CMP_SWAP),
                atomic.eq(cmp | (opcode == OpCode.RC_FETCH_ADD)),
                wreth.eq((opcode == OpCode.RC_RDMA_WRITE_FIRST)
                         | (opcode == OpCode.RC_RDMA_WRITE_ONLY)),
                reth.eq(wreth | read),
                is_write.eq(wreth | (opcode == OpCode.RC_RDMA_WRITE_MIDDLE)
                            | (opcode == OpCode.RC_RDMA_WRITE_LAST)),
                last.eq((opcode == OpCode.RC_RDMA_WRITE_LAST)
                        | (opcode == OpCode.RC_RDMA_WRITE_ONLY) | read | atomic),
                overhead.eq(outer + BTH_BYTES + ICRC_BYTES
                            + Mux(reth, RETH_BYTES, Mux(atomic, ATOMIC_ETH_BYTES, 0))
                            + hdr.bth.pad_count),
            ]
            size_ok = Signal()
            m.d.comb += size_ok.eq((is_write & (ip_len > overhead))
                                   | ((read | atomic) & (ip_len == overhead)))
        else:
            m.d.comb += overhead.eq(outer + BTH_BYTES + ICRC_BYTES
                                    + Mux(reth, RETH_BYTES, 0) + hdr.bth.pad_count)
        header_ok = Signal()
        sized = (size_ok,) if self.reads else (is_write, ip_len > overhead)
        if scaleup:
            m.d.comb += header_ok.eq(reduce(operator.and_, (
                (hdr.su.type == ScaleUpType.BTH.value), (hdr.bth.tver == 0), *sized)))
        else:
            m.d.comb += header_ok.eq(reduce(operator.and_, (
                (hdr.eth.ethertype == bswap(Const(ETHERTYPE_IPV4, 16), 2)),
                (hdr.ip.version == 4), (hdr.ip.ihl == 5),
                (hdr.ip.protocol == IP_PROTO_UDP),
                (hdr.udp.dport == bswap(Const(ROCE_UDP_PORT, 16), 2)),
                (hdr.bth.tver == 0), *sized, ~e.single)))
        # Frame bytes outside ``ip_len``: the Ethernet header (14) or the scale-up
        # header (10), and the FCS.
        before = self.framing.outer if scaleup else 14
        fail = Signal(4)          # one-hot: fcs_bad, truncated, malformed, icrc_bad
        m.d.comb += fail.eq(Mux(
            ~e.fcs_ok, 0b0001, Mux(
                e.too_long | (e.length != before + ip_len + 4), 0b0010, Mux(
                    ~header_ok, 0b0100, Mux(~e.icrc_ok, 0b1000, 0)))))

        job = self.o.payload
        qpn = Signal(QPN_BITS)
        m.d.comb += [qpn.eq(bswap(hdr.bth.dest_qp, 3)), job.rest.eq(e.rest)]
        with m.If(fail == 0):
            m.d.comb += [
                job.check.eq(1), job.qpn.eq(qpn), job.entry.eq(self.entry),
                job.psn.eq(bswap(hdr.bth.psn, 3)),
                job.ack_req.eq(hdr.bth.ack_req), job.reth.eq(reth), job.last.eq(last),
                job.va.eq(bswap(hdr.reth.va, 8)), job.rkey.eq(bswap(hdr.reth.rkey, 4)),
                job.dma_len.eq(bswap(hdr.reth.dma_length, 4)),
                job.plen.eq(ip_len - overhead),
                job.data.eq(Cat(e.b0, e.b1)[8 * self.framing.plain_bytes:]),
            ]
            if self.reads:
                m.d.comb += [job.read.eq(read), job.atomic.eq(atomic), job.cmp.eq(cmp)]

        # Frames of each entry looked up (this stage) and done (the verify stage).
        m.submodules.looked_up = looked = memory.Memory(
            shape=inflight_bits(self.jobs), depth=self.entries, init=[])
        rd, wr = looked.read_port(domain="comb"), looked.write_port()
        entry = self.entry
        m.d.comb += [rd.addr.eq(entry), wr.addr.eq(entry), wr.data.eq(rd.data + 1),
                     self.done_addr.eq(entry),
                     self.victim_busy.eq(rd.data != self.done_data),
                     self.lookup.payload.qpn.eq(qpn)]

        with m.If(self.i.valid & self.o.ready):
            with m.If(fail != 0):
                m.d.comb += [self.o.valid.eq(1), self.i.ready.eq(1)]
                ports = ports_by_name(self)
                for k, name in enumerate(HEADER_COUNTERS[:4]):
                    counter = ports[name]
                    with m.If(fail[k]):
                        m.d.sync += counter.eq(counter + 1)
            with m.Else():
                m.d.comb += self.lookup.valid.eq(1)
                with m.If(self.lookup.ready):
                    m.d.comb += [self.o.valid.eq(1), self.i.ready.eq(1), wr.en.eq(1)]
        with m.If(self.o_level > self.jobs_max):
            m.d.sync += self.jobs_max.eq(self.o_level)
        return m
