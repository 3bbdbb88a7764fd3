"""The area of each "Where the gap comes from" row (:mod:`tb.gap_table`): the parts of ONE
endpoint of the row's design at the row's settings, and their figures from area.json.

What a row counts (:func:`~.catalogue.gap_row_entries`): the NIC endpoint (TX and RX)
or the RDMA engine (requester and responder), the host interface when the row attaches
over PCIe, the NIC's completion blocks when it completes end to end, and with link-level
retry the endpoint's own two retry ends (the ReplayTx of its uplink, the ReplayRx of its
downlink), each sized for the row's fabric and the design's frames. The fabric is common
to every row and counted on none: the switch, the links, the delay lines that stand for
wires (the links, the switch hop and its ElasticDelay, the NIC's credit return, the
reliable links' ACK sideband) and the retry ends on the far side of the endpoint's links.
Consecutive rows then differ by the hardware of their one factor.
"""

from tb.gap_table import gap_settings, side_settings

from .catalogue import FIGURES, gap_row_entries

__all__ = ["row_parts", "gap_parts", "side_parts", "figures_of", "parts_figures"]


def row_parts(design, settings):
    """``{component: count}`` of one endpoint of a row (``design`` and ``settings`` as
    :func:`tb.gap_table.gap_settings` gives them); every name is a key of
    :data:`~.catalogue.COMPONENTS`. ``ValueError`` names a setting with no entry."""
    return {name: count for name, (_, count) in gap_row_entries(design, settings).items()}


def gap_parts(profile):
    """``[(factor, design, parts)]``: :func:`row_parts` of every row of the table at
    fabric ``profile``, in the table's order."""
    return [(name, design, row_parts(design, s)) for name, design, s in gap_settings(profile)]


def side_parts(profile):
    """``[(name, design, parts)]``: :func:`row_parts` of the side rows at ``profile``
    (:func:`tb.gap_table.side_settings`), in the table's order."""
    return [(name, design, row_parts(design, s))
            for name, design, s, _ in side_settings(profile)]


def figures_of(area):
    """``{component: figures}`` from the contents of an area.json (``None``: empty)."""
    return {c["component"]: c for c in (area or {}).get("components", [])}


def parts_figures(parts, figures):
    """The figures of :data:`~.catalogue.FIGURES` summed over ``parts`` (``{component:
    count}``), each component's figures (CRC cores included) times its count; None when
    ``figures`` lacks any of the parts."""
    if any(name not in figures for name in parts):
        return None
    return {k: sum(n * figures[name][k] for name, n in parts.items()) for k in FIGURES}
