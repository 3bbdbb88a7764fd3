"""The pipelined RDMA WRITE requester: one stage per module, wired by ``requester``."""
