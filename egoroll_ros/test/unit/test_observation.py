"""Observation assembly: staleness, state order, images, continuous-joint unwrapping."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from sensor_msgs.msg import CompressedImage, Image

from egoroll_ros.core.observation import (
    JOINT_STATES,
    CameraConfig,
    LatestInputs,
    ObservationBuilder,
    StaleInputError,
    camera_input,
    unwrap_continuous,
)
from egoroll_ros.core.policy import ImageFeature, PolicyMetadata
from egoroll_ros.core.types import JointStateData
from egoroll_ros.errors import InputError
from egoroll_ros.ros import images

JOINTS = ['a', 'b', 'c']


def _meta(cams=(('scene', 24, 32),)) -> PolicyMetadata:
    return PolicyMetadata(backend='t', fingerprint='0' * 64,
                          image_features=tuple(ImageFeature(*c) for c in cams), state_size=3,
                          action_size=3, chunk_length=2, step_period=0.1,
                          normalization={'state': 1, 'action': 1})


def _image(h: int, w: int, encoding: str = 'rgb8') -> tuple[Image, np.ndarray]:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    msg = Image(height=h, width=w, encoding=encoding, step=w * 3)
    data = rgb if encoding == 'rgb8' else rgb[:, :, ::-1]
    msg.data = np.ascontiguousarray(data).tobytes()
    return msg, rgb


def _builder(**kw) -> tuple[ObservationBuilder, LatestInputs]:
    kw.setdefault('prepare', images.prepare_image)
    b = ObservationBuilder(JOINTS, [CameraConfig('scene', 48, 64)], _meta(), 0.2, 0.1, 0.2, **kw)
    store = LatestInputs([JOINT_STATES, camera_input('scene')])
    return b, store


def _js(names=('c', 'a', 'b'), pos=(3.0, 1.0, 2.0), received=10.0) -> JointStateData:
    return JointStateData(names=tuple(names), positions=np.array(pos), received=received)


def test_builds_state_in_configured_order_and_resized_images():
    b, store = _builder()
    msg, rgb = _image(48, 64)
    store.put(JOINT_STATES, _js(), 1.0, 10.0)
    store.put(camera_input('scene'), msg, 1.0, 10.0)
    obs = b.build(store, now=10.05, stamp=123.0)
    np.testing.assert_array_equal(obs.state, [1.0, 2.0, 3.0])
    assert obs.stamp == 123.0 and obs.images['scene'].shape == (24, 32, 3)
    np.testing.assert_array_equal(obs.images['scene'],
                                  cv2.resize(rgb, (32, 24), interpolation=cv2.INTER_AREA))


def test_stale_and_missing_inputs_are_reported_by_name_and_age():
    b, store = _builder()
    with pytest.raises(StaleInputError) as err:
        b.build(store, now=10.0, stamp=0.0)
    assert {s.name for s in err.value.stale} == {JOINT_STATES, 'camera/scene'}
    assert 'never received' in str(err.value)
    msg, _ = _image(48, 64)
    store.put(JOINT_STATES, _js(), 1.0, 10.0)
    store.put(camera_input('scene'), msg, 1.0, 9.5)
    with pytest.raises(StaleInputError) as err:
        b.build(store, now=10.05, stamp=0.0)
    (s,) = err.value.stale
    assert s.name == 'camera/scene' and s.age == pytest.approx(0.55)
    assert 'camera/scene is 0.550 s old (max 0.200 s)' in str(err.value)
    assert store.ages(10.05)[JOINT_STATES] == pytest.approx(0.05)


def test_missing_joint_and_non_finite_state_are_not_ready():
    b, store = _builder()
    msg, _ = _image(48, 64)
    store.put(camera_input('scene'), msg, 1.0, 10.0)
    store.put(JOINT_STATES, _js(names=('a', 'b', 'x')), 1.0, 10.0)
    with pytest.raises(InputError, match='lacks configured joints: c'):
        b.build(store, 10.0, 0.0)
    store.put(JOINT_STATES, _js(pos=(np.nan, 1.0, 2.0)), 1.0, 10.0)
    with pytest.raises(InputError, match='non-finite positions for: c'):
        b.build(store, 10.0, 0.0)


def test_image_of_unexpected_size_is_refused_not_rescaled():
    b, store = _builder()
    msg, _ = _image(24, 32)
    store.put(JOINT_STATES, _js(), 1.0, 10.0)
    store.put(camera_input('scene'), msg, 1.0, 10.0)
    with pytest.raises(InputError, match='image is 24x32 .* expects 48x64'):
        b.build(store, 10.0, 0.0)


@pytest.mark.parametrize('encoding', ['rgb8', 'bgr8'])
def test_raw_images_decode_to_rgb(encoding):
    msg, rgb = _image(10, 12, encoding)
    np.testing.assert_array_equal(images.decode_rgb(msg), rgb)


def test_compressed_png_decodes_to_rgb():
    _, rgb = _image(10, 12)
    ok, png = cv2.imencode('.png', rgb[:, :, ::-1])
    msg = CompressedImage(format='png')
    msg.data = png.tobytes()
    np.testing.assert_array_equal(images.decode_rgb(msg), rgb)


def test_corrupt_image_is_an_input_error():
    msg = Image(height=10, width=10, encoding='rgb8', step=30)
    msg.data = bytes(10)
    with pytest.raises(InputError, match='cannot decode'):
        images.decode_rgb(msg, 'camera/scene')


def test_decoder_choice_and_cv_bridge_agreement():
    name, _ = images.decoder()
    try:
        import cv_bridge  # noqa: F401
    except Exception:  # noqa: BLE001
        assert name == 'rosbags'
        pytest.skip('cv_bridge not importable here: only the rosbags-image path runs')
    msg, rgb = _image(10, 12, 'bgr8')
    a = images._cv_bridge_decoder()(msg)
    b = images._rosbags_decoder()(msg)
    np.testing.assert_array_equal(a, b)


def test_unwrap_moves_continuous_joints_the_short_way():
    ref = np.array([0.0, 3.1])
    chunk = np.array([[0.5, -3.1], [0.6, -3.0], [0.7, 3.1]])
    out = unwrap_continuous(chunk, ref, [1])
    np.testing.assert_array_equal(out[:, 0], chunk[:, 0])
    np.testing.assert_allclose(out[:, 1], [-3.1 + 2 * math.pi, -3.0 + 2 * math.pi,
                                           3.1], atol=1e-12)
    assert np.all(np.abs(np.diff(np.concatenate(([ref[1]], out[:, 1])))) < math.pi)


def test_unwrap_relative_to_a_multi_turn_measured_state():
    ref = np.array([4 * math.pi + 0.1])
    out = unwrap_continuous(np.array([[0.2], [0.3]]), ref, [0])
    np.testing.assert_allclose(out[:, 0], [4 * math.pi + 0.2, 4 * math.pi + 0.3])
