"""Human takeover from the Quest, end to end over real DDS with the installed nodes.

sim_robot -> trajectory_server <- safety_gate (config/safety_gate_cartesian.yaml) <- policy_node
(config/policy_node_cartesian.yaml: scripted_cartesian, takeover of arm 'arm' by the right
controller, button 3; the clutch off, so the re-anchor after the deadman release comes from the
gate's safety/heartbeat), plus an in-process episode_recorder.
The test plays the Quest: it holds the deadman, publishes quest/right_pose, presses button 3 in
the middle of a rollout, moves the controller, lets go of the grip, grips again, and presses
button 3 to hand back.
"""

from __future__ import annotations

import contextlib
import threading
import time

from geometry_msgs.msg import PoseStamped
import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.bag.reader import BagReader
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.nodes.episode_recorder import EpisodeRecorder
from egoroll_ros.ros.convert import time_to_sec
from egoroll_ros.ros.takeover import INTERVENTION_TOPIC
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME, demo_urdf_path
from egoroll_ros.testing import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.safety]
START_TIMEOUT = 90.0
# Staleness limits widened for the loaded 2-core machine, as the Cartesian e2e test does.
LOADED_MACHINE_GATE = {'max_joint_state_age': 0.5, 'max_chunk_age': 1.0}
TAKEOVER_BUTTON = 3


class Quest:
    """The operator's Quest: joy (deadman axis 3, buttons) and the right controller pose."""

    def __init__(self, node) -> None:  # noqa: ANN001
        self._lock = threading.Lock()
        self.grip = 1.0
        self.button = 0
        # controller displacement (Quest frame = base frame here): a ramp from _a at time _t0
        # to _b at _t1 (wall clock), the operator's hand motion
        self._a = self._b = np.zeros(3)
        self._t0 = self._t1 = 0.0
        self._node = node
        self._joy = node.create_publisher(Joy, 'quest/joy', qos_profile_sensor_data)
        self._pose = node.create_publisher(PoseStamped, 'quest/right_pose',
                                           qos_profile_sensor_data)
        node.create_timer(0.02, self._tick)

    def _tick(self) -> None:
        with self._lock:
            grip, button = self.grip, self.button
            f = float(np.clip((time.time() - self._t0) / max(self._t1 - self._t0, 1e-9), 0, 1))
            offset = self._a + f * (self._b - self._a)
        stamp = self._node.get_clock().now().to_msg()
        joy = Joy(axes=[0.0, 0.0, 0.0, grip, 0.0, 0.0], buttons=[0, 0, 0, button])
        joy.header.stamp = stamp
        self._joy.publish(joy)
        pose = PoseStamped()
        pose.header.stamp = stamp
        pose.header.frame_id = 'quest_world'
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = \
            (np.array([0.2, -0.3, 1.1]) + offset).tolist()
        pose.pose.orientation.w = 1.0
        self._pose.publish(pose)

    def set(self, **kw) -> None:  # noqa: ANN003
        with self._lock:
            for k, v in kw.items():
                setattr(self, k, v)

    def move(self, offset: list[float], duration: float) -> None:
        """Move the hand from where it is to ``offset`` in ``duration`` s (0: at once)."""
        now = time.time()
        with self._lock:
            f = float(np.clip((now - self._t0) / max(self._t1 - self._t0, 1e-9), 0, 1))
            self._a = self._a + f * (self._b - self._a)
            self._b = np.asarray(offset, dtype=float)
            self._t0, self._t1 = now, now + duration

    def press(self, label: BoolLog, want: bool) -> float:
        """Press and release the takeover button; wall time at which the label flipped."""
        self.set(button=1)
        try:
            label.wait(want, 10.0)
        finally:
            self.set(button=0)
        return label.flipped_at(want)


