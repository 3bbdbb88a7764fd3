"""The RoCEv2 reliable-connected RDMA engine (design 2), one component per file."""
