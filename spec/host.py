"""The host interface's contract data: profiles, their checks, port layouts, counter names.

One definition, three users: the RTL (:mod:`rtl.host`), the golden model
(:mod:`pymodel.host`) and the testbenches import these; none of them redefines a number.
The timing contract itself is written in :class:`rtl.host.HostInterface` and
``docs/host_interface.md``.

Units: one cycle is one period of the 1 GHz device clock (1 ns); the device datapath and
host memory move 64-byte words; every address on these ports is a word address.

Sources (facts only)
--------------------
[pcie-bench]
    R. Neugebauer et al., "Understanding PCIe performance for end host networking",
    SIGCOMM 2018: NFP-6000 on a Xeon E5, DMA read latency of 64 B, median about 560 ns
    (1 KiB: about 853 ns).
[pcie-model]
    github.com/pcie-bench/pcie-model: 24 B per memory request or posted write TLP with a
    64-bit address (4 DW header 16 B + 4 B framing and sequence number + 4 B LCRC, Gen3
    and later), 20 B per completion with data (3 DW header 12 B + 8 B).
[kalia16]
    A. Kalia et al., "Design guidelines for high performance RDMA systems", USENIX ATC
    2016: 26 B / 22 B per TLP on Gen3 when the physical-layer framing is counted.
[gen5]
    PCIe 5.0 x16: 32 GT/s per lane x 16 lanes with 128b/130b coding, about 63 GB/s per
    direction, i.e. 63 bytes per 1 ns cycle.
[tags]
    PCIe: 8-bit tags allow 256 outstanding non-posted requests, 10-bit tags (PCIe 4.0 and
    later) 768.
[defaults]
    MPS 256 B, MRRS 512 B, RCB 128 B: common server settings; a choice, not a standard.
[ideal64]
    The host memory this project used before the host interface: any word read after 64
    cycles, no bandwidth limit, no per-transaction cost.
"""

from dataclasses import dataclass, fields

from amaranth.lib import data

__all__ = ["WORD_BYTES", "MAX_READ_WORDS", "ID_BITS", "MMIO_ADDR_BITS", "MMIO_NBYTES_BITS",
           "COUNTER_BITS", "TAG_BITS", "held_word_layout", "HostProfile", "check_profile",
           "check_host",
           "PCIE", "ON_DIE", "IDEAL64",
           "PROFILES", "HOST_COUNTERS", "rd_req_layout", "rd_data_layout", "wr_layout",
           "mmio_layout"]

#: Bytes in one device / host-memory word (the 512-bit datapath).
WORD_BYTES = 64
#: Words one engine read may ask for (4 KiB).
MAX_READ_WORDS = 64
#: Bits of the engine's read id, echoed on every returned word.
ID_BITS = 8
#: Bits of the register offset of a host MMIO write.
MMIO_ADDR_BITS = 16
#: Bits of the byte count of a host MMIO write (so at most 511 bytes, 8 words).
MMIO_NBYTES_BITS = 9
#: Bits of the tag a marked posted write reports (a QP number).
TAG_BITS = 24
#: Bits of every counter (they wrap).
COUNTER_BITS = 32


@dataclass(frozen=True)
class HostProfile:
    """The parameters of a host interface; checked on construction (:func:`check_profile`).

    Attributes
    ----------
    bytes_per_cycle : int
        Bytes each direction moves per cycle (1..64).
    req_overhead : int
        Bytes of overhead of a memory read request TLP and of a posted write TLP, device
        to host (0..64).
    cpl_overhead : int
        Bytes of overhead of a completion with data, host to device (0..64).
    mmio_overhead : int
        Bytes of overhead of a host posted write into the device (0..64).
    read_latency : int
        Cycles from a read request TLP's first cycle to the earliest first cycle of its
        first completion (1..65535).
    tags : int
        Read request TLPs outstanding at most (1..1024).
    max_read_request : int
        Max read request size in bytes (MRRS), a power of two from 64 to 4096.
    max_payload : int
        Max payload size in bytes (MPS), a power of two from 64 to 4096.
    rcb : int
        Read completion boundary in bytes, a power of two from 64 to ``max_payload``.
    mmio_fifo_words : int
        Words of the device's buffer for host posted writes (4..1024).
    wr_fifo_words : int
        Words of the device-to-host posted-write buffer (4..1024).
    rd_queue : int
        Engine read requests that may wait to be issued (1..256).
    """

    bytes_per_cycle: int
    req_overhead: int
    cpl_overhead: int
    mmio_overhead: int
    read_latency: int
    tags: int
    max_read_request: int
    max_payload: int
    rcb: int
    mmio_fifo_words: int
    wr_fifo_words: int
    rd_queue: int

    def __post_init__(self):
        check_profile(self)


