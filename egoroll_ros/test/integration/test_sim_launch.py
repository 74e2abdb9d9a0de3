"""Bring up sim_launch.py with launch_pytest and wait for an accepted gate verdict.

launch_pytest comes with a ROS 2 install and is not installable from PyPI, so this test is
skipped where it is missing (the structural checks in test/unit/test_launch_files.py run
everywhere).
"""

from pathlib import Path

import pytest

launch_pytest = pytest.importorskip('launch_pytest')

from ament_index_python.packages import get_package_share_directory  # noqa: E402
from launch import LaunchDescription  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from sensor_msgs.msg import Joy  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from egoroll_interfaces.msg import GateVerdict  # noqa: E402
from egoroll_ros.testing import wait_until  # noqa: E402

pytestmark = pytest.mark.integration
SIM_LAUNCH = Path(get_package_share_directory('egoroll_ros')) / 'launch' / 'sim_launch.py'


@launch_pytest.fixture
def sim_graph():
    return LaunchDescription([
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(SIM_LAUNCH)),
            launch_arguments={'rviz': 'false', 'robot_state_publisher': 'false'}.items()),
        launch_pytest.actions.ReadyToTest(),
    ])


def call(node, srv_type, name, timeout=30.0):
    client = node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=timeout), f'no service {name}'
    future = client.call_async(srv_type.Request())
    wait_until(future.done, timeout, f'{name} reply')
    return future.result()


@pytest.mark.launch(fixture=sim_graph)
def test_sim_launch_brings_up_a_graph_that_accepts_a_chunk(ros_graph):
    node = ros_graph.node('sim_launch_tester')
    verdicts = ros_graph.collect(node, GateVerdict, 'safety/verdict')
    # Hold the Quest deadman the demo gate requires, as an operator would.
    joy_pub = node.create_publisher(Joy, 'quest/joy', 10)

    def hold_deadman() -> None:
        msg = Joy()
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.axes = [0.0, 0.0, 0.0, 1.0]
        msg.buttons = [0, 0, 0, 0]
        joy_pub.publish(msg)

    node.create_timer(0.05, hold_deadman)
    assert call(node, Trigger, 'policy/preflight', timeout=60.0).success
    assert call(node, Trigger, 'policy/start').success
    verdict = verdicts.wait_for(lambda v: v.accepted, timeout=60.0)
    assert not verdict.violations
