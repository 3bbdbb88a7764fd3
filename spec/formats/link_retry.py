"""Wire format of the link-level retry: the sequence tag of each frame and the ACK/NAK.

# Ref: the frame sequence number rides in the preamble, as in the Link Level Retry of the
# Ultra Ethernet Specification 1.0 (2025), and the ACK/NAK travel in the reverse
# direction between frames, as the credits do (rtl/nic/credit_return.py). Neither costs
# a frame byte; docs/recovery.md gives the protocol and its timing.

Tagged beat: the fields of :func:`spec.formats.packet.packet_layout` (same bit offsets, so
a flat beat integer of the model keeps its meaning) and then ``tag``, equal on every beat
of a frame: the frame's sequence number (``SEQ_BITS``) and above it one check bit, the
XOR of the sequence number's bits (so the whole tag has even parity). The FCS covers
only the frame bytes, so the tag has its own check: a tag with a flipped bit is caught
and the frame is treated as lost (it can never pass for another number).

ACK/NAK (one per cycle at most, receiver to sender)::

    seq    16  the receiver's next expected sequence number: frames before it are received
    nak     1  the frame ``seq`` was lost or damaged: send again from it (go-back-N)
    check   1  XOR of ``seq`` and ``nak`` (even parity over the 18 bits): an ACK/NAK
               with a flipped bit is ignored, as if it had been lost
"""

from amaranth.lib import data, stream

from spec.formats.packet import packet_layout

__all__ = ["SEQ_BITS", "TAG_BITS", "tagged_packet_layout", "tagged_packet_signature", "ack_layout",
           "seq_before"]

#: Bits of the frame sequence number (it wraps; the sender keeps far fewer than
#: ``2**(SEQ_BITS - 1)`` frames unacknowledged).
SEQ_BITS = 16
#: Bits of the tag: the sequence number and its check bit.
TAG_BITS = SEQ_BITS + 1


def tagged_packet_layout(width, tag_bits=TAG_BITS):
    """A beat of ``width`` bytes with a ``tag_bits`` sideband tag (no tag if 0)."""
    base = packet_layout(width)
    if tag_bits == 0:
        return base
    fields = {name: field.shape for name, field in base}
    fields["tag"] = tag_bits
    return data.StructLayout(fields)


def tagged_packet_signature(width, tag_bits=TAG_BITS):
    """A ``valid``/``ready`` stream of :func:`tagged_packet_layout` beats."""
    return stream.Signature(tagged_packet_layout(width, tag_bits))


ack_layout = data.StructLayout({"seq": SEQ_BITS, "nak": 1, "check": 1})


def seq_before(a, b):
    """``a`` comes before ``b`` in sequence-number order (modulo ``2**SEQ_BITS``)."""
    return a != b and ((b - a) % (1 << SEQ_BITS)) < (1 << (SEQ_BITS - 1))
