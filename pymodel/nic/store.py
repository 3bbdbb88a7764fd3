"""The store command: the item of the NIC's ``cmd`` stream (``store_cmd_layout``)."""

from pymodel.packet import frame_to_beats, unpack_beat
from spec.host import PROFILES

__all__ = ["Store", "cut"]


class Store:
    """One store command: ``payload`` goes to ``addr`` of node ``dst``; ``length`` is the
    header field (default ``len(payload)``; another value makes a malformed frame).

    ``release`` (default 0): the store's arrival cycle. Its first command beat is offered
    from cycle ``release`` on, its later beats at once (the top's timed ``cmd<p>``
    player: :class:`rtl.sim.stream_player.StreamPlayer` with ``timed``); a store
    released earlier than the one before it in its node's list simply waits for that
    one (the player is in order). Release 0 is the behaviour of an untimed player.

    ``ack_req`` (default False): the command's flag, set by the issuer when no next store
    of its own is queued behind this one (spec.formats.nic, "Ack request").
    """

    def __init__(self, dst, addr, payload, length=None, release=0, ack_req=False):
        self.dst, self.addr, self.payload = dst, addr, bytes(payload)
        self.ack_req = bool(ack_req)
        self.length = len(payload) if length is None else length
        if not isinstance(release, int) or isinstance(release, bool) or not (
                0 <= release < 1 << 32):
            raise ValueError(f"release must be a cycle from 0 to 2**32 - 1, not {release!r}")
        self.release = release

    def beats(self, width):
        """The command beats: ``(data, nbytes, first, last)``."""
        return [unpack_beat(width, b) for b in frame_to_beats(self.payload, width)]

    def host_writes(self, mps=PROFILES["pcie"].max_payload):
        """The stores of the ``pcie`` attachment: the host writes this store as posted
        writes of at most ``mps`` bytes (MPS), each a store of its own at
        ``addr + k * mps``; the last carries this store's ``ack_req`` (the register
        offset's bit :data:`spec.nic.PCIE_ACK_REQ_BIT`)."""
        n = max(len(self.payload), 1)
        return [Store(self.dst, self.addr + k, self.payload[k:k + mps],
                      release=self.release if k == 0 else 0,
                      ack_req=self.ack_req and k + mps >= n)
                for k in range(0, n, mps)]

    def segments(self, width, max_payload):
        """The frames' stores after the NIC's segmenter
        (:class:`pymodel.nic.store_segmenter.StoreSegmenterModel`): :func:`cut`."""
        return cut(self, max_payload)


def cut(store, max_payload):
    """The segments of ``store`` after the NIC's segmenter (the rule of
    :class:`pymodel.nic.store_segmenter.StoreSegmenterModel`): a cut every
    ``max_payload`` bytes of payload; segment ``k`` goes to ``addr + k * max_payload``
    with the header length ``min(rem, max_payload)``, ``rem`` starting at ``length`` and
    losing ``max_payload`` (13-bit wrap) per segment; the segment with ``rem <=
    max_payload`` (for an honest store its last) carries the store's ``ack_req``, the
    others none."""
    out, rem = [], store.length
    for k in range(0, max(len(store.payload), 1), max_payload):
        out.append(Store(store.dst, store.addr + k, store.payload[k:k + max_payload],
                         min(rem, max_payload), ack_req=store.ack_req and rem <= max_payload))
        rem = (rem - max_payload) % (1 << 13)
    return out
