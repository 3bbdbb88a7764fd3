"""A faster, exact test for combinational cycles in an Amaranth 0.5 netlist.

Amaranth checks every netlist it converts for combinational cycles, bit by bit: for each
output bit of each cell it visits the bits that feed it. Many cells feed every output
bit from the same inputs (an adder, a comparison, a shift, a variable part-select, a
case match, a memory's asynchronous read port): a 512-bit shift by a variable amount
has 512 output bits of about 520 inputs each, and the check walked each of those
edges. It took a third of the export of the RDMA fabric top (14.5 of 44 s).

:func:`has_no_comb_cycle` answers the same question with one visit per such cell:

* a cell whose output bits all depend on the same input nets ("uniform") is one node;
  once one of its bits is fully explored without finding a cycle, so are all of them
  (they reach exactly what its inputs reach);
* reaching any bit of a uniform cell while another bit of it is on the search path is a
  cycle: that bit depends on an input the path went through.

So ``True`` means what Amaranth's check would conclude, and :func:`install` only ever
skips the original when there is no cycle; when there may be one it runs the original,
which raises :class:`amaranth.hdl._nir.CombinationalCycle` with its path as before.
The uniform cell kinds are read from Amaranth 0.5's ``comb_edges_to`` (the version is
pinned in pyproject.toml; another version keeps Amaranth's own check).
"""

import contextlib

__all__ = ["has_no_comb_cycle", "install"]

#: The Amaranth version whose cell kinds this module knows.
KNOWN_VERSION = "0.5.10"

_BITWISE = ("~", "&", "|", "^", "m")


class _Cycle(Exception):
    pass


def _uniform_kinds():
    from amaranth.hdl import _nir

    return (_nir.Part, _nir.Matches, _nir.AsyncReadPort, _nir.FlipFlop)


def has_no_comb_cycle(netlist):
    """Whether ``netlist`` (an Amaranth 0.5 ``Netlist``) is free of combinational cycles.
    Exact: ``False`` if and only if Amaranth's own check would find a cycle."""
    from amaranth.hdl import _nir

    cells, connections = netlist.cells, netlist.connections
    kinds = _uniform_kinds()
    uniform = []
    for cell in cells:
        if isinstance(cell, _nir.Operator):
            uniform.append(cell.operator not in _BITWISE)
        else:
            uniform.append(isinstance(cell, kinds))

    done_nets, done_cells = set(), set()
    path_nets, path_cells = set(), set()

    def enter(net):
        """Start visiting ``net``: its sources, or None if there is nothing to visit.
        Raises _Cycle on a cycle."""
        if net in (0, 1) or net in done_nets:
            return None
        if net < 0:                                        # a late-bound signal net
            if net in path_nets:
                raise _Cycle
            path_nets.add(net)
            return (net, False, iter((connections[net],)))
        cell, bit = net >> 16, net & 0xFFFF
        if uniform[cell]:
            if cell in done_cells:
                return None
            if cell in path_cells:
                raise _Cycle
            path_cells.add(cell)
            return (cell, True, (src for src, _ in cells[cell].comb_edges_to(bit)))
        if net in path_nets:
            raise _Cycle
        path_nets.add(net)
        return (net, False, (src for src, _ in cells[cell].comb_edges_to(bit)))

    def roots():
        for cell_idx, cell in enumerate(cells):
            yield from cell.output_nets(cell_idx)
        for value in netlist.signals.values():
            yield from value

    try:
        for root in roots():
            frame = enter(root)
            if frame is None:
                continue
            stack = [frame]
            while stack:
                key, is_cell, sources = stack[-1]
                for src in sources:
                    frame = enter(src)
                    if frame is not None:
                        stack.append(frame)
                        break
                else:
                    stack.pop()
                    if is_cell:
                        path_cells.discard(key)
                        done_cells.add(key)
                    else:
                        path_nets.discard(key)
                        done_nets.add(key)
    except _Cycle:
        return False
    return True


@contextlib.contextmanager
def install():
    """Within the block, Amaranth's netlist check runs :func:`has_no_comb_cycle` first and
    its own (slow) check only when that finds a cycle, to raise its usual error."""
    import amaranth
    from amaranth.hdl import _nir

    if getattr(amaranth, "__version__", None) != KNOWN_VERSION:
        yield
        return
    original = _nir.Netlist.check_comb_cycles

    def check_comb_cycles(self):
        if not has_no_comb_cycle(self):
            original(self)

    _nir.Netlist.check_comb_cycles = check_comb_cycles
    try:
        yield
    finally:
        _nir.Netlist.check_comb_cycles = original
