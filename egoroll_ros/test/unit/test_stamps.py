"""Setpoint stamps in exact integer nanoseconds (ros/convert.py): consecutive ticks of a 500 Hz
loop are stamped exactly one period apart, also at today's epoch."""

import numpy as np
import pytest

from egoroll_ros.ros.convert import ns_to_time, sec_to_time, steady_to_ros_ns

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun


def test_ticks_one_period_apart_are_stamped_one_period_apart_to_the_nanosecond():
    offset_ns = 1_796_142_583_086_961_123 - 33_000_123_456_789   # ROS epoch minus uptime
    t0, period = 33_000.123456789, 0.002
    stamps = [ns_to_time(steady_to_ros_ns(offset_ns, t0 + k * period)) for k in range(5000)]
    ns = np.array([s.sec * 1_000_000_000 + s.nanosec for s in stamps], dtype=np.int64)
    assert set(np.diff(ns).tolist()) == {2_000_000}
    # Float seconds of the epoch (the old path) cannot do this: 2^-22 s of rounding.
    floats = [sec_to_time((offset_ns + t0 * 1e9 + k * period * 1e9) * 1e-9) for k in range(5000)]
    fns = np.array([s.sec * 1_000_000_000 + s.nanosec for s in floats], dtype=np.int64)
    assert np.abs(np.diff(fns) - 2_000_000).max() > 100


def test_ns_to_time_splits_seconds_and_nanoseconds():
    t = ns_to_time(1_796_142_583_999_999_999)
    assert (t.sec, t.nanosec) == (1_796_142_583, 999_999_999)
