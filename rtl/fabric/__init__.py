"""Simulation fabric of the systems: links with latency (and faults), the switch."""