class BoolLog:
    """policy/intervention as (wall receipt time, value)."""

    def __init__(self, node) -> None:  # noqa: ANN001
        from egoroll_ros.ros.takeover import _LABEL_QOS

        self._cond = threading.Condition()
        self.items: list[tuple[float, bool]] = []
        node.create_subscription(Bool, INTERVENTION_TOPIC, self._cb, _LABEL_QOS)

    def _cb(self, msg: Bool) -> None:
        with self._cond:
            self.items.append((time.time(), bool(msg.data)))
            self._cond.notify_all()

    def wait(self, value: bool, timeout: float) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.items and self.items[-1][1] == value,
                                       timeout), f'policy/intervention never became {value}'

    def flipped_at(self, value: bool) -> float:
        with self._cond:
            for (_, a), (t, b) in zip(self.items, self.items[1:], strict=False):
                if b == value and a != value:
                    last = t
            return last


def _call(client, timeout=15.0):  # noqa: ANN001
    fut = client.call_async(Trigger.Request())
    wait_until(fut.done, timeout, f'{client.srv_name} reply')
    return fut.result()


def _q(msg) -> np.ndarray:  # noqa: ANN001
    return np.array([msg.position[list(msg.name).index(j)] for j in DEMO_JOINTS])


def _max_speed(commanded: list, t0: float, t1: float) -> float:
    """Largest joint speed between consecutive setpoints stamped in [t0, t1] (rad/s or m/s;
    by their stamps, so a late control tick, or a control loop starved for a while on a
    loaded machine, does not look like a jump)."""
    sel = [m for m in commanded if t0 <= time_to_sec(m.header.stamp) <= t1]
    assert len(sel) >= 10, f'{len(sel)} setpoints in [{t0}, {t1}]'
    qs = np.array([_q(m) for m in sel])
    ts = np.array([time_to_sec(m.header.stamp) for m in sel])
    dt = np.diff(ts)
    ok = dt > 1e-4
    return float((np.abs(np.diff(qs, axis=0))[ok] / dt[ok, None]).max())


