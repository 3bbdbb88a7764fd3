"""The dependency rule of the layers, checked on every import statement:

    spec/  <-  {rtl/, pymodel/}  <-  tb/  <-  {tests/, scripts/}

``spec/`` imports only Amaranth and the standard library; ``rtl/`` and ``pymodel/`` import
``spec/`` and themselves (never each other, nor ``tb/``); the golden model and the RTL
import no cocotb or pyuvm; nothing below ``tests/`` and ``scripts/`` imports them. Every
``import`` and ``from ... import`` counts, at module level or inside a function, and so
does ``importlib.import_module("<literal>")``; relative imports are resolved against the
file's package.
"""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The project's top-level packages, from the bottom of the stack up.
PROJECT = ("spec", "rtl", "pymodel", "tb", "scripts", "tests")

#: Layer -> project packages it may import (besides the standard library).
ALLOWED = {
    "spec": {"spec"},
    "rtl": {"spec", "rtl"},
    "pymodel": {"spec", "pymodel"},
    "tb": {"spec", "rtl", "pymodel", "tb"},
    "scripts": {"spec", "rtl", "pymodel", "tb", "scripts"},
}
#: Layer -> third-party packages it may import (None: any).
THIRD_PARTY = {
    "spec": {"amaranth"},
    "rtl": {"amaranth"},
    "pymodel": {"amaranth", "numpy"},
    "tb": None,
    "scripts": None,
}


def _package_of(path):
    """The package a file belongs to, as a list of names (for relative imports)."""
    return list(path.relative_to(ROOT).parts[:-1])


def imports_of(source, path):
    """``(line, module)`` of every import in ``source`` (the text of ``path``)."""
    tree = ast.parse(source, filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(path)
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            out.append((node.lineno, name))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "importlib"
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
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
    for layer in ("spec", "rtl", "pymodel"):
        assert violations(ROOT / layer / "planted.py", text) == []
    assert violations(ROOT / "tb" / "planted.py", "import cocotb\nfrom rtl import tops\n") == []


def test_relative_imports_resolve_to_their_package():
    path = ROOT / "tb" / "nic" / "uvm" / "planted.py"
    text = "from .items import A\nfrom ..store_driver import B\nfrom . import env\n"
    assert imports_of(text, path) == [(1, "tb.nic.uvm.items"), (2, "tb.nic.store_driver"),
                                      (3, "tb.nic.uvm")]