#: ``field -> (low, high, power_of_two)``; ``rcb``'s upper bound is ``max_payload``.
_RANGES = {
    "bytes_per_cycle": (1, 64, False),
    "req_overhead": (0, 64, False),
    "cpl_overhead": (0, 64, False),
    "mmio_overhead": (0, 64, False),
    "read_latency": (1, 65535, False),
    "tags": (1, 1024, False),
    "max_read_request": (64, 4096, True),
    "max_payload": (64, 4096, True),
    "rcb": (64, None, True),
    "mmio_fifo_words": (4, 1024, False),
    "wr_fifo_words": (4, 1024, False),
    "rd_queue": (1, 256, False),
}


def check_profile(p):
    """Return ``p`` if every field is in range, else raise ``ValueError`` naming the field.

    The message reads ``host profile field 'tags' must be an integer from 1 to 1024, not
    0`` (or ``... a power of two from 64 to 4096 ...``).
    """
    if not isinstance(p, HostProfile):
        raise ValueError(f"host profile must be a HostProfile, not {p!r}")
    for f in fields(HostProfile):
        value = getattr(p, f.name)
        low, high, pow2 = _RANGES[f.name]
        if high is None:
            high = p.max_payload if isinstance(p.max_payload, int) else 4096
        kind = "a power of two" if pow2 else "an integer"
        ok = (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
              and not (pow2 and value & (value - 1)))
        if not ok:
            raise ValueError(f"host profile field {f.name!r} must be {kind} from {low} to "
                             f"{high}, not {value!r}")
    return p


#: A PCIe Gen5 x16 attachment of a NIC to its host.
PCIE = HostProfile(
    bytes_per_cycle=63,         # Ref: [gen5] 63 GB/s per direction = 63 B per 1 ns cycle
    req_overhead=24,            # Ref: [pcie-model] 4 DW header + framing/sequence + LCRC
    cpl_overhead=20,            # Ref: [pcie-model] 3 DW header + framing/sequence + LCRC
    mmio_overhead=24,           # Ref: [pcie-model] a host posted write is a 4 DW MWr TLP
    read_latency=560,           # Ref: [pcie-bench] median 64 B DMA read, 560 ns
    tags=256,                   # Ref: [tags] 8-bit tags
    max_read_request=512,       # Ref: [defaults] MRRS 512 B
    max_payload=256,            # Ref: [defaults] MPS 256 B
    rcb=128,                    # Ref: [defaults] RCB 128 B
    mmio_fifo_words=64,         # a choice: 4 KiB of posted-write receive buffer
    wr_fifo_words=64,           # a choice: 4 KiB of posted-write transmit buffer
    rd_queue=16,                # a choice
)

#: An engine integrated beside the accelerator's memory (HBM): no TLPs, a 64-byte port.
#: ``read_latency`` is an assumption, not a measurement: pointer-chasing micro-benchmarks
#: of recent NVIDIA GPUs (Volta to Hopper) put an HBM load at several hundred SM cycles
#: at 1.4-1.8 GHz, a few hundred ns through the SM's own pipeline; an engine with its
#: own port into the memory system is taken to see 300 ns.
ON_DIE = HostProfile(
    bytes_per_cycle=64,         # the 512-bit datapath, no link in between
    req_overhead=0,             # on-chip requests carry no TLP header
    cpl_overhead=0,
    mmio_overhead=0,
    read_latency=300,           # assumption (see above)
    tags=1024,                  # the largest the interface allows: not a limit here
    max_read_request=4096,      # no split: the largest read the engine asks for
    max_payload=4096,
    rcb=64,                     # data returns word by word
    mmio_fifo_words=64,
    wr_fifo_words=64,
    rd_queue=16,
)

