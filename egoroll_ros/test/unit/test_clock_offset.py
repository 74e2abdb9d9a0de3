"""The steady -> ROS clock offset of the executor's stamps (core/clock_offset.py)."""

from __future__ import annotations

import pytest

from egoroll_ros.core.clock_offset import ClockOffset

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun


def _reads(*reads):
    it = iter(reads)
    return lambda: next(it)


def test_the_first_offset_is_the_quickest_of_five_reads():
    c = ClockOffset()
    reads = [(0.0, 100.0, 0.01), (1.0, 101.0001, 1.0002), (2.0, 102.5, 2.1),
             (3.0, 103.0, 3.001), (4.0, 104.0, 4.0005)]
    assert c.update(_reads(*reads)) == pytest.approx(101.0001 - 1.0001)


def test_small_moves_and_interrupted_reads_keep_the_offset():
    c = ClockOffset()
    c.update(_reads(*[(0.0, 100.0, 0.0)] * 5))
    assert c.update(_reads((1.0, 101.001, 1.0))) == 100.0          # 1 ms: jitter, kept
    assert c.update(_reads((1.0, 106.0, 1.01))) == 100.0           # a 10 ms read: no measure


def test_a_clock_jump_seen_in_a_clean_read_is_taken():
    c = ClockOffset()
    c.update(_reads(*[(0.0, 100.0, 0.0)] * 5))
    assert c.update(_reads((1.0, 106.0, 1.0001))) == pytest.approx(105.0 - 0.00005)
    assert c.offset == pytest.approx(105.0 - 0.00005)


def test_later_updates_read_the_clocks_once():
    c = ClockOffset()
    c.update(_reads(*[(0.0, 100.0, 0.0)] * 5))
    n = []

    def read():
        n.append(1)
        return (1.0, 101.0, 1.0)
    c.update(read)
    assert len(n) == 1
