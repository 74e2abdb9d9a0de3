"""The executor drives ros2_control controllers as they listen: a stand-in
forward_command_controller (std_msgs/Float64MultiArray on ``<controller>/commands``, values in
the order of its ``joints`` parameter) and a stand-in joint_trajectory_controller
(trajectory_msgs/JointTrajectory on ``<controller>/joint_trajectory``), each subscribing with
the QoS those controllers use (rclcpp::SystemDefaultsQoS: reliable, volatile). The graph is
robot_launch.py's, from the shared description, with ``command_interface`` / ``controller`` /
``command_joints`` launch arguments, in a namespace, on the simulated arm (which listens on the
controller's topic too, closing the loop)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
import threading
import time

from ament_index_python.packages import get_package_share_directory
import numpy as np
import pytest
from rclpy.qos import qos_profile_sensor_data, qos_profile_system_default
from sensor_msgs.msg import JointState, Joy
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
import yaml

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.launch_graph import describe, node_parameters
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.ros.convert import chunk_to_msg
from egoroll_ros.testing import wait_until
from egoroll_ros.testing.arming import GateArmer

pytestmark = [pytest.mark.integration, pytest.mark.safety]
SHARE = Path(get_package_share_directory('egoroll_ros'))
NS = '/arm1'
#: Verdicts of a gate that is still starting (then reset), not of a bad chunk.
NOT_READY = {'robot_model', 'joint_state', 'deadman', 'chunk_age', 'chunk_in_past',
             'executor_unavailable', 'latched_fault'}


def _yaml(node: str) -> dict:
    data = yaml.safe_load((SHARE / 'config' / f'{node}.yaml').read_text())
    return node_parameters(data, node, NS)


JOINTS = _yaml('trajectory_server')['joints']
#: The controller's `joints` parameter: another order than the executor's.
CONTROLLER_JOINTS = JOINTS[::-1]
CONTROL_RATE = _yaml('trajectory_server')['control_rate']


class StandInController:
    """Subscribes exactly as the ros2_control controller does and records what arrives; its
    node carries the controller's name and its ``joints`` parameter, which the executor reads
    through the node's get_parameters service, as from a controller the controller_manager
    loaded (every ros2_control controller is a node of its own name with that parameter)."""

    def __init__(self, node, msg_type, topic: str) -> None:
        self.lock = threading.Lock()
        self.messages: list = []
        self.times: list[float] = []
        self.sub = node.create_subscription(msg_type, topic, self._on_msg,
                                            qos_profile_system_default)

    def _on_msg(self, msg) -> None:
        with self.lock:
            self.messages.append(msg)
            self.times.append(time.monotonic())

    def snapshot(self) -> tuple[list, list[float]]:
        with self.lock:
            return list(self.messages), list(self.times)


def controller_node(ros_graph, name: str, joints=CONTROLLER_JOINTS):
    """The controller's node: its name, in the namespace, with its `joints` parameter."""
    node = ros_graph.node(name, namespace=NS)
    node.declare_parameter('joints', list(joints))
    return node


def _graph(launcher, interface: str, controller: str):
    args = {'namespace': NS, 'command_interface': interface, 'controller': controller,
            'command_joints': ','.join(CONTROLLER_JOINTS)}
    sim_yaml = _yaml('sim_robot')
    order = [JOINTS.index(j) for j in CONTROLLER_JOINTS]
    # The simulated hardware takes the controller's order too (its joints list is that order).
    sim = describe('sim', args, SHARE, overrides={'sim_robot': {
        'joints': CONTROLLER_JOINTS,
        'initial_positions': [sim_yaml['initial_positions'][i] for i in order],
        'max_velocity': [sim_yaml['max_velocity'][i] for i in order]}})[0]
    robot = describe('robot', args, SHARE)
    ts = next(s for s in robot if s.name == 'trajectory_server')
    topic = {'float64_multi_array': 'commands', 'joint_trajectory': 'joint_trajectory'}
    assert ts.remaps == (('command', f'{controller}/{topic[interface]}'),)
    assert sim.remaps == ts.remaps
    launcher.start_graph([sim, *robot])


