"""RobotModel: limits from the URDF, batched FK against Pinocchio itself, malformed URDFs."""

from __future__ import annotations

import math
from pathlib import Path
import site

from gate_testlib import arm_urdf, bimanual_model
import numpy as np
import pinocchio as pin
import pytest

from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.errors import RobotModelError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

ROBOTS = Path(site.getsitepackages()[0]) / 'cmeel.prefix/share/example-robot-data/robots'


@pytest.mark.parametrize('urdf, frames', [
    ('panda_description/urdf/panda.urdf', ['panda_hand', 'panda_link8', 'panda_leftfinger']),
    ('ur_description/urdf/ur5_robot.urdf', ['tool0', 'ee_link', 'wrist_2_link']),
])
def test_batched_fk_agrees_with_pinocchio_on_real_robots(urdf, frames):
    path = ROBOTS / urdf
    model = RobotModel.from_file(path)
    joints = model.joint_names
    q = np.random.default_rng(1).uniform(-2.5, 2.5, (40, len(joints)))
    trans, rots = model.fk(frames, joints, q)
    pmodel = pin.buildModelFromUrdf(str(path))         # Pinocchio directly, its own model
    data = pmodel.createData()
    for f, frame in enumerate(frames):
        fid = pmodel.getFrameId(frame)
        for i in range(q.shape[0]):
            cfg = pin.neutral(pmodel)
            for j, name in enumerate(joints):
                cfg[pmodel.joints[pmodel.getJointId(name)].idx_q] = q[i, j]
            pin.framesForwardKinematics(pmodel, data, cfg)
            np.testing.assert_allclose(trans[f, i], data.oMf[fid].translation, atol=1e-12)
            np.testing.assert_allclose(rots[f, i], data.oMf[fid].rotation, atol=1e-12)


def test_joint_order_of_the_positions_is_respected():
    model = RobotModel.from_file(ROBOTS / 'panda_description/urdf/panda.urdf')
    joints = list(model.joint_names)
    q = np.random.default_rng(2).uniform(-1, 1, (5, len(joints)))
    perm = list(reversed(range(len(joints))))
    a = model.fk(['panda_hand'], joints, q)[0]
    b = model.fk(['panda_hand'], [joints[i] for i in perm], q[:, perm])[0]
    np.testing.assert_allclose(a, b, atol=1e-14)


def test_limits_from_the_urdf_including_continuous_and_prismatic():
    model = RobotModel(arm_urdf())
    assert (model.joints['pan'].lower, model.joints['pan'].upper) == (-2.0, 2.0)
    roll = model.joints['roll']
    assert roll.continuous and roll.lower == -math.inf and roll.upper == math.inf
    assert roll.velocity == 3.0
    assert model.joints['gripper'].kind == 'prismatic' and model.joints['gripper'].upper == 0.04
    assert model.base_frame == 'base_link'
    assert model.chain('tool0') == ('pan', 'lift', 'roll', 'wrist')


def test_continuous_joint_fk_matches_pinocchio_beyond_pi():
    model = RobotModel(arm_urdf())
    joints = ('pan', 'lift', 'roll', 'wrist')
    q = np.array([[0.3, 0.4, 4.0, 0.5], [0.3, 0.4, 4.0 - 2 * math.pi, 0.5]])
    trans, rots = model.fk(['tool0'], joints, q)
    for i in range(2):
        p, r = model.fk_reference('tool0', joints, q[i])
        np.testing.assert_allclose(trans[0, i], p, atol=1e-12)
        np.testing.assert_allclose(rots[0, i], r, atol=1e-12)
    np.testing.assert_allclose(trans[0, 0], trans[0, 1], atol=1e-12)


def test_bimanual_frames_are_computed_together():
    model = bimanual_model()
    joints = model.joint_names
    q = np.random.default_rng(3).uniform(-1, 1, (7, len(joints)))
    trans, _ = model.fk(['left_tool0', 'right_tool0'], joints, q)
    for f, frame in enumerate(['left_tool0', 'right_tool0']):
        for i in range(7):
            np.testing.assert_allclose(trans[f, i], model.fk_reference(frame, joints, q[i])[0],
                                       atol=1e-12)


@pytest.mark.parametrize('text, match', [
    ('', 'empty'),
    ('<robot name="x"><link name="a"', 'well-formed'),
    ('<robt name="x"/>', '<robot>'),
    (arm_urdf().replace('<limit lower="-2.0" upper="2.0" velocity="2.0" effort="10"/>', ''),
     "revolute joint 'pan' has no <limit>"),
    (arm_urdf().replace('velocity="3.0" effort="5"/></joint>\n  <joint name="wrist"', 'x'),
     'well-formed'),
    (arm_urdf().replace('lower="-1.5" upper="1.5"', 'lower="1.5" upper="-1.5"'), "'lift'"),
    (arm_urdf().replace('velocity="2.0"', 'velocity="fast"', 1), 'not a number'),
    (arm_urdf().replace('<child link="l2"/>', '<child link="nowhere"/>'), 'Pinocchio'),
    (arm_urdf().replace('type="continuous"', 'type="floating"'), 'unsupported type'),
])
def test_malformed_urdf_raises_robot_model_error(text, match):
    with pytest.raises(RobotModelError, match=match):
        RobotModel(text)


def test_missing_file_and_unknown_frame():
    with pytest.raises(RobotModelError, match='cannot read'):
        RobotModel.from_file('/nonexistent/robot.urdf')
    with pytest.raises(RobotModelError, match="no frame named 'hand'"):
        RobotModel(arm_urdf()).fk_plan(['hand'], ['pan'])
