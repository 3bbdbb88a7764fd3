"""Golden-model twin of the host interface (:class:`HostInterfaceModel`)."""

from pymodel.host.host_interface import HostInterfaceModel, StepResult, tlp_cycles

__all__ = ["HostInterfaceModel", "StepResult", "tlp_cycles"]
