"""trajectory_server on real DDS: validation codes, preemption, cancel, tolerances, silence,
command interfaces. Server, sim robot and client run in this process (one participant), so
discovery is instant. Rates are kept at 100-200 Hz: rclpy's executor costs about 1 ms of CPU per
callback on these 2-core machines, and every setpoint is a callback for the sim and the test."""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback

from action_msgs.msg import GoalStatus
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
from rclpy.action import CancelResponse
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_interfaces.msg import ExecutorState, InterlockHeartbeat
from egoroll_ros.core.executor import CODES
from egoroll_ros.nodes.sim_robot import SimRobot
from egoroll_ros.nodes.trajectory_server import SWITCH_INTERVAL, TrajectoryServer
from egoroll_ros.ros.action_client import ActionClient
from egoroll_ros.ros.auth import GateSigner
from egoroll_ros.ros.convert import sec_to_duration, sec_to_time, time_to_sec
from egoroll_ros.ros.joint_states import WRITER_IDS
from egoroll_ros.ros.robot_models import DESCRIPTION_TOPIC, LATCHED
from egoroll_ros.testing import run_callback, wait_until

# One executor thread (the default; explicit), as the installed trajectory_server spins (execute
# callbacks are coroutines).
pytestmark = [pytest.mark.integration, pytest.mark.ros_threads(1), pytest.mark.safety]


