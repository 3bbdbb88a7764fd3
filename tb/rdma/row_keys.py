"""What an RDMA results row carries beside its figures, shared by the headline's direct
link (:mod:`tb.rdma.headline`) and the NIC's switch (:mod:`tb.rdma.headline_switch`): the
comparison keys, the topologies, the state by kind and the per-message figures."""

from spec.fabric_profiles import replay_buffer_bits
from spec.metrics import STEADY_WINDOW
from spec.rdma import LINK_FRAME_BEATS

__all__ = ["PER_MESSAGE", "comparison_keys", "TOPOLOGY", "TOPOLOGIES", "state_kinds",
           "ii_messages"]

#: A row's figures that are per message (the back-to-back run's).
PER_MESSAGE = ("wire_bytes", "ctrl_ops", "ctrl_bytes", "host_bytes", "host_tlps",
               "host_util", "inflight_bits", "ii_cycles")


def comparison_keys(host, fabric="board", link_retry=False, header="roce",
                    topology="direct-link"):
    """The keys of an RDMA row that say what it compares on (docs/results.md): ``fabric``,
    ``topology`` (one of :data:`TOPOLOGIES`), ``attachment`` (the host-interface profile),
    ``completion`` (``"e2e"``: the ACK and the CQE), ``completion_at`` (``"host-memory"``:
    the CQE in host memory), ``reliability`` (the engine's go-back-N, over link retry
    with ``link_retry``: ``"link-retry+go-back-N"``) and ``header``."""
    return {"topology": topology, "fabric": fabric, "attachment": host, "completion": "e2e",
            "reliability": "link-retry+go-back-N" if link_retry else "go-back-N",
            "header": header, "completion_at": "host-memory"}


#: RdmaTop's topology key: the two nodes on one link that stands for the whole path
#: (:func:`spec.fabric_profiles.one_way`), no switch and no credit-based flow control.
TOPOLOGY = "direct-link"
#: The topologies of a point: RdmaTop's direct link, or the NIC's switch
#: (:class:`rtl.tops.rdma_fabric_top.RdmaFabricTop`; the NIC's ``TOPOLOGY``).
TOPOLOGIES = (TOPOLOGY, "switch")


def state_kinds(inflight_bits, fabric="board", link_retry=False, fabric_beats=0):
    """An RDMA row's state by the kinds of :data:`spec.metrics.STATE_KINDS`: all of
    ``inflight_bits`` (the engine's records) is the engine's own (window records,
    outstanding reads, prefetched WQEs, held payload, context fills, receive buffer);
    the fabric buffer is ``fabric_beats`` 64-byte beats (on the switch: the sender's
    credits in use at their high-water mark, the switch ingress beats its frames held
    until their credits returned; 0 on RdmaTop's direct link); with ``link_retry`` the
    replay buffer of one link of the ``fabric``
    (:func:`spec.fabric_profiles.replay_buffer_bits` of the longest RDMA frame), as the
    NIC's."""
    return {"endpoint_state_bits": inflight_bits, "fabric_buffer_bits": 512 * fabric_beats,
            "replay_buffer_bits": (replay_buffer_bits(fabric, LINK_FRAME_BEATS)
                                   if link_retry else 0)}


def ii_messages():
    """The fewest messages of a back-to-back run (after its warm-up message) whose steady
    window (:data:`spec.metrics.STEADY_WINDOW`, over the warm-up and the messages) starts
    after the warm-up message: below it the row's ``ii_cycles`` would be the warm-up's
    spacing, not a rate."""
    (lo_num, lo_den), _ = STEADY_WINDOW
    return -(-lo_den // lo_num) - 1
