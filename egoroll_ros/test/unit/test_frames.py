"""Rotation representations, the frame convention (both directions) and the codec."""

from __future__ import annotations

import numpy as np
import pytest

from egoroll_ros.core.frames import (
    ArmLayout,
    ArmPoses,
    CartesianCodec,
    FrameConvention,
    cartesian_errors,
    from_matrix,
    quat_to_matrix,
    to_matrix,
)
from egoroll_ros.errors import ConfigError

REPRS = ['quat_xyzw', 'quat_wxyz', 'rot6d'] + \
    [f'rpy:{o}' for o in ('xyz', 'xzy', 'yxz', 'yzx', 'zxy', 'zyx')] + \
    [f'rpy:{o}' for o in ('XYZ', 'XZY', 'YXZ', 'YZX', 'ZXY', 'ZYX')]


def random_rotations(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return quat_to_matrix(q / np.linalg.norm(q, axis=1, keepdims=True))


def _elem(axis: str, a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return {'x': np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            'y': np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            'z': np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


# EgoMimic-style convention: a permutation/sign rotation between the dataset's axes and the
# hardware's, on both the reference and the end-effector side, plus a gripper scale.
PERM = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
CONVENTIONS = {
    'identity': FrameConvention(),
    'egomimic_like': FrameConvention(reference_rotation=PERM, ee_rotation=PERM.T,
                                     reference_translation=[0.1, -0.2, 0.3],
                                     gripper_scale=0.04, gripper_offset=0.0),
    'general': FrameConvention(reference_rotation=quat_to_matrix(
        np.array([0.2, -0.3, 0.5, 0.78]) / np.linalg.norm([0.2, -0.3, 0.5, 0.78])),
        ee_rotation=_elem('x', 0.7) @ _elem('z', -1.1), ee_translation=[0.0, 0.0, 0.12],
        gripper_scale=-2.0, gripper_offset=0.5),
}


@pytest.mark.parametrize('rep', REPRS)
def test_every_representation_round_trips_matrix_and_values(rep):
    rng = np.random.default_rng(0)
    rots = random_rotations(rng, 500)
    values = from_matrix(rots, rep)
    back = to_matrix(values, rep)
    assert np.abs(back - rots).max() < 1e-9
    assert np.abs(from_matrix(back, rep) - values).max() < 1e-9


@pytest.mark.parametrize('order', ['xyz', 'zyx', 'yzx', 'XYZ', 'ZYX', 'YXZ'])
def test_euler_orders_follow_their_definition(order):
    a, b, c = 0.3, -0.7, 1.9
    axes = order.lower()
    if order.islower():     # extrinsic: first angle about the first fixed axis, applied first
        expect = _elem(axes[2], c) @ _elem(axes[1], b) @ _elem(axes[0], a)
    else:                   # intrinsic
        expect = _elem(axes[0], a) @ _elem(axes[1], b) @ _elem(axes[2], c)
    assert np.allclose(to_matrix(np.array([a, b, c]), f'rpy:{order}'), expect, atol=1e-12)


def test_urdf_rpy_is_extrinsic_xyz():
    roll, pitch, yaw = 0.1, 0.2, 0.3
    expect = _elem('z', yaw) @ _elem('y', pitch) @ _elem('x', roll)
    assert np.allclose(to_matrix(np.array([roll, pitch, yaw]), 'rpy:xyz'), expect)


def test_rot6d_is_first_two_rows_and_is_orthonormalised():
    rng = np.random.default_rng(1)
    r = random_rotations(rng, 1)[0]
    assert np.allclose(from_matrix(r, 'rot6d'), r[:2].reshape(6))
    noisy = r[:2].reshape(6) * 3.0 + 0.01 * rng.normal(size=6)
    m = to_matrix(noisy, 'rot6d')
    assert np.allclose(m @ m.T, np.eye(3), atol=1e-12) and np.linalg.det(m) > 0


def test_non_unit_quaternion_and_degenerate_rot6d_are_refused():
    with pytest.raises(ValueError, match='norm'):
        to_matrix(np.array([0.0, 0.0, 0.0, 2.0]), 'quat_xyzw')
    with pytest.raises(ValueError, match='degenerate'):
        to_matrix(np.array([1.0, 0, 0, 2.0, 0, 0]), 'rot6d')


def test_unknown_representation_is_a_config_error():
    for bad in ('euler', 'rpy:xxy', 'rpy:xYz', 'quat'):
        with pytest.raises(ConfigError):
            to_matrix(np.zeros(3), bad)


@pytest.mark.parametrize('name', sorted(CONVENTIONS))
def test_convention_round_trips_both_ways(name):
    conv = CONVENTIONS[name]
    rng = np.random.default_rng(2)
    rot, pos = random_rotations(rng, 200), rng.normal(size=(200, 3))
    r_hw, p_hw = conv.to_hardware(rot, pos)
    r_ds, p_ds = conv.to_dataset(r_hw, p_hw)
    assert np.abs(r_ds - rot).max() < 1e-9 and np.abs(p_ds - pos).max() < 1e-9
    r2, p2 = conv.to_hardware(*conv.to_dataset(rot, pos))
    assert np.abs(r2 - rot).max() < 1e-9 and np.abs(p2 - pos).max() < 1e-9
    g = rng.uniform(0, 1, 50)
    assert np.abs(conv.gripper_to_dataset(conv.gripper_to_hardware(g)) - g).max() < 1e-12
    if name != 'identity':
        assert np.abs(r_hw - rot).max() > 0.1      # the convention does something


@pytest.mark.parametrize('rep', REPRS)
@pytest.mark.parametrize('name', sorted(CONVENTIONS))
def test_codec_observation_and_action_are_inverse_for_every_representation(rep, name):
    """What the policy sees (encode) and what its output means (decode) are one mapping."""
    rng = np.random.default_rng(3)
    cam_r = quat_to_matrix(np.array([0.1, 0.9, -0.3, 0.2]) / np.linalg.norm([0.1, 0.9, -0.3,
                                                                             0.2]))
    codec = CartesianCodec([ArmLayout('left', rep, True), ArmLayout('right', rep, False)],
                           CONVENTIONS[name], cam_r, np.array([1.1, 0.5, 0.8]))
    measured = [ArmPoses('left', rng.normal(size=(20, 3)), random_rotations(rng, 20),
                         rng.uniform(0, 0.04, 20)),
                ArmPoses('right', rng.normal(size=(20, 3)), random_rotations(rng, 20))]
    vec = codec.encode(measured)
    assert vec.shape == (20, codec.width)
    decoded = codec.decode(vec)
    for m, d in zip(measured, decoded, strict=True):
        assert np.abs(d.positions - m.positions).max() < 1e-9
        assert np.abs(d.rotations - m.rotations).max() < 1e-9
        if m.gripper is not None:
            assert np.abs(d.gripper - m.gripper).max() < 1e-9
    assert np.abs(codec.encode(decoded) - vec).max() < 1e-9


def test_codec_refuses_wrong_width_and_non_finite():
    codec = CartesianCodec([ArmLayout('a', 'quat_xyzw', True)], FrameConvention())
    with pytest.raises(ValueError, match='shape'):
        codec.decode(np.zeros((5, 7)))
    bad = np.tile([0, 0, 0, 0, 0, 0, 1, 0.0], (5, 1))
    bad[2, 0] = np.nan
    with pytest.raises(ValueError, match='non-finite'):
        codec.decode(bad)


def test_convention_rejects_a_non_rotation():
    with pytest.raises(ConfigError, match='reference_rotation'):
        FrameConvention(reference_rotation=np.diag([1.0, 1.0, -1.0]))


def test_cartesian_errors_per_step():
    rng = np.random.default_rng(4)
    r = random_rotations(rng, 5)
    p = rng.normal(size=(5, 3))
    turn = _elem('z', 0.25)
    pe, re = cartesian_errors(p + [0.0, 0.003, 0.004], r @ turn, p, r)
    assert np.allclose(pe, 0.005) and np.allclose(re, 0.25)
