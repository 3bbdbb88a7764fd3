"""Per-message host-interface figures from the interfaces' counters (both designs).

Each function takes the counter dicts of any number of host interfaces
(:data:`spec.host.HOST_COUNTERS` names): the RDMA top has one per node, the NIC's
``pcie`` attachment one per node too.
"""

__all__ = ["host_tlps", "host_bytes", "host_util"]

_TLP_KINDS = {"read_req": "up_rd_tlps", "write": "up_wr_tlps", "completion": "dn_cpl_tlps",
              "mmio": "dn_mmio_tlps"}


def host_tlps(*hosts):
    """TLPs of the host interfaces by kind, summed."""
    return {k: sum(h[c] for h in hosts) for k, c in _TLP_KINDS.items()}


def host_bytes(*hosts):
    """Bytes through the host interfaces: payload and TLP overhead, both directions."""
    return sum(h[f"{d}_{k}_bytes"] for h in hosts for d in ("up", "dn")
               for k in ("payload", "overhead"))


def host_util(hosts, messages, ii):
    """The busiest direction's busy fraction in the steady state: its busy cycles per
    message over the cycles per message (``None`` without an ii)."""
    if not ii:
        return None
    busiest = max(h[f"{d}_busy_cycles"] for h in hosts for d in ("up", "dn"))
    return min(1.0, busiest / messages / ii)
