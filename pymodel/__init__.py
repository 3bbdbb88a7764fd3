"""The golden model: pure Python twins of every RTL block (no cocotb import).

Each twin reproduces its block's outputs bit for bit and its handshakes cycle for cycle,
following the timing contract written in the RTL block's docstring.
"""
