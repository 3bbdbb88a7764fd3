"""cocotb tests and the host-driver model of the RDMA engine."""
