"""safety_gate node with Cartesian chunks over real DDS: IK joint goal forwarded, stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from test_safety_gate import Rig

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.cartesian import CartesianArmTarget, CartesianChunk
from egoroll_ros.core.frames import matrix_to_quat
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.ros.convert import (
    cartesian_chunk_from_msg,
    cartesian_chunk_to_msg,
    chunk_to_msg,
)

pytestmark = [pytest.mark.integration, pytest.mark.safety]

URDF = Path(__file__).resolve().parents[2] / 'urdf' / 'demo_arm.urdf'
ARM = ['shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
       'wrist_pitch', 'wrist_roll']
JOINTS = ARM + ['gripper']
Q0 = np.array([0.1, 0.4, 0.0, 1.0, 0.0, 0.6, 0.0, 0.02])


class CartesianRig(Rig):
    """The demo arm at Q0, the gate configured for Cartesian chunks of arm 'arm' (tool0)."""

    def _publish_js(self) -> None:
        msg = JointState(name=JOINTS, position=Q0.tolist())
        msg.header.stamp = self.tester.get_clock().now().to_msg()
        self.js_pub.publish(msg)

    def arm(self, seq: int) -> None:
        """A Cartesian preflight holding tool0 where it is, then safety/arm naming it."""
        model = RobotModel.from_file(URDF)
        trans, rots = model.fk(['tool0'], ARM, np.tile(Q0[:7], (5, 1)))
        verdict = self.send_cartesian(seq, trans[0], rots[0], shadow=True)
        assert verdict.accepted, verdict.summary
        answer = self.armer.arm(seq, 'ab' * 32)
        assert answer.success, answer.message

    def send_cartesian(self, seq: int, positions, rotations, gripper=None,
                       shadow: bool = False) -> GateVerdict:
        stamp = self.tester.get_clock().now().nanoseconds * 1e-9
        n = len(positions)
        arm = CartesianArmTarget('arm', 'tool0', 'base_link', np.asarray(positions),
                                 matrix_to_quat(np.asarray(rotations)),
                                 np.zeros(0) if gripper is None else np.asarray(gripper))
        chunk = CartesianChunk(seq, 'ab' * 32, stamp, 0.05 * np.arange(1, n + 1), (arm,),
                               shadow=shadow)
        start = len(self.verdicts.snapshot())
        self.chunk_pub.publish(cartesian_chunk_to_msg(chunk))
        return self.verdicts.wait_for(lambda v: v.sequence == seq, 5.0, start=start)


@pytest.fixture
def rig(ros_graph, tmp_path):
    return CartesianRig(ros_graph, tmp_path, urdf_text=URDF.read_text(), joints=JOINTS,
                        ee_frames=['tool0'], gripper_joints=['gripper'], gripper_min=[0.0],
                        gripper_max=[0.04], max_step=[0.2] * 7 + [0.01],
                        cartesian_arms=['arm'], cartesian_ee_frames=['tool0'],
                        cartesian_gripper_joints=['gripper'], on_reject='skip')


def path(n=20, delta=(0.1, -0.05, 0.1, 0.1, -0.1, 0.1, 0.2)):
    model = RobotModel.from_file(URDF)
    qs = Q0[:7] + np.linspace(0, 1, n + 1)[1:, None] * np.asarray(delta)
    trans, rots = model.fk(['tool0'], ARM, qs)
    return qs, trans[0], rots[0], model


def test_cartesian_message_round_trip():
    _, pos, rot, _ = path(5)
    arm = CartesianArmTarget('arm', 'tool0', 'base_link', pos, matrix_to_quat(rot),
                             np.full(5, 0.01))
    chunk = CartesianChunk(7, 'ab' * 32, 12.5, 0.1 * np.arange(1, 6), (arm,), shadow=True)
    msg = cartesian_chunk_to_msg(chunk)
    assert msg.action_space == ActionChunk.ACTION_SPACE_CARTESIAN
    assert msg.trajectory.joint_names == [] and all(not p.positions
                                                    for p in msg.trajectory.points)
    back = cartesian_chunk_from_msg(msg)
    assert back.sequence == 7 and back.shadow and abs(back.stamp - 12.5) < 1e-9
    assert np.allclose(back.times, chunk.times)
    assert np.allclose(back.arms[0].positions, pos)
    assert np.allclose(back.arms[0].quaternions, arm.quaternions)
    assert np.allclose(back.arms[0].gripper, 0.01)


def test_accepted_cartesian_chunk_forwards_the_ik_joint_trajectory(rig):
    qs, pos, rot, model = path()
    grip = np.full(len(pos), 0.02)
    verdict = rig.send_cartesian(1, pos, rot, grip)
    assert verdict.accepted and verdict.forwarded, verdict.summary
    assert verdict.stage == GateVerdict.STAGE_JOINT
    assert verdict.action_space == ActionChunk.ACTION_SPACE_CARTESIAN
    goal = rig.server.goals[-1]
    assert goal.sequence == 1 and list(goal.trajectory.joint_names) == JOINTS
    q = np.array([p.positions for p in goal.trajectory.points])
    trans, _ = model.fk(['tool0'], JOINTS, q)
    assert np.linalg.norm(trans[0] - pos, axis=1).max() < 1e-3


def test_rotation_jump_is_rejected_at_the_cartesian_stage_and_nothing_is_sent(rig):
    qs, pos, rot, _ = path(6)
    a = 0.5
    turn = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    rot = rot.copy()
    rot[3:] = rot[3:] @ turn
    sent = len(rig.server.goals)
    verdict = rig.send_cartesian(2, pos, rot)
    assert not verdict.accepted and not verdict.forwarded
    assert verdict.stage == GateVerdict.STAGE_CARTESIAN
    assert {v.check for v in verdict.violations} == {'ee_rotation_jump'}
    assert len(rig.server.goals) == sent


def test_joint_chunks_keep_working_and_report_the_joint_stage(rig):
    qs, _, _, _ = path(10)
    stamp = rig.tester.get_clock().now().nanoseconds * 1e-9
    traj = JointTrajectoryData(tuple(JOINTS), 0.05 * np.arange(1, 11),
                               np.hstack([qs, np.full((10, 1), 0.02)]), stamp=stamp)
    start = len(rig.verdicts.snapshot())
    rig.chunk_pub.publish(chunk_to_msg(Chunk(4, 'ab' * 32, stamp, traj)))
    verdict = rig.verdicts.wait_for(lambda v: v.sequence == 4, 5.0, start=start)
    assert verdict.accepted and verdict.stage == GateVerdict.STAGE_JOINT
    assert verdict.action_space == ActionChunk.ACTION_SPACE_JOINT
