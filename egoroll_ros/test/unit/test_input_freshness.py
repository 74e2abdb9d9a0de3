"""Inputs that cannot fake freshness: stamps that stop advancing or go back, frozen frames,
clock offsets (the pure store and builder that policy_node and evaluate share)."""

from __future__ import annotations

import array

import numpy as np
import pytest
from sensor_msgs.msg import Image

from egoroll_ros.core.observation import (
    CLOCK_OFFSET,
    FRAME_UNCHANGED,
    JOINT_STATES,
    NO_MESSAGE,
    STAMP_NOT_ADVANCING,
    STAMP_WENT_BACK,
    CameraConfig,
    LatestInputs,
    ObservationBuilder,
    StaleInputError,
    camera_input,
    frame_digest,
    put_camera,
    stale_inputs,
)
from egoroll_ros.core.policy import ImageFeature, PolicyMetadata
from egoroll_ros.core.types import JointStateData

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

CAM = camera_input('scene')
MAX = {CAM: 0.2}


def _frame(seed: int) -> Image:
    msg = Image(height=48, width=64, encoding='rgb8', step=64 * 3)
    msg.data = np.random.default_rng(seed).integers(0, 255, 48 * 64 * 3,
                                                    dtype=np.uint8).tobytes()
    return msg


def _reasons(store: LatestInputs, now: float, max_offset: float | None = None) -> list:
    return [(s.name, s.reason) for s in stale_inputs(store.snapshot(), MAX, now, max_offset)]


def test_a_camera_republishing_the_same_stamp_goes_stale_after_its_max_age():
    store = LatestInputs([CAM])
    for k in range(10):                     # new frames every 0.05 s, stamp stuck at 5.0
        t = 10.0 + 0.05 * k
        put_camera(store, CAM, _frame(k), 5.0, t, t)
        fresh = t - 10.0 <= 0.2
        assert _reasons(store, t) == ([] if fresh else [(CAM, STAMP_NOT_ADVANCING)]), k
    (s,) = stale_inputs(store.snapshot(), MAX, 10.45)
    assert s.since == pytest.approx(10.2) and s.age == pytest.approx(0.45)
    assert 'header stamp has not advanced for 0.450 s (max 0.200 s)' in s.describe()
    put_camera(store, CAM, _frame(99), 5.5, 10.5, 10.5)    # advances again: fresh
    assert _reasons(store, 10.5) == []


def test_a_stamp_that_goes_back_is_stale_until_stamps_advance_again():
    store = LatestInputs([CAM])
    put_camera(store, CAM, _frame(0), 5.0, 10.0, 10.0)
    put_camera(store, CAM, _frame(1), 4.0, 10.05, 10.05)
    (s,) = stale_inputs(store.snapshot(), MAX, 10.05)
    assert s.reason == STAMP_WENT_BACK and s.age == pytest.approx(1.0)
    assert 'went back by 1.000 s' in s.describe()
    put_camera(store, CAM, _frame(2), 4.0, 10.1, 10.1)     # equal: still not advancing
    assert _reasons(store, 10.1) == [(CAM, STAMP_WENT_BACK)]
    put_camera(store, CAM, _frame(3), 4.1, 10.15, 10.15)
    assert _reasons(store, 10.15) == []


def test_an_identical_frame_with_fresh_stamps_is_stale_after_its_max_age():
    store = LatestInputs([CAM])
    frozen = _frame(7)
    for k in range(10):
        t = 10.0 + 0.05 * k
        put_camera(store, CAM, frozen, t, t, t)              # stamps advance, pixels do not
        assert _reasons(store, t) == ([] if t - 10.0 <= 0.2 else [(CAM, FRAME_UNCHANGED)])
    assert 'frame identical to the previous ones for' in \
        stale_inputs(store.snapshot(), MAX, 10.45)[0].describe()
    put_camera(store, CAM, _frame(8), 10.5, 10.5, 10.5)
    assert _reasons(store, 10.5) == []


def test_messages_that_stop_are_stale_as_before():
    store = LatestInputs([CAM])
    put_camera(store, CAM, _frame(0), 5.0, 10.0, 10.0)
    assert _reasons(store, 10.3) == [(CAM, NO_MESSAGE)]
    assert 'camera/scene is 0.300 s old (max 0.200 s)' in \
        stale_inputs(store.snapshot(), MAX, 10.3)[0].describe()


def test_clock_offset_is_measured_reported_and_refused_beyond_the_limit():
    store = LatestInputs([CAM])
    for k in range(5):                      # camera clock 0.3 s behind ours
        t = 100.0 + 0.05 * k
        put_camera(store, CAM, _frame(k), t - 0.3, t, t)
    off = store.clock_offsets()[CAM]
    assert off['count'] == 5 and off['min'] == pytest.approx(0.3) and \
        off['max'] == pytest.approx(0.3) and off['mean'] == pytest.approx(0.3)
    assert _reasons(store, 100.2, max_offset=0.5) == []
    (s,) = stale_inputs(store.snapshot(), MAX, 100.2, 0.25)
    assert s.reason == CLOCK_OFFSET and s.age == pytest.approx(0.3)
    assert 'clock offset +0.300 s' in s.describe() and '(max 0.250 s)' in s.describe()
    assert _reasons(store, 100.2, max_offset=None) == []       # not checked
    store.put(JOINT_STATES, None, 1.0, 100.0)                  # no clock: not measured
    assert JOINT_STATES not in store.clock_offsets()


def test_frame_digest_sees_sampled_changes_and_takes_any_buffer():
    data = bytearray(np.random.default_rng(0).integers(0, 255, 100_000, dtype=np.uint8))
    d = frame_digest(bytes(data))
    assert frame_digest(array.array('B', data)) == d == frame_digest(memoryview(data))
    assert frame_digest(np.frombuffer(bytes(data), np.uint8)) == d
    data[0] ^= 1                              # byte 0 is always sampled
    assert frame_digest(bytes(data)) != d
    assert frame_digest(bytes(data[:-1])) != frame_digest(bytes(data))   # length counts


def test_builder_refuses_a_frozen_camera_and_reports_the_reason():
    meta = PolicyMetadata(backend='t', fingerprint='0' * 64,
                          image_features=(ImageFeature('scene', 24, 32),), state_size=1,
                          action_size=1, chunk_length=2, step_period=0.1,
                          normalization={'state': 1, 'action': 1})
    b = ObservationBuilder(['a'], [CameraConfig('scene', 48, 64)], meta, 0.2, 0.1, 0.2,
                           max_clock_offset=0.5)
    store = LatestInputs([JOINT_STATES, CAM])
    frozen = _frame(3)
    for k in range(8):
        t = 10.0 + 0.05 * k
        store.put(JOINT_STATES, JointStateData(('a',), np.array([0.0]), received=t), t, t,
                  clock=t)
        put_camera(store, CAM, frozen, 9.9, t, t)          # same frame, same stamp
    with pytest.raises(StaleInputError) as err:
        b.build(store, 10.35, 10.35)
    (s,) = err.value.stale
    assert (s.name, s.reason) == (CAM, STAMP_NOT_ADVANCING)
