"""cocotb side: the co-simulation runner, the harness (bulk access to players and
recorders), testbench classes, drivers, scoreboards and cocotb test modules."""
