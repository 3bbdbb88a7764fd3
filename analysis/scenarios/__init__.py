"""Seeded scenarios shared by the golden-model runs (:mod:`analysis.points`), the cocotb
tests, the headline runs and the reports: :mod:`.nic` (store scenarios of the NIC top) and
:mod:`.rdma` (verbs-built RDMA scenarios). Pure Python, like the rest of the model."""
