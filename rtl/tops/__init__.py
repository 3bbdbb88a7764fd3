"""Top levels exported to Verilog for co-simulation."""
