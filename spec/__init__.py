"""The spec layer: the contract that the RTL and the golden model both implement.

Wire and host formats (:mod:`spec.formats`), sizing rules and constants, parameter
defaults and headline definitions (:mod:`spec.nic`, :mod:`spec.rdma`), the fabric's
fault and retry definitions (:mod:`spec.fabric`), the LFSR of every seeded pattern
(:mod:`spec.lfsr`), counter and metric names (:mod:`spec.metrics`) and the parameter
checks (:mod:`spec.checks`), each with its reference (``# Ref:``).

The dependency rule (checked by ``tests/test_import_rule.py``)::

    spec/  <-  {rtl/, pymodel/}  <-  analysis/  <-  tb/  <-  {tests/, scripts/}

``spec/`` imports only Amaranth and the standard library; ``rtl/`` and ``pymodel/`` import
``spec/`` but never each other (nor ``analysis/`` or ``tb/``). The model shares
definitions with the RTL (a layout, a polynomial, a depth, a formula), never the code that
does the work.
"""
