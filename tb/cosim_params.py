"""The parameters each cocotb module under ``tb`` accepts, and :func:`check_params`,
which :func:`tb.cosim.run_cosim` runs before any export or build: a key a module does not
take, or a value its checker refuses, stops the run with a ``ValueError`` naming it."""

import json

__all__ = ["ACCEPTED_PARAMS", "check_params"]


#: The parameters each cocotb module under ``tb`` accepts: the one declaration that
#: :func:`check_params` (run by :func:`run_cosim` before any export or build) holds every
#: ``params`` to. A tuple lists the accepted keys; a string names a function
#: (``"module:function"``) that checks keys and values and raises ``ValueError``.
ACCEPTED_PARAMS = {
    "tb.cocotb_clock_only": ("cycles", "inputs", "out_json"),
    "tb.cocotb_elastic_delay": ("latency", "bits", "seed", "cycles", "offer", "ready"),
    "tb.cocotb_ephemeral_fuzz": ("seed", "chunks", "packets", "top", "out"),
    "tb.cocotb_ephemeral_pool": ("entries", "key_bits", "idle", "keys", "seed", "cycles",
                                 "offer", "open", "done"),
    "tb.cocotb_ephemeral_sender": ("entries", "ack_slots", "idle", "ack_every", "ii",
                                   "completion", "lookahead", "popularity", "peers",
                                   "messages", "seed"),
    "tb.cocotb_ephemeral_lanes": ("entries", "ack_slots", "idle", "ack_every", "ii",
                                  "completion", "lookahead", "popularity", "peers",
                                  "messages", "seed", "lanes"),
    "tb.cocotb_ephemeral_receiver": "tb.cosim_params:_ephemeral_receiver_params",
    "tb.cocotb_faulty_link": ("width", "latency", "fifo_depth", "max_frame_beats", "frames",
                              "seed", "settings", "src_stall_rate", "src_stall_seed"),
    "tb.cocotb_fcs": ("width", "seed", "max_len", "long_frames"),
    "tb.cocotb_host_interface": ("profile", "depth", "mix", "seed", "stalls"),
    "tb.cocotb_mem_credit": ("width", "depth", "latency", "max_credits", "ops", "seed",
                             "stall_rate"),
    "tb.cocotb_selftest_bulk_dump": (),
    "tb.cocotb_selftest_clock_restart": (),
    "tb.cocotb_selftest_empty": (),
    "tb.cocotb_selftest_fails": (),
    "tb.nic.cocotb_fuzz": ("top", "seed", "frames", "chunks", "out", "sabotage"),
    "tb.nic.cocotb_load": "tb.cosim_params:_nic_load_params",
    "tb.nic.cocotb_mem_fuzz": ("top", "seed", "frames", "chunks", "out"),
    "tb.nic.cocotb_nic_mem": ("nodes", "framing", "fabric", "tags", "mem_words",
                              "max_payload", "target_latency", "target_reads", "cmds", "raws",
                              "mem_seed", "stalls", "link_retry", "faults"),
    "tb.nic.cocotb_nic": ("width", "nodes", "framing", "link_latency", "mem_words",
                          "max_payload", "credits", "scenario", "seed", "count", "messages",
                          "msg_bytes", "peers", "attachment", "fabric", "stall_rate", "completion",
                          "coalesce", "flush_idle", "timeout", "retry", "one_at_a_time",
                          "records", "warmup", "destinations", "popularity",
                          "peer_retry", "peer_window"),
    "tb.nic.cocotb_nic_e2e": ("width", "nodes", "framing", "link_latency", "mem_words",
                              "max_payload", "credits", "scenario", "seed", "coalesce",
                              "flush_idle", "timeout", "extra_cycles", "stall_rate",
                              "attachment"),
    "tb.nic.cocotb_nic_peer": ("width", "nodes", "framing", "link_latency", "mem_words",
                               "max_payload", "credits", "scenario", "seed", "coalesce",
                               "flush_idle", "timeout", "peer_window", "retry",
                               "switch_faults"),
    "tb.nic.cocotb_nic_peer_pcie": ("width", "nodes", "framing", "link_latency", "mem_words",
                                    "max_payload", "credits", "seed", "coalesce",
                                    "flush_idle", "timeout", "peer_window", "records",
                                    "retry", "attachment"),
    "tb.nic.cocotb_nic_retry": ("width", "nodes", "framing", "link_latency", "mem_words",
                                "max_payload", "credits", "faults", "seed", "count",
                                "stall_rate", "expect_damage", "expect_signalling",
                                "fabric", "incast", "completion", "coalesce", "flush_idle",
                                "timeout"),
    "tb.nic.uvm.tests": "tb.cosim_params:_nic_uvm_params",
    "tb.rdma.cocotb_fabric": "tb.rdma.fabric_writes:check_run_params",
    "tb.rdma.cocotb_fabric_reads": "tb.rdma.fabric_reads:check_reads_params",
    "tb.rdma.cocotb_fuzz": ("top", "seed", "frames", "chunks", "fillers", "inject_stall",
                            "out", "read_mix"),
    "tb.rdma.cocotb_rdma": "tb.rdma.cocotb_rdma:check_params",
    "tb.rdma.cocotb_rdma_budget": "tb.rdma.cocotb_rdma_budget:check_budget_params",
    "tb.rdma.cocotb_read_requester": ("seed", "timeout"),
    "tb.rdma.cocotb_req_fuzz": ("seed", "frames", "chunks", "out", "timeout"),
    "tb.rdma.uvm.tests": "tb.cosim_params:_rdma_uvm_params",
    "tb.soak.cocotb_nic_mem_soak": ("top", "seed", "plan", "mix", "token", "faults"),
    "tb.soak.cocotb_ephemeral_soak": "tb.soak.ephemeral:check_params",
    "tb.soak.cocotb_rdma_soak": "tb.soak.rdma:check_group_params",
    "tb.soak.cocotb_nic_soak": ("width", "nodes", "framing", "link_latency", "mem_words",
                                "max_payload", "credits", "seed", "chunks", "per_chunk",
                                "model_stores", "stall_rate", "drop_rate", "corrupt_rate",
                                "dup_rate", "tag_rate", "ack_drop_rate", "ack_corrupt_rate",
                                "break_model_chunk", "token", "switch_drops",
                                "peer_window", "coalesce", "flush_idle", "timeout"),
}


