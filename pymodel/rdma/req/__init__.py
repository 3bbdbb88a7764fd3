"""Twins of the requester's stages (``rtl/rdma/req/``), stepped one cycle at a time."""
