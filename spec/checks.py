"""Constructor parameter checks with errors that name the parameter and the bad value,
and the one helper that tells Amaranth an elaboratable is deliberately left unused."""

__all__ = ["reject", "check_int", "check_windows", "silence"]


def silence(*objs):
    """Mark elaboratables that are deliberately never elaborated, and every elaboratable
    they hold (through attributes, lists, tuples and dicts), so that Amaranth does not warn
    that they were "created but never used": a half-built component, one built only to be
    looked at, or one whose Verilog comes from a cache. Other objects are ignored.

    Amaranth 0.5 keeps this flag under a private name (``_MustUse__silence``); this is the
    only place that writes it.
    """
    from amaranth.hdl import Elaboratable

    seen, todo = set(), list(objs)
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            todo += obj
        elif isinstance(obj, dict):
            todo += obj.values()
        elif isinstance(obj, Elaboratable):
            obj._MustUse__silence = True
            todo += vars(obj).values()


def reject(component, message):
    """Raise ``ValueError(message)`` from a component's constructor.

    The half-built object is silenced (:func:`silence`) so that Amaranth does not also
    warn that it was "created but never used".
    """
    silence(component)
    raise ValueError(message)


def check_int(component, name, value, low, high):
    """Return ``value`` if it is an int in ``[low, high]``, else reject it by name."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        reject(component, f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value


def check_power_of_two(name, value, low, high, what, zero=None):
    """Return ``value`` if it is an int power of two in ``[low, high]`` (or 0 when
    ``zero`` says what 0 means), else ``ValueError`` reading ``<name> must be [0
    (<zero>) or ]a power of two from <low> to <high> (<what>), not <value>``."""
    if not (isinstance(value, int) and not isinstance(value, bool)
            and ((zero is not None and value == 0)
                 or (low <= value <= high and not value & (value - 1)))):
        either = f"0 ({zero}) or " if zero is not None else ""
        raise ValueError(f"{name} must be {either}a power of two from {low} to {high} "
                         f"({what}), not {value!r}")
    return value


def check_windows(component, windows, entries):
    """The requester's ``windows`` parameter: 0, or a power of two from ``entries`` (the
    cache entries built) to 4096. Returns the window slots built (``entries`` for 0)."""
    check_int(component, "window slots (windows)", windows, 0, 4096)
    if windows and (windows & (windows - 1) or windows < entries):
        reject(component, f"window slots (windows) must be 0 or a power of two from the "
                          f"{entries} cache entries to 4096, not {windows!r}")
    return windows or entries