def _drive_one_joint(ros_graph, joint: str):
    """Chunks through the gate that move ``joint`` only; returns when one was accepted."""
    node = ros_graph.node('controller_tester', namespace=NS)
    states = ros_graph.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
    verdicts = ros_graph.collect(node, GateVerdict, 'safety/verdict')
    joy = node.create_publisher(Joy, 'quest/joy', 10)
    chunks = node.create_publisher(ActionChunk, 'policy/chunk', 10)

    def hold_deadman() -> None:
        msg = Joy(axes=[0.0, 0.0, 0.0, 1.0], buttons=[0, 0, 0, 0])
        msg.header.stamp = node.get_clock().now().to_msg()
        joy.publish(msg)

    node.create_timer(0.05, hold_deadman)
    ros_graph.wait_for_subscribers(chunks)
    states.wait_for(timeout=10.0)
    seq = 0
    armer = GateArmer(node)

    def accepted() -> bool:
        nonlocal seq
        seq += 1
        if seq == 1 or not v_armed[0]:      # the gate starts disarmed: preflight, then arm
            last = states.snapshot()[-1]
            start = np.array([last.position[list(last.name).index(j)] for j in JOINTS])
            times = 0.05 * np.arange(1, 21)
            stamp = node.get_clock().now().nanoseconds * 1e-9
            n = len(verdicts.snapshot())
            chunks.publish(chunk_to_msg(Chunk(seq, 'ab' * 32, stamp, JointTrajectoryData(
                tuple(JOINTS), times, np.tile(start, (20, 1)), stamp=stamp), shadow=True)))
            pre = verdicts.wait_for(lambda v: v.sequence == seq, 10.0, start=n)
            if not pre.accepted or not armer.arm(seq, 'ab' * 32).success:
                return False
            v_armed[0] = True
            seq += 1
        last = states.snapshot()[-1]
        start = np.array([last.position[list(last.name).index(j)] for j in JOINTS])
        times = 0.05 * np.arange(1, 21)
        step = np.zeros(len(JOINTS))
        step[JOINTS.index(joint)] = 0.1
        stamp = node.get_clock().now().nanoseconds * 1e-9
        n = len(verdicts.snapshot())
        chunks.publish(chunk_to_msg(Chunk(seq, 'ab' * 32, stamp, JointTrajectoryData(
            tuple(JOINTS), times, start + np.outer(times, step), stamp=stamp))))
        v = verdicts.wait_for(lambda v: v.sequence == seq, 10.0, start=n)
        if not v.accepted:
            assert {x.check for x in v.violations} <= NOT_READY, v.summary
            reset = node.create_client(Trigger, 'safety/reset')   # the latched hold
            assert reset.wait_for_service(timeout_sec=10.0)
            future = reset.call_async(Trigger.Request())
            wait_until(future.done, 10.0, 'safety/reset reply')
            node.destroy_client(reset)
            v_armed[0] = False     # the rejection disarmed the gate: preflight and arm again
        return v.accepted and v.forwarded

    v_armed = [False]

    wait_until(accepted, 30.0, 'an accepted chunk', interval=0.2)
    return accepted


def test_forward_command_controller_gets_values_in_its_joint_order_at_the_control_rate(
        ros_graph, launcher):
    probe = controller_node(ros_graph, 'fpc')
    fpc = StandInController(probe, Float64MultiArray, '~/commands')
    _graph(launcher, 'float64_multi_array', 'fpc')
    # The arm starts at the sim's initial positions; setpoints start from the measured state.
    init = _yaml('sim_robot')['initial_positions']
    before = np.array([init[JOINTS.index(j)] for j in CONTROLLER_JOINTS])
    n0 = 0
    send = _drive_one_joint(ros_graph, 'shoulder_pan')
    moved = CONTROLLER_JOINTS.index('shoulder_pan')

    def pan_moved() -> bool:
        if not fpc.snapshot()[0]:
            return False
        return abs(fpc.snapshot()[0][-1].data[moved] - before[moved]) > 0.05

    # Chunks keep coming, as from a policy (the executor holds after command_timeout without).
    wait_until(lambda: send() and pan_moved(), 15.0,
               'shoulder_pan moving in the controller-order slot', interval=0.1)
    msgs, times = fpc.snapshot()
    data = np.array([m.data for m in msgs[n0:]])
    assert data.shape[1] == len(CONTROLLER_JOINTS)
    others = [i for i in range(len(CONTROLLER_JOINTS)) if i != moved]
    assert np.allclose(data[:, others], before[others], atol=1e-3), \
        'only the slot of shoulder_pan (in the controller joint order) changes'
    # A stream at the control rate: the mean over at least 2 s of receipt (the test's own
    # executor thread delivers in bursts on a loaded machine, so single periods say nothing).
    wait_until(lambda: fpc.snapshot()[1][-1] - fpc.snapshot()[1][0] > 2.0, 10.0, '2 s of stream')
    _, times = fpc.snapshot()
    rate = (len(times) - 1) / (times[-1] - times[0])
    assert 0.5 * CONTROL_RATE < rate < 1.5 * CONTROL_RATE, rate


