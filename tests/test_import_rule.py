"""The dependency rule of the layers, checked on every import statement:

    spec/  <-  {rtl/, pymodel/}  <-  analysis/  <-  tb/  <-  {tests/, scripts/}

``spec/`` imports only Amaranth and the standard library; ``rtl/`` and ``pymodel/`` import
``spec/`` and themselves (never each other, nor anything above them); ``analysis/`` (what
runs the twins to measure the designs: points, fast paths, scenarios, load, workloads)
imports ``spec/``, ``pymodel/`` and itself, never ``rtl/`` or ``tb/``, so no import runs
back up from the twins to it; the golden model, its analysis and the RTL import no cocotb
or pyuvm; nothing below ``tests/`` and ``scripts/`` imports them. Every ``import`` and
``from ... import`` counts, at module level or inside a function, and so does
``importlib.import_module("<literal>")``; relative imports are resolved against the file's
package.

One more rule on the files of those layers: no import cycle between files (two files that
import each other, directly or through others, at module level or inside a function).
"""

import ast
import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The project's top-level packages, from the bottom of the stack up.
PROJECT = ("spec", "rtl", "pymodel", "analysis", "tb", "scripts", "tests")

#: Layer -> project packages it may import (besides the standard library).
ALLOWED = {
    "spec": {"spec"},
    "rtl": {"spec", "rtl"},
    "pymodel": {"spec", "pymodel"},
    "analysis": {"spec", "pymodel", "analysis"},
    "tb": {"spec", "rtl", "pymodel", "analysis", "tb"},
    "scripts": {"spec", "rtl", "pymodel", "analysis", "tb", "scripts"},
}
#: Layer -> third-party packages it may import (None: any).
THIRD_PARTY = {
    "spec": {"amaranth"},
    "rtl": {"amaranth"},
    "pymodel": {"amaranth", "numpy"},
    "analysis": {"amaranth", "numpy"},
    "tb": None,
    "scripts": None,
}


def _package_of(path):
    """The package a file belongs to, as a list of names (for relative imports)."""
    return list(path.relative_to(ROOT).parts[:-1])


