"""Ephemeral delivery contexts (design 3): the on-chip context pool, one component per file."""
