"""Which joint_states the gate and the executor believe (core/joint_state_vetting.py, issue
24.5), against a small reference model written here."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from egoroll_ros.core.joint_state_vetting import (
    ACCEPTED,
    IGNORED,
    REFUSED,
    JointStateVetter,
)
from egoroll_ros.core.types import JointStateData

ARM = ('j1', 'j2')
DRIVER, OTHER = b'driver', b'jsp'


def _js(stamp: float, received: float, names=ARM, value: float = 0.0) -> JointStateData:
    return JointStateData(tuple(names), np.full(len(names), value), stamp=stamp,
                          received=received)


def test_a_message_about_other_joints_is_ignored_and_one_about_some_is_refused():
    v = JointStateVetter(ARM)
    assert v.vet(_js(1.0, 1.0, names=('finger',)), OTHER, 1.0).status == IGNORED
    partial = v.vet(_js(1.0, 1.0, names=('j1',)), DRIVER, 1.0)
    assert partial.status == REFUSED and 'lacks j2' in partial.reason
    assert v.vet(_js(1.0, 1.0), DRIVER, 1.0).status == ACCEPTED
    # the ignored publisher of other joints is no second publisher of these
    assert v.vet(_js(1.01, 1.01, names=('finger',)), OTHER, 1.01).status == IGNORED
    assert v.vet(_js(1.02, 1.02), DRIVER, 1.02).status == ACCEPTED


def test_a_second_publisher_refuses_both_until_one_is_silent_for_the_window():
    v = JointStateVetter(ARM, writer_window=2.0)
    assert v.vet(_js(1.0, 1.0), DRIVER, 1.0).status == ACCEPTED
    second = v.vet(_js(1.05, 1.05, value=0.0), OTHER, 1.05)
    assert second.status == REFUSED and second.second_publisher
    assert '2 publishers' in second.reason
    t = 1.1
    while t < 3.0:                        # the driver too, while the other one lives
        assert v.vet(_js(t, t), DRIVER, t).second_publisher
        t += 0.1
    assert v.conflict_since == pytest.approx(1.05)
    t = 3.2                               # the other one last spoke at 1.05: 2.15 s ago
    got = v.vet(_js(t, t), DRIVER, t)
    assert got.status == ACCEPTED and v.conflict_since is None
    assert v.refused == 1 + 19


def test_a_stamp_going_backwards_is_refused_unless_the_clock_went_back_with_it():
    v = JointStateVetter(ARM, clock_window=0.5)
    assert v.vet(_js(100.0, 1.0), DRIVER, 100.0).status == ACCEPTED
    old = v.vet(_js(99.0, 1.01), DRIVER, 100.01)            # a late duplicate, a replay
    assert old.status == REFUSED and 'went backwards by 1.000 s' in old.reason
    assert v.vet(_js(100.02, 1.02), DRIVER, 100.02).status == ACCEPTED
    jump = v.vet(_js(5.0, 1.03), DRIVER, 5.01)               # /clock restarted at 5 s
    assert jump.status == ACCEPTED and jump.clock_jump and v.clock_jumps == 1
    assert v.vet(_js(100.03, 1.04), DRIVER, 5.02).status == ACCEPTED   # newer: accepted
    assert v.vet(_js(100.03, 1.05), DRIVER, 5.03).status == ACCEPTED   # equal: not back


def test_without_publisher_ids_only_the_stamps_are_checked():
    v = JointStateVetter(ARM)
    for k in range(10):
        assert v.vet(_js(1.0 + 0.01 * k, 1.0 + 0.01 * k), None, 1.0).status == ACCEPTED
    assert v.vet(_js(0.5, 1.2), None, 1.2).status == REFUSED


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([DRIVER, OTHER, None]),
                          st.floats(0.0, 0.5), st.floats(-1.0, 0.05), st.booleans(),
                          st.booleans()), min_size=1, max_size=60))
def test_the_vetter_agrees_with_a_reference_model(events):
    """Each event: (writer, seconds since the last, stamp step, whole message?, ROS clock
    jumped back to the stamp?). The model: a writer conflict while two writers were heard
    within 2 s; otherwise a partial message is refused; a stamp below the last accepted one
    is accepted only when it lies within 0.5 s of the clock."""
    v = JointStateVetter(ARM, writer_window=2.0, clock_window=0.5)
    heard: dict[bytes, float] = {}
    last_stamp = None
    now, stamp = 10.0, 100.0
    for writer, dt, step, whole, clock_jumped in events:
        now += dt
        stamp += step
        ros_now = stamp if clock_jumped else max(stamp, 100.0 + now)
        names = ARM if whole else ARM[:1]
        got = v.vet(_js(stamp, now, names=names), writer, ros_now)
        if writer is not None:
            live = {w for w, t in heard.items() if now - t < 2.0 and w != writer}
            heard[writer] = now
            if live:
                assert got.status == REFUSED and got.second_publisher
                continue
        if not whole:
            assert got.status == REFUSED and not got.second_publisher
            continue
        if last_stamp is not None and stamp < last_stamp and abs(ros_now - stamp) > 0.5:
            assert got.status == REFUSED and 'backwards' in got.reason
            continue
        assert got.status == ACCEPTED, got.reason
        last_stamp = stamp
