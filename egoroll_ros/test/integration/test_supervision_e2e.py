"""The executor supervises the gate: installed sim_robot, trajectory_server and safety_gate.

A goal sent straight to the executor by another node (within and beyond the URDF limits) is
refused SOURCE_REFUSED while a chunk runs. Then SIGKILL of the safety gate mid-chunk: the
gate's ``safety/heartbeat`` stops, and the executor aborts the goal (HEARTBEAT_LOST) and holds,
measured on the stamps of ``executor/commanded`` (``command_timeout`` is off here, so nothing
else can stop it before the 6 s chunk ends). An e-stop pressed after the gate died changes
nothing (the arm already holds), and a goal sent straight to the executor meanwhile, even one
naming the gate as its source, is refused HEARTBEAT_LOST.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
import pytest
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_interfaces.msg import ActionChunk, GateVerdict, InterlockHeartbeat
from egoroll_ros.core.auth import GOAL_EPOCH_WINDOW, load_key
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.ros.action_client import ActionClient
from egoroll_ros.ros.auth import sign_goal
from egoroll_ros.ros.convert import chunk_to_msg, trajectory_to_msg
from egoroll_ros.testing import wait_until
from egoroll_ros.testing.arming import GateArmer

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.safety]

ARM = ['shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
       'wrist_pitch', 'wrist_roll', 'gripper']
START = [0.0, 0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.02]
ROLL = ARM.index('wrist_roll')
HEARTBEAT_TIMEOUT = 0.25
RATE = 100.0
BOUND = 1.5      # s: generous for a shared 2-core machine, well short of the 6 s chunk


def wait_until_or_none(predicate, timeout: float):  # noqa: ANN001, ANN201
    """``wait_until``'s value, or None when ``timeout`` passes first."""
    try:
        return wait_until(predicate, timeout, 'condition')
    except AssertionError:
        return None


def _stamp(m) -> float:
    return m.header.stamp.sec + m.header.stamp.nanosec * 1e-9


