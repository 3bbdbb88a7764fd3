"""Simulation fabric: stimulus players and result recorders that keep Python off the clock."""
