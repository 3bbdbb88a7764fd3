"""Runs of the ephemeral contexts' twins: a sender's messages through the pool twin
(:mod:`.flow`)."""