#: The host memory before the host interface (reproduces earlier results' memory timing).
IDEAL64 = HostProfile(
    bytes_per_cycle=64,         # Ref: [ideal64] one word per cycle, no limit below that
    req_overhead=0,             # Ref: [ideal64] no per-transaction cost
    cpl_overhead=0,
    mmio_overhead=0,
    read_latency=64,            # Ref: [ideal64] 64-cycle reads
    tags=1024,
    max_read_request=4096,
    max_payload=4096,
    rcb=64,
    mmio_fifo_words=64,
    wr_fifo_words=64,
    rd_queue=16,
)

PROFILES = {"pcie": PCIE, "on_die": ON_DIE, "ideal64": IDEAL64}


def check_host(host):
    """``host`` if it names a profile of :data:`PROFILES`, else ``ValueError`` naming
    ``host``."""
    if host not in PROFILES:
        raise ValueError(f"host must be one of {sorted(PROFILES)}, not {host!r}")
    return host

#: The interface's 32-bit counters, in port order. ``up_*``: device to host (read
#: request and posted write TLPs); ``dn_*``: host to device (completions and host MMIO
#: writes); ``tag_wait_cycles``: cycles a read waited for a tag with ``up`` free;
#: ``tags_max``: the most read request TLPs outstanding at once.
HOST_COUNTERS = ("up_rd_tlps", "up_wr_tlps", "up_payload_bytes", "up_overhead_bytes",
                 "up_busy_cycles", "dn_cpl_tlps", "dn_mmio_tlps", "dn_payload_bytes",
                 "dn_overhead_bytes", "dn_busy_cycles", "tag_wait_cycles", "tags_max")


def rd_req_layout(depth):
    """An engine read: ``words`` (1..64) consecutive words from word ``addr``, ``id``."""
    return data.StructLayout({"addr": range(depth), "words": range(1, MAX_READ_WORDS + 1),
                              "id": ID_BITS})


def rd_data_layout():
    """A returned word: ``data``, the read's ``id``, ``last`` on the read's last word."""
    return data.StructLayout({"data": 8 * WORD_BYTES, "id": ID_BITS, "last": 1})


def wr_layout(depth):
    """A posted-write word: word ``addr``, ``data``, byte enables ``be`` (bit ``i`` for
    byte ``i``), ``last`` on the last word of a write; ``mark`` asks the interface to
    report, with ``tag``, the cycle the word reaches host memory (its ``marked`` port):
    how the engines time-stamp a remote write or a CQE."""
    return data.StructLayout({"addr": range(depth), "data": 8 * WORD_BYTES,
                              "be": WORD_BYTES, "last": 1, "mark": 1, "tag": TAG_BITS})


def held_word_layout(depth):
    """A posted-write word as the write buffer holds it."""
    return data.StructLayout({"addr": range(depth), "data": 8 * WORD_BYTES,
                              "be": WORD_BYTES, "mark": 1, "tag": TAG_BITS})


def mmio_layout(addr_bits=MMIO_ADDR_BITS):
    """A word of a host posted write into the device: register offset ``addr``
    (``addr_bits`` wide: :data:`MMIO_ADDR_BITS`, or more for a device whose offsets name
    more registers), the write's length ``nbytes`` (both the same in every word),
    ``data``, ``first``, ``last``."""
    return data.StructLayout({"addr": addr_bits, "nbytes": MMIO_NBYTES_BITS,
                              "data": 8 * WORD_BYTES, "first": 1, "last": 1})