def _keys(test_module, params, accepted):
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"{test_module}: unknown parameter(s) {unknown} (accepted: "
                         f"{sorted(accepted)})")


def _nic_load_params(params):
    from analysis.load.nic import LOAD_TOP
    _keys("tb.nic.cocotb_load", params, ["framing", "nodes", "msg_bytes", "messages", "load",
                                         "pattern", "burst", "seed", *LOAD_TOP])


def _ephemeral_receiver_params(params):
    from spec.ephemeral import check_receiver
    _keys("tb.cocotb_ephemeral_receiver", params,
          ["entries", "idle", "sources", "packets", "seed"])
    try:
        check_receiver(params.get("entries", 2), params.get("idle", 1))
    except ValueError as exc:
        raise ValueError(f"tb.cocotb_ephemeral_receiver: {exc}") from None


def _nic_uvm_params(params):
    import dataclasses

    from tb.nic.uvm.config import NicConfig
    _keys("tb.nic.uvm.tests", params, [f.name for f in dataclasses.fields(NicConfig)])


def _rdma_uvm_params(params):
    import dataclasses

    from spec.rdma_engine import TOP_DEFAULTS
    from tb.rdma.uvm.config import RdmaConfig
    _keys("tb.rdma.uvm.tests", params,
          ["top", *(f.name for f in dataclasses.fields(RdmaConfig))])
    _keys("tb.rdma.uvm.tests 'top'", params.get("top", {}), TOP_DEFAULTS)


def check_params(test_module, params):
    """Refuse ``params`` for ``test_module`` (``ValueError`` naming the keys or values):
    keys the module does not take (:data:`ACCEPTED_PARAMS`), values its checker refuses; a
    module that declares nothing is refused too (declare it there)."""
    import importlib

    params = params or {}
    if not isinstance(params, dict):
        raise ValueError(f"{test_module}: params must be a dict, not {params!r}")
    if test_module not in ACCEPTED_PARAMS:
        raise ValueError(f"{test_module}: no accepted parameters declared "
                         f"(tb.cosim_params.ACCEPTED_PARAMS)")
    accepted = ACCEPTED_PARAMS[test_module]
    if isinstance(accepted, str):
        module, function = accepted.split(":")
        getattr(importlib.import_module(module), function)(params)
    else:
        _keys(test_module, params, accepted)
    try:
        json.dumps(params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{test_module}: params must be JSON-serialisable ({exc})") from None
