"""Synthesisable groupings of the designs' blocks for area measurement (``make area``).

The co-simulation tops (:class:`~rtl.tops.nic_top.NicTop`, :class:`~rtl.tops.rdma_top.RdmaTop`)
also hold what only a simulation needs: stimulus players, result recorders, host- and
local-memory models, links, fault injectors. The wrappers here hold the hardware of one
node and nothing else, so that its area can be measured as a whole.
"""

from amaranth import Const, Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In

from rtl.host.host_interface import HostInterface
from rtl.rdma.req.requester import Requester
from rtl.rdma.resp.responder import Responder
from spec.checks import silence
from spec.formats.roce import MR_LAYOUT
from spec.rdma_engine import ContextCacheShape
from spec.rdma_responder import MrTableShape

__all__ = ["NicNode", "RdmaEngine", "RdmaNode", "ResponderWithMrPort", "nic_part",
           "host_interface", "NIC_PARTS"]

#: What :func:`nic_part` can return.
NIC_PARTS = ("tx", "rx", "credit_return", "switch", "node", "endpoint", "completion_gen",
             "outstanding_tracker", "completion_recorder", "host_interface")


def nic_part(part, **top_params):
    """A part of node 0 of a :class:`~rtl.tops.nic_top.NicTop` built with ``top_params``.

    Taking the parts from the top itself gives them exactly the parameters of the
    co-simulated design (credits, segment size, ...), whatever rule the top derives them
    by. ``part`` is one of :data:`NIC_PARTS`: ``"tx"``, ``"rx"``, ``"credit_return"``,
    ``"switch"`` (the whole switch, ``nodes`` ports), ``"node"`` (a :class:`NicNode` of
    the node's TX, RX and credit return), ``"endpoint"`` (a :class:`NicNode` of the TX
    and RX alone: the credit return is a delay line standing for the link's credit
    sideband, fabric rather than endpoint), ``"completion_gen"`` and
    ``"outstanding_tracker"`` (the node's :class:`~rtl.nic.completion_gen.CompletionGen`
    and :class:`~rtl.nic.outstanding_tracker.OutstandingTracker`; ``completion="e2e"``
    only), ``"completion_recorder"`` (its :class:`~rtl.nic.completion_record.
    CompletionRecorder`; ``records`` only) or ``"host_interface"`` (the node's
    :class:`~rtl.host.host_interface.HostInterface`; ``attachment="pcie"`` only). The
    top's players and recorders are built with depth 1; they are not part of what is
    returned. ``ValueError`` names a ``part`` the top has not got.
    """
    from rtl.tops.nic_top import NicTop

    if part not in NIC_PARTS:
        raise ValueError(f"NIC part must be one of {NIC_PARTS}, not {part!r}")
    top = NicTop(items=1, events=1, **top_params)
    picked = {"tx": top.txs[0], "rx": top.rxs[0], "credit_return": top.crs[0],
              "switch": top.switch, "completion_gen": top.gens[:1],
              "outstanding_tracker": top.trks[:1], "completion_recorder": top.recs[:1],
              "host_interface": top.his[:1]}
    silence(top)
    if part == "node":
        return NicNode(picked["tx"], picked["rx"], picked["credit_return"])
    if part == "endpoint":
        return NicNode(picked["tx"], picked["rx"])
    if isinstance(picked[part], list):
        if not picked[part]:
            raise ValueError(f"NIC part {part!r}: this NicTop has none (completion "
                             f"{top.completion!r}, attachment {top.attachment!r}, "
                             f"records {top.records!r})")
        return picked[part][0]
    return picked[part]


def host_interface(profile, depth):
    """A :class:`~rtl.host.host_interface.HostInterface` of the named ``profile``
    (:data:`spec.host.PROFILES`)."""
    from spec.host import PROFILES

    return HostInterface(PROFILES[profile], depth)


def _prefixed(prefix, component):
    """``component``'s signature members, renamed ``prefix + name``."""
    return {prefix + name: member for name, member in component.signature.members.items()}


def _expose(m, outer, prefix, inner, skip=()):
    """Wire every port of ``inner`` (but those named in ``skip``) to the port
    ``prefix + name`` of ``outer``."""
    outer_ports = {path: value for path, _, value in outer.signature.flatten(outer)}
    for path, member, value in inner.signature.flatten(inner):
        if path[0] in skip or isinstance(value, Const):   # e.g. ``ready`` of always_ready
            continue
        port = outer_ports[(prefix + path[0],) + path[1:]]
        if member.flow == In:
            m.d.comb += value.eq(port)
        else:
            m.d.comb += port.eq(value)


