"""pyuvm environment of the RDMA engine top (:class:`rtl.tops.rdma_top.RdmaTop`).

Layers, bottom up (see ``docs/uvm.md``, section "RDMA"):

- :mod:`.bench`: the only code that touches signals. It owns the :class:`tb.harness.Harness`
  (through :class:`tb.rdma.testbench.RdmaTestbench`), loads host memories, MR table, the
  MMIO and injection players and the run-time ports before reset, and reads recorders,
  counters and memories in bulk after the run.
- :mod:`.items`, :mod:`.plan`, :mod:`.sequences`: RDMA WRITE work requests with a seeded
  ``randomize(rng)`` (QP, size, error, how the host posts them), the host images, MMIO
  writes and injected frames they turn into, and the sequences that make them.
- :mod:`.frames`: frames decoded by scapy for the intent checks and the coverage.
- :mod:`.agent`, :mod:`.scoreboard`, :mod:`.coverage`, :mod:`.env`: UVM components that
  call the bench, never a signal.
- :mod:`.tests`: the cocotb module of ``@pyuvm.test`` classes.
"""
