"""Stimulus and model runs for the host interface, shared by the unit tests and the
cocotb module.

The stimulus sources behave as :class:`rtl.sim.stream_player.StreamPlayer` does: item
``k`` is presented in cycle ``c`` when the earlier items are taken and the source's
stall pattern (:func:`pymodel.stall.stall_pattern`) lets it; the host's ``mmio_in``
source only stalls before the first word of a write (the host keeps ``valid`` high
through a write). ``mmio.ready`` follows the recorder's pattern; ``rd_data`` is never
stalled.
"""


from dataclasses import dataclass, field

from pymodel.host import HostInterfaceModel
from pymodel.stall import stall_pattern
from spec.host import (
    MAX_READ_WORDS,
    MMIO_NBYTES_BITS,
    WORD_BYTES,
    mmio_layout,
    rd_data_layout,
    rd_req_layout,
    wr_layout,
)

__all__ = ["SOURCES", "Stimulus", "Stalls", "Run", "pack", "unpack", "layouts",
           "random_stimulus", "run_model", "mmio_write", "Presenter"]

#: The input streams, in the order the top's players are named.
SOURCES = ("rd_req", "wr", "mmio_in")


def layouts(depth):
    """The payload layout of every stream of the interface, by port name."""
    return {"rd_req": rd_req_layout(depth), "wr": wr_layout(depth),
            "mmio_in": mmio_layout(), "rd_data": rd_data_layout(), "mmio": mmio_layout()}


def pack(layout, fields):
    """A dict of fields as the flat integer of ``layout``."""
    return layout.const(fields).as_bits()


def unpack(layout, bits):
    """A flat integer of ``layout`` as a dict of int fields."""
    view = layout.from_bits(bits)
    return {name: int(getattr(view, name)) for name, _ in layout}


@dataclass
class Stimulus:
    """Items of every source (dicts of fields) and the initial host memory."""

    rd_req: list = field(default_factory=list)
    wr: list = field(default_factory=list)
    mmio_in: list = field(default_factory=list)
    mem: dict = field(default_factory=dict)


@dataclass
class Stalls:
    """``(seed, rate)`` of each source's gaps and of ``mmio.ready``'s stalls (rate 0:
    none)."""

    rd_req: tuple = (1, 0)
    wr: tuple = (1, 0)
    mmio_in: tuple = (1, 0)
    mmio: tuple = (1, 0)

    def patterns(self, cycles):
        return {name: stall_pattern(*getattr(self, name), cycles)
                for name in (*SOURCES, "mmio")}


@dataclass
class Run:
    """What a run produced: ``(cycle, item)`` lists of the outputs, the cycles each
    source's items were taken, the counters, the final memory and the last cycle."""

    rd_data: list
    mmio: list
    taken: dict
    counters: dict
    mem: dict
    cycles: int
    marked: list = field(default_factory=list)


class Presenter:
    """Which item each source presents in a cycle (the players' rule)."""

    def __init__(self, stim, stalls, cycles):
        self.items = {name: getattr(stim, name) for name in SOURCES}
        self.index = dict.fromkeys(SOURCES, 0)
        self.stall = stalls.patterns(cycles)

    def present(self, c):
        out = {}
        for name in SOURCES:
            items, k = self.items[name], self.index[name]
            item = items[k] if k < len(items) else None
            if item is not None and self.stall[name][c]:
                if name != "mmio_in" or item["first"]:
                    item = None
            out[name] = item
        return out

    def take(self, name):
        self.index[name] += 1

    def done(self):
        return all(self.index[n] == len(self.items[n]) for n in SOURCES)

    def ready(self, c):
        """``mmio.ready`` in cycle ``c``."""
        return not self.stall["mmio"][c]


def run_model(profile, depth, stim, stalls=None, limit=200_000, tail=8):
    """Run the model on ``stim`` until every item is taken and the model is idle, plus
    ``tail`` cycles. Raises ``AssertionError`` after ``limit`` cycles (a hang)."""
    stalls = stalls or Stalls()
    model = HostInterfaceModel(profile, depth, stim.mem)
    pres = Presenter(stim, stalls, limit + tail + 1)
    rd_data, mmio, marked = [], [], []
    taken = {name: [] for name in SOURCES}
    c, end = 0, None
    while end is None or c <= end:
        if c > limit:
            raise AssertionError(f"the model has not finished after {limit} cycles")
        shown = pres.present(c)
        r = model.step(c, mmio_ready=pres.ready(c), **shown)
        for name in SOURCES:
            if getattr(r, f"{name}_taken"):
                taken[name].append(c)
                pres.take(name)
        if r.rd_data is not None:
            rd_data.append((c, r.rd_data))
        if r.marked is not None:
            marked.append((c, r.marked))
        if r.mmio is not None and pres.ready(c):
            mmio.append((c, r.mmio))
        if end is None and pres.done() and model.next_event(c) is None:
            end = c + tail
        c += 1
    return Run(rd_data, mmio, taken, dict(model.counters), model.mem, end, marked)


def random_stimulus(rng, profile, depth, reads=20, writes=20, mmio=10, mem_words=None,
                    sizes=None, max_write_words=None, mmio_bytes=(1, 256)):
    """A random mix: ``reads`` reads of random sizes (``sizes``: a list to pick from,
    default 1..64 words) at random addresses, ``writes`` posted writes (runs of 1 to
    ``max_write_words`` words, default 2 * max_payload / 64 + 1, ``last`` on the last
    word; 60% of the words with every byte enabled, the others with random, single or
    leading byte enables), ``mmio`` host writes of ``mmio_bytes`` bytes, and a
    memory image of ``mem_words`` random words (default: all of ``depth``, up to 4096)."""
    ids = rng.sample(range(256), min(reads, 256)) + [rng.randrange(256)
                                                      for _ in range(reads - 256)]
    stim = Stimulus()
    for k in range(reads):
        words = rng.choice(sizes) if sizes else rng.randint(1, MAX_READ_WORDS)
        stim.rd_req.append({"addr": rng.randrange(depth), "words": words, "id": ids[k]})
    longest = max_write_words or 2 * profile.max_payload // WORD_BYTES + 1
    for _ in range(writes):
        n = rng.randint(1, longest)
        base = rng.randrange(depth)
        for j in range(n):
            be = (1 << 64) - 1 if rng.random() < 0.6 else rng.choice(
                [rng.getrandbits(64), 0xF, 1 << 63, (1 << rng.randint(1, 64)) - 1])
            mark = int(rng.random() < 0.3)
            stim.wr.append({"addr": (base + j) % depth, "data": rng.getrandbits(512),
                            "be": be, "last": int(j == n - 1), "mark": mark,
                            "tag": rng.getrandbits(24) if mark else 0})
    top = min(mmio_bytes[1], (1 << MMIO_NBYTES_BITS) - 1, 64 * profile.mmio_fifo_words)
    for _ in range(mmio):
        nbytes = rng.randint(mmio_bytes[0], top)
        stim.mmio_in += mmio_write(rng.randrange(1 << 16), nbytes,
                                   rng.getrandbits(8 * nbytes))
    count = min(depth, 4096) if mem_words is None else mem_words
    stim.mem = {a: rng.getrandbits(512) for a in rng.sample(range(depth), count)}
    return stim


def mmio_write(addr, nbytes, value):
    """The words of one host write of ``nbytes`` bytes (``value``, little endian)."""
    n = -(-nbytes // WORD_BYTES)
    return [{"addr": addr, "nbytes": nbytes,
             "data": (value >> (512 * j)) & ((1 << 512) - 1),
             "first": int(j == 0), "last": int(j == n - 1)} for j in range(n)]


