"""The room a run of the RDMA pyuvm environment has: :class:`Budget`.

The sequences (:mod:`.sequences`) draw items only while they fit the top's players,
recorders, host memories and the inject run's limits.
"""

from .items import QP_TABLE
from .plan import inject_cost

__all__ = ["Budget"]

#: Host-memory words (of each node) not left for the items: the context table, the CQ,
#: the read-only MR and the send queues of QPs without traffic.
_RESERVED_WORDS = QP_TABLE + 1024 + 256 + 4 * 300


def _beats(nbytes):
    return -(-nbytes // 64)


class Budget:
    """Room left in the top's players, recorders and host memories.

    Posted run: MMIO words (player), beats on the A->B link (recorder), ``written`` and
    ``completed`` marks, words of each host memory (payloads, send-queue slots, targets).
    Inject run: frames and payload beats at the responder (:class:`RdmaConfig`), and the
    inject player's depth.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.used = dict.fromkeys(("mmio", "wire", "events", "words", "inj_frames",
                                   "inj_beats", "inj_rest"), 0)
        self.limit = {"mmio": cfg.mmio_depth, "wire": cfg.wire_depth,
                      "events": cfg.event_depth, "words": (cfg.depth - _RESERVED_WORDS) // 2,
                      "inj_frames": cfg.inject_frames, "inj_beats": cfg.inject_depth,
                      "inj_rest": cfg.inject_rest_beats}

    @staticmethod
    def need(item):
        # A send-queue slot (rounded up to a power of two per QP: twice, at most), the
        # payload and the target with its gap.
        words = 2 * (1 << item.qp.stride_log2) + 2 * _beats(item.size) + 1
        if item.path == "inject":
            frames, beats, rest = inject_cost(item)
            return {"inj_frames": frames, "inj_beats": beats, "inj_rest": rest,
                    "words": words}
        # A doorbell, or the WQE by MMIO with its inline words (the most it may take).
        mmio = 1 + (_beats(item.size) if item.inline else 0)
        return {"mmio": mmio, "events": 1, "words": words,
                "wire": sum(_beats(n) for n in item.frames())}

    def fits(self, item, reserve=0):
        """Whether ``item`` fits, keeping room for ``reserve`` more inject items of the
        smallest kind (two frames of two beats)."""
        need = self.need(item)
        keep = {"inj_frames": 2 * reserve, "inj_beats": 4 * reserve}
        return all(self.used[k] + v + keep.get(k, 0) <= self.limit[k] for k, v in need.items())

    def wire_room(self):
        """Whether one more (smallest) inject item fits."""
        return (self.used["inj_frames"] + 2 <= self.limit["inj_frames"]
                and self.used["inj_beats"] + 4 <= self.limit["inj_beats"])

    def take(self, item):
        for k, v in self.need(item).items():
            self.used[k] += v
