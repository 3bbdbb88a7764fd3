"""The host interface: see :class:`rtl.host.host_interface.HostInterface`."""

from rtl.host.host_interface import HostInterface

__all__ = ["HostInterface"]
