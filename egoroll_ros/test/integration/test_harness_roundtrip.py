"""First real-graph tests: our interfaces cross a process boundary over DDS intact."""

from pathlib import Path

import numpy as np
import pytest

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_interfaces.msg import ActionChunk
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.ros.action_client import ActionClient
from egoroll_ros.ros.convert import chunk_from_msg, chunk_to_msg, trajectory_to_msg
from egoroll_ros.testing import wait_until

ECHO = str(Path(__file__).parent / 'helpers' / 'echo_node.py')
pytestmark = pytest.mark.integration


def _chunk(n_points: int = 50, n_joints: int = 14) -> Chunk:
    rng = np.random.default_rng(7)
    names = tuple(f'arm{j // 7}_joint{j % 7}' for j in range(n_joints))
    traj = JointTrajectoryData(
        joint_names=names, times=0.02 * np.arange(1, n_points + 1),
        positions=rng.uniform(-3, 3, (n_points, n_joints)),
        velocities=rng.uniform(-1, 1, (n_points, n_joints)),
        accelerations=rng.uniform(-5, 5, (n_points, n_joints)), stamp=1234.5678901)
    return Chunk(sequence=2**40 + 3, policy_id='ab' * 32, stamp=1234.5678901, trajectory=traj,
                 shadow=True, inference_latency=0.0123)


def test_action_chunk_50x14_crosses_processes_with_every_field_intact(ros_graph, launcher):
    launcher.start(ECHO, 'echo_node', wait_subscriptions=['echo/in'],
                   wait_publishers=['echo/out'])
    node = ros_graph.node('chunk_tester')
    out = ros_graph.collect(node, ActionChunk, 'echo/out')
    pub = node.create_publisher(ActionChunk, 'echo/in', 10)
    ros_graph.wait_for_subscribers(pub)
    ros_graph.wait_for_publishers(out.subscription)

    sent = _chunk()
    msg = chunk_to_msg(sent, frame_id='base_link')
    pub.publish(msg)
    got = out.wait_for(timeout=10.0)

    assert got.header.frame_id == 'base_link'
    assert (got.header.stamp.sec, got.header.stamp.nanosec) == (msg.header.stamp.sec,
                                                               msg.header.stamp.nanosec)
    back = chunk_from_msg(got)
    assert back.sequence == sent.sequence
    assert back.policy_id == sent.policy_id
    assert back.shadow is True
    assert back.inference_latency == sent.inference_latency
    assert back.trajectory.joint_names == sent.trajectory.joint_names
    assert back.trajectory.positions.shape == (50, 14)
    np.testing.assert_array_equal(back.trajectory.positions, sent.trajectory.positions)
    np.testing.assert_array_equal(back.trajectory.velocities, sent.trajectory.velocities)
    np.testing.assert_array_equal(back.trajectory.accelerations, sent.trajectory.accelerations)
    np.testing.assert_allclose(back.trajectory.times, sent.trajectory.times, atol=1e-9)


def test_execute_trajectory_goal_gets_feedback_and_result_across_processes(ros_graph, launcher):
    launcher.start(ECHO, 'echo_node', wait_actions=['execute_trajectory'])
    node = ros_graph.node('goal_tester')
    client = ActionClient(node, ExecuteTrajectory, 'execute_trajectory')
    assert client.wait_for_server(timeout_sec=10.0)

    chunk = _chunk(n_points=5, n_joints=7)
    goal = ExecuteTrajectory.Goal(trajectory=trajectory_to_msg(chunk.trajectory),
                                  sequence=42, source='test')
    feedback = []
    send = client.send_goal_async(goal, feedback_callback=lambda fb: feedback.append(fb.feedback))
    wait_until(send.done, 10.0, 'goal response')
    handle = send.result()
    assert handle.accepted
    # rclpy drops feedback that arrives after the result: collect it before asking for the result.
    wait_until(lambda: len(feedback) == 5, 10.0, 'five feedback messages')
    result_future = handle.get_result_async()
    wait_until(result_future.done, 10.0, 'goal result')
    result = result_future.result().result

    assert result.error_code == ExecuteTrajectory.Result.SUCCESSFUL
    assert result.points_executed == 5
    assert 'from test' in result.error_string
    assert [f.current_point for f in feedback] == list(range(5))
    assert all(f.sequence == 42 for f in feedback)
    np.testing.assert_array_equal(np.array([f.desired for f in feedback]),
                                  chunk.trajectory.positions)
