"""LLM inference workloads carried by both designs (docs/inference.md).

- :mod:`.config`: model configurations from data files (``data/models/*.toml``), KV bytes
  per token, parameter counts.
- :mod:`.generate`: the messages of one decode step (TP all-reduce, DeepEP dispatch and
  combine) and of one KV-cache transfer, as a :class:`~.trace.Trace`.
- :mod:`.trace`: the trace (phases with dependencies, message rows) and its JSON replay
  format.
- :mod:`.carriers`: per-message costs of each design from the golden model's fast path;
  RDMA rungs and issuer profiles (``data/issuers.toml``).
- :mod:`.timing`: the communication time of a trace on a carrier.
- :mod:`.roofline`: the decode roofline and the compute / memory / coordination
  classifier; :mod:`.calibration`: the fit to NVIDIA NIM's Llama-3.1-8B table.
- :mod:`.grid`: the inference grid (every scenario, batch and design), KV rows and KV
  transfers; the report section that presents it is scripts/reporting/inference.py.
"""

from analysis.workloads.carriers import ISSUERS, RUNGS, Carrier, IssuerProfile, Rung
from analysis.workloads.config import kv_bytes_per_token, load_model, model_names
from analysis.workloads.generate import Deployment, decode_step, kv_transfer
from analysis.workloads.roofline import decode_roofline
from analysis.workloads.timing import comm_time
from analysis.workloads.trace import Trace, trace_from_dict

__all__ = ["Carrier", "Rung", "IssuerProfile", "RUNGS", "ISSUERS", "load_model",
           "model_names", "kv_bytes_per_token", "Deployment", "decode_step", "kv_transfer",
           "decode_roofline", "comm_time", "Trace", "trace_from_dict"]