def test_quest_takeover_mid_rollout_goes_through_the_gate_and_is_labelled(
        ros_graph, launcher, tmp_path):
    from ament_index_python.packages import get_package_share_directory

    share = get_package_share_directory('egoroll_ros')
    cfg, urdf = f'{share}/config', f'{share}/urdf/demo_arm.urdf'
    launcher.start('sim_robot', 'sim_robot', params_files=[f'{cfg}/sim_robot.yaml'],
                   params={'urdf_path': urdf, 'initial_positions': list(HOME)},
                   wait_publishers=['joint_states'], timeout=START_TIMEOUT)
    launcher.start('trajectory_server', 'trajectory_server',
                   params_files=[f'{cfg}/trajectory_server.yaml'],
                   wait_actions=['execute_trajectory'], timeout=START_TIMEOUT)
    launcher.start('safety_gate', 'safety_gate',
                   params_files=[f'{cfg}/safety_gate_cartesian.yaml'],
                   params={'urdf_path': urdf, **LOADED_MACHINE_GATE},
                   wait_subscriptions=['policy/chunk'], wait_publishers=['safety/verdict'],
                   timeout=START_TIMEOUT)
    launcher.start('policy_node', 'policy_node',
                   params_files=[f'{cfg}/policy_node_cartesian.yaml'],
                   # teleop at the policy's 10 Hz, chunks held 1 s: on the loaded 2-core test
                   # machine 30 Hz goals backed up in the executor (answered later than the
                   # gate's 1 s stop_timeout) and chunks arrived up to 0.6 s after their
                   # stamp; the shipped 30 Hz and 0.5 s are for a robot computer
                   # no clutch: the deadman release reaches the takeover only through the
                   # gate's interlock heartbeat (the path faults and e-stops take too)
                   params={'max_age.joint_states': 0.5, 'takeover.rate': 10.0,
                           'takeover.horizon': 1.0, 'takeover.clutch_axis': -1},
                   wait_services=['policy/preflight', 'policy/start', 'policy/stop',
                                  'policy/takeover'],
                   wait_publishers=['policy/chunk'], timeout=START_TIMEOUT)
    rec = ros_graph.add(EpisodeRecorder(context=ros_graph.context, parameter_overrides=[
        Parameter('out_dir', value=str(tmp_path / 'episodes')),
        Parameter('outcome_window', value=0.2)]))
    node = ros_graph.node('takeover_e2e')
    quest = Quest(node)
    label = BoolLog(node)
    verdicts = ros_graph.collect(node, GateVerdict, 'safety/verdict', 1000)
    chunks = ros_graph.collect(node, ActionChunk, 'policy/chunk', 1000)
    states = ros_graph.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
    commanded = ros_graph.collect(node, JointState, 'executor/commanded', 1000)
    ros_graph.wait_for_publishers(verdicts.subscription)
    ros_graph.wait_for_publishers(chunks.subscription)
    states.wait_for(timeout=10.0)
    clients = {n: node.create_client(Trigger, f'policy/{n}') for n in
               ('preflight', 'start', 'stop')}
    for c in clients.values():
        assert c.wait_for_service(timeout_sec=10.0)
    label.wait(False, 10.0)
    model = RobotModel.from_file(demo_urdf_path())

    def tool0(msg) -> np.ndarray:  # noqa: ANN001
        return model.fk(['tool0'], DEMO_JOINTS, _q(msg))[0][0, 0]

    # preflight until the gate accepted its shadow chunk (discovery of the held deadman)
    deadline = time.monotonic() + 30.0
    shadow = None
    while shadow is None:
        assert time.monotonic() < deadline, 'no accepted verdict on a preflight chunk'
        start = len(verdicts.snapshot())
        if not _call(clients['preflight']).success:
            continue
        with contextlib.suppress(AssertionError):
            shadow = verdicts.wait_for(lambda v: v.shadow, 3.0, start=start)
        if shadow is not None and not shadow.accepted:
            shadow = None
    assert _call(clients['start']).success
    try:
        n0 = len(verdicts.snapshot())
        wait_until(lambda: sum(v.forwarded and not v.shadow
                               for v in verdicts.snapshot()[n0:]) >= 8, 20, '8 policy chunks')
        # ---- take over with the Quest button, in the middle of the rollout ----------------
        t_take = quest.press(label, True)
        n_take = len(chunks.snapshot())
        wait_until(lambda: sum(c.policy_id == 'operator' for c in chunks.snapshot()[n_take:])
                   >= 5, 10, '5 teleop chunks')
        ee0 = tool0(states.snapshot()[-1])
        # the controller rises 2 cm over 1 s: the end effector follows through the gate
        quest.move([0.0, 0.0, 0.02], 1.0)
        wait_until(lambda: tool0(states.snapshot()[-1])[2] > ee0[2] + 0.017, 10,
                   'tool0 2 cm up')
        # ---- deadman released during the takeover: the gate cancels, the executor holds --
        quest.set(grip=0.0)
        t_release = time.time()
        wait_until(lambda: time_to_sec(commanded.snapshot()[-1].header.stamp)
                   > t_release + 0.6, 10, 'setpoints after the release')
        quest.move([0.0, 0.0, 0.05], 0.0)     # moving the hand now moves nothing
        wait_until(lambda: time_to_sec(commanded.snapshot()[-1].header.stamp)
                   > t_release + 1.2, 10, 'setpoints 1.2 s after the release')
        held = [m for m in commanded.snapshot()
                if time_to_sec(m.header.stamp) > t_release + 0.3]
        assert len(held) > 20 and all(list(m.position) == list(held[0].position)
                                      for m in held), 'the arm moved with the deadman released'
        ee_held = tool0(states.snapshot()[-1])
        # ---- grip again: re-anchored (the 3 cm moved meanwhile do not jump), then down ---
        n_regrip = len(verdicts.snapshot())
        quest.set(grip=1.0)
        t_regrip = time.time()
        wait_until(lambda: sum(v.forwarded for v in verdicts.snapshot()[n_regrip:]) >= 5, 10,
                   'teleop chunks forwarded after the grip')
        quest.move([0.0, 0.0, 0.032], 0.9)
        wait_until(lambda: tool0(states.snapshot()[-1])[2] < ee_held[2] - 0.012, 10,
                   'tool0 1.5 cm down')
        # ---- hand back: the policy drives again from the measured state -------------------
        t_back = quest.press(label, False)
        n_back = len(verdicts.snapshot())
        wait_until(lambda: sum(v.forwarded and v.policy_id != 'operator'
                               for v in verdicts.snapshot()[n_back:]) >= 5, 20,
                   '5 policy chunks forwarded after the handback')
    finally:
        t_stop = time.time()
        stop = _call(clients['stop'])
    assert stop.success, stop.message
    t_end = time.time()

    # every verdict of the run: nothing rejected, every teleop chunk accepted and forwarded
    vs = verdicts.snapshot()
    # (after the stop, chunks still in flight meet the gate's rollout_stopped latch)
    bad = [v.summary for v in vs if not v.shadow and v.violations and not (
        {x.check for x in v.violations} <= {'deadman'})
        and time_to_sec(v.header.stamp) < t_stop]
    assert not bad, bad
    teleop = [v for v in vs if v.policy_id == 'operator']
    assert len(teleop) > 20
    assert all(v.action_space == ActionChunk.ACTION_SPACE_CARTESIAN and not v.shadow
               for v in teleop)
    assert sum(v.accepted and v.forwarded for v in teleop) > 20
    # nothing was forwarded while the deadman was released (0.3 s: the gate's joy receipt on
    # a loaded machine; the hold of the setpoints from then on is asserted above)
    assert not any(v.forwarded and t_release + 0.3 < time_to_sec(v.header.stamp) < t_regrip
                   for v in vs)
    # the policy ran in shadow during the takeover: its chunks were shadow chunks
    cs = chunks.snapshot()
    during = [c for c in cs if c.policy_id != 'operator'
              and t_take + 0.2 < time_to_sec(c.header.stamp) < t_back - 0.2]
    assert len(during) >= 10 and all(c.shadow for c in during)
    assert not any(c.policy_id == 'operator' and time_to_sec(c.header.stamp) > t_back + 0.1
                   for c in cs)
    # no setpoint jump at either handover (or at the grip): the largest speed between two
    # setpoints stays that of slow motion (0.1-0.6 rad/s measured, 1.2 once at load 20 on 2
    # cores); 1.8 rad/s is below the executor's own max_velocity (2-3 rad/s), so the
    # executor saturating on a jumped-to target would fail it.
    wait_until(lambda: time_to_sec(commanded.snapshot()[-1].header.stamp) > t_back + 1.0, 10,
               'setpoints 1 s after the handback (the hold after the stop)')
    cm = commanded.snapshot()
    speeds = {name: _max_speed(cm, t - 0.3, t + 0.9) for name, t in (
        ('takeover', t_take), ('regrip', t_regrip), ('handback', t_back))}
    print('largest setpoint speed around each handover (rad/s or m/s):', speeds)
    assert max(speeds.values()) < 1.8, speeds
    # the first teleop target is a measured pose of the takeover moment (FK of one of the
    # joint_states the policy node may have anchored at: within its max_age.joint_states)
    first = next(c for c in cs if c.policy_id == 'operator')
    t_first = time_to_sec(first.header.stamp)
    p = first.cartesian[0].poses[0].position
    gap = min(np.linalg.norm(np.array([p.x, p.y, p.z]) - tool0(m)) for m in states.snapshot()
              if t_first - 0.6 <= time_to_sec(m.header.stamp) <= t_first)
    assert gap < 0.001, f'first teleop target {gap:.4f} m from every measured pose before it'
    # the intervention is labelled: true from the takeover to the handback
    assert [v for _, v in label.items][-1] is False
    assert t_take < t_back
    # ... and recorded by the episode recorder
    wait_until(lambda: rec.closed, 15, 'the episode closed')
    rec.close()
    (path, _ep), = rec.closed
    from rclpy.serialization import deserialize_message

    with BagReader(path) as bag:
        values = [(t, deserialize_message(bytes(raw), Bool).data)
                  for _, _, t, raw in bag.messages(['/policy/intervention'])]
        ops = sum(deserialize_message(bytes(raw), ActionChunk).policy_id == 'operator'
                  for _, _, _, raw in bag.messages(['/policy/chunk']))
    flags = [v for _, v in values]
    assert True in flags and flags[-1] is False and flags[0] is False
    first_true = flags.index(True)
    assert False in flags[first_true:]
    assert ops > 20
    assert t_end > t_back
