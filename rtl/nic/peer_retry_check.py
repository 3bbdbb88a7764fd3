"""The per-peer retry's receiver check: the PSN a receiver expects from each source."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.checks import check_int
from spec.formats.nic import PSN_BITS
from spec.nic import PEER_VERDICTS

__all__ = ["PeerRetryCheck", "psn_event_layout"]

#: A store frame's source id and PSN (the PSN extension, :func:`spec.formats.nic.
#: psn_layout`), offered in the receiver's verdict cycle.
psn_event_layout = data.StructLayout({"src": 8, "psn": PSN_BITS})


class PeerRetryCheck(wiring.Component):
    """Per source: the PSN expected next, the gaps and duplicates counted.

    Parameters
    ----------
    peers : int
        Sources tracked: ids ``0 .. peers - 1`` (1 to 256); a frame of another id is
        not tracked (verdict ``accept``, no state), as the completion generator does
        not track it.

    Ports
    -----
    i : In(stream.Signature(psn_event_layout, always_ready=True))
        A store frame that passed the FCS, format and destination checks.
    verdict : Out(2)
        In the cycle of ``i``: the index in :data:`spec.nic.PEER_VERDICTS` (0 accept:
        in order; 1 duplicate: the PSN is behind the expected one by 1 to ``2**15``; 2
        nak: ahead, the first gap since the last frame in order; 3 gap: ahead again).
    expected, gaps, duplicates : Out(data.ArrayLayout(16, peers))
        Per source (counters modulo ``2**16``).

    Timing
    ------
    The verdict is combinational on the state of the start of the cycle; the state
    changes at its end (an accepted frame advances ``expected``, a frame in order clears
    the NAK flag, a first gap sets it). Never stalls.
    """

    def __init__(self, peers):
        self.peers = check_int(self, "peers", peers, 1, 256)
        arr = data.ArrayLayout(PSN_BITS, peers)
        super().__init__({
            "i": In(stream.Signature(psn_event_layout, always_ready=True)),
            "verdict": Out(2),
            "expected": Out(arr),
            "gaps": Out(arr),
            "duplicates": Out(arr),
        })

    def elaborate(self, platform):
        m = Module()
        half = 1 << (PSN_BITS - 1)
        v = {name: k for k, name in enumerate(PEER_VERDICTS)}
        e = self.i.payload
        m.d.comb += self.verdict.eq(v["accept"])
        for s in range(self.peers):
            exp, gaps, dups = self.expected[s], self.gaps[s], self.duplicates[s]
            nak = Signal(name=f"nak_sent{s}")
            diff = Signal(PSN_BITS, name=f"diff{s}")
            m.d.comb += diff.eq(e.psn - exp)
            with m.If(self.i.valid & (e.src == s)):
                with m.If(diff == 0):
                    m.d.sync += [exp.eq(exp + 1), nak.eq(0)]
                with m.Elif(diff >= half):
                    m.d.comb += self.verdict.eq(v["duplicate"])
                    m.d.sync += dups.eq(dups + 1)
                with m.Else():
                    m.d.comb += self.verdict.eq(v["gap"])
                    m.d.sync += [gaps.eq(gaps + 1), nak.eq(1)]
                    with m.If(~nak):
                        m.d.comb += self.verdict.eq(v["nak"])
        return m
