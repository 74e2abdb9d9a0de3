"""A node's watchdog on itself (core/liveness.py)."""

from __future__ import annotations

import pytest

from egoroll_ros.core.liveness import Liveness
from egoroll_ros.errors import ConfigError

pytestmark = pytest.mark.safety  # supervision: never rerun


def test_regular_beats_are_not_a_stall_and_the_longest_gap_is_kept():
    lv = Liveness(1.0)
    for k in range(100):
        assert lv.beat(0.05 * k) is None
    assert lv.stalls == 0 and lv.max_gap == pytest.approx(0.05)


def test_a_gap_of_the_timeout_is_a_stall_reported_once_by_the_beat_or_the_check_first():
    lv = Liveness(1.0)
    lv.beat(0.0)
    assert lv.check(1.5) == pytest.approx(1.5)     # an event acted on before the next beat
    assert lv.beat(1.55) is None                   # ... and the beat after it does not repeat
    assert lv.beat(2.6) == pytest.approx(1.05)
    assert lv.stalls == 2


def test_reset_starts_counting_afresh_and_zero_turns_detection_off():
    lv = Liveness(1.0)
    lv.beat(0.0)
    lv.reset(10.0)
    assert lv.check(10.2) is None
    off = Liveness(0.0)
    off.beat(0.0)
    assert off.beat(100.0) is None and off.max_gap == 100.0


def test_an_earlier_time_never_moves_the_reference_back():
    lv = Liveness(1.0)
    lv.beat(5.0)
    assert lv.check(4.0) is None                   # a time read before the beat's
    assert lv.beat(5.5) is None


@pytest.mark.parametrize('bad', [-0.1, float('nan'), float('inf')])
def test_a_bad_timeout_is_refused(bad):
    with pytest.raises(ConfigError):
        Liveness(bad)
