"""The QP-context size (``qpc_bytes``): checked with an error naming it wherever it is a
parameter, laid out in host memory with a stride of ``qpc_bytes / 64`` words (dynamic
word, static word, reserved words), and co-simulated on RdmaTop against the golden model
with misses and write-backs at the smallest and the largest size (the default, 256
bytes, runs in every other RdmaTop co-simulation)."""

import pytest

from analysis.load.rdma_knobs import check_load_knobs
from analysis.points import resolve
from pymodel.fields import pack, unpack
from pymodel.rdma.config import Config
from pymodel.rdma.fabric_system import FabricConfig
from pymodel.rdma.verbs import Verbs
from spec.formats.roce import (
    QPC_BYTES_DEFAULT,
    QPC_DYNAMIC_FIELDS,
    QPC_DYNAMIC_MASK,
    QPC_LAYOUT,
    qpc_image,
    qpc_words,
)
from spec.rdma_engine import FETCH_GROUP, HOST_DEPTH, SEQ_GROUP
from spec.rdma_responder import RESP_GROUP
from tb.rdma.runner import run_rdma

BAD = [0, 32, 100, 192, 2048, True, "256"]


@pytest.mark.parametrize("bad", BAD)
def test_bad_qpc_bytes_named(bad):
    with pytest.raises(ValueError, match="qpc_bytes"):
        qpc_words(bad)
    with pytest.raises(ValueError, match="Config.qpc_bytes"):
        Config(qpc_bytes=bad)
    with pytest.raises(ValueError, match="FabricConfig.qpc_bytes"):
        FabricConfig(qpc_bytes=bad)
    with pytest.raises(ValueError, match="qpc_bytes"):
        resolve("rdma", 128, 10, {"qpc_bytes": bad})
    with pytest.raises(ValueError, match="qpc_bytes"):
        check_load_knobs(128, 10, {"qpc_bytes": bad})


def test_default_holds_the_mlx5_context():
    # mlx5_ifc_qpc_bits is 0x740 bits (Linux include/linux/mlx5/mlx5_ifc.h): 232 bytes,
    # and the default is the smallest power of two of whole host words that holds it.
    mlx5 = 0x740 // 8
    assert mlx5 == 232
    assert QPC_BYTES_DEFAULT == 1 << (mlx5 - 1).bit_length()
    assert Config().qpc_bytes == FabricConfig().qpc_bytes == QPC_BYTES_DEFAULT
    assert Config().qpc_words == 4 and Config().qpc_log2 == 2


def test_the_groups_are_the_dynamic_fields():
    """Every field a pipeline stage rewrites is in the dynamic word, and only those."""
    assert set(FETCH_GROUP + SEQ_GROUP + RESP_GROUP) == set(QPC_DYNAMIC_FIELDS)
    for f in QPC_LAYOUT.members:
        bits = pack(QPC_LAYOUT, **{f: 1})
        assert bool(bits & QPC_DYNAMIC_MASK) == (f in QPC_DYNAMIC_FIELDS), f


@pytest.mark.parametrize("words", [1, 2, 4, 16])
def test_verbs_lay_contexts_out_with_stride(words):
    v = Verbs(qpc_words=words)
    v.create_qp(3, 5, psn_a=77, psn_b=99)
    a = unpack(QPC_LAYOUT, pack(QPC_LAYOUT, **v.context(v.mem_a, 0, 3)))
    assert a["next_psn"] == 77 and a["dest_qp"] == 5 and a["valid"] == 1
    assert v.context(v.mem_b, 0, 5)["expected_psn"] == 99
    # QP 3's context: words 3W .. 3W + W - 1, nothing else below the heap.
    # The table holds 4096 contexts, or as many as fill half of the host memory.
    assert v.max_qps == min(4096, HOST_DEPTH // 2 // words)
    table = [addr for addr in v.mem_a if addr < v.max_qps * words]
    assert sorted(table) == list(range(3 * words, 4 * words))
    whole = pack(QPC_LAYOUT, **a)
    image = [v.mem_a[3 * words + k] for k in range(words)]
    assert image == qpc_image(whole, words)
    if words == 1:
        assert image == [whole]
    else:
        assert image[0] == whole & QPC_DYNAMIC_MASK
        assert image[1] == whole & ~QPC_DYNAMIC_MASK
        assert image[2:] == [0] * (words - 2)
    # The heap starts after the table: the CQ is the first allocation.
    assert v.cq_base == v.max_qps * words
    with pytest.raises(ValueError, match="qpc_bytes"):
        v.create_qp(v.max_qps, 6)


@pytest.mark.slow_variants("icarus-*", reason=(
    "Verilator runs both sizes on the same top (about 8 s a size on Icarus)"))
@pytest.mark.parametrize("qpc_bytes", [64, 1024])
def test_rdma_qpc_bytes_misses_and_writebacks(sim, test_id, qpc_bytes):
    """24 QPs round robin over 16 cache entries, three rounds of 128-byte WRITEs: every
    lookup of a round after the first misses and evicts a context its stages wrote, so
    fills of ``qpc_bytes / 64`` words and one-word write-backs at both engines, compared
    with the model cycle for cycle, both host memories word for word."""
    qps, messages = 24, 72
    run_rdma({}, params=dict(kind="writes", messages=messages, sizes=[128], qps=qps,
                             cache_entries=16, qpc_bytes=qpc_bytes,
                             expect_min={"req_frames": messages, "req_misses": qps,
                                         "resp_misses": qps, "req_writebacks": 8,
                                         "resp_writebacks": 8}),
             sim=sim, test_id=test_id)