def _from_module(node, path):
    """The module of the ``from ... import`` statement ``node`` in the file ``path``."""
    if not node.level:
        return node.module
    base = _package_of(path)
    base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def _import_module_literal(node):
    """The literal of ``importlib.import_module("<literal>")`` at ``node``, or ``None``."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "importlib"
            and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)):
        return node.args[0].value
    return None


def _statements(node):
    """Every statement under ``node``, at any depth (function and class bodies, branches,
    handlers, match cases): where an ``import`` statement can stand."""
    for name in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, name, None) or ():
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                yield child
                yield from _statements(child)


@functools.cache
def _import_nodes(source, filename):
    """The import statements of ``source`` and its ``importlib.import_module`` calls,
    found once per text (the layer, cycle and analysis checks all read every file); only
    a text that names ``import_module`` is walked down to its expressions."""
    tree = ast.parse(source, filename=filename)
    if "import_module" in source:
        return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                or _import_module_literal(n) is not None]
    return [n for n in _statements(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def imports_of(source, path):
    """``(line, module)`` of every import in ``source`` (the text of ``path``)."""
    out = []
    for node in _import_nodes(source, str(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, _from_module(node, path)))
        elif (literal := _import_module_literal(node)) is not None:
            out.append((node.lineno, literal))
    return out


def violations(path, source=None):
    """Every forbidden import of the file ``path``, as ``"file:line: ..."`` messages."""
    layer = path.relative_to(ROOT).parts[0]
    source = path.read_text() if source is None else source
    out = []
    for line, module in imports_of(source, path):
        top = module.split(".")[0]
        where = f"{path.relative_to(ROOT)}:{line}"
        if top in PROJECT:
            if top not in ALLOWED[layer]:
                out.append(f"{where}: {layer}/ must not import {module} "
                           f"(allowed: {', '.join(sorted(ALLOWED[layer]))})")
        elif top in sys.stdlib_module_names or top == "__future__":
            continue
        elif THIRD_PARTY[layer] is not None and top not in THIRD_PARTY[layer]:
            out.append(f"{where}: {layer}/ must not import the third-party package "
                       f"{module} (allowed: {', '.join(sorted(THIRD_PARTY[layer]))})")
    return out


def _files():
    return sorted(p for layer in ALLOWED for p in (ROOT / layer).rglob("*.py"))


def test_every_layer_has_files():
    layers = {p.relative_to(ROOT).parts[0] for p in _files()}
    assert layers == set(ALLOWED)


@pytest.mark.parametrize("layer", list(ALLOWED))
def test_imports_follow_the_layers(layer):
    files = [p for p in _files() if p.relative_to(ROOT).parts[0] == layer]
    bad = [v for p in files for v in violations(p)]
    assert not bad, "forbidden imports:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("layer,text,culprit", [
    ("pymodel", "from rtl.formats import nic\n", "rtl.formats"),
    ("pymodel", "def f():\n    import tb.cosim\n", "tb.cosim"),
    ("pymodel", "import cocotb\n", "cocotb"),
    ("pymodel", "from analysis.points import cycle_point\n", "analysis.points"),
    ("pymodel", "def f():\n    import analysis.rdma.fastpath\n", "analysis.rdma.fastpath"),
    ("analysis", "from rtl.rdma import top\n", "rtl.rdma"),
    ("analysis", "from tb.rdma.headline import run_point\n", "tb.rdma.headline"),
    ("analysis", "import cocotb\n", "cocotb"),
    ("rtl", "from analysis.scenarios.nic import pair\n", "analysis.scenarios"),
    ("rtl", "from pymodel.stall import stall_pattern\n", "pymodel.stall"),
    ("rtl", "import importlib\nimportlib.import_module('tb.harness')\n", "tb.harness"),
    ("spec", "import numpy as np\n", "numpy"),
    ("spec", "from rtl.common import crc32\n", "rtl.common"),
    ("tb", "from scripts import report\n", "scripts"),
    ("tb", "import tests.conftest\n", "tests.conftest"),
])
def test_the_checker_finds_a_forbidden_import(layer, text, culprit):
    """The check itself: a forbidden import in a file of ``layer`` is reported with the
    file, the line and the module."""
    path = ROOT / layer / "planted.py"
    found = violations(path, text)
    assert len(found) == 1 and culprit in found[0] and "planted.py:" in found[0], found


def test_the_checker_lets_allowed_imports_pass():
    text = ("import json\nfrom amaranth.lib import data\nfrom spec.formats import nic\n"
            "from . import sibling\n")
    for layer in ("spec", "rtl", "pymodel", "analysis"):
        assert violations(ROOT / layer / "planted.py", text) == []
    assert violations(ROOT / "analysis" / "planted.py",
                      "import numpy\nfrom pymodel.rdma import system\n") == []
    assert violations(ROOT / "tb" / "planted.py", "import cocotb\nfrom rtl import tops\n"
                      "from analysis.points import cycle_point\n") == []


def test_relative_imports_resolve_to_their_package():
    path = ROOT / "tb" / "nic" / "uvm" / "planted.py"
    text = "from .items import A\nfrom ..store_driver import B\nfrom . import env\n"
    assert imports_of(text, path) == [(1, "tb.nic.uvm.items"), (2, "tb.nic.store_driver"),
                                      (3, "tb.nic.uvm")]


def _module_file(name):
    """The file of the project module ``name`` (a module's ``.py`` or a package's
    ``__init__.py``), or ``None``."""
    parts = name.split(".") if name else []
    if not parts or parts[0] not in PROJECT:
        return None
    for f in (ROOT.joinpath(*parts).with_suffix(".py"), ROOT.joinpath(*parts, "__init__.py")):
        if f.is_file():
            return f
    return None


def imported_files(source, path):
    """The project files the file ``path`` (text ``source``) imports: each imported
    module's file, and for ``from package import name`` the submodule ``name``'s file
    when there is one (else the package's). The file itself is left out."""
    names = []
    for node in _import_nodes(source, str(path)):
        if isinstance(node, ast.Import):
            names += [[alias.name] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, path)
            names += [[f"{module}.{alias.name}", module] for alias in node.names]
        elif (literal := _import_module_literal(node)) is not None:
            names.append([literal])
    found = {next((f for f in map(_module_file, tries) if f), None) for tries in names}
    return found - {None, path}


def import_graph(files):
    """``{file: the project files it imports}`` over ``files``."""
    return {f: imported_files(f.read_text(), f) for f in files}


@functools.cache
def _project_graph():
    return import_graph(_files())


def cycles(graph):
    """The import cycles of ``graph``: its strongly connected components of more than one
    file (Tarjan's algorithm, iterative), each as a sorted list."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycle_between_files():
    found = cycles(_project_graph())
    assert not found, "import cycles:\n  " + "\n  ".join(
        " <-> ".join(str(f.relative_to(ROOT)) for f in c) for c in found)


def test_every_point_driver_is_in_the_analysis_layer():
    """A file named for a point (``points.py``, ``point.py``, ``*_point.py``) drives an
    experiment on the twins: it lives in analysis/, none in pymodel/."""
    named = [f for layer in ("pymodel", "analysis") for f in (ROOT / layer).rglob("*.py")
             if f.stem in ("points", "point") or f.stem.endswith("_point")]
    assert any(f.relative_to(ROOT).parts[0] == "analysis" for f in named), named
    misplaced = [str(f.relative_to(ROOT)) for f in named
                 if f.relative_to(ROOT).parts[0] != "analysis"]
    assert not misplaced, "point drivers outside analysis/: " + ", ".join(misplaced)


def test_the_graph_resolves_submodules_and_relative_imports():
    """``from package import module`` leads to the module's file, a name that is no
    module to the package's; relative imports and ``import a.b`` resolve too."""
    path = ROOT / "pymodel" / "nic" / "planted.py"
    text = ("from pymodel.nic import store\nfrom . import store_segmenter\n"
            "from .store import Store\nimport spec.host\nfrom pymodel import nic\n"
            "def f():\n    from pymodel.packet import frame_to_beats\n")
    assert imported_files(text, path) == {
        ROOT / "pymodel/nic/store.py", ROOT / "pymodel/nic/store_segmenter.py",
        ROOT / "spec/host.py", ROOT / "pymodel/nic/__init__.py", ROOT / "pymodel/packet.py"}


def test_the_check_finds_planted_cycles():
    a, b, c, d = (ROOT / "pymodel" / f"{n}.py" for n in "abcd")
    assert cycles({a: {b}, b: {c}, c: {a}, d: {a}}) == [sorted([a, b, c])]
    assert cycles({a: {b}, b: {a}, c: {d}, d: {c}}) == [sorted([a, b]), sorted([c, d])]
    assert cycles({a: {b}, b: {c}, c: set(), d: {a, c}}) == []
