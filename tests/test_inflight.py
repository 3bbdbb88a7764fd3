"""The in-flight peak that reduces NIC stamps to ``inflight_bits``: hand-computed cases."""

import pytest

from pymodel.inflight import peak_in_flight


def test_overlapping_messages_add_up():
    # [0, 7) 3 beats, [3, 10) 3 beats, [6, 13) 3 beats: all three overlap in cycle 6.
    assert peak_in_flight([0, 3, 6], [7, 10, 13], [3, 3, 3]) == 9


def test_an_end_frees_before_a_start_in_the_same_cycle():
    # The first ends in cycle 5, the second starts in cycle 5: never both in flight.
    assert peak_in_flight([0, 5], [5, 9], [4, 2]) == 4


def test_no_messages_hold_nothing():
    assert peak_in_flight([], [], []) == 0


@pytest.mark.parametrize("args,match", [
    (([0, 1], [2], [1, 1]), "one entry per message"),
    (([5], [4], [1]), "ends"),
])
def test_bad_input_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        peak_in_flight(*args)
