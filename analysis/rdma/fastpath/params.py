"""The point's parameters and the arithmetic every part of the fast path shares.

:func:`_setup` turns :func:`analysis.points.resolve`'s params into a :class:`_Setup`
(the message, the host profile, the rung's knobs with the explicit ones on top) and
makes the check the verbs model makes (inline data must fit a WQE slot: ``ValueError``
naming the payload); a point built other than the formulas' engine
(:data:`FORMULA_BUILD`) is refused. :func:`_tlp` is the cycles a TLP holds its host-interface
direction; :func:`_not_covered` is the ``ValueError`` every refused regime raises.
"""

import dataclasses

from pymodel.rdma.engine_config import context_words
from pymodel.rdma.frames import ETH_OVERHEAD
from spec.design_point import RdmaPoint
from spec.formats.roce import HOST_WORD_BYTES
from spec.formats.scaleup import framing
from spec.host import PROFILES
from spec.rdma_engine import LADDER, MAX_INLINE_WORDS, REQUESTER_DEFAULTS, RUNG_KNOBS
from spec.rdma_fabric import FCS_BYTES

_W = HOST_WORD_BYTES
_FCS = FCS_BYTES
_PHY = ETH_OVERHEAD                        # preamble + SFD, inter-frame gap (IEEE 802.3)


#: The point's build fields the formulas take. Every other build field must be at its
#: default: the formulas place QP q in entry q % cache_entries (a direct-mapped cache),
#: read no MRs (the MR table on chip) and serve items in order (no item passes another
#: waiting for its context fill).
FORMULA_BUILD = ("link_latency", "header")


def _cdiv(a, b):
    return -(-a // b)


def _tlp(payload, overhead, bpc, words=0):
    """Cycles a TLP holds its direction (docs/host_interface.md, "Timing")."""
    return max(1, words, _cdiv(payload + overhead, bpc))


def _not_covered(why):
    return ValueError(f"outside the RDMA fast path ({why}); use analysis.points.cycle_point")


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What the formulas need of a point: the message, the host profile, the knobs."""
    msg_bytes: int
    qps: int
    cache: int
    prof: object
    link: int
    pmtu: int
    serial: int
    ring_every: int
    bf: int
    inline: int
    signal_every: int
    ack_every: int
    ack_frames: int
    header: str = "roce"
    #: The requester's window slots (:data:`spec.rdma_engine.REQUESTER_DEFAULTS`): 0
    #: holds a context-cache entry until its QP's messages are acknowledged, a power
    #: of two until their records reach the completion unit.
    windows: int = REQUESTER_DEFAULTS["windows"]
    #: Host words of a QP context (the point's size over 64): a fill reads them all, from a
    #: table at word 0 (:class:`pymodel.rdma.verbs.Verbs`), so a fill read is aligned
    #: to its own size and cut at MRRS and RCB as a read at offset 0.
    qpc_words: int = 1

    @property
    def words(self):
        """Payload words of a message (``ceil(L / 64)``)."""
        return _cdiv(self.msg_bytes, _W)

    @property
    def stride(self):
        """log2 of the send-queue slot in words (a slot holds inline data)."""
        return 2 if self.inline else 0

    @property
    def n_inline(self):
        return self.words if self.inline else 0


def _setup(msg_bytes, p):
    """A :class:`_Setup` from :func:`analysis.points.resolve`'s params (the rung's knobs
    with the explicit ones on top), and the checks the verbs model makes."""
    knobs = dict(RUNG_KNOBS)
    knobs.update(dict(LADDER)[p["rung"]])
    knobs.update({k: p[k] for k in RUNG_KNOBS if p.get(k) is not None})
    s = _Setup(msg_bytes=msg_bytes, qps=p["qps"], cache=p["cache_entries"],
               prof=PROFILES[p["host"]], link=p["link_latency"], pmtu=1 << p["pmtu_log2"],
               header=framing(p.get("header", "roce")).header.value,
               windows=p.get("windows", REQUESTER_DEFAULTS["windows"]),
               qpc_words=context_words(p, "RDMA fast path"),
               **knobs)
    for f in RdmaPoint.knobs():
        value = p.get(f.name, f.default)
        if (f.metadata["kind"] == "build" and f.name not in FORMULA_BUILD
                and value != f.default):
            what = f.metadata["help"].split(":")[0].split(" (")[0]
            raise _not_covered(f"{f.name} {value}, {what}: the formulas' engine is built "
                               f"with {f.name} {f.default}")
    if s.windows and s.qps > s.windows:
        raise _not_covered(f"{s.qps} QPs over {s.windows} window slots (QPs take turns "
                           f"in a slot)")
    if s.inline and s.words > min(MAX_INLINE_WORDS, (1 << s.stride) - 1):
        raise ValueError(f"inline payload of {msg_bytes} bytes does not fit a WQE slot of "
                         f"{_W << s.stride} bytes")
    return s
