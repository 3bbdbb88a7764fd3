"""The parameters of the NIC system model, typed and checked: :class:`NicParams`."""

import dataclasses

from spec.fabric_profiles import fabric_profile, nic_top_credits, switch_hop_latency
from spec.formats.nic import MAX_LENGTH, Framing
from spec.formats.packet import SUPPORTED_WIDTHS
from spec.nic import ATTACHMENTS, HEADLINE_TOP

__all__ = ["NicParams"]

#: Nodes of a system: 8-bit node ids, so at most 255 besides the sender's own id (a
#: switch port per node; the RTL switch builds up to 16, the model sweeps further).
MAX_NODES = 255
#: Link latency range of the RTL ``Link`` and ``CreditReturn`` (cycles).
MAX_LINK_LATENCY = 1024
#: Memory words of a receiver: the RTL ``NicRx``/``WindowTable`` depth range.
MAX_MEM_WORDS = 1 << 20
#: Largest credit count of the RTL ``CreditCounter`` (16 bits).
MAX_CREDITS = 65535


def _int(name, value, low, high):
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"NicParams.{name} must be an integer from {low} to {high}, "
                         f"not {value!r}")


@dataclasses.dataclass(frozen=True)
class NicParams:
    """The parameters of :class:`rtl.tops.nic_top.NicTop` that its twin
    (:class:`pymodel.nic.system.NicSystemModel`) needs.

    Defaults: :data:`spec.nic.HEADLINE_TOP` (the ``make sim`` headline top), ``credits``
    from :func:`spec.fabric_profiles.nic_top_credits` (the switch's ingress buffer;
    ``board`` without retry: :func:`spec.nic.link_credits`), no link retry, the ``integrated``
    attachment (:data:`spec.nic.ATTACHMENTS`), the ``board`` fabric profile
    (:data:`spec.fabric_profiles.FABRIC_PROFILES`). ``link_latency`` None is the
    profile's link; on ``board`` any may be given, on another profile only its own.
    :attr:`hop_latency` (derived) is the switch's extra hop delay of the profile
    (elastic with ``retry``). ``framing has no default: the two framings
    are the two rows of every comparison. Each field is checked; a bad one raises
    ``ValueError`` naming it.
    """

    framing: str
    width: int = HEADLINE_TOP["width"]
    nodes: int = HEADLINE_TOP["nodes"]
    link_latency: int | None = None
    mem_words: int = HEADLINE_TOP["mem_words"]
    max_payload: int = HEADLINE_TOP["max_payload"]
    credits: int | None = None
    retry: bool = False
    attachment: str = ATTACHMENTS[0]
    fabric: str = "board"

    def __post_init__(self):
        if isinstance(self.framing, Framing):
            object.__setattr__(self, "framing", self.framing.value)
        framings = [f.value for f in Framing]
        if self.framing not in framings:
            raise ValueError(f"NicParams.framing must be one of {framings}, not "
                             f"{self.framing!r}")
        if self.width not in SUPPORTED_WIDTHS:
            raise ValueError(f"NicParams.width must be one of {list(SUPPORTED_WIDTHS)}, not "
                             f"{self.width!r}")
        _int("nodes", self.nodes, 2, MAX_NODES)
        try:
            profile = fabric_profile(self.fabric)
        except ValueError as exc:
            raise ValueError(f"NicParams.{exc}") from None
        if self.link_latency is None:
            object.__setattr__(self, "link_latency", profile.link)
        elif profile.name != "board" and self.link_latency != profile.link:
            raise ValueError(f"NicParams.link_latency {self.link_latency!r}: fabric "
                             f"{profile.name!r} sets the link latency ({profile.link} "
                             f"cycles); leave link_latency out")
        _int("link_latency", self.link_latency, 1, MAX_LINK_LATENCY)
        _int("mem_words", self.mem_words, 2, MAX_MEM_WORDS)
        _int("max_payload", self.max_payload, self.width, MAX_LENGTH)
        if self.max_payload % self.width:
            raise ValueError(f"NicParams.max_payload must be a multiple of the width "
                             f"({self.width}), not {self.max_payload!r}")
        if not isinstance(self.retry, bool):
            raise ValueError(f"NicParams.retry must be True or False, not {self.retry!r}")
        if self.credits is None:
            object.__setattr__(self, "credits",
                               nic_top_credits(profile, self.width, self.max_payload,
                                               self.retry, self.link_latency))
        _int("credits", self.credits, 1, MAX_CREDITS)
        if self.attachment not in ATTACHMENTS:
            raise ValueError(f"NicParams.attachment must be one of {list(ATTACHMENTS)}, "
                             f"not {self.attachment!r}")

    @property
    def hop_latency(self):
        """The switch's hop delay beyond its own cycles on this fabric
        (:func:`spec.fabric_profiles.switch_hop_latency`)."""
        return switch_hop_latency(self.fabric)
