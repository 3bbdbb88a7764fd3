"""cocotb side of the scale-up NIC: scenarios, the co-simulation test, the headline."""
