"""Cartesian rollout end to end over real DDS, installed nodes with the shipped configs.

policy_node (scripted_cartesian, config/policy_node_cartesian.yaml) -> safety_gate
(config/safety_gate_cartesian.yaml: Cartesian checks, IK, joint checks) -> trajectory_server
-> sim_robot. The Quest deadman is held on quest/joy axis 3, as the demo gate requires.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
import threading
import time

import numpy as np
import pytest
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger
from takeover_testlib import START_TIMEOUT, start_cartesian_robot
import yaml

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.launch_graph import node_parameters
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.policies.scripted_cartesian import DEFAULTS, circle_positions
from egoroll_ros.ros.convert import time_to_sec
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME, demo_urdf_path
from egoroll_ros.testing import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _call(node, client, timeout=15.0):
    fut = client.call_async(Trigger.Request())
    wait_until(fut.done, timeout, f'{client.srv_name} reply')
    return fut.result()


class graph_ns:  # noqa: N801 - a namespace for the fixture's extra collectors
    commanded = None


@pytest.fixture
def graph(ros_graph, launcher):
    graph = graph_ns
    cfg, _ = start_cartesian_robot(launcher)
    launcher.start('policy_node', 'policy_node',
                   params_files=[f'{cfg}/policy_node_cartesian.yaml'],
                   params={'max_age.joint_states': 0.5},
                   wait_services=['policy/preflight', 'policy/start', 'policy/stop'],
                   wait_publishers=['policy/chunk'], timeout=START_TIMEOUT)
    node = ros_graph.node('cartesian_e2e')
    joy = node.create_publisher(Joy, 'quest/joy', qos_profile_sensor_data)

    stop_joy = threading.Event()

    def deadman() -> None:
        # The operator's Quest, held at 50 Hz from its own thread (as the Quest bridge is its
        # own process): not from a timer of the test's executor, which also serves the 100 Hz
        # joint_states and setpoint collectors and on a busy 2-core box fell more than the
        # gate's joy_timeout (0.5 s) behind, so the gate rightly saw the deadman released.
        while not stop_joy.wait(0.02):
            msg = Joy(axes=[0.0, 0.0, 0.0, 1.0, 0.0, 0.0], buttons=[0, 0, 0, 0])
            msg.header.stamp = node.get_clock().now().to_msg()
            joy.publish(msg)

    joy_thread = threading.Thread(target=deadman, daemon=True)
    joy_thread.start()
    verdicts = ros_graph.collect(node, GateVerdict, 'safety/verdict')
    chunks = ros_graph.collect(node, ActionChunk, 'policy/chunk')
    states = ros_graph.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
    ros_graph.wait_for_publishers(verdicts.subscription)
    ros_graph.wait_for_publishers(chunks.subscription)
    states.wait_for(timeout=10.0)
    clients = {n: node.create_client(Trigger, f'policy/{n}') for n in
               ('preflight', 'start', 'stop')}
    for c in clients.values():
        assert c.wait_for_service(timeout_sec=10.0)
    graph.commanded = ros_graph.collect(node, JointState, 'executor/commanded', 1000)
    yield node, clients, verdicts, chunks, states
    stop_joy.set()
    joy_thread.join(timeout=2.0)


def _shipped(node: str, name: str) -> np.ndarray:
    from ament_index_python.packages import get_package_share_directory

    share = get_package_share_directory('egoroll_ros')
    data = yaml.safe_load(Path(f'{share}/config/{node}.yaml').read_text())
    return np.array(node_parameters(data, node)[name])


def _q(msg) -> np.ndarray:
    return np.array([msg.position[list(msg.name).index(j)] for j in DEMO_JOINTS])


def test_scripted_cartesian_policy_moves_tool0_along_its_circle_through_gate_ik(graph):
    node, clients, verdicts, chunks, states = graph
    model = RobotModel.from_file(demo_urdf_path())
    # preflight (a shadow chunk: the gate reports, nothing moves), repeated until the gate
    # has discovered the policy node (DDS discovery between processes takes up to ~2 s)
    deadline = time.monotonic() + 30.0
    shadow = None
    while shadow is None:
        assert time.monotonic() < deadline, 'no verdict on a preflight chunk'
        start = len(verdicts.snapshot())
        res = _call(node, clients['preflight'])
        if not res.success:
            continue
        with contextlib.suppress(AssertionError):
            shadow = verdicts.wait_for(lambda v: v.shadow, 3.0, start=start)
        if shadow is not None and {v.check for v in shadow.violations} == {'deadman'}:
            shadow = None   # the gate has not yet received the held deadman (discovery)
    assert shadow.accepted and not shadow.forwarded, shadow.summary
    assert shadow.stage == GateVerdict.STAGE_JOINT
    q0 = _q(states.snapshot()[-1])
    p0, r0 = (a[0, 0] for a in model.fk(['tool0'], DEMO_JOINTS, q0))
    assert np.allclose(q0, HOME, atol=1e-3)
    n_states = len(states.snapshot())
    n_verdicts = len(verdicts.snapshot())
    res = _call(node, clients['start'])
    assert res.success, res.message
    try:
        # ~2.5 s of rollout: 20 accepted live chunks
        live = []
        while len(live) < 20:
            v = verdicts.wait_for(lambda v: not v.shadow, 10.0, start=n_verdicts)
            n_verdicts = verdicts.snapshot().index(v) + 1
            live.append(v)
    finally:
        stop = _call(node, clients['stop'])
        t_ret = time.monotonic()
        assert stop.success, stop.message
    # policy/stop through the real nodes: it returned once the gate had the executor's word,
    # so every setpoint stamped after its return is the shipped stop_behavior's jerk-limited
    # deceleration from the running state (never the old trajectory): within
    # max_acceleration, at rest within 0.2 s, then the same hold (setpoint stamps).
    assert 'holds' in stop.message, stop.message
    offset = time.time() - time.monotonic()
    wait_until(lambda: any(time_to_sec(m.header.stamp) - offset > t_ret + 0.4
                           for m in graph_ns.commanded.snapshot()), 10.0, 'setpoints after')
    sent = graph_ns.commanded.snapshot()
    ts = np.array([time_to_sec(m.header.stamp) - offset for m in sent])
    qs = np.array([_q(m) for m in sent])
    rest = ts > t_ret + 0.2
    assert rest.any() and np.all(qs[rest] == qs[rest][0])
    tail = ts > t_ret - 0.1
    t_tail, q_tail = ts[tail], qs[tail]
    vel = np.diff(q_tail, axis=0) / np.diff(t_tail)[:, None]
    acc = np.diff(vel, axis=0) / (0.5 * (t_tail[2:] - t_tail[:-2]))[:, None]
    assert np.all(np.abs(acc) <= _shipped('trajectory_server', 'max_acceleration') *
                  (1 + 1e-3)), np.abs(acc).max(axis=0)
    for v in live:
        assert v.accepted and v.forwarded, v.summary
        assert v.stage == GateVerdict.STAGE_JOINT
        assert v.action_space == ActionChunk.ACTION_SPACE_CARTESIAN
    msg = next(c for c in chunks.snapshot() if not c.shadow)
    assert msg.action_space == ActionChunk.ACTION_SPACE_CARTESIAN
    assert msg.trajectory.joint_names == []
    (arm,) = msg.cartesian
    assert (arm.arm, arm.ee_frame, arm.reference_frame) == ('arm', 'tool0', 'base_link')
    assert len(arm.poses) == len(msg.trajectory.points) == DEFAULTS['chunk_length']
    # The commanded poses lie on the circle through the start pose, in the base frame.
    cmd = np.array([[p.position.x, p.position.y, p.position.z] for c in chunks.snapshot()
                    if not c.shadow for p in c.cartesian[0].poses])
    r = DEFAULTS['radius']
    centre = p0 - [r, 0.0, 0.0]
    assert np.abs(np.linalg.norm((cmd - centre)[:, :2], axis=1) - r).max() < 1e-6
    assert np.abs(cmd[:, 2] - p0[2]).max() < 1e-6
    # The arm's tool0 (FK of the measured joints) follows: it moves along the circle, its
    # orientation holds, and the gripper stays put.
    qs = np.array([_q(m) for m in states.snapshot()[n_states:]])
    trans, rots = model.fk(['tool0'], DEMO_JOINTS, qs)
    moved = np.linalg.norm(trans[0] - p0, axis=1)
    assert moved.max() > 0.02, moved.max()
    off_circle = np.abs(np.linalg.norm((trans[0] - centre)[:, :2], axis=1) - r)
    assert off_circle.max() < 0.004, off_circle.max()
    assert np.abs(trans[0, :, 2] - p0[2]).max() < 0.004
    cos = (np.einsum('nij,ij->n', rots[0], r0) - 1.0) / 2.0
    assert np.arccos(np.clip(cos, -1, 1)).max() < 0.02
    assert np.abs(qs[:, 7] - HOME[7]).max() < 1e-3
    # It went the right way round (counter-clockwise seen from above, from +x of the centre).
    expect = circle_positions(p0, np.array([0.5]), r, DEFAULTS['period'], DEFAULTS['ramp'])
    assert expect[0, 1] > p0[1] and trans[0, -1, 1] > p0[1] + 0.005
