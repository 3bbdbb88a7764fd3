"""The 16-bit LFSR behind every seeded pattern: stall patterns of the players and
recorders, and the fault draws of the faulty links.

# Ref: a Galois LFSR (shift right, XOR the taps when the bit shifted out is 1) with the
# feedback polynomial x^16 + x^14 + x^13 + x^11 + 1, maximal length (period 65535): the
# 16-bit example of the Wikipedia article "Linear-feedback shift register" (section
# "Galois LFSRs", toggle mask 0xB400).

The RTL (:class:`rtl.common.stall_pattern.StallPattern`, the fault draws of
:class:`rtl.fabric.faulty_link.FaultyLink`) and the golden model (:mod:`pymodel.stall`,
:mod:`pymodel.fabric.faulty_link`) each compute the sequence with their own code from
:data:`LFSR_TAPS`; :func:`lfsr_next` is the reference that tests hold both against.
A seed of 0 is read as 1 everywhere (an LFSR can not leave 0).
"""

__all__ = ["LFSR_BITS", "LFSR_TAPS", "LFSR_PERIOD", "lfsr_next"]

#: Bits of the LFSR state.
LFSR_BITS = 16
#: Galois toggle mask of x^16 + x^14 + x^13 + x^11 + 1: XORed into the state after the
#: right shift when the bit shifted out was 1.
LFSR_TAPS = 0xB400
#: States a maximal-length 16-bit LFSR runs through before it repeats.
LFSR_PERIOD = (1 << LFSR_BITS) - 1


def lfsr_next(state):
    """The reference: the LFSR state one cycle (one step) after ``state``."""
    return (state >> 1) ^ (LFSR_TAPS if state & 1 else 0)
