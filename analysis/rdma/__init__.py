"""Runs of the RDMA engine's twins: a design point (:mod:`.point`), the fabric twin under
load (:mod:`.fabric_point`), and the point from closed forms (:mod:`.fastpath`)."""
