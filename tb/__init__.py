"""cocotb side: the co-simulation harness, bulk fabric access, drivers and test modules."""
