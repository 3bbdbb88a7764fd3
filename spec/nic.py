"""The scale-up NIC's sizing rules, counter names and parameter defaults.

# Ref: docs/nic.md (credits, segmentation, receive windows) and SPEC.md ("make sim",
# the headline scenario). Wire formats: :mod:`spec.formats.nic`.

Imported by the RTL top (:class:`rtl.tops.nic_top.NicTop`), the golden model
(:mod:`pymodel.nic`, :mod:`pymodel.points`), the testbench and the reports.
"""

__all__ = ["COUNTERS", "WINDOW_WRITES", "HEADLINE_TOP", "ATTACHMENTS", "PCIE_WORD_BITS",
           "check_attachment", "pcie_mmio_addr", "link_credits"]

#: Per-node receive counters (NicRx ports; NicTop ports ``<name><node>``): frames written,
#: then one drop counter per reason, in the order a frame with several faults is counted.
COUNTERS = ("frames_ok", "drop_fcs", "drop_malformed", "drop_dst", "drop_addr",
            "drop_window")
#: Items of each ``win<p>`` player of NicTop (window-table writes of node ``p``).
WINDOW_WRITES = 16

#: The headline top of ``make sim``: 64-byte datapath, 4 nodes, 2-cycle links, 32 KB local
#: memories (512 words of 64 bytes), stores cut into frames of at most 1024 bytes.
#: How the accelerator reaches the NIC. ``integrated``: its stores arrive on the NIC's
#: command port and the receiver writes its local memory directly. ``pcie``: each store
#: of at most ``max_payload`` of the host profile (256 B) is one host posted write
#: through a :class:`rtl.host.host_interface.HostInterface` (its MMIO path), and the
#: receiver's writes leave as posted DMA writes through the same interface (docs/nic.md).
ATTACHMENTS = ("integrated", "pcie")
#: ``pcie``: a host write's 16-bit register offset carries the store's destination node
#: (the top 4 bits) and its word address (the low ``PCIE_WORD_BITS``): a window per node.
PCIE_WORD_BITS = 12


def check_attachment(attachment):
    """``attachment`` if it is one of :data:`ATTACHMENTS`; ``ValueError`` otherwise."""
    if attachment not in ATTACHMENTS:
        raise ValueError(f"attachment must be one of {list(ATTACHMENTS)}, "
                         f"not {attachment!r}")
    return attachment


def pcie_mmio_addr(dst, addr):
    """The host write's register offset of a store of node ``dst``, byte ``addr``."""
    return (dst << PCIE_WORD_BITS) | ((addr // 64) & ((1 << PCIE_WORD_BITS) - 1))


HEADLINE_TOP = dict(width=64, nodes=4, link_latency=2, mem_words=512, max_payload=1024)


def link_credits(width, max_payload):
    """Switch ingress buffer per port, in beats: twice ``max_payload + 28`` bytes (the
    20-byte L2 header, the 4-byte FCS and 4 bytes of margin), rounded up to beats; the
    credits each sender starts with. A sizing rule (a depth), shared by the RTL top and
    the model."""
    return 2 * (-(-(max_payload + 28) // width))
