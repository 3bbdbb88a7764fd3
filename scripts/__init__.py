"""The reports and tools of the project, as thin command-line scripts over importable
modules (the top of the layers: they may import :mod:`tb`, :mod:`pymodel`, :mod:`rtl` and
:mod:`spec`; nothing imports them but the tests).

``sim.py`` (``make sim``), ``report.py`` (``make report``: :mod:`scripts.reporting`),
``area.py`` (``make area``: :mod:`scripts.area_proxies`), ``bench.py`` (``make bench``:
:mod:`scripts.benchmark`), ``regress.py``, ``soak.py``, ``retry_trace.py``, ``waves.py``,
``test_wall.py``, and ``setup.sh``.
"""
