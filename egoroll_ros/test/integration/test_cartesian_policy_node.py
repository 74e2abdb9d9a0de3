"""policy_node with a Cartesian policy, in one process: the published Cartesian chunk, faults,
refusal at configure."""

from __future__ import annotations

from pathlib import Path
import sys

import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk
from egoroll_ros.core.frames import FrameConvention, quat_to_matrix
from egoroll_ros.core.policy import CartesianArm, CartesianSpec
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.rollout import State
from egoroll_ros.nodes.policy_node import PolicyNode
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME
from egoroll_ros.testing import run_callback, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'unit'))
from cartesian_fakes import BACKEND, write_checkpoint  # noqa: E402, I001

# The policy node spins on one thread, as it does as a process (its callbacks never block).
pytestmark = [pytest.mark.integration, pytest.mark.ros_threads(1)]  # the default; explicit
URDF = Path(__file__).resolve().parents[2] / 'urdf' / 'demo_arm.urdf'
Q = np.array(HOME) + [0.1, -0.1, 0.2, 0.1, -0.2, 0.1, 0.3, 0.0]
CONV = FrameConvention(ee_rotation=[[0, 0, 1], [-1, 0, 0], [0, -1, 0]],
                       reference_translation=[0.0, 0.1, -0.2], gripper_scale=0.04)
SPEC = CartesianSpec((CartesianArm('arm', 'tool0', 'quat_wxyz', True),),
                     frame='camera_optical_frame', convention=CONV, state='ee_pose')


def _node(ros_graph, ck, **params):
    base = {'joints': list(DEMO_JOINTS), 'policy.backend': BACKEND, 'policy.path': str(ck),
            'query_frequency': 50.0, 'max_age.joint_states': 1.0,
            'cartesian.arms': ['arm'], 'cartesian.ee_frames': ['tool0'],
            'cartesian.gripper_joints': ['gripper'], 'urdf_path': str(URDF),
            'gate.arm_service': '', 'gate.stop_service': '',   # no safety gate in these tests
            'gate.require_preflight_acceptance': False}
    base.update(params)
    return ros_graph.add(PolicyNode(context=ros_graph.context, parameter_overrides=[
        Parameter(k, value=v) for k, v in base.items()]))


def _inputs(ros_graph):
    node = ros_graph.node('js_driver')
    pub = node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)

    def tick():
        msg = JointState(name=list(DEMO_JOINTS), position=Q.tolist())
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)

    node.create_timer(0.01, tick)


def _call(node, name):
    fn = {'preflight': node._srv_preflight, 'start': node._srv_start,
          'stop': node._srv_stop}[name]
    return run_callback(fn, Trigger.Request(), Trigger.Response())


def _fresh(node):
    import time
    wait_until(lambda: (node.inputs.ages(time.monotonic()).get('joint_states') or 9) < 0.5,
               10, 'joint_states received')


def _first_live_chunk(ros_graph, node, chunks):
    """Preflight, start, the first live chunk, stop."""
    ros_graph.wait_for_publishers(chunks.subscription)
    _fresh(node)
    assert _call(node, 'preflight').success
    assert _call(node, 'start').success
    msg = chunks.wait_for(lambda m: not m.shadow, 5.0)
    _call(node, 'stop')
    return msg


