"""Build and run the fuzz co-simulations (used by scripts/fuzz.py and tests/test_fuzz.py).

One call runs a list of chunks in one simulator process; each chunk appends one JSON line
to ``out`` (see :mod:`tb.rdma.cocotb_fuzz`, :mod:`tb.nic.cocotb_fuzz` and
:mod:`tb.cocotb_ephemeral_fuzz`).
"""

from pathlib import Path

from tb.cosim import run_cosim

__all__ = ["DESIGNS", "RDMA_FUZZ_TOP", "NIC_FUZZ_TOP", "NIC_FRAMINGS", "NIC_TARGETS",
           "NIC_MEM_FUZZ_TOP", "EPHEMERAL_FUZZ_TOP", "READ_REQ_FUZZ_TOP", "max_chunk",
           "run_fuzz"]

DESIGNS = ("nic", "rdma", "rdma-req", "ephemeral")
#: RdmaTop's parameters for the fuzz: injection player and link recorders deep enough
#: for a chunk, and node B's responder with RDMA READ and atomics (its READ data FIFO
#: of two packets of the largest MTU, as :data:`tb.rdma.runner.FEATURES_TOP`).
RDMA_FUZZ_TOP = {"inject": 16384, "wire_beats": 16384, "read_words": 128}
#: NicRxTop's parameters (the framing is added per run).
NIC_FUZZ_TOP = {"width": 16, "max_payload": 256, "mem_words": 128, "beats": 1 << 15}
NIC_FRAMINGS = ("compact", "l2")
#: NicMemTop's parameters for the memory receiver's fuzz: the top of the NIC's load and
#: atomic co-simulations (tests/test_cosim_nic_mem.py: 3 nodes, board fabric, 4 tags, so
#: that tags run out), with raw players and recorders deep enough for a chunk.
NIC_MEM_FUZZ_TOP = dict(nodes=3, framing="compact", fabric="board", tags=4, mem_words=256,
                        max_payload=256, items=64, raws=1024, events=4096)
#: The NIC design's fuzz targets, chunk ``k`` on target ``k % 3``: the store receiver
#: (NicRxTop) in each framing, then the memory receiver (NicMemTop, its loads and
#: atomics).
NIC_TARGETS = (("nic", "compact"), ("nic", "l2"), ("nic-mem", "compact"))
#: EphemeralReceiverTop's parameters for the ephemeral receiver's fuzz: the top of its
#: co-simulation test (tests/test_unit_ephemeral_receiver.py), a pool of 8 contexts (so
#: that floods of forged opens fill it) and a player and recorders of 2,048 packets.
EPHEMERAL_FUZZ_TOP = {"entries": 8, "depth": 2048}
#: ReadRequesterTop's parameters for the requester's fuzz (``rdma-req``): the build of
#: its co-simulation test (tests/test_cosim_rdma_read_requester.py), players and
#: recorders of 1,024 items.
READ_REQ_FUZZ_TOP = {"items": 1024}


def max_chunk(design):
    """The most fuzz frames a chunk may hold: the player's depth over the longest frame
    the scenario makes (in beats), with room for the tail and fillers."""
    if design == "rdma":
        # Frames of up to 334 + 200 bytes (9 beats; they average 4 to 5), and 2,048
        # beats kept for the fillers of the READs and atomics
        # (analysis.scenarios.fuzz.FILLERS_PER_READ each, one in 40 valid frames: a
        # chunk of 1,500 has about 20, 2,800 beats, inside the 9-beat margin); a chunk
        # that does not fit is refused by tb.rdma.cocotb_fuzz, naming --chunk.
        return (RDMA_FUZZ_TOP["inject"] - 300 - 2048) // 9
    if design == "ephemeral":
        return EPHEMERAL_FUZZ_TOP["depth"]               # one packet an entry
    if design == "rdma-req":
        # analysis.scenarios.fuzz_req.req_chunk fits any chunk in the frames player (it
        # fills up with frames of at most two beats); half of it for the fuzz.
        return (READ_REQ_FUZZ_TOP["items"] - 4) // 4
    if design == "nic-mem":
        return NIC_MEM_FUZZ_TOP["raws"]                  # one beat a frame, any sender
    nic = (NIC_FUZZ_TOP["beats"] - 200) // 32            # frames of up to 280 + 200 bytes
    return min(nic, max_chunk("nic-mem")) if design == "nic" else nic


