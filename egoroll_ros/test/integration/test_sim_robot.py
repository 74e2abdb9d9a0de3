"""sim_robot as the installed console script: config file, command interfaces, faults at run
time, joint_states rate, robot_description (transient local)."""

from __future__ import annotations

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectoryPoint

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_ros.ros.action_client import ActionClient
from egoroll_ros.ros.auth import GateSigner
from egoroll_ros.ros.convert import sec_to_duration
from egoroll_ros.testing import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.safety]
CONFIG = Path(get_package_share_directory('egoroll_ros')) / 'config'
J = ['a', 'b']
URDF = '<robot name="t"><link name="base_link"/></robot>'


def _set(node, target, name, value):
    client = AsyncParameterClient(node, target)
    assert client.wait_for_services(timeout_sec=10.0)
    fut = client.set_parameters([Parameter(name, value=value)])
    wait_until(fut.done, 10.0, f'set {name}')
    assert all(r.successful for r in fut.result().results), fut.result()


def test_sim_robot_follows_commands_and_injects_faults(ros_graph, launcher, tmp_path):
    urdf = tmp_path / 'robot.urdf'
    urdf.write_text(URDF)
    launcher.start('sim_robot', 'sim_robot', params=dict(
        joints=J, max_velocity=[5.0, 5.0], rate=100.0, time_constant=0.01,
        command_interface='float64_multi_array', urdf_path=str(urdf)),
        wait_publishers=['joint_states', 'robot_description'], wait_subscriptions=['command'])
    node = ros_graph.node('sim_tester')
    states = ros_graph.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    desc = ros_graph.collect(node, String, 'robot_description', latched)
    assert desc.wait_for(timeout=10.0).data == URDF  # late joiner still gets it
    pub = node.create_publisher(Float64MultiArray, 'command', 10)
    ros_graph.wait_for_subscribers(pub)

    def reach(target):
        def check():
            pub.publish(Float64MultiArray(data=target))
            msgs = states.snapshot()
            return msgs and np.allclose(msgs[-1].position, target, atol=1e-3)
        wait_until(check, 10.0, f'sim at {target}')

    reach([0.3, -0.2])
    _set(node, 'sim_robot', 'fault.freeze', True)
    states.clear()
    pub.publish(Float64MultiArray(data=[0.0, 0.0]))
    states.wait_count(20, timeout=10.0)
    frozen = states.snapshot()
    assert all(list(m.position) == list(frozen[0].position) for m in frozen)
    np.testing.assert_allclose(frozen[0].position, [0.3, -0.2], atol=1e-3)
    _set(node, 'sim_robot', 'fault.freeze', False)
    reach([0.0, 0.1])
    _set(node, 'sim_robot', 'fault.drop_fraction', 1.0)

    def silent_for(window):
        n = len(states.snapshot())
        try:
            states.wait_count(n + 1, timeout=window)
        except AssertionError:
            return True
        return False

    # messages already in flight may still arrive; then joint_states go silent
    assert any(silent_for(0.3) for _ in range(10)), 'joint_states never stopped'


def test_installed_server_and_sim_run_a_demo_goal_from_their_config_files(ros_graph, launcher):
    launcher.start('sim_robot', 'sim_robot', params_files=[CONFIG / 'sim_robot.yaml'],
                   wait_publishers=['joint_states'], wait_subscriptions=['command'])
    launcher.start('trajectory_server', 'trajectory_server',
                   params_files=[CONFIG / 'trajectory_server.yaml'],
                   params={'heartbeat_timeout': 0.0,   # no safety gate in this test
                           'allowed_sources': ['/test']},
                   wait_actions=['execute_trajectory'])
    node = ros_graph.node('demo_goal_tester')
    states = ros_graph.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
    start = np.array(states.wait_for(timeout=10.0).position)
    diags = ros_graph.collect(node, DiagnosticArray, '/diagnostics')
    # the server sees joint_states once DDS discovery between the two processes is done
    diags.wait_for(lambda m: any(kv.key == 'joint_state_age' and kv.value != 'never'
                                 for st in m.status for kv in st.values), 15.0)
    client = ActionClient(node, ExecuteTrajectory, 'execute_trajectory')
    assert client.wait_for_server(timeout_sec=10.0)
    names = list(states.snapshot()[-1].name)
    target = start + np.array([0.1, -0.1, 0.1, -0.1, 0.1, -0.1, 0.1, 0.005])
    goal = ExecuteTrajectory.Goal(sequence=1, source='/test')
    goal.trajectory.joint_names = names
    goal.trajectory.points = [JointTrajectoryPoint(positions=target.tolist(),
                                                   time_from_start=sec_to_duration(0.4))]
    GateSigner().goal(goal)     # as the gate signs (the user's default key: no key file given)
    send = client.send_goal_async(goal)
    wait_until(send.done, 10.0, 'goal response')
    fut = send.result().get_result_async()
    wait_until(fut.done, 10.0, 'result')
    res = fut.result().result
    assert res.error_code == ExecuteTrajectory.Result.SUCCESSFUL, res.error_string
    np.testing.assert_allclose(states.snapshot()[-1].position, target, atol=0.02)
