"""Cartesian policies on the policy side: metadata, refusals, the codec both ways (no ROS)."""

from __future__ import annotations

from pathlib import Path

from cartesian_fakes import BACKEND, write_checkpoint
import numpy as np
import pytest

from egoroll_ros.core.frames import CartesianCodec, FrameConvention, matrix_to_quat
from egoroll_ros.core.inference import (
    make_cartesian_chunk,
    predict_cartesian,
    setup_from_params,
)
from egoroll_ros.core.observation import JOINT_STATES, LatestInputs
from egoroll_ros.core.policy import (
    CartesianArm,
    CartesianSpec,
    CartesianSupply,
    PolicyError,
    PolicyMetadata,
    validate_metadata,
)
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import JointStateData
from egoroll_ros.errors import CheckpointError, ConfigError
from egoroll_ros.policies.loading import load_policy
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME

URDF = Path(__file__).resolve().parents[2] / 'urdf' / 'demo_arm.urdf'
ARM7 = list(DEMO_JOINTS[:7])
# A non-trivial convention: EgoMimic-style axis permutation/sign at the end effector, a
# rotated + shifted reference, gripper 0..1 -> metres.
CONV = FrameConvention(reference_rotation=[[0, -1, 0], [1, 0, 0], [0, 0, 1]],
                       reference_translation=[0.1, -0.05, 0.02],
                       ee_rotation=[[0, 0, 1], [-1, 0, 0], [0, -1, 0]],
                       ee_translation=[0.0, 0.0, 0.03], gripper_scale=0.04)
ARM = CartesianArm('arm', 'tool0', 'rot6d', True)


def params(**kw):
    p = {'joints': list(DEMO_JOINTS), 'continuous_joints': [], 'cameras.names': [],
         'cameras.heights': [], 'cameras.widths': [], 'cameras.compressed': [],
         'quest.grip_axes': [-1, -1], 'quest.trigger_axes': [-1, -1],
         'policy.backend': BACKEND, 'policy.isolated': False, 'policy.num_threads': 0,
         'policy.expected_fingerprint': '', 'max_age.camera': 0.2,
         'max_age.joint_states': 0.1, 'max_age.quest': 0.2, 'max_clock_offset': 0.5,
         'cartesian.arms': ['arm'], 'cartesian.ee_frames': ['tool0'],
         'cartesian.gripper_joints': ['gripper'], 'urdf_path': str(URDF),
         'cartesian.camera_frames': [], 'cartesian.camera_poses': []}
    p.update(kw)
    return p


def load(tmp_path, spec, p=None, **ck):
    path = write_checkpoint(tmp_path / 'ck', spec, **ck)
    p = p or params()
    return load_policy(p, setup_from_params(p), str(path), 'python', lambda _: None)


def observe(loaded, q, t=5.0):
    store = LatestInputs([JOINT_STATES])
    store.put(JOINT_STATES, JointStateData(tuple(DEMO_JOINTS), np.asarray(q, float),
                                           received=t), t, t)
    return loaded.builder.build(store, t, t)


def fk(q):
    t, r = RobotModel.from_file(URDF).fk(['tool0'], DEMO_JOINTS, np.atleast_2d(q))
    return t[0], r[0]


def test_metadata_json_round_trip_keeps_layout_frame_convention_and_state():
    spec = CartesianSpec((ARM, CartesianArm('b', 'tool1', 'rpy:zyx', False)),
                         frame='camera_optical_frame', convention=CONV, state='ee_pose')
    meta = PolicyMetadata('x', 'a' * 64, (), 17, 17, 3, 0.1, normalization={'state': 1},
                          action_space='cartesian', cartesian=spec)
    back = PolicyMetadata.from_json(meta.to_json())
    assert back.action_space == 'cartesian' and back.cartesian.arms == spec.arms
    assert back.cartesian.frame == 'camera_optical_frame' and back.cartesian.state == 'ee_pose'
    for name in ('reference_rotation', 'reference_translation', 'ee_rotation',
                 'ee_translation'):
        assert np.allclose(getattr(back.cartesian.convention, name), getattr(CONV, name))
    assert back.cartesian.convention.gripper_scale == 0.04 and spec.width == 10 + 6
    # joint metadata written before Cartesian policies existed still loads as joint
    old = {k: v for k, v in meta.to_json().items() if k not in ('action_space', 'cartesian')}
    assert PolicyMetadata.from_json(old).action_space == 'joint'


def _meta(spec, action_size=None, state_size=8):
    return PolicyMetadata('x', 'a' * 64, (), state_size, action_size or spec.width, 3, 0.1,
                          normalization={'state': 1, 'action': 1}, action_space='cartesian',
                          cartesian=spec)


