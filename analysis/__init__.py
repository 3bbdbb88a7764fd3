"""The analysis layer: what runs the golden model's twins (:mod:`pymodel`) to measure the
designs, and what stands in for them.

- :mod:`.points`: one measurement point of a design on the cycle-level twins, reduced to
  the metrics of SPEC.md; :mod:`.fastpath`: the NIC's point from closed forms, equal to
  the cycle model's.
- :mod:`.scenarios`: seeded inputs (messages, faults, fuzz) the runs play into the twins.
- :mod:`.load`: open-loop load (traffic, saturation searches, latency distributions).
- :mod:`.workloads`: inference workloads (models, deployments, rooflines) the designs'
  figures are applied to.
- :mod:`.rdma`: an RDMA point (:mod:`.rdma.point`), the fabric twin's runs under load
  (:mod:`.rdma.fabric_point`) and the RDMA point from closed forms (:mod:`.rdma.fastpath`).
- :mod:`.ephemeral`: a sender's messages through the context pool twin
  (:mod:`.ephemeral.flow`).

It imports :mod:`spec` and :mod:`pymodel`, never :mod:`rtl` or :mod:`tb`; the twins never
import it (tests/test_import_rule.py).
"""