def test_cartesian_policy_publishes_base_frame_cartesian_chunks_without_ik(ros_graph,
                                                                          tmp_path):
    node = _node(ros_graph, write_checkpoint(tmp_path / 'ck', SPEC))
    assert node.sm.state is State.IDLE, node.sm.detail
    _inputs(ros_graph)
    probe = ros_graph.node('probe')
    chunks = ros_graph.collect(probe, ActionChunk, 'policy/chunk')
    msg = _first_live_chunk(ros_graph, node, chunks)
    assert msg.action_space == ActionChunk.ACTION_SPACE_CARTESIAN
    assert msg.trajectory.joint_names == [] and all(not p.positions
                                                    for p in msg.trajectory.points)
    assert len(msg.trajectory.points) == 4 and len(msg.policy_id) == 64
    (arm,) = msg.cartesian
    assert (arm.arm, arm.ee_frame, arm.reference_frame) == ('arm', 'tool0', 'base_link')
    # The "hold" policy repeated its encoded state (camera frame, dataset convention); the
    # node decoded it back: the targets are the measured tool0 pose in the base frame.
    t, r = RobotModel.from_file(URDF).fk(['tool0'], DEMO_JOINTS, Q[None])
    for pose in arm.poses:
        p = np.array([pose.position.x, pose.position.y, pose.position.z])
        q = np.array([pose.orientation.x, pose.orientation.y, pose.orientation.z,
                      pose.orientation.w])
        assert np.allclose(p, t[0, 0], atol=1e-9)
        assert np.allclose(quat_to_matrix(q), r[0, 0], atol=1e-9)
    assert np.allclose(arm.gripper, Q[7])


@pytest.mark.parametrize(('mode', 'why'), [('nan', 'non-finite'),
                                           ('badquat', 'quaternion norm')])
def test_malformed_cartesian_output_faults_and_publishes_nothing(ros_graph, tmp_path, mode,
                                                                 why):
    spec = CartesianSpec((CartesianArm('arm', 'tool0', 'quat_xyzw', True),), state='ee_pose')
    node = _node(ros_graph, write_checkpoint(tmp_path / 'ck', spec))
    _inputs(ros_graph)
    _fresh(node)
    assert _call(node, 'preflight').success
    assert _call(node, 'start').success
    wait_until(lambda: node.sm.chunks_published >= 2, 5, 'chunks')
    node.policy.cfg['mode'] = mode
    wait_until(lambda: node.sm.state is State.FAULT, 5, 'FAULT')
    assert why in node.sm.detail
    n = node.sm.chunks_published
    assert not _call(node, 'preflight').success
    assert node.sm.chunks_published == n


def test_cartesian_policy_without_cartesian_configuration_is_refused(ros_graph, tmp_path):
    node = _node(ros_graph, write_checkpoint(tmp_path / 'ck', SPEC),
                 **{'cartesian.arms': ['left'], 'cartesian.ee_frames': ['tool0']})
    assert node.sm is None
    assert "arm 'arm' is not configured" in node.unconfigured_detail


def _latched_description(ros_graph, text):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    node = ros_graph.node('description_publisher')
    pub = node.create_publisher(String, 'robot_description', QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL))
    pub.publish(String(data=text))
    return pub


def test_without_urdf_path_the_node_configures_from_robot_description(ros_graph, tmp_path):
    node = _node(ros_graph, write_checkpoint(tmp_path / 'ck', SPEC), urdf_path='')
    assert node.sm is None and node.policy is None
    assert 'waiting for robot_description' in node.unconfigured_detail
    _inputs(ros_graph)
    probe = ros_graph.node('probe')
    chunks = ros_graph.collect(probe, ActionChunk, 'policy/chunk')
    _latched_description(ros_graph, URDF.read_text())
    wait_until(lambda: node.sm is not None and node.sm.state is State.IDLE, 10.0,
               'configured from robot_description')
    msg = _first_live_chunk(ros_graph, node, chunks)
    (arm,) = msg.cartesian
    assert arm.reference_frame == 'base_link'
    t, _ = RobotModel.from_file(URDF).fk(['tool0'], DEMO_JOINTS, Q[None])
    p = arm.poses[0].position
    assert np.allclose([p.x, p.y, p.z], t[0, 0], atol=1e-9)


def test_a_malformed_robot_description_leaves_the_node_unconfigured_with_the_reason(
        ros_graph, tmp_path):
    node = _node(ros_graph, write_checkpoint(tmp_path / 'ck', SPEC), urdf_path='')
    _latched_description(ros_graph, '<robot name="broken"><link name="a"></robot')
    wait_until(lambda: 'configure refused' in node.unconfigured_detail, 10.0,
               'configure refused')
    assert node.sm is None and node.policy is None
    assert 'robot_description' in node.unconfigured_detail, node.unconfigured_detail
    assert not _call(node, 'preflight').success
