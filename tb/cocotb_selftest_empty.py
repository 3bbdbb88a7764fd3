"""A cocotb module with no test: the harness must not count it as a pass."""
