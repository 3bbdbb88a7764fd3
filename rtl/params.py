"""Constructor parameter checks with errors that name the parameter and the bad value."""

__all__ = ["reject", "check_int"]


def reject(component, message):
    """Raise ``ValueError(message)`` from a component's constructor.

    The half-built object is marked so that Amaranth does not also warn that it was
    "created but never used".
    """
    component._MustUse__silence = True
    raise ValueError(message)


def check_int(component, name, value, low, high):
    """Return ``value`` if it is an int in ``[low, high]``, else reject it by name."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        reject(component, f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value
