"""Golden model of the MAC-routed scale-up NIC."""
