"""The pipelined RDMA responder: one stage per file, wired by :mod:`.responder`.

This package file imports nothing, so that the golden model can import the sizing
constants (:mod:`.sizes`) without elaborating any RTL.
"""