SUPPLY = CartesianSupply({'arm': 'tool0'}, {'arm': 'gripper'},
                         frozenset({'camera_optical_frame'}))


@pytest.mark.parametrize(('spec', 'supply', 'kw', 'reason'), [
    (CartesianSpec((ARM,)), None, {}, 'supplies no arms'),
    (CartesianSpec((CartesianArm('left', 'tool0'),)), SUPPLY, {}, "arm 'left' is not configured"),
    (CartesianSpec((CartesianArm('arm', 'flange_link'),)), SUPPLY, {},
     "differs from the configured 'tool0'"),
    (CartesianSpec((ARM,), frame='wrist_cam'), SUPPLY, {}, "frame 'wrist_cam'"),
    (CartesianSpec((ARM,), convention=CONV),
     CartesianSupply({'arm': 'tool0'}, {'arm': 'gripper'}, convention_configured=True), {},
     'declare a frame convention'),
    (CartesianSpec((ARM,)), SUPPLY, {'action_size': 8}, 'Cartesian layout width 10'),
    (CartesianSpec((ARM,), state='ee_pose'), SUPPLY, {'state_size': 8}, 'pose state'),
    (CartesianSpec((ARM,)), CartesianSupply({'arm': 'tool0'}, {'arm': ''}), {},
     'no gripper joint'),
    (CartesianSpec((CartesianArm('arm', 'tool0', 'euler'),)), SUPPLY, {'action_size': 10},
     'unknown'),
])
def test_cartesian_policy_the_configuration_cannot_supply_is_refused(spec, supply, kw, reason):
    with pytest.raises(CheckpointError, match=reason):
        validate_metadata(_meta(spec, **kw), DEMO_JOINTS, {}, cartesian=supply)


def test_cartesian_policy_the_configuration_supplies_is_accepted_and_joint_unchanged():
    validate_metadata(_meta(CartesianSpec((ARM,), frame='camera_optical_frame')), DEMO_JOINTS,
                      {}, cartesian=SUPPLY)
    joint = PolicyMetadata('x', 'a' * 64, (), 8, 8, 3, 0.1,
                           normalization={'state': 1, 'action': 1})
    validate_metadata(joint, DEMO_JOINTS, {})
    with pytest.raises(CheckpointError, match='action space'):
        validate_metadata(PolicyMetadata('x', 'a' * 64, (), 8, 8, 3, 0.1,
                                         normalization={'state': 1, 'action': 1},
                                         action_space='velocity'), DEMO_JOINTS, {})


def test_refused_at_load_when_the_node_has_no_cartesian_configuration(tmp_path):
    with pytest.raises(CheckpointError, match='supplies no arms'):
        load(tmp_path, CartesianSpec((ARM,)), params(**{'cartesian.arms': []}))
    with pytest.raises(ConfigError, match='urdf_path'):
        load(tmp_path, CartesianSpec((ARM,)), params(urdf_path=''))


def test_the_urdf_text_of_robot_description_serves_when_there_is_no_urdf_path(tmp_path):
    import dataclasses

    p = params(urdf_path='')
    setup = setup_from_params(p)
    spec = CartesianSpec((ARM,), state='ee_pose')   # the state needs FK of the model
    path = write_checkpoint(tmp_path / 'ck', spec)
    with_text = dataclasses.replace(setup, cartesian=dataclasses.replace(
        setup.cartesian, urdf_text=URDF.read_text()))
    loaded = load_policy(p, with_text, str(path), 'python', lambda _: None)
    assert loaded.cartesian.base_frame == RobotModel.from_file(URDF).base_frame
    q = np.array([0.1, -0.4, 0.2, 1.1, 0.0, 0.4, 0.3, 0.02])
    ee_from_text = observe(loaded, q).state
    by_file = load(tmp_path / 'f', spec)
    assert ee_from_text.shape == (loaded.policy.metadata.state_size,)
    np.testing.assert_allclose(ee_from_text, observe(by_file, q).state, atol=1e-12)
    # and it is the pose of tool0: FK of the measured joints
    np.testing.assert_allclose(ee_from_text[:3], fk(q)[0][0], atol=1e-9)
    broken = dataclasses.replace(setup, cartesian=dataclasses.replace(
        setup.cartesian, urdf_text='<robot name="x"><link'))
    with pytest.raises(ConfigError, match='robot_description'):
        load_policy(p, broken, str(path), 'python', lambda _: None)


