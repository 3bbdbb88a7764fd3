"""Source scans of rtl/ (and, for their size, of pymodel/, analysis/, tb/ and scripts/) for
the contract rules that a review would otherwise have to catch:

- widths come from spec/: no integer literal 512 (a host word or 64-byte beat:
  ``HOST_WORD_BITS``) or 24 (a QPN, PSN or MSN: ``QPN_BITS``, ``PSN_BITS``,
  ``MSN_BITS``) or 31 (the transport timeout: ``TIMEOUT_BITS``) in the code of rtl/ (strings,
  docstrings and comments do not count; a parameter's default value is a size, not a
  width, and does not count either);
- ports are declared through signatures, not by name: no port dictionary key built with
  an f-string (``ports[f"s{k}_addr"] = In(...)``, ``{f"{n}_we": In(1) for n in ...}``),
  and no ``getattr``/``setattr``/``hasattr`` whose name is built from strings (an
  f-string, ``prefix + name``, ``"...".format(...)``: ``getattr(self, f"{name}_we")``);
  a signal's own ``name=f"..."`` (a debug name) is not a port and does not count;
- blocks and tops join ports with ``wiring.connect``, not by name: no ``getattr(...)`` on
  either side of an ``.eq`` (``getattr(self, n).eq(getattr(x, n))``);
- files stay small: of the Python files in :data:`SIZED_DIRS`, at most
  :data:`MAX_LONG_FILES` have more than :data:`MAX_LINES` lines, and each of those says
  in its module docstring why it :data:`STAYS_WHOLE` (the rest are split by concern).

The first three rules hold for every file of rtl/.

Each rule is checked on a small sample written to break it, so that the scan is known
to see what it is meant to see.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RTL = ROOT / "rtl"

#: Integer literals that stand for a width spec/ names.
WIDTH_LITERALS = {512: "HOST_WORD_BITS", 24: "QPN_BITS/PSN_BITS/MSN_BITS", 31: "TIMEOUT_BITS"}

def width_literals(source):
    """``(line, value)`` of each integer literal of :data:`WIDTH_LITERALS` in the code of
    ``source``, parameter defaults left out."""
    tree = ast.parse(source)
    defaults = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            defaults |= {id(d) for d in node.defaults + node.kw_defaults if d is not None}
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and type(n.value) is int
                  and n.value in WIDTH_LITERALS and id(n) not in defaults)


def _is_port_constructor(node):
    """``In(...)``/``Out(...)``, possibly with ``.array(...)`` after it."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "array":
        node = node.func.value
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("In", "Out"))