class Supervised:
    """sim_robot, trajectory_server (heartbeat_timeout 0.25 s, command_timeout off) and
    safety_gate, started from the installed package, with a tester that holds the deadman,
    publishes chunks, and collects verdicts, joint_states and executor/commanded."""

    def __init__(self, ros_graph, launcher) -> None:  # noqa: ANN001
        from ament_index_python.packages import get_package_share_directory

        share = get_package_share_directory('egoroll_ros')
        urdf = f'{share}/urdf/demo_arm.urdf'
        vmax = [2.0] * 7 + [0.1]
        launcher.start('sim_robot', 'sim_robot', params=dict(
            joints=ARM, initial_positions=START, max_velocity=vmax, urdf_path=urdf),
            wait_publishers=['joint_states'])
        launcher.start('trajectory_server', 'trajectory_server', params=dict(
            joints=ARM, max_velocity=vmax, max_acceleration=[20.0] * 7 + [1.0],
            state_timeout=3.0, urdf_path=urdf, blend_time=0.1, seam='blend',
            max_jerk=[1000.0] * 7 + [50.0], max_blend_time=0.4, control_rate=RATE,
            heartbeat_timeout=HEARTBEAT_TIMEOUT, command_timeout=0.0, max_late_ticks=0,
            diagnostics_rate=10.0, stop_behavior='hold', path_tolerance=[0.0] * 8),
            wait_actions=['execute_trajectory'])
        self.gate = launcher.start('safety_gate', 'safety_gate',
                                   params_files=[f'{share}/config/safety_gate.yaml'],
                                   params=dict(urdf_path=urdf, joy_timeout=1.0,
                                               max_joint_state_age=0.5),
                                   wait_subscriptions=['policy/chunk', 'quest/joy'],
                                   wait_publishers=['safety/verdict', 'safety/heartbeat'])
        node = self.node = ros_graph.node('supervision_tester')
        self.chunk_pub = node.create_publisher(ActionChunk, 'policy/chunk', 10)
        joy_pub = node.create_publisher(Joy, 'quest/joy', 10)
        self.verdicts = ros_graph.collect(node, GateVerdict, 'safety/verdict')
        self.states = ros_graph.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
        self.commanded = ros_graph.collect(node, JointState, 'executor/commanded', 1000)
        self.diag = ros_graph.collect(node, DiagnosticArray, '/diagnostics')
        self.heartbeats = ros_graph.collect(node, InterlockHeartbeat, 'safety/heartbeat',
                                            QoSProfile(depth=100,
                                                       reliability=ReliabilityPolicy.RELIABLE))
        ros_graph.wait_for_subscribers(self.chunk_pub)
        ros_graph.wait_for_subscribers(joy_pub)
        self.joy = {'estop': 0}
        self._stop = threading.Event()
        self.seq = 1

        def hold_deadman() -> None:
            while not self._stop.wait(0.02):
                msg = Joy(axes=[0.0, 0.0, 0.0, 1.0], buttons=[0, self.joy['estop']])
                msg.header.stamp = node.get_clock().now().to_msg()
                joy_pub.publish(msg)

        self._thread = threading.Thread(target=hold_deadman, daemon=True)
        self._thread.start()
        self.armer = GateArmer(node)
        self.states.wait_for(timeout=10.0)
        self.offset = time.time() - time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)

    def send(self, q0: np.ndarray, shadow: bool = False) -> GateVerdict:
        """A 6 s chunk rolling the wrist at 0.4 rad/s after 0.5 s; its verdict."""
        stamp = self.node.get_clock().now().nanoseconds * 1e-9
        times = 0.05 * np.arange(1, 121)
        pos = np.tile(q0, (len(times), 1))
        pos[:, ROLL] += 0.4 * np.maximum(times - 0.5, 0.0)
        traj = JointTrajectoryData(tuple(ARM), times, pos, stamp=stamp)
        start = len(self.verdicts.snapshot())
        seq, self.seq = self.seq, self.seq + 1
        self.chunk_pub.publish(chunk_to_msg(Chunk(seq, 'ab' * 32, stamp, traj, shadow=shadow)))
        return self.verdicts.wait_for(lambda v, s=seq: v.sequence == s, 10.0, start=start)

    def moving_chunk(self) -> np.ndarray:
        """A preflight, then a live chunk, until one moves the setpoints; the start state.
        Set-up: not yet ready (deadman, discovery), or held at once because a heartbeat came
        late on a loaded machine (what the executor must do, and the gate then needs a new
        preflight): try again."""
        for _ in range(50):
            q0 = np.array(self.states.snapshot()[-1].position)
            pre = self.send(q0, shadow=True)
            if pre.accepted:     # the start: safety/arm naming the preflight
                answer = self.armer.arm(int(pre.sequence), 'ab' * 32)
                if not answer.success:
                    time.sleep(0.1)
                    continue
            v = self.send(q0)
            if pre.accepted and v.forwarded and wait_until_or_none(
                    lambda q=q0: abs(self.commanded.snapshot()[-1].position[ROLL] - q[ROLL])
                    > 0.05 if self.commanded.snapshot() else False, 3.0):
                return q0
            time.sleep(0.1)
        raise AssertionError(f'no chunk moved the setpoints; last verdict: {v.summary}')

    def rogue_goal(self, source: str, target: np.ndarray, key: bytes | None = None,
                   boot_id: int | None = None, counter: int | None = None):  # noqa: ANN201
        """A 1 s goal to ``target`` sent straight to the executor (a sequence above any the
        gate sent) naming ``source``; its result. ``key``: signed with it (the user's key:
        what a process of the gate's user can do), as a goal of the gate's latest heartbeat
        unless ``boot_id`` / ``counter`` say otherwise; None: no tag."""
        if not hasattr(self, '_client'):
            self._client = ActionClient(self.node, ExecuteTrajectory, 'execute_trajectory')
            self._rogue_seq = 10**17
        assert self._client.wait_for_server(timeout_sec=10.0)
        self._rogue_seq += 1
        goal = ExecuteTrajectory.Goal(sequence=self._rogue_seq, source=source)
        goal.trajectory = trajectory_to_msg(JointTrajectoryData(
            tuple(ARM), np.array([1.0]), np.asarray(target)[None, :], stamp=0.0))
        if key is not None:
            self.heartbeats.wait_for(timeout=10.0)
            hb = self.heartbeats.snapshot()[-1]
            goal.heartbeat_counter = int(hb.counter if counter is None else counter)
            sign_goal(key, goal, int(hb.boot_id if boot_id is None else boot_id))
        fut = self._client.send_goal_async(goal)
        wait_until(fut.done, 10.0, 'goal answered')
        res_fut = fut.result().get_result_async()
        wait_until(res_fut.done, 10.0, 'goal result')
        return res_fut.result().result

    def held_since(self) -> float | None:
        """Monotonic time of the last changing setpoint once 0.3 s of identical ones follow."""
        msgs = self.commanded.snapshot()
        last_change = None
        for a, b in zip(msgs, msgs[1:], strict=False):
            if list(a.position) != list(b.position):
                last_change = _stamp(b) - self.offset
        if last_change is None or _stamp(msgs[-1]) - self.offset < last_change + 0.3:
            return None     # not yet 0.3 s of identical setpoints
        return last_change

    def assert_holds(self, ticks: int = 50) -> np.ndarray:
        """The next ``ticks`` setpoints repeat the newest one; returns it."""
        held = np.array(self.commanded.snapshot()[-1].position)
        n = len(self.commanded.snapshot())
        for m in self.commanded.wait_count(n + ticks, 10.0)[n:]:
            np.testing.assert_array_equal(np.array(m.position), held)
        return held


