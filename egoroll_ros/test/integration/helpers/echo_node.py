"""A tiny test peer: echoes ActionChunk messages and serves ExecuteTrajectory.

Run as a subprocess by the harness tests (two-process DDS round trips). Not installed.
"""

import sys

import rclpy
from rclpy.action import ActionServer
from rclpy.node import Node

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_interfaces.msg import ActionChunk
from egoroll_ros.ros.runner import run_node


class EchoNode(Node):
    """Relays ``echo/in`` to ``echo/out``; executes goals by reporting one feedback per point."""

    def __init__(self) -> None:
        super().__init__('echo_node')
        self.pub = self.create_publisher(ActionChunk, 'echo/out', 10)
        self.sub = self.create_subscription(ActionChunk, 'echo/in', self.pub.publish, 10)
        self.server = ActionServer(self, ExecuteTrajectory, 'execute_trajectory', self.execute)

    def execute(self, goal_handle):  # noqa: ANN001, ANN201
        goal = goal_handle.request
        names = list(goal.trajectory.joint_names)
        for i, point in enumerate(goal.trajectory.points):
            fb = ExecuteTrajectory.Feedback()
            fb.header.stamp = self.get_clock().now().to_msg()
            fb.sequence = goal.sequence
            fb.joint_names = names
            fb.desired = list(point.positions)
            fb.actual = list(point.positions)
            fb.error = [0.0] * len(names)
            fb.current_point = i
            goal_handle.publish_feedback(fb)
        goal_handle.succeed()
        result = ExecuteTrajectory.Result()
        result.error_code = ExecuteTrajectory.Result.SUCCESSFUL
        result.error_string = f'echoed {len(goal.trajectory.points)} points from {goal.source}'
        result.points_executed = len(goal.trajectory.points)
        return result


if __name__ == '__main__':
    assert rclpy  # imported for side effects in run_node
    sys.exit(run_node(EchoNode))