def run_fuzz(design, *, sim, seed, chunks, frames, out, test_id, framing="compact",
             rdma_top=None, fillers=256, sabotage=(), nic_mem_top=None, read_mix=None):
    """Run ``chunks`` (chunk numbers) of ``frames`` fuzz frames each of ``design`` on
    ``sim``; returns the run folder. Raises :class:`tb.cosim.CosimFailure` when a chunk
    failed (its line in ``out`` says why). ``rdma_top``: RdmaTop's parameters (default
    :data:`RDMA_FUZZ_TOP`; the tests use the defaults, the top the other co-simulations
    build, with room for a chunk of about 100 frames); ``fillers``: the RDMA chunk's
    one-beat frames before its tail (:func:`analysis.scenarios.fuzz.rdma_chunk`);
    ``sabotage``: NIC only, see :mod:`tb.nic.cocotb_fuzz` (tests of the checks).
    ``design`` ``"nic-mem"``: the NIC's memory receiver on NicMemTop
    (:mod:`tb.nic.cocotb_mem_fuzz`; ``nic_mem_top``: its parameters, default
    :data:`NIC_MEM_FUZZ_TOP`), one of the NIC design's targets (:data:`NIC_TARGETS`).
    ``design`` ``"ephemeral"``: the ephemeral receiver on EphemeralReceiverTop
    (:mod:`tb.cocotb_ephemeral_fuzz`, :data:`EPHEMERAL_FUZZ_TOP`), ``frames`` packets a
    chunk. ``design`` ``"rdma-req"``: the requester's response path on ReadRequesterTop
    (:mod:`tb.rdma.cocotb_req_fuzz`, :data:`READ_REQ_FUZZ_TOP`). ``read_mix``: RDMA with
    READs, the shares of
    :func:`analysis.scenarios.fuzz.rdma_chunk` (default its own)."""
    out = str(Path(out).resolve())
    if design == "rdma":
        from rtl.tops.rdma_top import RdmaTop
        top = RDMA_FUZZ_TOP if rdma_top is None else rdma_top
        params = {"seed": seed, "chunks": list(chunks), "frames": frames, "out": out,
                  "top": top, "fillers": fillers}
        if read_mix is not None:
            params["read_mix"] = dict(read_mix)
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
    if design == "nic-mem":
        from rtl.tops.nic_mem_top import NicMemTop
        top = NIC_MEM_FUZZ_TOP if nic_mem_top is None else nic_mem_top
        params = {"seed": seed, "chunks": list(chunks), "frames": frames, "out": out,
                  "top": top}
        return run_cosim(NicMemTop(**top), name="nic_mem_top",
                         test_module="tb.nic.cocotb_mem_fuzz", params=params, sim=sim,
                         test_id=test_id)
    if design == "ephemeral":
        from rtl.tops.ephemeral_receiver_top import EphemeralReceiverTop
        top = EPHEMERAL_FUZZ_TOP
        params = {"seed": seed, "chunks": list(chunks), "packets": frames, "out": out,
                  "top": top}
        return run_cosim(EphemeralReceiverTop(**top), name=f"ephemeral_receiver_"
                                                           f"{top['entries']}",
                         test_module="tb.cocotb_ephemeral_fuzz", params=params, sim=sim,
                         test_id=test_id)
    if design == "rdma-req":
        from rtl.tops.read_requester_top import ReadRequesterTop
        params = {"seed": seed, "chunks": list(chunks), "frames": frames, "out": out}
        return run_cosim(ReadRequesterTop(**READ_REQ_FUZZ_TOP), name="read_requester_top",
                         test_module="tb.rdma.cocotb_req_fuzz", params=params, sim=sim,
                         test_id=test_id)
    raise ValueError(f"design must be one of {DESIGNS} or 'nic-mem', not {design!r}")
