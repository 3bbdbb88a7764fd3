"""Build and run the fuzz co-simulations (used by scripts/fuzz.py and tests/test_fuzz.py).

One call runs a list of chunks in one simulator process; each chunk appends one JSON line
to ``out`` (see :mod:`tb.rdma.cocotb_fuzz` and :mod:`tb.nic.cocotb_fuzz`).
"""

from pathlib import Path

from tb.cosim import run_cosim

__all__ = ["DESIGNS", "RDMA_FUZZ_TOP", "NIC_FUZZ_TOP", "NIC_FRAMINGS", "max_chunk",
           "run_fuzz"]

DESIGNS = ("nic", "rdma")
#: RdmaTop's parameters for the fuzz: injection player and link recorders deep enough
#: for a chunk, and node B's responder with RDMA READ and atomics (its READ data FIFO
#: of two packets of the largest MTU, as :data:`tb.rdma.runner.FEATURES_TOP`).
RDMA_FUZZ_TOP = {"inject": 16384, "wire_beats": 16384, "read_words": 128}
#: NicRxTop's parameters (the framing is added per run).
NIC_FUZZ_TOP = {"width": 16, "max_payload": 256, "mem_words": 128, "beats": 1 << 15}
NIC_FRAMINGS = ("compact", "l2")


def max_chunk(design):
    """The most fuzz frames a chunk may hold: the player's depth over the longest frame
    the scenario makes (in beats), with room for the tail and fillers."""
    if design == "rdma":
        return (RDMA_FUZZ_TOP["inject"] - 300) // 9     # frames of up to 334 + 200 bytes
    return (NIC_FUZZ_TOP["beats"] - 200) // 32           # frames of up to 280 + 200 bytes


def run_fuzz(design, *, sim, seed, chunks, frames, out, test_id, framing="compact",
             rdma_top=None, fillers=256, sabotage=()):
    """Run ``chunks`` (chunk numbers) of ``frames`` fuzz frames each of ``design`` on
    ``sim``; returns the run folder. Raises :class:`tb.cosim.CosimFailure` when a chunk
    failed (its line in ``out`` says why). ``rdma_top``: RdmaTop's parameters (default
    :data:`RDMA_FUZZ_TOP`; the tests use the defaults, the top the other co-simulations
    build, with room for a chunk of about 100 frames); ``fillers``: the RDMA chunk's
    one-beat frames before its tail (:func:`pymodel.scenarios.fuzz.rdma_chunk`);
    ``sabotage``: NIC only, see :mod:`tb.nic.cocotb_fuzz` (tests of the checks)."""
    out = str(Path(out).resolve())
    if design == "rdma":
        from rtl.tops.rdma_top import RdmaTop
        top = RDMA_FUZZ_TOP if rdma_top is None else rdma_top
        params = {"seed": seed, "chunks": list(chunks), "frames": frames, "out": out,
                  "top": top, "fillers": fillers}
        return run_cosim(RdmaTop(**top), name="rdma_top",
                         test_module="tb.rdma.cocotb_fuzz", params=params, sim=sim,
                         test_id=test_id)
    if design == "nic":
        from rtl.tops.nic_rx_top import NicRxTop
        top = dict(NIC_FUZZ_TOP, framing=framing)
        params = {"seed": seed, "chunks": list(chunks), "frames": frames, "out": out,
                  "top": top, "sabotage": list(sabotage)}
        return run_cosim(NicRxTop(**top), name=f"nic_rx_top_{framing}",
                         test_module="tb.nic.cocotb_fuzz", params=params, sim=sim,
                         test_id=test_id)
    raise ValueError(f"design must be one of {DESIGNS}, not {design!r}")