def test_hold_policy_in_a_camera_frame_through_a_convention_commands_the_measured_pose(
        tmp_path):
    """State = FK pose encoded (hardware -> dataset, base -> camera); the policy repeats it;
    the decoded target (dataset -> hardware, camera -> base) is the measured pose exactly:
    the one codec/convention object serves both directions."""
    spec = CartesianSpec((ARM,), frame='camera_optical_frame', convention=CONV,
                         state='ee_pose')
    loaded = load(tmp_path, spec)
    q = np.array(HOME) + [0.1, -0.1, 0.2, 0.1, -0.2, 0.1, 0.3, 0.0]
    obs = observe(loaded, q)
    assert obs.state.shape == (10,) and np.allclose(obs.joints, q)
    pos, rot = fk(q)
    # the state is NOT the base-frame pose (camera frame + convention applied) ...
    assert np.linalg.norm(obs.state[:3] - pos[0]) > 0.05
    assert abs(obs.state[9] - 0.02 / 0.04) < 1e-12           # gripper 0.02 m -> 0.5
    targets = predict_cartesian(loaded.policy, obs, loaded.cartesian)
    (t,) = targets
    assert (t.arm, t.ee_frame, t.reference_frame) == ('arm', 'tool0', 'base_link')
    assert np.allclose(t.positions, pos[0], atol=1e-9)
    assert np.allclose(t.quaternions, matrix_to_quat(rot[0]), atol=1e-9)
    assert np.allclose(t.gripper, 0.02)
    chunk = make_cartesian_chunk(loaded.policy.metadata, targets, 5.0, 0.01, sequence=3)
    assert np.allclose(chunk.times, [0.05, 0.1, 0.15, 0.2]) and chunk.sequence == 3


def test_policy_output_in_the_camera_frame_is_converted_to_the_base_frame(tmp_path):
    """An independent codec built from Pinocchio's camera pose encodes known base-frame
    poses; the node's decoding must return those poses (not the camera-frame numbers)."""
    model = RobotModel.from_file(URDF)
    cam_t, cam_r = model.fk_reference('camera_optical_frame', [], [])
    assert np.linalg.norm(cam_t) > 0.1                       # a real transform
    qs = np.array(HOME) + np.linspace(0, 0.2, 4)[:, None] * np.array([1, -1, 1, 1, 0, 1, 1, 0])
    pos, rot = fk(qs)
    from egoroll_ros.core.frames import ArmPoses
    ref = CartesianCodec([ARM.layout], CONV, cam_r, cam_t)
    values = ref.encode([ArmPoses('arm', pos, rot, np.full(4, 0.01))])
    spec = CartesianSpec((ARM,), frame='camera_optical_frame', convention=CONV)
    loaded = load(tmp_path, spec, mode='fixed', values=values.tolist())
    obs = observe(loaded, HOME)
    assert np.allclose(obs.state, HOME)                      # joint state: unchanged
    (t,) = predict_cartesian(loaded.policy, obs, loaded.cartesian)
    assert np.allclose(t.positions, pos, atol=1e-9)
    assert np.allclose(t.quaternions, matrix_to_quat(rot), atol=1e-9)
    assert np.allclose(t.gripper, 0.01)


def test_configured_camera_pose_and_convention_are_used(tmp_path):
    q = np.array([0.0, 0.0, 0.0, 0.7071067811865476, 0.7071067811865476])  # 90 deg about z
    p = params(**{'cartesian.camera_frames': ['ext_cam'],
                  'cartesian.camera_poses': [0.5, 0.2, 0.3, *q[1:].tolist()],
                  'cartesian.convention.gripper_scale': 0.04})
    spec = CartesianSpec((ARM,), frame='ext_cam', state='ee_pose')
    loaded = load(tmp_path, spec, p)
    assert loaded.cartesian.convention.gripper_scale == 0.04
    obs = observe(loaded, HOME)
    pos, _ = fk(HOME)
    rel = pos[0] - [0.5, 0.2, 0.3]
    assert np.allclose(obs.state[:3], [rel[1], -rel[0], rel[2]], atol=1e-9)
    (t,) = predict_cartesian(loaded.policy, obs, loaded.cartesian)
    assert np.allclose(t.positions, pos, atol=1e-9)
    with pytest.raises(ConfigError, match='also a URDF frame'):
        load(tmp_path, CartesianSpec((ARM,), frame='camera_optical_frame'),
             params(**{'cartesian.camera_frames': ['camera_optical_frame'],
                       'cartesian.camera_poses': [0, 0, 0, 0, 0, 0, 1]}))


@pytest.mark.parametrize(('mode', 'match'), [('nan', 'non-finite'),
                                             ('badquat', 'quaternion norm')])
def test_non_finite_or_malformed_cartesian_output_raises_policy_error(tmp_path, mode, match):
    spec = CartesianSpec((CartesianArm('arm', 'tool0', 'quat_xyzw', True),), state='ee_pose')
    loaded = load(tmp_path, spec, mode=mode)
    with pytest.raises(PolicyError, match=match):
        predict_cartesian(loaded.policy, observe(loaded, HOME), loaded.cartesian)
