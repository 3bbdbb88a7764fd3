"""Blocks shared by both designs: CRC/FCS, credit counter, memory model, stall patterns."""
