"""The RDMA system model's :class:`pymodel.rdma.system.Config`: frozen, and every field
checked against the ranges the RTL top and its parts accept (spec/), a bad value raising
``ValueError`` that names the field."""

import dataclasses

import pytest

from pymodel.rdma.system import Config
from spec.rdma_engine import RETRY_LIMIT_RANGE, TIMEOUT_RANGE, TOP_DEFAULTS, ContextCacheShape
from spec.rdma_responder import MrTableShape


@pytest.mark.parametrize("kw,name", [
    # The transport timeout below the requester's range (spec.rdma_engine.TIMEOUT_RANGE).
    (dict(timeout=TIMEOUT_RANGE[0] - 1), "timeout"),
    # A retry limit above the 3-bit field's range.
    (dict(retry_limit=RETRY_LIMIT_RANGE[1] + 1), "retry_limit"),
    # Cache entries in use: a power of two from 16 to the capacity built.
    (dict(cache_entries=24), "cache_entries"),
    (dict(cache_entries=2 * TOP_DEFAULTS["cache_entries"]), "cache_entries"),
    # Host memory: a power of two; the CQ base must lie inside it.
    (dict(depth=1000), "depth"),
    (dict(cq_base=TOP_DEFAULTS["depth"]), "cq_base"),
    (dict(host="pcie6"), "host"),
    (dict(serial=True), "serial"),
    # Recovery: 0 go-back-N or 1 selective repeat (the engines' one-bit port).
    (dict(selective=2), "selective"),
    (dict(selective=True), "selective"),
    (dict(responder_sizes={"colour": 3}), "responder_sizes"),
    (dict(faults_ab={}), "faults_ab"),
    # Context-cache ways: 1, 2, 4 or 8; more than one needs window slots apart from the
    # cache (windows > 0).
    (dict(cache_ways=3), "cache_ways"),
    (dict(cache_ways=16), "cache_ways"),
    (dict(cache_ways=4, windows=0), "cache_ways"),
])
def test_bad_field_raises_naming_it(kw, name):
    with pytest.raises(ValueError, match=rf"^Config\.{name} must be "):
        Config(**kw)


def test_config_is_frozen_and_replaced():
    cfg = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.timeout = 1024
    new = dataclasses.replace(cfg, timeout=1024)
    assert (new.timeout, cfg.timeout) == (1024, TOP_DEFAULTS["timeout"])
    with pytest.raises(ValueError, match=r"^Config\.timeout must be "):
        dataclasses.replace(cfg, timeout=0)


@pytest.mark.parametrize("make, text", [
    (lambda: ContextCacheShape(24), "cache_entries must be a power of two from 16 to 256 "
     "(QP-context cache entries), not 24"),
    (lambda: ContextCacheShape(512), "from 16 to 256 (QP-context cache entries), not 512"),
    (lambda: ContextCacheShape(True), "not True"),
    (lambda: MrTableShape(3), "mr_entries must be a power of two from 2 to 256 (MR table "
     "entries), not 3"),
    (lambda: MrTableShape(16, 3), "mr_cache must be 0 (the on-chip MR table) or a power of "
     "two from 2 to 256 (MR cache entries), not 3"),
    (lambda: MrTableShape(16, 512), "not 512"),
])
def test_cache_and_mr_table_shapes_refuse_bad_sizes_by_name(make, text):
    """The context cache's and the MR table's shapes refuse a size that is not a power of
    two in range (spec.checks.check_power_of_two), naming the parameter; 0 is an MR cache
    size (the table on chip), not a context cache's."""
    with pytest.raises(ValueError) as err:
        make()
    assert text in str(err.value)
    assert ContextCacheShape(256, 8).ways == 8 and not MrTableShape(16, 0).in_host
    with pytest.raises(ValueError, match="cache_entries"):
        ContextCacheShape(0)