class NicNode(wiring.Component):
    """One NIC endpoint: a :class:`~rtl.nic.nic_tx.NicTx`, a :class:`~rtl.nic.nic_rx.NicRx`
    and the :class:`~rtl.nic.credit_return.CreditReturn` that brings the switch's credits
    back to the sender, wired as in :class:`~rtl.tops.nic_top.NicTop`.

    Ports: every port of the TX as ``tx_<name>`` except ``give``, which the credit
    return drives; every port of the RX as ``rx_<name>``; ``credit`` (In(1)), a credit
    pulse from the switch's ingress buffer of this node. The local memory, the links and
    the fault injector of the top are not part of the node. With ``credit_return``
    None the ``credit`` pulse drives ``give`` directly (the credit return, a delay line
    of the link's latency, left to the fabric).
    """

    def __init__(self, tx, rx, credit_return=None):
        self.tx, self.rx, self.cret = tx, rx, credit_return
        tx_ports = _prefixed("tx_", tx)
        del tx_ports["tx_give"]
        super().__init__({**tx_ports, **_prefixed("rx_", rx), "credit": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.nic_tx = tx = self.tx
        m.submodules.nic_rx = self.rx
        if self.cret is not None:
            m.submodules.cret = self.cret
        _expose(m, self, "tx_", tx, skip=("give",))
        _expose(m, self, "rx_", self.rx)
        if self.cret is None:
            m.d.comb += tx.give.eq(self.credit)
        else:
            m.d.comb += [self.cret.i.eq(self.credit), tx.give.eq(self.cret.o)]
        return m


class ResponderWithMrPort(wiring.Component):
    """A :class:`~rtl.rdma.resp.responder.Responder` whose MR table has a write port.

    The responder's MR table has no write port in the RTL: the testbench loads it
    through the simulator, as the driver's ``reg_mr`` would. Synthesis then sees a
    memory that is never written, all zeros, and removes it together with the rkey,
    access-right and bounds checks that read it. A real engine registers memory regions
    through a write port; this wrapper adds one, so that the table and its checks are
    counted.

    Ports: every port of the responder, and ``mr_wr`` (In, a stream that is always
    ready): write ``payload.data`` (an MR entry) into entry ``payload.addr``.
    ``header``: the responder's framing (``"roce"`` or ``"scaleup"``).
    """

    def __init__(self, cache_entries, depth, mr_entries, header="roce"):
        self.responder = Responder(ContextCacheShape(cache_entries), depth,
                                   MrTableShape(mr_entries), header)
        mr_write = data.StructLayout({"addr": range(mr_entries), "data": MR_LAYOUT})
        super().__init__({**_prefixed("", self.responder),
                          "mr_wr": In(stream.Signature(mr_write, always_ready=True))})

    def elaborate(self, platform):
        m = Module()
        # The responder's own elaboration, with one more port on its table.
        inner = self.responder.elaborate(platform)
        silence(self.responder)                 # elaborated here, not by Fragment.get
        wp = inner.submodules.mr_table.write_port()
        m.d.comb += [wp.addr.eq(self.mr_wr.payload.addr), wp.data.eq(self.mr_wr.payload.data),
                     wp.en.eq(self.mr_wr.valid)]
        m.submodules.responder = inner
        _expose(m, self, "", self.responder)
        return m


class RdmaEngine(wiring.Component):
    """One RDMA engine: a :class:`~rtl.rdma.req.requester.Requester` and a
    :class:`~rtl.rdma.resp.responder.Responder` side by side.

    Every port of the requester is exposed as ``req_<name>``, every port of the
    responder as ``resp_<name>``. Their link and DMA ports are not merged: the design
    has no link multiplexer or DMA arbiter (in :class:`~rtl.tops.rdma_top.RdmaTop` node A
    has only the requester and node B only the responder), so that glue is not counted.
    Each side has its own QP-context cache of ``cache_entries`` entries. The responder's
    MR table gets the write port a real engine needs (:class:`ResponderWithMrPort`),
    exposed as ``resp_mr_wr``. ``header`` is both sides' framing (``"roce"`` or
    ``"scaleup"``, as in :class:`~rtl.tops.rdma_top.RdmaTop`); ``requester_params`` are
    the requester's sizes (:data:`spec.rdma_engine.REQUESTER_SIZES` keys, e.g. the
    window ``records`` and transport ``timeout`` a fabric profile sets), checked by the
    :class:`~rtl.rdma.req.requester.Requester`.
    """

    def __init__(self, cache_entries, depth, mr_entries, header="roce", **requester_params):
        self.requester = Requester(ContextCacheShape(cache_entries), depth, header,
                                   **requester_params)
        self.responder = ResponderWithMrPort(cache_entries, depth, mr_entries, header)
        super().__init__({**_prefixed("req_", self.requester),
                          **_prefixed("resp_", self.responder)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.requester = self.requester
        m.submodules.responder = self.responder
        _expose(m, self, "req_", self.requester)
        _expose(m, self, "resp_", self.responder)
        return m


class RdmaNode(wiring.Component):
    """One RDMA node as deployed: an :class:`RdmaEngine` and the host interface each of
    its sides reaches host memory through (:class:`~rtl.host.host_interface.HostInterface`
    of ``profile``). Ports: the engine's and both interfaces' (``hia_``, ``hib_``)."""

    def __init__(self, cache_entries, depth, mr_entries, profile):
        self.engine = RdmaEngine(cache_entries, depth, mr_entries)
        self.hi_a = HostInterface(profile, depth)
        self.hi_b = HostInterface(profile, depth)
        super().__init__({**_prefixed("", self.engine), **_prefixed("hia_", self.hi_a),
                          **_prefixed("hib_", self.hi_b)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = self.engine
        m.submodules.hi_a = self.hi_a
        m.submodules.hi_b = self.hi_b
        _expose(m, self, "", self.engine)
        _expose(m, self, "hia_", self.hi_a)
        _expose(m, self, "hib_", self.hi_b)
        return m