@pytest.fixture
def sup(ros_graph, launcher):  # noqa: ANN001, ANN201
    rig = Supervised(ros_graph, launcher)
    yield rig
    rig.close()


def test_gate_sigkill_mid_chunk_holds_by_heartbeat_and_estop_after_changes_nothing(sup):
    rogue_goal = sup.rogue_goal
    q0 = sup.moving_chunk()
    # A goal from another node while the gate lives, within and beyond the URDF limits
    # (elbow upper limit 2.0 rad): refused, the running goal unaffected.
    for elbow in (q0[ARM.index('elbow')] + 0.01, 2.15):
        target = q0.copy()
        target[ARM.index('elbow')] = elbow
        result = rogue_goal('rogue', target)
        assert result.error_code == ExecuteTrajectory.Result.SOURCE_REFUSED, \
            result.error_string
    t_kill = time.monotonic()
    os.kill(sup.gate.popen.pid, signal.SIGKILL)
    sup.gate.popen.wait(timeout=10.0)
    last_change = wait_until(sup.held_since, 10.0, 'executor/commanded holds')
    latency = last_change - t_kill
    print(f'\ngate SIGKILL -> last changing setpoint {latency * 1e3:.1f} ms '
          f'(heartbeat_timeout {HEARTBEAT_TIMEOUT} s, period {1e3 / RATE:.0f} ms)')
    assert latency < BOUND, latency
    sup.diag.wait_for(lambda d: any('HEARTBEAT_LOST' in kv.value for st in d.status
                                    for kv in st.values), timeout=10.0)
    # E-stop after the gate died: the arm already holds and stays so.
    sup.joy['estop'] = 1
    held = sup.assert_holds()
    # A goal straight to the executor while the gate is dead, even one naming the gate as
    # its source: refused; unsigned AUTH_FAILED; signed with the user's key as the dead
    # gate's (what a process of the same user could do) HEARTBEAT_LOST.
    result = rogue_goal('/safety_gate', held)
    assert result.error_code == ExecuteTrajectory.Result.AUTH_FAILED, result.error_string
    result = rogue_goal('/safety_gate', held, key=load_key('')[0])
    assert result.error_code == ExecuteTrajectory.Result.HEARTBEAT_LOST, result.error_string


def test_a_hung_gate_holds_the_arm_within_the_bound_of_its_death(sup):
    """SIGSTOP of the safety gate mid-chunk (a hung process, not a dead one): its heartbeat
    stops and the executor holds within the bound of the gate's death, and keeps holding
    while the gate stays stopped (the e-stop and deadman are not watched meanwhile). What the
    gate forwards after SIGCONT is docs/hazards.md S6."""
    sup.moving_chunk()
    t_stop = time.monotonic()
    os.kill(sup.gate.popen.pid, signal.SIGSTOP)
    try:
        last_change = wait_until(sup.held_since, 10.0, 'executor/commanded holds')
        latency = last_change - t_stop
        print(f'\ngate SIGSTOP -> last changing setpoint {latency * 1e3:.1f} ms')
        assert latency < BOUND, latency
        wait_until(lambda: any('HEARTBEAT_LOST' in kv.value for d in sup.diag.snapshot()
                               for st in d.status for kv in st.values), 10.0,
                   'the executor reports HEARTBEAT_LOST')
        sup.assert_holds(100)
    finally:
        os.kill(sup.gate.popen.pid, signal.SIGCONT)


def test_a_goal_naming_the_gate_is_refused_while_the_gates_heartbeat_forbids_motion(sup):
    """Issue 23.2: with the e-stop latched at the (live) gate, a goal sent straight to the
    executor that names the gate as its source and carries a sequence above every fence is
    refused INTERLOCK, and nothing moves: the executor reads the gate's heartbeat, not the
    goal's word."""
    q0 = sup.moving_chunk()
    sup.joy['estop'] = 1
    wait_until(sup.held_since, 10.0, 'the e-stop holds the arm')
    held = sup.assert_holds()
    target = held.copy()
    target[ARM.index('elbow')] += 0.05
    # Signed with the user's key as the gate's (a process of the same user can read it:
    # docs/executor.md), so only the heartbeat's word refuses it.
    result = sup.rogue_goal('/safety_gate', target, key=load_key('')[0])
    assert result.error_code == ExecuteTrajectory.Result.INTERLOCK, result.error_string
    assert 'estop' in result.error_string or 'e-stop' in result.error_string, \
        result.error_string
    np.testing.assert_array_equal(sup.assert_holds(), held)
    assert abs(held[ROLL] - q0[ROLL]) < 1.0


