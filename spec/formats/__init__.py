"""Wire and stream formats, defined once and imported by RTL, golden model and testbench."""