def _is_built_name(node):
    """An attribute name made at run time from strings: an f-string, a ``+`` or ``%``
    (an attribute name is a string, so these join strings) or ``"...".format(...)``."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format" and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str))


def fstring_ports(source):
    """Lines that declare or reach a port through a built name: a dict entry or item
    assignment whose key is an f-string and whose value is ``In(...)``/``Out(...)``, a
    ``{f"...": In(...) for ...}`` comprehension, or ``getattr``/``setattr``/``hasattr``
    of a name built from strings (:func:`_is_built_name`)."""
    tree = ast.parse(source)
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            lines |= {k.lineno for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.JoinedStr) and _is_port_constructor(v)}
        elif isinstance(node, ast.DictComp):
            if isinstance(node.key, ast.JoinedStr) and _is_port_constructor(node.value):
                lines.add(node.lineno)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.JoinedStr) \
                        and _is_port_constructor(node.value):
                    lines.add(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "setattr", "hasattr") \
                and len(node.args) >= 2 and _is_built_name(node.args[1]):
            lines.add(node.lineno)
    return sorted(lines)


#: Folders whose Python files are held to the size rule, and the rule: at most
#: ``MAX_LONG_FILES`` files over ``MAX_LINES`` lines, each saying why it stays whole.
SIZED_DIRS = ("rtl", "pymodel", "analysis", "tb", "scripts")
MAX_LINES = 400
MAX_LONG_FILES = 2
STAYS_WHOLE = "stays whole"


def size_violations(sources):
    """What breaks the size rule in ``sources`` (``{name: text}``): a line per file over
    :data:`MAX_LINES` lines without :data:`STAYS_WHOLE` in its module docstring, and one
    naming them all when more than :data:`MAX_LONG_FILES` are over."""
    long = {name: len(text.splitlines()) for name, text in sources.items()
            if len(text.splitlines()) > MAX_LINES}
    out = [f"{name}: {n} lines and its docstring does not say why it {STAYS_WHOLE}"
           for name, n in sorted(long.items())
           if STAYS_WHOLE not in (ast.get_docstring(ast.parse(sources[name])) or "")]
    if len(long) > MAX_LONG_FILES:
        out.append(f"{len(long)} files over {MAX_LINES} lines (at most {MAX_LONG_FILES}): "
                   + ", ".join(f"{name} ({n})" for name, n in sorted(long.items())))
    return out


def _is_getattr(node):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr")


def getattr_plumbing(source):
    """Lines of ``<getattr(...)>.eq(...)`` or ``<x>.eq(<getattr(...)>)``: ports reached
    by name and assigned one by one."""
    tree = ast.parse(source)
    return sorted({n.lineno for n in ast.walk(tree)
                   if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr == "eq"
                   and (_is_getattr(n.func.value) or any(_is_getattr(a) for a in n.args))})


def _rtl_files():
    return sorted(RTL.rglob("*.py"))


@pytest.mark.parametrize("path", _rtl_files(), ids=lambda p: str(p.relative_to(RTL)))
def test_no_literal_widths(path):
    found = width_literals(path.read_text())
    assert found == [], "; ".join(
        f"{path.relative_to(ROOT)}:{line}: literal {value} (use {WIDTH_LITERALS[value]})"
        for line, value in found)


@pytest.mark.parametrize("path", _rtl_files(), ids=lambda p: str(p.relative_to(RTL)))
def test_no_fstring_port_names(path):
    found = fstring_ports(path.read_text())
    assert found == [], f"{path.relative_to(ROOT)}: ports named by built strings on lines {found}"


@pytest.mark.parametrize("path", _rtl_files(), ids=lambda p: str(p.relative_to(RTL)))
def test_no_getattr_port_plumbing(path):
    found = getattr_plumbing(path.read_text())
    assert found == [], f"{path.relative_to(ROOT)}: ports joined by getattr on lines {found}"


def test_scan_covers_rtl():
    """The scans see the files of rtl/ that hold the blocks, the tops and the harness
    (a moved tree must not leave the scans silently empty)."""
    names = {str(p.relative_to(RTL)) for p in _rtl_files()}
    assert {"sim/harness_top.py", "tops/rdma_top.py", "rdma/context_cache.py",
            "host/host_interface.py", "rdma/resp/verify.py"} <= names


def test_files_stay_small():
    sources = {str(path.relative_to(ROOT)): path.read_text()
               for d in SIZED_DIRS for path in sorted((ROOT / d).rglob("*.py"))}
    assert len(sources) > 100           # the scan sees the tree
    assert size_violations(sources) == []


def test_scans_see_what_they_are_for():
    """Samples written by hand to break each rule, and their compliant twins."""
    bad_widths = (
        "x = Signal(512)\n"                                   # line 1: a width
        "y = {'qpn': 24}\n"                                   # line 2: a layout width
        "def f(depth, words=512):\n    return words\n"        # a default: not counted
        "'''In(stream.Signature(512)) in a docstring'''\n"    # a string: not counted
    )
    assert width_literals(bad_widths) == [(1, 512), (2, 24)]
    assert width_literals("x = Signal(HOST_WORD_BITS)\ny = {'qpn': QPN_BITS}\n") == []
    bad_ports = (
        "ports[f's{k}_addr'] = In(range(n))\n"                # line 1
        "p = {f'{n}_we': In(1) for n in names}\n"             # line 2
        "q = {f'x{k}': Out(8), 'y': Out(1)}\n"                # line 3
        "a = getattr(self, f'{name}_data')\n"                 # line 4
        "r = {f'{n}': In(1).array(4)}\n"                      # line 5
        "s = Signal(name=f'{name}_fresh')\n"                  # a signal name: allowed
        "setattr(self, f'{name}_we', x)\n"                   # line 7
        "b = getattr(block, prefix + name)\n"                # line 8
        "c = getattr(block, name + '_count')\n"              # line 9
        "d = hasattr(block, '{}_done'.format(name))\n"       # line 10
        "e = getattr(block, '%s_done' % name)\n"             # line 11
    )
    assert fstring_ports(bad_ports) == [1, 2, 3, 4, 5, 7, 8, 9, 10, 11]
    assert fstring_ports("ports[name] = In(Sig(n))\nport = getattr(self, name)\n") == []
    bad_plumbing = (
        "m.d.comb += getattr(self, n).eq(getattr(x, n))\n"   # line 1
        "m.d.comb += getattr(self, n).eq(x.y)\n"             # line 2
        "m.d.comb += self.y.eq(getattr(x, n))\n"             # line 3
        "wiring.connect(m, x.counters, wiring.flipped(self.counters))\n"   # allowed
        "m.d.comb += self.y.eq(x.y)\n"                       # allowed
    )
    assert getattr_plumbing(bad_plumbing) == [1, 2, 3]

    long = "x = 1\n" * MAX_LINES
    whole = f'"""Kept in one piece: it {STAYS_WHOLE}."""\n' + long
    assert size_violations({"a.py": long[:-6], "b.py": whole, "c.py": whole}) == []
    assert size_violations({"a.py": long + "y = 2\n"}) == [
        f"a.py: {MAX_LINES + 1} lines and its docstring does not say why it {STAYS_WHOLE}"]
    found = size_violations({n: whole for n in ("a.py", "b.py", "c.py")})
    assert found == [f"3 files over {MAX_LINES} lines (at most {MAX_LONG_FILES}): "
                     f"a.py ({MAX_LINES + 1}), b.py ({MAX_LINES + 1}), c.py ({MAX_LINES + 1})"]