@pytest.fixture(autouse=True, scope='module')
def _control_thread_gets_the_gil():
    """The server here shares one Python process with the sim and the client, which the
    installed script (whose main() sets this) never does: give its control thread the
    interpreter back as promptly as main() would, or its ticks wait behind DDS callbacks."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    yield
    sys.setswitchinterval(previous)
R = ExecuteTrajectory.Result
J = ['j1', 'j2', 'j3']
VMAX = 2.0


def _params(d):
    return [Parameter(k, value=v) for k, v in d.items()]


def _thread_stacks() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    return '\n'.join(f'--- {names.get(ident, ident)}\n' + ''.join(traceback.format_stack(f)[-6:])
                     for ident, f in sys._current_frames().items())


class Rig:
    def __init__(self, graph, server=None, sim=None, start_sim=True):
        self.graph = graph
        sp = dict(joints=J, control_rate=100.0, state_timeout=1.0, max_velocity=[VMAX] * 3,
                  max_acceleration=[20.0] * 3, goal_time_tolerance=0.5,
                  # The executor alone: no safety gate, so no heartbeat to supervise; goals
                  # longer than the default command_timeout; a descheduled test process must
                  # not latch DEADLINE_MISSED. Each has its own test, which sets it.
                  heartbeat_timeout=0.0, command_timeout=0.0, max_late_ticks=0,
                  allowed_sources=['/test'], require_position_limits=False,
                  # The seam, stop and tolerances these tests were written for (the node's
                  # defaults before issue 24.3 made them blend / decelerate / required).
                  seam='splice', stop_behavior='hold', blend_time=0.0, max_blend_time=0.5,
                  path_tolerance=[0.0] * 3)
        sp.update(server or {})
        self.server = graph.add(TrajectoryServer(context=graph.context,
                                                 parameter_overrides=_params(sp)))
        self.sim_params = dict(joints=J, max_velocity=[5.0] * 3, rate=100.0,
                               time_constant=0.01)
        self.sim_params.update(sim or {})
        self.sim = self.start_sim() if start_sim else None
        self.node = graph.node('exec_test_client')
        # This test plays the safety gate: it signs with the same (the user's default) key.
        self.signer = GateSigner()
        self.client = ActionClient(self.node, ExecuteTrajectory, 'execute_trajectory')
        assert self.client.wait_for_server(timeout_sec=10.0)
        self.commanded = graph.collect(self.node, JointState, 'executor/commanded', 1000)
        graph.wait_for_publishers(self.commanded.subscription)
        self.seq = 0
        if self.sim is not None:
            try:
                wait_until(lambda: self.server.core.measured is not None, 10.0, 'joint_states')
            except AssertionError as exc:   # seen once in CI: say where every thread was
                raise AssertionError(
                    f'{exc}; the server matched '
                    f'{self.server._joint_states.subscription.get_publisher_count()} joint_states '
                    f'publisher(s); threads:\n{_thread_stacks()}') from None

    def start_sim(self):
        self.sim = self.graph.add(SimRobot(context=self.graph.context,
                                           parameter_overrides=_params(self.sim_params)))
        return self.sim

    def now(self):
        return self.node.get_clock().now().nanoseconds * 1e-9

    def goal(self, times, positions, names=J, stamp=0.0, seq=None, velocities=None):
        if seq is None:
            self.seq += 1
            seq = self.seq
        traj = JointTrajectory(joint_names=list(names))
        traj.header.stamp = sec_to_time(stamp)
        for i, t in enumerate(times):
            p = JointTrajectoryPoint(positions=list(positions[i]),
                                     time_from_start=sec_to_duration(t))
            if velocities is not None:
                p.velocities = list(velocities[i])
            traj.points.append(p)
        return ExecuteTrajectory.Goal(trajectory=traj, sequence=seq, source='/test')

    def send(self, goal, feedback=None, sign=True):
        if sign:
            self.signer.goal(goal)
        fut = self.client.send_goal_async(goal, feedback_callback=feedback)
        wait_until(fut.done, 10.0, 'goal response')
        handle = fut.result()
        assert handle.accepted  # invalid goals are accepted, then aborted with their code
        return handle

    def send_moving(self, sign):
        """A 0.8 s goal towards 0.2 * sign; returns (handle, send time) once it moves."""
        t_sent = self.now()
        handle = self.send(self.goal([0.4, 0.8], [[0.1 * sign] * 3, [0.2 * sign] * 3]))
        self.commanded.wait_for(lambda m: time_to_sec(m.header.stamp) > t_sent and
                                abs(m.velocity[0]) > 1e-6, 5.0)
        return handle, t_sent

    def result(self, handle, timeout=10.0):
        return self.outcome(handle, timeout)[0]

    def outcome(self, handle, timeout=10.0):
        """(result, the goal's final status as the server set it)."""
        fut = handle.get_result_async()
        wait_until(fut.done, timeout, 'goal result')
        return fut.result().result, fut.result().status

    def run(self, goal, timeout=10.0):
        return self.result(self.send(goal), timeout)

    def commanded_since(self, stamp):
        return [m for m in self.commanded.snapshot() if time_to_sec(m.header.stamp) > stamp]


def _assert_continuous(msgs, vmax=VMAX):
    if len(msgs) < 2:
        return
    pos = np.array([m.position for m in msgs])
    ts = np.array([time_to_sec(m.header.stamp) for m in msgs])
    dt = np.diff(ts)
    assert np.all(dt > 0), 'setpoints out of order'
    step = np.max(np.abs(np.diff(pos, axis=0)), axis=1)
    bound = vmax * dt * (1 + 1e-6) + 1e-8
    worst = int(np.argmax(step - bound))
    assert np.all(step <= bound), f'setpoint step {step[worst]:.5f} > {bound[worst]:.5f}'


def test_result_codes_are_the_action_constants():
    for name, value in CODES.items():
        assert getattr(R, name) == value, name


def test_each_invalid_goal_is_aborted_with_its_own_code_and_a_message(ros_graph):
    rig = Rig(ros_graph)
    ok = rig.run(rig.goal([0.2], [[0.05] * 3]))
    assert ok.error_code == R.SUCCESSFUL, ok.error_string
    last = rig.seq
    nan = float('nan')
    cases = [
        (rig.goal([], []), R.EMPTY_TRAJECTORY, 'no points'),
        (rig.goal([0.5], [[0.0] * 3], names=['j1', 'j2', 'x']), R.INVALID_JOINTS, 'unknown: x'),
        (rig.goal([0.5], [[0.0] * 2], names=['j1', 'j2']), R.INVALID_JOINTS, 'missing: j3'),
        (rig.goal([0.5], [[0.0] * 4], names=J + ['j1']), R.INVALID_JOINTS, 'duplicate: j1'),
        (rig.goal([0.5], [[0.0] * 2]), R.SIZE_MISMATCH, 'positions'),
        (rig.goal([0.5], [[0.0] * 3], velocities=[[0.0]]), R.SIZE_MISMATCH, 'velocities'),
        (rig.goal([0.5], [[0.0, nan, 0.0]]), R.NON_FINITE, 'positions'),
        (rig.goal([0.5, 0.5], [[0.0] * 3] * 2), R.TIME_NOT_INCREASING, 'point 1'),
        (rig.goal([0.5], [[0.0] * 3], seq=last), R.OLD_SEQUENCE, f'{last}'),
        (rig.goal([0.5], [[0.0] * 3], stamp=rig.now() - 2.0), R.TRAJECTORY_IN_PAST, 'past'),
    ]
    for goal, code, text in cases:
        res = rig.run(goal)
        assert res.error_code == code, (code, res.error_string)
        assert text in res.error_string
    # a refused goal never disturbed the hold, and a valid one still runs
    assert rig.server.core.state == 'holding'
    rig.seq += 20
    assert rig.run(rig.goal([0.2], [[0.0] * 3])).error_code == R.SUCCESSFUL


def test_goal_without_joint_states_is_refused_then_stale_state_is_refused(ros_graph):
    rig = Rig(ros_graph, start_sim=False)
    res = rig.run(rig.goal([0.5], [[0.0] * 3]))
    assert res.error_code == R.NO_STATE, res.error_string
    rig.start_sim()
    wait_until(lambda: rig.server.core.measured is not None, 10.0, 'joint_states')
    rig.sim.set_parameters([Parameter('fault.drop_fraction', value=1.0)])
    wait_until(lambda: rig.run(rig.goal([0.5], [[0.0] * 3])).error_code == R.STALE_STATE, 5.0,
               'STALE_STATE')


def test_goal_succeeds_with_feedback_planned_and_diagnostics(ros_graph):
    rig = Rig(ros_graph, server={'goal_tolerance': [0.01] * 3})
    planned = ros_graph.collect(rig.node, JointState, 'executor/planned')
    diags = ros_graph.collect(rig.node, DiagnosticArray, '/diagnostics')
    feedback = []
    target = [0.3, -0.2, 0.1]
    handle = rig.send(rig.goal([0.4, 0.8], [[0.15, -0.1, 0.05], target]),
                      feedback=lambda fb: feedback.append(fb.feedback))
    planned.wait_for(lambda m: np.allclose(m.position, target), 5.0)
    res = rig.result(handle)
    assert res.error_code == R.SUCCESSFUL, res.error_string
    assert res.points_executed == 2
    assert feedback and feedback[0].joint_names == J and len(feedback[0].actual) == 3
    np.testing.assert_allclose(rig.commanded.snapshot()[-1].position, target)
    d = diags.wait_for(lambda m: any(kv.key == 'late_ticks' for kv in m.status[0].values), 5.0)
    keys = {kv.key for kv in d.status[0].values}
    assert {'state', 'active_sequence', 'late_ticks', 'last_error'} <= keys


def _fifo_allowed() -> bool:
    """Whether this system lets a thread take SCHED_FIFO (tried on a throwaway thread)."""
    ok = []

    def attempt():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            ok.append(True)
        except OSError:
            ok.append(False)
    t = threading.Thread(target=attempt)
    t.start()
    t.join()
    return ok[0]


def test_control_thread_priority_puts_only_the_control_thread_on_sched_fifo(ros_graph):
    if not _fifo_allowed():
        pytest.skip('this system refuses SCHED_FIFO (no CAP_SYS_NICE / rtprio limit)')
    rig = Rig(ros_graph, server={'control_thread_priority': 7}, start_sim=False)
    tid = rig.server._thread.native_id
    wait_until(lambda: os.sched_getscheduler(tid) == os.SCHED_FIFO, 5.0, 'SCHED_FIFO')
    assert os.sched_getparam(tid).sched_priority == 7
    assert os.sched_getscheduler(threading.get_native_id()) == os.SCHED_OTHER


def test_preemption_mid_trajectory_is_continuous_and_old_goal_ends_preempted(ros_graph):
    rig = Rig(ros_graph, server={'goal_tolerance': [0.02] * 3})
    first = rig.send(rig.goal([0.5, 1.0], [[0.4] * 3, [0.8] * 3]))
    rig.commanded.wait_for(lambda m: m.position[0] > 0.2, 5.0)
    t_switch = rig.now()
    second = rig.send(rig.goal([0.6, 1.2], [[0.3, 0.2, 0.1], [0.0, -0.1, -0.2]]))
    r1 = rig.result(first)
    r2 = rig.result(second)
    assert r1.error_code == R.PREEMPTED, r1.error_string
    assert r2.error_code == R.SUCCESSFUL, r2.error_string
    msgs = rig.commanded_since(t_switch - 0.2)
    _assert_continuous(msgs)
    np.testing.assert_allclose(msgs[-1].position, [0.0, -0.1, -0.2])
    assert max(m.position[0] for m in msgs) < 0.8  # the old goal's end was never reached


@pytest.mark.safety
def test_cancel_holds_within_one_period_and_no_old_setpoint_after_the_result(ros_graph):
    rate = 200.0
    rig = Rig(ros_graph, server={'control_rate': rate, 'feedback_rate': 1.0,
                                 'planned_rate': 1.0})
    for rep in range(200):
        sign = 1.0 if rep % 2 == 0 else -1.0
        handle, t_sent = rig.send_moving(sign)
        cancel = handle.cancel_goal_async()
        res, status = rig.outcome(handle)
        t_result = rig.now()
        assert res.error_code == R.CANCELED, (rep, res.error_string)
        assert status == GoalStatus.STATUS_CANCELED, (rep, status)    # not aborted
        wait_until(cancel.done, 5.0, 'cancel response')
        wait_until(lambda t=t_result: len(rig.commanded_since(t)) >= 3, 5.0,
                   'setpoints after the cancel result')
        after = rig.commanded_since(t_result)
        hold = after[0].position
        for m in after:
            assert list(m.position) == list(hold), f'rep {rep}: moving after the result'
            assert not any(m.velocity), f'rep {rep}: velocity after the result'
        this_rep = [m for m in rig.commanded.snapshot() if time_to_sec(m.header.stamp) <= t_result]
        before = [m for m in this_rep if t_sent < time_to_sec(m.header.stamp)]
        # it moved: the hold differs from where this rep started (the buffer holds this rep's
        # setpoints and the previous hold). Not only those stamped after t_sent: a setpoint is
        # stamped with its tick's deadline, which lies before t_sent when the tick runs late,
        # so with a cancel one tick into the motion that window held the hold alone.
        assert any(list(m.position) != list(hold) for m in this_rep), f'rep {rep}: never moved'
        # the hold continues the last setpoint: no step beyond max_velocity x dt (the first
        # setpoint of a rep starts from the measured position, after the previous halt)
        _assert_continuous(sorted(before[1:] + after, key=lambda m: time_to_sec(m.header.stamp)))
        rig.commanded.clear()


def test_path_tolerance_aborts_and_holds_at_measured_when_the_sim_freezes(ros_graph):
    rig = Rig(ros_graph, server={'path_tolerance': [0.1] * 3})
    rig.sim.set_parameters([Parameter('fault.freeze', value=True)])
    frozen = rig.server.core.measured.positions.copy()
    res = rig.run(rig.goal([1.0], [[0.6] * 3]))
    assert res.error_code == R.PATH_TOLERANCE_VIOLATED, res.error_string
    t = rig.now()
    wait_until(lambda: len(rig.commanded_since(t)) >= 3, 5.0, 'hold setpoints')
    for m in rig.commanded_since(t):
        np.testing.assert_allclose(m.position, frozen, atol=1e-9)


def test_state_timeout_aborts_execution_when_joint_states_stop(ros_graph):
    rig = Rig(ros_graph)
    handle = rig.send(rig.goal([2.0], [[0.5] * 3]))
    rig.commanded.wait_for(lambda m: m.position[0] > 0.02, 5.0)
    rig.sim.set_parameters([Parameter('fault.drop_fraction', value=1.0)])
    res = rig.result(handle)
    assert res.error_code == R.STALE_STATE, res.error_string
    t = rig.now()
    wait_until(lambda: len(rig.commanded_since(t)) >= 3, 5.0, 'hold setpoints')
    held = rig.commanded_since(t)
    assert all(list(m.position) == list(held[0].position) for m in held)


def test_command_timeout_aborts_when_no_newer_goal_arrives(ros_graph):
    rig = Rig(ros_graph, server={'command_timeout': 0.3})
    res = rig.run(rig.goal([3.0], [[0.5] * 3]))
    assert res.error_code == R.COMMAND_TIMEOUT, res.error_string
    assert rig.server.core.state == 'holding'


def test_points_already_in_the_past_are_dropped(ros_graph):
    rig = Rig(ros_graph, server={'goal_tolerance': [0.01] * 3})
    assert rig.commanded.snapshot() == []  # nothing is commanded before the first goal
    start = list(rig.server.core.measured.positions)
    # points 0 and 1 lie 0.3 s in the past and far away; the arm must never head for them
    stamp = rig.now() - 0.5
    res = rig.run(rig.goal([0.1, 0.2, 0.9], [[1.5] * 3, [1.5] * 3, [0.1] * 3], stamp=stamp))
    assert res.error_code == R.SUCCESSFUL, res.error_string
    assert res.points_executed == 3
    peak = max(m.position[0] for m in rig.commanded_since(stamp))
    assert peak <= max(0.1, start[0]) + 1e-6


@pytest.mark.parametrize('interface,msg_type', [('float64_multi_array', Float64MultiArray),
                                                ('joint_trajectory', JointTrajectory)])
def test_command_interface_drives_the_sim(ros_graph, interface, msg_type):
    rig = Rig(ros_graph, server={'command_interface': interface,
                                 'goal_tolerance': [0.01] * 3},
              sim={'command_interface': interface})
    cmd = ros_graph.collect(rig.node, msg_type, 'command')
    target = [0.2, -0.3, 0.1]
    res = rig.run(rig.goal([0.3, 0.6], [[0.1, -0.15, 0.05], target]))
    assert res.error_code == R.SUCCESSFUL, res.error_string
    np.testing.assert_allclose(rig.server.core.measured.positions, target, atol=0.01)
    msg = cmd.wait_for(timeout=5.0)
    if interface == 'joint_trajectory':
        last = [m for m in cmd.snapshot() if m.points][-1]
        assert last.joint_names == J
    else:
        assert len(msg.data) == 3


def test_cancel_forwards_the_hold_to_a_trajectory_controller(ros_graph):
    rig = Rig(ros_graph, server={'command_interface': 'joint_trajectory'},
              sim={'command_interface': 'joint_trajectory'})
    cmd = ros_graph.collect(rig.node, JointTrajectory, 'command')
    handle = rig.send(rig.goal([0.5, 1.0], [[0.3] * 3, [0.6] * 3]))
    cmd.wait_for(lambda m: len(m.points) == 2, 5.0)  # the forwarded goal
    rig.commanded.wait_for(lambda m: m.position[0] > 0.05, 5.0)
    handle.cancel_goal_async()
    res = rig.result(handle)
    assert res.error_code == R.CANCELED, res.error_string
    # The hold: one point stamped zero ("start on receipt": never in the past); the goal's
    # horizon messages before it carry their send time.
    hold = cmd.wait_for(lambda m: len(m.points) == 1 and
                        time_to_sec(m.header.stamp) == 0.0, 5.0)
    q = list(hold.points[0].positions)
    assert q[0] < 0.6 and not any(hold.points[0].velocities)
    wait_until(lambda: rig.server.core.measured is not None and
               np.allclose(rig.server.core.measured.positions, q, atol=1e-3), 5.0,
               f'sim at the hold {q}: {rig.server.core.measured.positions}')
    assert cmd.snapshot()[-1] == hold, 'motion was sent after the hold'


@pytest.mark.safety
def test_a_trajectory_controller_never_holds_more_than_the_horizon_of_motion(ros_graph):
    """Issue 24.7: with joint_trajectory the controller is sent only the next
    trajectory_horizon of a 3 s goal, again as it runs; when the executor stops sending (its
    control thread starved here, as a SIGSTOP or a crash would), the stand-in controller
    (sim_robot, which like a joint_trajectory_controller holds a trajectory's last point)
    stops where the last message ended, within the horizon, far short of the goal."""
    rig = Rig(ros_graph, server={'command_interface': 'joint_trajectory',
                                 'trajectory_horizon': 0.3, 'command_timeout': 0.0},
              sim={'command_interface': 'joint_trajectory'})
    cmd = ros_graph.collect(rig.node, JointTrajectory, 'command', 1000)
    handle = rig.send(rig.goal([3.0], [[0.6] * 3]))
    rig.commanded.wait_for(lambda m: m.position[0] > 0.1, 5.0)
    with rig.server._lock:               # the executor sends nothing while this is held
        sent = [m for m in cmd.snapshot() if m.points]
        time.sleep(0.05)                 # anything already on the wire arrives
        last = [m for m in cmd.snapshot() if m.points][-1]
        time.sleep(1.0)                  # the stimulus: a 1 s outage of the executor
        held = rig.server.core.measured.positions.copy()
    assert len(sent) >= 3, 'the horizon is re-sent while the goal runs'
    for m in sent:
        span = m.points[-1].time_from_start.sec + m.points[-1].time_from_start.nanosec * 1e-9
        assert span <= 0.3 + 1e-6, span
    end = last.points[-1].positions[0]
    assert end < 0.5, 'the whole goal was queued in the controller'
    assert held[0] <= end + 1e-3, (held[0], end)
    assert rig.result(handle).error_code in (R.SUCCESSFUL, R.DEADLINE_MISSED, R.STALLED,
                                             R.PATH_TOLERANCE_VIOLATED)


@pytest.mark.safety
def test_shutdown_sends_a_trajectory_controller_the_stop(ros_graph):
    """Issue 24.7: the executor shutting down mid-goal ends it SHUTDOWN and sends the
    controller its stop (stamped zero, ending at rest), so the controller does not run out
    the horizon it was sent; the stand-in controller comes to rest there."""
    rig = Rig(ros_graph, server={'command_interface': 'joint_trajectory'},
              sim={'command_interface': 'joint_trajectory'})
    cmd = ros_graph.collect(rig.node, JointTrajectory, 'command', 1000)
    handle = rig.send(rig.goal([3.0], [[0.6] * 3]))
    rig.commanded.wait_for(lambda m: m.position[0] > 0.1, 5.0)
    rig.server.close()
    assert rig.result(handle).error_code == R.SHUTDOWN
    stop = cmd.wait_for(lambda m: time_to_sec(m.header.stamp) == 0.0 and m.points, 5.0)
    assert not any(stop.points[-1].velocities), 'the stop ends at rest'
    q = stop.points[-1].positions[0]
    assert q < 0.5
    wait_until(lambda: abs(rig.server.core.measured.positions[0] - q) < 1e-3, 5.0,
               'the controller at the stop')


@pytest.mark.safety
def test_cancel_right_after_acceptance_never_moves_the_robot(ros_graph):
    rig = Rig(ros_graph, server={'control_rate': 200.0})
    assert rig.run(rig.goal([0.2], [[0.0] * 3])).error_code == R.SUCCESSFUL
    for rep in range(50):
        t_sent = rig.now()
        handle = rig.send(rig.goal([0.5], [[0.3 if rep % 2 else -0.3] * 3]))
        handle.cancel_goal_async()  # at once: the execute callback may not have run yet
        res, status = rig.outcome(handle)
        t_result = rig.now()
        assert res.error_code == R.CANCELED, (rep, res.error_string)
        assert status == GoalStatus.STATUS_CANCELED, (rep, status)
        wait_until(lambda t=t_result: len(rig.commanded_since(t)) >= 2, 5.0, 'hold setpoints')
        after = rig.commanded_since(t_result)
        assert all(list(m.position) == list(after[0].position) for m in after), rep
        _assert_continuous(sorted(rig.commanded_since(t_sent)[1:],
                                  key=lambda m: time_to_sec(m.header.stamp)))


@pytest.mark.race
def test_preempt_racing_a_cancel_of_the_old_goal_never_stops_the_new_one(ros_graph):
    """A new goal and a cancel of the old one, repeated in both orders (the cancel sent at once,
    or only once the new goal has replaced the old one in the core): the old goal ends
    (canceled or preempted), the new one always runs to its end and the setpoints stay
    continuous. A late cancel of a replaced goal never stops the robot."""
    rig = Rig(ros_graph, server={'control_rate': 200.0, 'goal_tolerance': [0.05] * 3})
    for rep in range(40):
        sign = 1.0 if rep % 2 == 0 else -1.0
        old, t_sent = rig.send_moving(sign)
        goal = rig.signer.goal(rig.goal([0.3], [[0.05 * sign] * 3]))
        new_future = rig.client.send_goal_async(goal)
        if rep % 2 == 0:
            old.cancel_goal_async()         # at once: the cancel is handled first
            wait_until(new_future.done, 10.0, 'new goal response')
        else:                               # once the new goal runs: the preemption won
            wait_until(lambda g=goal: rig.server.core.active_sequence == g.sequence, 10.0,
                       'the new goal preempts the old one')
            old.cancel_goal_async()
            wait_until(new_future.done, 10.0, 'new goal response')
        new = new_future.result()
        assert new.accepted
        r_old, r_new = rig.result(old), rig.result(new)
        assert r_old.error_code in (R.PREEMPTED, R.CANCELED), (rep, r_old.error_string)
        assert r_new.error_code == R.SUCCESSFUL, (rep, r_new.error_string)
        # The result and executor/commanded are different topics, unordered between them:
        # wait for the goal's final setpoint to arrive before reading the stream.
        target = [0.05 * sign] * 3
        rig.commanded.wait_for(lambda m, t=target, t0=t_sent: time_to_sec(m.header.stamp) > t0
                               and np.allclose(m.position, t, rtol=0.0, atol=1e-9), 5.0)
        msgs = sorted(rig.commanded_since(t_sent)[1:], key=lambda m: time_to_sec(m.header.stamp))
        _assert_continuous(msgs)
        np.testing.assert_allclose(msgs[-1].position, target, atol=1e-9)
        rig.commanded.clear()


class _FakeHandle:
    """Stands in for a ServerGoalHandle to force the cancel-before-execute ordering."""

    def __init__(self, goal):
        self.goal_id = type('Id', (), {'uuid': bytes(range(16))})()
        self.request = goal
        self.is_cancel_requested = True
        self.ended = None

    def canceled(self):
        self.ended = 'canceled'

    def abort(self):
        self.ended = 'aborted'

    def succeed(self):
        self.ended = 'succeeded'


def test_cancel_that_arrives_before_the_execute_callback_is_honoured(ros_graph):
    rig = Rig(ros_graph)
    handle = _FakeHandle(rig.goal([0.5], [[0.3] * 3]))
    assert rig.server._on_cancel(handle) == CancelResponse.ACCEPT
    res = run_callback(rig.server._execute, handle)
    assert res.error_code == R.CANCELED and handle.ended == 'canceled'
    assert rig.server.core.active_sequence is None and rig.server.core.state == 'idle'


@pytest.mark.safety
def test_setpoint_beyond_the_executors_own_position_limit_aborts_with_joint_value_limit(
        ros_graph):
    rig = Rig(ros_graph, server={'position_lower': [-1.0] * 3, 'position_upper': [0.3, 1.0, 1.0]})
    t0 = rig.now()
    res = rig.run(rig.goal([1.0], [[0.6, 0.1, 0.1]]))
    assert res.error_code == R.LIMIT_VIOLATED, res.error_string
    assert 'joint j1' in res.error_string and '0.3' in res.error_string, res.error_string
    assert rig.server.core.state == 'holding'
    msgs = rig.commanded_since(t0)
    assert msgs and max(m.position[0] for m in msgs) <= 0.3     # never sent, never clamped
    n = len(rig.commanded.snapshot())
    held = rig.commanded.wait_count(n + 20, 5.0)[n:]
    assert all(list(m.position) == list(held[0].position) for m in held)


def _urdf(j1_upper: float) -> str:
    """Three joints on a chain: j1 revolute [-1, j1_upper], j2 revolute, j3 continuous."""
    links = ''.join(f'<link name="l{i}"/>' for i in range(4))
    kinds = [('revolute', f'<limit lower="-1" upper="{j1_upper}" velocity="2" effort="1"/>'),
             ('revolute', '<limit lower="-1.5" upper="1.5" velocity="2" effort="1"/>'),
             ('continuous', '<limit velocity="2" effort="1"/>')]
    joints = ''.join(f'<joint name="j{i + 1}" type="{kind}"><parent link="l{i}"/>'
                     f'<child link="l{i + 1}"/><axis xyz="0 0 1"/>{lim}</joint>'
                     for i, (kind, lim) in enumerate(kinds))
    return f'<robot name="three">{links}{joints}</robot>'


@pytest.mark.safety
def test_the_heartbeats_motion_fence_holds_the_running_goal_and_refuses_fenced_ones(ros_graph):
    """A heartbeat whose fence_sequence covers the running goal ends it FENCED and the arm
    holds, with no cancel; a goal at or below the fence is refused FENCED and never moves;
    one above it runs (the fence never stops a goal the gate forwarded after it)."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    rig = Rig(ros_graph)
    pub = rig.node.create_publisher(InterlockHeartbeat, 'safety/heartbeat',
                                    QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    ros_graph.wait_for_subscribers(pub)
    handle, _ = rig.send_moving(1.0)
    fenced = rig.seq
    pub.publish(rig.signer.heartbeat(InterlockHeartbeat(
        state='stopped', motion_allowed=False, counter=1, fence_sequence=fenced)))
    res = rig.result(handle)
    t_result = rig.now()
    assert res.error_code == R.FENCED, res.error_string
    wait_until(lambda: len(rig.commanded_since(t_result)) >= 20, 5.0, 'setpoints after it')
    after = rig.commanded_since(t_result)
    assert all(list(m.position) == list(after[0].position) for m in after), 'moved after FENCED'
    assert 0.0 < after[0].position[0] < 0.2                      # held short of the goal's end
    # A fence above goals never sent yet (a goal in flight that arrives after its fence).
    pub.publish(rig.signer.heartbeat(InterlockHeartbeat(
        state='stopped', motion_allowed=False, counter=2, fence_sequence=fenced + 2)))
    wait_until(lambda: rig.server.core.fence == fenced + 2, 5.0, 'the raised fence arrives')
    t_refused = rig.now()
    for seq in (fenced + 1, fenced + 2):
        res = rig.run(rig.goal([0.3], [[0.1] * 3], seq=seq))
        assert res.error_code == R.FENCED, res.error_string
    wait_until(lambda: len(rig.commanded_since(t_refused)) >= 10, 5.0, 'setpoints')
    assert all(list(m.position) == list(after[0].position)
               for m in rig.commanded_since(t_refused)), 'a fenced goal moved'
    # A late copy of an older fence, then a goal above the fence: it runs to the end.
    pub.publish(rig.signer.heartbeat(InterlockHeartbeat(
        state='ok', motion_allowed=True, counter=3, fence_sequence=fenced)))
    res = rig.run(rig.goal([0.5], [[0.05] * 3], seq=fenced + 3))
    assert res.error_code == R.SUCCESSFUL, res.error_string


def test_rogue_goal_beyond_the_urdf_limit_is_stopped_by_the_executors_own_limits(ros_graph):
    """No position limits in the parameters: the executor takes them from robot_description
    (as the gate does) and refuses goals until it has them. A goal from another node naming an
    allowed source (the allow-list cannot tell) that runs past the URDF limit aborts
    LIMIT_VIOLATED with the joint, value and limit, and never sends a setpoint beyond it."""
    rig = Rig(ros_graph, server={'require_position_limits': True})
    res = rig.run(rig.goal([0.5], [[0.1] * 3]))
    assert res.error_code == R.NO_ROBOT_MODEL, res.error_string
    assert 'robot_description' in res.error_string
    pub = rig.node.create_publisher(String, DESCRIPTION_TOPIC, LATCHED)
    pub.publish(String(data=_urdf(0.3)))
    wait_until(lambda: rig.server.core.position_limits is not None, 10.0, 'URDF limits')
    assert 'robot_description' in rig.server.core.limits_source
    t0 = rig.now()
    res = rig.run(rig.goal([1.0], [[0.6, 0.1, 0.1]]))      # j1 past its URDF upper 0.3
    assert res.error_code == R.LIMIT_VIOLATED, res.error_string
    assert 'joint j1' in res.error_string and '[-1, 0.3]' in res.error_string
    assert 'robot_description' in res.error_string
    msgs = rig.commanded_since(t0)
    assert msgs and max(m.position[0] for m in msgs) <= 0.3     # never sent, never clamped
    assert max(m.position[0] for m in msgs) > 0.25              # it did move up to there


@pytest.mark.safety
def test_a_second_robot_description_never_widens_the_executors_limits(ros_graph):
    """Issue 24.1: the executor's limits are fixed by the first valid robot_description; a
    different one (a second publisher, wider limits) is refused and counted, and a goal past
    the first model's limit still aborts LIMIT_VIOLATED at that limit."""
    rig = Rig(ros_graph, server={'require_position_limits': True})
    pub = rig.node.create_publisher(String, DESCRIPTION_TOPIC, LATCHED)
    pub.publish(String(data=_urdf(0.3)))
    wait_until(lambda: rig.server.core.position_limits is not None, 10.0, 'URDF limits')
    other = ros_graph.node('second_state_publisher').create_publisher(
        String, DESCRIPTION_TOPIC, LATCHED)
    other.publish(String(data=_urdf(1.0)))
    wait_until(lambda: rig.server._models.refused >= 1, 10.0, 'the second one refused')
    res = rig.run(rig.goal([1.0], [[0.6, 0.1, 0.1]]))
    assert res.error_code == R.LIMIT_VIOLATED, res.error_string
    assert '[-1, 0.3]' in res.error_string


@pytest.mark.safety
def test_a_gate_checking_another_robot_model_makes_the_executor_refuse_and_halt(ros_graph):
    """Issue 24.1: the gate's signed heartbeat names the hash of the model it checks chunks
    against. While that is not the executor's own model, every goal is refused INTERLOCK
    (robot_model_mismatch) and nothing moves, a running goal halts, and /diagnostics says
    MISMATCH (ERROR); a heartbeat naming the same model lets goals run again."""
    import hashlib

    from rclpy.qos import QoSProfile, ReliabilityPolicy

    rig = Rig(ros_graph, server={'require_position_limits': True})
    text = _urdf(0.3)
    own = hashlib.sha256(text.encode()).hexdigest()
    other = hashlib.sha256(_urdf(1.0).encode()).hexdigest()
    rig.node.create_publisher(String, DESCRIPTION_TOPIC, LATCHED).publish(String(data=text))
    wait_until(lambda: rig.server._models.model_hash == own, 10.0, 'the model')
    pub = rig.node.create_publisher(InterlockHeartbeat, 'safety/heartbeat',
                                    QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    ros_graph.wait_for_subscribers(pub)
    diags = ros_graph.collect(rig.node, DiagnosticArray, '/diagnostics', 200)

    def beat(model):
        pub.publish(rig.signer.heartbeat(InterlockHeartbeat(
            state='ok', motion_allowed=True, robot_model_sha256=model)))
        wait_until(lambda: rig.server._gate_model_hash == model, 5.0, 'the heartbeat')

    beat(own)
    handle, _ = rig.send_moving(1.0)           # runs while both name the same model
    beat(other)                                # the gate now checks another model
    res = rig.result(handle)
    assert res.error_code == R.INTERLOCK, res.error_string
    assert 'robot_model_mismatch' in res.error_string
    t0 = rig.now()
    for model in (other, ''):                  # another model, or none named (an old gate)
        beat(model)
        res = rig.run(rig.goal([0.3], [[0.25] * 3]))
        assert res.error_code == R.INTERLOCK, res.error_string
        assert 'robot_model_mismatch' in res.error_string and own[:12] in res.error_string
    wait_until(lambda: len(rig.commanded_since(t0)) >= 10, 5.0, 'setpoints')
    held = rig.commanded_since(t0)
    assert all(list(m.position) == list(held[0].position) for m in held), 'it moved'

    def mismatch_reported():
        return any(st.level == DiagnosticStatus.ERROR and
                   {kv.key: kv.value for kv in st.values}.get('robot_model_check', '')
                   .startswith('MISMATCH')
                   for arr in diags.snapshot() for st in arr.status)
    wait_until(mismatch_reported, 10.0, '/diagnostics MISMATCH at ERROR')
    beat(own)
    res = rig.run(rig.goal([0.5], [[0.25] * 3]))
    assert res.error_code == R.SUCCESSFUL, res.error_string


@pytest.mark.safety
def test_every_executor_check_that_is_off_is_listed_in_diagnostics(ros_graph):
    """Issue 24.4: this rig turns supervision off (no heartbeat, command timeout, late-tick
    limit, robot model; no tolerances): /diagnostics lists each in disabled_checks, a joint
    left unchecked by a tolerance by name; with them on, none is listed."""
    rig = Rig(ros_graph, server={'path_tolerance': [0.1, 0.0, 0.1]})
    listed = dict(rig.server._executor_status().values)['disabled_checks'].split(',')
    no_ids = set() if WRITER_IDS else {'joint_states_second_publisher'}   # this rclpy's
    assert set(listed) == {'command_timeout', 'heartbeat_timeout', 'max_late_ticks',
                           'require_position_limits', 'path_tolerance(j2)', 'start_jump(j2)',
                           'goal_tolerance'} | no_ids
    on = Rig(ros_graph, server={'heartbeat_timeout': 0.25, 'command_timeout': 0.5,
                                'max_late_ticks': 50, 'require_position_limits': True,
                                'path_tolerance': [0.1] * 3, 'goal_tolerance': [0.05] * 3},
             start_sim=False)
    assert set(filter(None, dict(on.server._executor_status().values)['disabled_checks']
                      .split(','))) == no_ids


class FakeDriver:
    """joint_states at 100 Hz from a node of its own, positions set by the test (the driver's
    word; a test stand-in for the robot, stamped as a driver stamps: now)."""

    def __init__(self, graph, name='fake_driver', positions=(0.0, 0.0, 0.0)):
        self.node = graph.node(name)
        self.positions = list(positions)
        self.pub = self.node.create_publisher(JointState, 'joint_states', 10)
        self.timer = self.node.create_timer(0.01, self._publish)

    def _publish(self):
        msg = JointState(name=list(J), position=list(self.positions))
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pub.publish(msg)

    def close(self):
        self.timer.cancel()


@pytest.mark.safety
def test_a_second_joint_states_publisher_holds_the_arm_and_refuses_goals(ros_graph):
    """Issue 24.5: a joint_state_publisher beside the driver (zeros for the arm's joints):
    neither stream is believed while both publish, so the running goal ends STALE_STATE and
    the arm holds, /diagnostics names the conflict, and a new goal is refused; once the
    second one is silent for 2 s the driver's states are believed again and goals run."""
    if not WRITER_IDS:
        pytest.skip('this rclpy gives no publisher id (MessageInfo without publisher_gid): the '
                    'second-publisher check is off here, as its start-up warning says')
    rig = Rig(ros_graph, server={'state_timeout': 0.2})
    handle, _ = rig.send_moving(1.0)
    other = FakeDriver(ros_graph, 'joint_state_publisher')
    res = rig.result(handle)
    assert res.error_code == R.STALE_STATE, res.error_string
    t0 = rig.now()
    values = dict(rig.server._executor_status().values)
    assert values['joint_states_publishers_conflict'] is True
    assert 'publishers of the controlled joints' in values['last_joint_states_refusal']
    res = rig.run(rig.goal([0.5], [[0.0] * 3]))
    assert res.error_code == R.STALE_STATE, res.error_string
    wait_until(lambda: len(rig.commanded_since(t0)) >= 10, 5.0, 'setpoints')
    held = rig.commanded_since(t0)
    assert all(list(m.position) == list(held[0].position) for m in held), 'it moved'
    other.close()
    wait_until(lambda: not rig.server._joint_states.vetter.conflict_since and
               time.monotonic() - rig.server.core.measured.received < 0.05, 10.0,
               'the driver believed again')
    res = rig.run(rig.goal([0.5], [[0.05] * 3]))
    assert res.error_code == R.SUCCESSFUL, res.error_string


@pytest.mark.safety
def test_a_measured_start_far_from_the_hold_setpoint_is_refused_start_jump(ros_graph):
    """Issue 24.5: after a goal the arm holds at its last setpoint; when joint_states then
    say the arm is elsewhere by more than path_tolerance + start_jump_margin (another
    source's values), the next goal is refused START_JUMP naming the joint and the hold
    stays exactly where it was; a measured start within the bound runs."""
    rig = Rig(ros_graph, server={'path_tolerance': [0.05] * 3, 'start_jump_margin': 0.005},
              start_sim=False)
    driver = FakeDriver(ros_graph)
    wait_until(lambda: rig.server.core.measured is not None, 10.0, 'joint_states')
    res = rig.run(rig.goal([0.3], [[0.01] * 3]))
    assert res.error_code == R.SUCCESSFUL, res.error_string
    assert rig.server.core.state == 'holding'
    driver.positions = [0.01 + 0.056, 0.01, 0.01]      # 56 mm/mrad from the hold: beyond
    wait_until(lambda: rig.server.core.measured.positions[0] > 0.06, 5.0, 'the new state')
    t0 = rig.now()
    res = rig.run(rig.goal([0.5], [[0.2] * 3]))
    assert res.error_code == R.START_JUMP, res.error_string
    assert 'joint j1' in res.error_string and '0.055' in res.error_string
    wait_until(lambda: len(rig.commanded_since(t0)) >= 10, 5.0, 'setpoints')
    assert all(m.position[0] == pytest.approx(0.01, abs=1e-9)
               for m in rig.commanded_since(t0)), 'the hold moved'
    driver.positions = [0.01 + 0.05, 0.01, 0.01]       # within 0.055: the arm's own lag
    wait_until(lambda: rig.server.core.measured.positions[0] < 0.065, 5.0, 'the new state')
    res = rig.run(rig.goal([0.5], [[0.05] * 3]))
    assert res.error_code == R.SUCCESSFUL, res.error_string
    driver.close()


def test_a_silent_joint_states_stream_with_its_publisher_matched_is_subscribed_again(
        ros_graph):
    """A reader left behind by the transport (seen after a SIGSTOP of this process) would
    never deliver again: when nothing arrives for 2 x state_timeout while the publisher is
    still matched, the executor subscribes again (counted in /diagnostics), and the state
    stays stale meanwhile (goals refused STALE_STATE)."""
    rig = Rig(ros_graph, server={'state_timeout': 0.5}, start_sim=False)
    driver = FakeDriver(ros_graph)
    wait_until(lambda: rig.server.core.measured is not None, 10.0, 'joint_states')
    driver.close()                                     # silent, still matched
    res = rig.run(rig.goal([0.5], [[0.0] * 3]))
    assert res.error_code in (R.STALE_STATE, R.SUCCESSFUL), res.error_string
    wait_until(lambda: rig.server._joint_states.resubscribed >= 1, 10.0, 'resubscribed')
    assert dict(rig.server._executor_status().values)['joint_states_resubscribed'] >= 1
    driver.timer = driver.node.create_timer(0.01, driver._publish)     # it speaks again
    wait_until(lambda: time.monotonic() - rig.server.core.measured.received < 0.1, 10.0,
               'joint_states through the new subscription')


@pytest.mark.safety
def test_an_old_joint_states_message_is_refused(ros_graph):
    """Issue 24.5: a joint_states message stamped 1 s before the last one (a late duplicate,
    a replay), far behind the node's clock, is refused and counted; the measured state is
    not replaced by it."""
    rig = Rig(ros_graph, start_sim=False)
    driver = FakeDriver(ros_graph, positions=(0.02, 0.02, 0.02))
    wait_until(lambda: rig.server.core.measured is not None, 10.0, 'joint_states')
    old = JointState(name=list(J), position=[0.3, 0.3, 0.3])
    old.header.stamp = sec_to_time(rig.now() - 1.0)
    before = rig.server._joint_states.vetter.refused
    driver.pub.publish(old)                            # the same publisher: stamps only
    wait_until(lambda: rig.server._joint_states.vetter.refused > before, 5.0, 'refused')
    assert 'went backwards' in rig.server._joint_states.vetter.last_refusal
    assert rig.server.core.measured.positions[0] == pytest.approx(0.02)
    driver.close()


def test_position_limit_parameters_beyond_the_urdf_make_its_model_unusable(ros_graph):
    """Parameters may only tighten the URDF's limits: ones beyond them refuse every goal."""
    strict = Rig(ros_graph, server={'require_position_limits': True,
                                    'position_lower': [-1.0] * 3,
                                    'position_upper': [0.5, 1.0, 1.0]})
    pub = strict.node.create_publisher(String, DESCRIPTION_TOPIC, LATCHED)
    pub.publish(String(data=_urdf(0.3)))
    wait_until(lambda: strict.server.core.supervision_error(time.monotonic()) is not None and
               'outside the URDF limits' in str(
                   strict.server.core.supervision_error(time.monotonic())), 10.0,
               'URDF refused')
    res = strict.run(strict.goal([0.5], [[0.1] * 3]))
    assert res.error_code == R.NO_ROBOT_MODEL, res.error_string
    assert "'j1' [-1, 0.5] is outside the URDF limits [-1, 0.3]" in res.error_string


@pytest.mark.safety
def test_consecutive_late_ticks_latch_deadline_missed(ros_graph):
    rig = Rig(ros_graph, server={'max_late_ticks': 3})
    handle = rig.send(rig.goal([3.0], [[0.5] * 3]))
    wait_until(lambda: rig.server.core.active_sequence is not None and
               rig.server.core.state == 'executing', 5.0, 'executing')
    with rig.server._lock:           # the control thread misses deadlines while we hold it
        time.sleep(0.1)              # the stimulus (a 0.1 s stall = 10 periods), not a wait
    res = rig.result(handle)
    assert res.error_code == R.DEADLINE_MISSED, res.error_string
    assert rig.server.core.state == 'holding'


def test_executor_state_reports_the_commanded_velocity_and_acceleration(ros_graph):
    # seam blend: the motion is a Ruckig join into a cubic spline, whose acceleration the
    # state carries at every tick (state_rate = control_rate here), stamped as the setpoint.
    rig = Rig(ros_graph, server={'seam': 'blend', 'max_jerk': [500.0] * 3, 'blend_time': 0.1,
                                 'state_rate': 100.0, 'goal_tolerance': [0.02] * 3})
    states = ros_graph.collect(rig.node, ExecutorState, 'executor/state', 1000)
    ros_graph.wait_for_publishers(states.subscription)
    res = rig.run(rig.goal([0.3, 0.6, 0.9], [[0.05] * 3, [0.15] * 3, [0.2] * 3]))
    assert res.error_code == R.SUCCESSFUL, res.error_string
    by_stamp = {time_to_sec(m.header.stamp): m for m in rig.commanded.snapshot()}
    moving = [s for s in states.snapshot() if s.state == 'executing']
    assert len(moving) > 30 and all(list(s.joint_names) == J for s in moving)
    assert max(abs(a) for s in moving for a in s.accelerations) > 0.1
    matched = [(s, by_stamp[time_to_sec(s.header.stamp)]) for s in moving
               if time_to_sec(s.header.stamp) in by_stamp]
    assert len(matched) > 0.9 * len(moving)
    for s, c in matched:
        assert list(s.positions) == list(c.position) and list(s.velocities) == list(c.velocity)
    # the reported acceleration is the setpoints' own (their second divided difference)
    ts = np.array([time_to_sec(s.header.stamp) for s, _ in matched])
    q = np.array([s.positions for s, _ in matched])
    a = np.array([s.accelerations for s, _ in matched])
    even = np.abs(np.diff(ts) - 0.01) < 1e-6
    idx = [i for i in range(1, len(ts) - 1) if even[i - 1] and even[i]]
    fd = np.array([(q[i + 1] - 2 * q[i] + q[i - 1]) / 1e-4 for i in idx])
    np.testing.assert_allclose(fd, a[idx], atol=0.5 * 500.0 * 0.01)   # jerk x dt


def test_seam_blend_joins_each_new_goal_off_the_control_tick_without_a_step(ros_graph):
    # A chunk stream on one smooth path (a goal every ~0.1 s, each 1 s long): every goal after
    # the first is joined by the seam_joiner thread at a predicted tick (the first, from rest,
    # in the tick), and the executor's own per-setpoint velocity/acceleration checks pass at
    # every takeover (any step would end the goal LIMIT_VIOLATED).
    rig = Rig(ros_graph, server={'seam': 'blend', 'max_jerk': [500.0] * 3, 'blend_time': 0.1,
                                 'max_blend_time': 0.4})
    core = rig.server.core
    t_start = rig.now()

    def path(t):
        return 0.15 * np.sin(1.5 * (t - t_start))

    handles = []
    for i in range(6):
        now = rig.now()
        times = np.arange(1, 21) * 0.05
        handles.append(rig.send(rig.goal(times, [[path(now + t)] * 3 for t in times])))
        wait_until(lambda n=i + 1: core.joins['prepared'] + core.joins['in_tick'] == n, 5.0,
                   f'goal {i + 1} adopted')
        adopted = rig.now()
        rig.commanded.wait_for(lambda m, t=adopted: time_to_sec(m.header.stamp) > t + 0.08,
                               5.0)
    results = [rig.result(h) for h in handles]
    codes = [r.error_code for r in results]
    assert codes == [R.PREEMPTED] * 5 + [R.SUCCESSFUL], [r.error_string for r in results]
    assert core.joins['in_tick'] == 1 and core.joins['prepared'] == 5, core.joins
    assert core.refused == 0
    _assert_continuous(rig.commanded_since(t_start))
