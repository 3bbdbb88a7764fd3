"""Golden model of the RoCEv2 RDMA engine (design 2)."""
