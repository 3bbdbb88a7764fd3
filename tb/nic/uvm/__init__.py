"""pyuvm environment of the NIC top (:class:`rtl.tops.nic_top.NicTop`).

Layers, bottom up (see ``docs/uvm.md``):

- :mod:`.bench`: the only code that touches signals. It owns the :class:`Harness` and the
  signal-level bus models of :mod:`tb.nic.store_driver` (``StoreSource``,
  ``FrameMonitor``), loads before reset and drains after the run.
- :mod:`.items`, :mod:`.sequences`: transactions with a seeded ``randomize(rng)`` and
  the sequences that make them.
- :mod:`.agent`, :mod:`.scoreboard`, :mod:`.coverage`, :mod:`.env`: UVM components that
  call the bench, never a signal.
- :mod:`.tests`: the cocotb module of ``@pyuvm.test`` classes; :mod:`.run` runs it.
"""