def test_a_forged_or_replayed_goal_naming_the_gate_never_moves_the_arm(sup):
    """Issue 23.4: during a live rollout (motion allowed), goals sent straight to the executor
    that name the gate and carry a sequence above everything: no tag, a tag under another key,
    the right key but another boot of the gate (a goal recorded from an earlier run) or a
    heartbeat epoch long past (a goal held back): each is refused AUTH_FAILED, and the gate's
    own chunk runs on, untouched (the elbow the rogues aim at never moves)."""
    q0 = sup.moving_chunk()
    elbow = ARM.index('elbow')
    target = q0.copy()
    target[elbow] += 0.1
    key = load_key('')[0]
    wait_until(lambda: len(sup.heartbeats.snapshot()) > GOAL_EPOCH_WINDOW + 5, 20.0,
               'enough heartbeats for an epoch long past')
    newest = int(sup.heartbeats.snapshot()[-1].counter)
    for what, kwargs in (('no tag', {}), ('another key', {'key': b'k' * 32}),
                         ('another boot', {'key': key, 'boot_id': 12345}),
                         ('an epoch long past',
                          {'key': key, 'counter': newest - GOAL_EPOCH_WINDOW - 5})):
        result = sup.rogue_goal('/safety_gate', target, **kwargs)
        assert result.error_code == ExecuteTrajectory.Result.AUTH_FAILED, \
            (what, result.error_string)
    # the gate's chunk still runs: the wrist keeps rolling, the elbow never moved
    roll = sup.commanded.snapshot()[-1].position[ROLL]
    wait_until(lambda: sup.commanded.snapshot()[-1].position[ROLL] > roll + 0.05, 5.0,
               "the gate's chunk goes on")
    elbows = [m.position[elbow] for m in sup.commanded.snapshot()]
    assert max(abs(e - q0[elbow]) for e in elbows) < 1e-9, 'a rogue goal moved the elbow'
    sup.diag.wait_for(lambda d: any(kv.key == 'goals_refused_auth' and int(kv.value) >= 4
                                    for st in d.status for kv in st.values), timeout=10.0)


def test_replayed_and_forged_heartbeats_do_not_keep_a_dead_gates_arm_moving(sup):
    """Issue 23.4: the gate's own heartbeats recorded during motion and sent again after its
    SIGKILL (real tags, old counters), interleaved with forged ones saying motion is allowed
    (newer counters, no tag): the executor honours none of them, so it aborts HEARTBEAT_LOST
    and holds within the bound of the gate's death, and counts the refused heartbeats."""
    sup.moving_chunk()
    wait_until(lambda: len(sup.heartbeats.snapshot()) >= 50, 10.0, 'heartbeats recorded')
    recorded = sup.heartbeats.snapshot()[-50:]
    pub = sup.node.create_publisher(InterlockHeartbeat, 'safety/heartbeat', QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE))
    wait_until(lambda: pub.get_subscription_count() >= 1, 10.0, 'the executor subscribes')
    stop = threading.Event()

    def replay() -> None:
        i = 0
        while not stop.wait(0.01):
            old = recorded[i % len(recorded)]
            pub.publish(old)
            forged = InterlockHeartbeat(state='ok', motion_allowed=True, boot_id=old.boot_id,
                                        counter=int(recorded[-1].counter) + 1 + i,
                                        fence_sequence=old.fence_sequence)
            pub.publish(forged)
            i += 1

    t_kill = time.monotonic()
    os.kill(sup.gate.popen.pid, signal.SIGKILL)
    thread = threading.Thread(target=replay, daemon=True)
    thread.start()
    try:
        sup.gate.popen.wait(timeout=10.0)
        last_change = wait_until(sup.held_since, 10.0, 'executor/commanded holds')
        latency = last_change - t_kill
        print(f'\ngate SIGKILL + replayed/forged heartbeats -> last changing setpoint '
              f'{latency * 1e3:.1f} ms')
        assert latency < BOUND, latency
        sup.diag.wait_for(lambda d: any('HEARTBEAT_LOST' in kv.value for st in d.status
                                        for kv in st.values), timeout=10.0)
        sup.diag.wait_for(lambda d: any(kv.key == 'heartbeats_refused' and int(kv.value) > 20
                                        for st in d.status for kv in st.values), timeout=10.0)
        sup.assert_holds(100)
    finally:
        stop.set()
        thread.join(timeout=2.0)
