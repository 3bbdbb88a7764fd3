"""Twins of the simulation fabric."""
