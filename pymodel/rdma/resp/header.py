"""Twin of :class:`rtl.rdma.resp.header.HeaderCheck` (from its docstring)."""

from pymodel.cycle import Staged
from pymodel.fields import field_slot
from spec.formats.roce import (
    BTH_BYTES,
    ETHERTYPE_IPV4,
    HOST_WORD_BITS,
    ICRC_BYTES,
    IP_PROTO_UDP,
    IPV4_BYTES,
    RETH_BYTES,
    ROCE_UDP_PORT,
    UDP_BYTES,
    WRITE_RETH_HEADER,
    OpCode,
    bswap,
)
from spec.formats.scaleup import SU_WRITE_RETH_HEADER, Header, ScaleUpType, framing

__all__ = ["HeaderCheckModel", "parse_header", "REASONS"]

_WRITES = {OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_MIDDLE.value,
           OpCode.RC_RDMA_WRITE_LAST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_RETH = {OpCode.RC_RDMA_WRITE_FIRST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_LAST = {OpCode.RC_RDMA_WRITE_LAST.value, OpCode.RC_RDMA_WRITE_ONLY.value}
_READ = OpCode.RC_RDMA_READ_REQUEST.value
_ATOMICS = {OpCode.RC_CMP_SWAP.value, OpCode.RC_FETCH_ADD.value}
#: Bytes of the AtomicETH (IBTA Vol 1 section 9.3.4).
_ATOMIC_ETH_BYTES = 28
#: Rejection reasons of this stage, in check order.
REASONS = ("fcs_bad", "truncated", "malformed", "icrc_bad")


#: ``(offset, mask)`` of the header fields the check reads, by path: each read as
#: :func:`pymodel.fields.unpack` would give it, without unpacking the whole header.
_SLOTS = {path: field_slot(WRITE_RETH_HEADER, path) for path in (
    "ip.version", "ip.ihl", "ip.protocol", "bth.opcode", "bth.tver", "bth.pad_count",
    "bth.dest_qp", "bth.psn", "bth.ack_req", "reth.va", "reth.rkey", "reth.dma_length")}


_SU_SLOTS = {path: field_slot(SU_WRITE_RETH_HEADER, path) for path in (
    "su.type", "su.length", "bth.opcode", "bth.tver", "bth.pad_count", "bth.dest_qp",
    "bth.psn", "bth.ack_req", "reth.va", "reth.rkey", "reth.dma_length")}
_SU = framing("scaleup")


def parse_scaleup_header(entry, reads=False):
    """:func:`parse_header` for the scale-up header: ``truncated`` when the frame's
    length is not the header's ``length`` + 10 + 4 (or it is too long); ``malformed``
    when ``type`` is not BTH, the BTH version is not 0, the opcode not a WRITE or
    ``length`` leaves no payload (one-beat frames are allowed: a short WRITE fits one);
    ``data`` holds frame bytes 22..127."""
    raw = entry["b0"] | entry["b1"] << HOST_WORD_BITS
    h = {path: raw >> offset & mask for path, (offset, mask) in _SU_SLOTS.items()}
    su_len = bswap(h["su.length"], 2)
    opcode = h["bth.opcode"]
    read = reads and opcode == _READ
    atomic = reads and opcode in _ATOMICS
    reth = opcode in _RETH or read
    overhead = BTH_BYTES + ICRC_BYTES + _ext(reth, atomic) + h["bth.pad_count"]
    header_ok = (h["su.type"] == ScaleUpType.BTH.value and h["bth.tver"] == 0
                 and _size_ok(opcode, read or atomic, su_len, overhead))
    return _verdict(entry, h, entry["length"] == _SU.outer + su_len + 4, header_ok,
                    su_len - overhead, raw >> (8 * _SU.plain_bytes), reads)


def _ext(reth, atomic):
    """Bytes of the extended header after the BTH: a RETH, an AtomicETH or none."""
    return RETH_BYTES if reth else _ATOMIC_ETH_BYTES if atomic else 0


def _size_ok(opcode, read, ip_len, overhead):
    """A WRITE carries payload, a READ or atomic request (``read``) none."""
    return (opcode in _WRITES and ip_len > overhead) or (read and ip_len == overhead)


def parse_header(entry, header="roce", reads=False):
    """``(reason or None, verify job)`` of a header entry (dicts); ``reads``: READ
    requests pass (the RTL's parameter of that name)."""
    if header != "roce" and framing(header).header is Header.SCALEUP:
        return parse_scaleup_header(entry, reads)
    raw = entry["b0"] | entry["b1"] << HOST_WORD_BITS
    h = {path: raw >> offset & mask for path, (offset, mask) in _SLOTS.items()}
    b = raw.to_bytes(128, "little")
    ip_len = int.from_bytes(b[16:18], "big")
    opcode = h["bth.opcode"]
    read = reads and opcode == _READ
    atomic = reads and opcode in _ATOMICS
    reth = opcode in _RETH or read
    overhead = (IPV4_BYTES + UDP_BYTES + BTH_BYTES + ICRC_BYTES + _ext(reth, atomic)
                + h["bth.pad_count"])
    header_ok = (int.from_bytes(b[12:14], "big") == ETHERTYPE_IPV4
                 and h["ip.version"] == 4 and h["ip.ihl"] == 5
                 and h["ip.protocol"] == IP_PROTO_UDP
                 and int.from_bytes(b[36:38], "big") == ROCE_UDP_PORT
                 and h["bth.tver"] == 0 and _size_ok(opcode, read or atomic, ip_len, overhead)
                 and not entry["single"])
    return _verdict(entry, h, entry["length"] == 14 + ip_len + 4, header_ok,
                    ip_len - overhead, int.from_bytes(b[54:128], "little"), reads)


def _verdict(entry, h, length_ok, header_ok, plen, data, reads=False):
    """``(reason or None, verify job)`` of a header entry whose framing has been judged
    (``length_ok``: the frame's length agrees with its header's; ``header_ok``: the
    outer header, the BTH and the opcode are acceptable), in the order the RTL counts a
    frame with several faults; the job's fields from the BTH and RETH slots ``h``,
    ``plen`` payload bytes and the header beats' ``data`` after the headers."""
    if not entry["fcs_ok"]:
        reason = "fcs_bad"
    elif entry["too_long"] or not length_ok:
        reason = "truncated"
    elif not header_ok:
        reason = "malformed"
    elif not entry["icrc_ok"]:
        reason = "icrc_bad"
    else:
        reason = None
    job = dict.fromkeys(("check", "qpn", "entry", "psn", "ack_req", "reth", "last", "va", "rkey",
                         "dma_len", "plen", "data"), 0)
    job["rest"] = entry["rest"]
    if reads:
        job.update(read=0, atomic=0, cmp=0)
    if reason is None:
        opcode = h["bth.opcode"]
        read = int(reads and opcode == _READ)
        atomic = int(reads and opcode in _ATOMICS)
        if reads:
            job.update(read=read, atomic=atomic, cmp=int(opcode == OpCode.RC_CMP_SWAP.value))
        job.update(
            check=1, qpn=bswap(h["bth.dest_qp"], 3), psn=bswap(h["bth.psn"], 3),
            ack_req=h["bth.ack_req"], reth=int(opcode in _RETH or read),
            last=int(opcode in _LAST or read or atomic),
            va=bswap(h["reth.va"], 8), rkey=bswap(h["reth.rkey"], 4),
            dma_len=bswap(h["reth.dma_length"], 4), plen=plen & 0x1FFFF, data=data)
    return reason, job


class HeaderCheckModel:
    """Header entries from ``i`` to verify jobs in ``o`` (Fifos).

    ``lookup(qpn, victim_busy, side)`` presents a lookup to the context cache (its twin
    in a system, the test's side inputs in a unit test) and returns whether it was taken;
    ``done(entry, side)`` reads the verify stage's count of frames done; ``entry_of(qpn,
    side)`` is the cache's ``entry`` for a lookup of ``qpn`` (by default the
    direct-mapped ``qpn % used``). A job that passed carries its ``entry``.
    """

    def __init__(self, i, o, entries, jobs, lookup, done, used=None, log=None,
                 header="roce", entry_of=None, reads=False):
        """``log``: a :class:`pymodel.cycle.StagedLog` the register file enters, for an
        owner that commits it through it (:meth:`commit` commits it alone); ``header``:
        the framing (:mod:`spec.formats.scaleup`)."""
        self.i, self.o, self.entries = i, o, entries
        self.header = framing(header).header.value
        self.reads = bool(reads)
        self.used = used or entries
        self.mod = 1 << (jobs.bit_length() + 1)
        self.lookup, self.done = lookup, done
        self.entry_of = entry_of or (lambda qpn, side: qpn % self.used)
        self.looked_up = Staged(0, size=entries, name="looked_up", log=log)
        self.count = dict.fromkeys(REASONS + ("jobs_max",), 0)
        #: Cycles a lookup was presented with ``victim_busy`` and not taken (a statistic
        #: of the model only, for tests).
        self.busy_waits = 0

    def step(self, c, side):
        cnt = self.count
        if len(self.o) > cnt["jobs_max"]:
            cnt["jobs_max"] = len(self.o)
        out = {"lookup.valid": 0}
        if not (self.i.can_read() and self.o.can_write()):
            return out
        reason, job = parse_header(self.i.head(), self.header, self.reads)
        if reason is not None:
            cnt[reason] += 1
            self.i.read()
            self.o.write(job)
            return out
        e = job["entry"] = self.entry_of(job["qpn"], side)
        busy = self.looked_up[e] != self.done(e, side)
        out.update({"lookup.valid": 1, "lookup.payload": {"qpn": job["qpn"]},
                    "victim_busy": int(busy), "done_addr": e})
        if self.lookup(job["qpn"], busy, side):
            self.i.read()
            self.o.write(job)
            self.looked_up.set(e, (self.looked_up[e] + 1) % self.mod)
        elif busy:
            self.busy_waits += 1
        return out

    def commit(self):
        self.looked_up.commit()
