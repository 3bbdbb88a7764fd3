"""The host interface on Verilator and Icarus, against the golden model."""

from dataclasses import asdict, replace

import pytest

from rtl.tops.host_interface_top import HostInterfaceTop
from spec.host import IDEAL64, PCIE
from tb.cosim import run_cosim

#: A small-latency profile with a narrow link, few tags and small buffers, so that tags,
#: both schedulers and both buffers are exercised in a short run.
SMALL = replace(IDEAL64, bytes_per_cycle=17, req_overhead=8, cpl_overhead=12,
                mmio_overhead=16, read_latency=20, tags=4, max_read_request=256,
                max_payload=128, rcb=64, mmio_fifo_words=8, wr_fifo_words=8, rd_queue=3)

CASES = {
    "pcie": (PCIE, dict(reads=24, writes=16, mmio=16)),
    "small": (SMALL, dict(reads=24, writes=16, mmio=16)),
}


@pytest.mark.slow_variants("verilator-small", reason=(
    "Verilator runs the pcie profile; Icarus runs both"))
@pytest.mark.slow_variants("verilator-*", reason=(
    "the host interface runs on Verilator inside RdmaTop; Icarus runs it alone"))
@pytest.mark.parametrize("case", list(CASES))
def test_host_interface_against_model(sim, case, test_id):
    """A seeded mix of reads (1..64 words), posted writes (TLPs split at ``last`` and at
    MPS) and host writes (1..256 bytes), with about 40% gaps on every input and 50%
    backpressure on ``mmio``. The cocotb module compares every recorded word and its
    cycle, each input's accept cycles, the twelve counters and the whole host memory with
    the model, and checks that a flipped model bit is caught."""
    profile, mix = CASES[case]
    depth = 1024
    top = HostInterfaceTop(profile, depth=depth, items=1024, words=2048)
    stalls = {"rd_req": (0xACE1, 100), "wr": (0x1234, 100), "mmio_in": (0x0F0F, 100),
              "mmio": (0x5A5A, 128)}
    run_cosim(top, name=f"host_interface_top_{case}", test_module="tb.cocotb_host_interface",
              sim=sim, test_id=test_id,
              params=dict(profile=asdict(profile), depth=depth, seed=1300 + len(case),
                          mix=mix, stalls=stalls))