def test_joint_trajectory_controller_gets_named_trajectories(ros_graph, launcher):
    probe = controller_node(ros_graph, 'jtc')
    jtc = StandInController(probe, JointTrajectory, '~/joint_trajectory')
    _graph(launcher, 'joint_trajectory', 'jtc')
    send = _drive_one_joint(ros_graph, 'elbow')
    wait_until(lambda: send() and any(len(m.points) > 1 for m in jtc.snapshot()[0]), 15.0,
               'a forwarded trajectory', interval=0.1)
    for msg in jtc.snapshot()[0]:
        assert list(msg.joint_names) == CONTROLLER_JOINTS
        t = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
        assert all(b > a for a, b in zip(t, t[1:], strict=False)), t
        for p in msg.points:
            assert len(p.positions) == len(CONTROLLER_JOINTS)
            assert np.all(np.isfinite(p.positions))
    moving = next(m for m in jtc.snapshot()[0] if len(m.points) > 1)
    pos = np.array([p.positions for p in moving.points])
    others = [i for i, j in enumerate(CONTROLLER_JOINTS) if j != 'elbow']
    assert np.ptp(pos[:, CONTROLLER_JOINTS.index('elbow')]) > 0.01
    assert np.allclose(np.ptp(pos[:, others], axis=0), 0.0, atol=1e-6)


@pytest.mark.parametrize('command_joints', [
    JOINTS[:-1], JOINTS + ['extra_joint'], JOINTS[:1] + JOINTS[:-1], JOINTS])
def test_executor_refuses_a_command_joints_list_that_disagrees_with_the_controller(
        ros_graph, launcher, command_joints):
    """Issue 24.7: command_joints is only a cross-check of the controller's own `joints`
    (read from the controller node): any difference in set or order refuses to start,
    naming both (JOINTS is a permutation of the controller's order: refused too)."""
    controller_node(ros_graph, 'fpc')
    spec = next(s for s in describe('robot', {
        'namespace': NS, 'command_interface': 'float64_multi_array', 'controller': 'fpc',
        'command_joints': ','.join(command_joints)}, SHARE) if s.name == 'trajectory_server')
    with pytest.raises(AssertionError, match='exited with status 2') as err:
        launcher.start_spec(spec, timeout=60.0)
    assert "parameter 'command_joints'" in str(err.value)
    assert "disagrees with controller 'fpc'" in str(err.value)


@pytest.mark.parametrize('controller_joints', [JOINTS[:-1], JOINTS + ['extra_joint'], None])
def test_executor_refuses_a_controller_whose_joints_are_not_its_own_or_that_is_absent(
        ros_graph, launcher, controller_joints):
    """Issue 24.7: the command order comes from the controller node's `joints`: a controller
    for another set of joints, or no controller answering, refuses to start (status 2,
    naming the problem), never a guessed order."""
    if controller_joints is not None:
        controller_node(ros_graph, 'fpc', controller_joints)
    spec = next(s for s in describe('robot', {
        'namespace': NS, 'command_interface': 'float64_multi_array', 'controller': 'fpc'},
        SHARE) if s.name == 'trajectory_server')
    if controller_joints is None:      # nobody will answer: do not wait the default 10 s
        spec = dataclasses.replace(spec, overrides={**spec.overrides, 'controller_timeout': 2.0})
    with pytest.raises(AssertionError, match='exited with status 2') as err:
        launcher.start_spec(spec, timeout=60.0)
    if controller_joints is None:
        assert "no controller 'fpc' answered" in str(err.value)
    else:
        assert "parameter 'command_joints'" in str(err.value)   # command_order's refusal
