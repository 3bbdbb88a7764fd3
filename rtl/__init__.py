"""Amaranth 0.5 RTL: shared blocks, simulation fabric, the two designs and their tops."""
