"""egoroll_ros.ros.action_client: a goal's response is never lost to the executor thread
(ros2/rclpy#1123, present in the Humble and Jazzy rclpy the distro environments run)."""

from __future__ import annotations

import sys

import pytest
from rclpy.action import ActionServer

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_ros.ros.action_client import ActionClient
from egoroll_ros.testing import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.race]

GOALS = 300
BURST = 5


def _succeed(handle):
    handle.succeed()
    return ExecuteTrajectory.Result()


@pytest.fixture
def switch_often():
    """Hand the interpreter between threads as often as it allows, so the executor thread
    runs inside the client's send path as often as it ever could."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def test_every_goal_response_and_result_arrives(ros_graph, switch_often):
    server_node = ros_graph.node('stand_in_executor')
    ActionServer(server_node, ExecuteTrajectory, 'execute_trajectory', _succeed)
    client = ActionClient(ros_graph.node('gate_client'), ExecuteTrajectory,
                          'execute_trajectory')
    assert client.wait_for_server(timeout_sec=10.0)
    # In bursts below the action services' queue depth (10, rclpy's default), so DDS keeps
    # every request and response: what is tested is the client, not the QoS.
    for burst in range(GOALS // BURST):
        futures = [client.send_goal_async(ExecuteTrajectory.Goal(sequence=burst * BURST + i))
                   for i in range(BURST)]
        wait_until(lambda fs=futures: all(f.done() for f in fs), 10.0,
                   f'the goal responses of burst {burst}')
        handles = [f.result() for f in futures]
        assert all(h.accepted for h in handles)
        results = [h.get_result_async() for h in handles]
        wait_until(lambda rs=results: all(f.done() for f in rs), 10.0,
                   f'the results of burst {burst}')
