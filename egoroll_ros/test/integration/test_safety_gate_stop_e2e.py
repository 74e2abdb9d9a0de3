"""Stop paths end to end over real DDS: installed safety_gate, trajectory_server and sim_robot.

One set of processes for the whole module (start-up costs seconds on a loaded machine); each
test first brings the graph back to a known state (faults off, deadman held, e-stop released,
``safety/reset``, arm at rest) and uses sequences that only ever increase.

While a long accepted chunk executes, an e-stop press, a deadman release and stale joint_states
each stop it: the goal ends CANCELED (the gate's cancel-all) or FENCED (the motion fence of the
heartbeat the gate sent just before it, whichever reaches the executor first; the executor's
own stale-state abort would be STALE_STATE: its ``state_timeout`` is set well above the gate's
``max_joint_state_age``), executor/commanded
repeats one setpoint (holds) from then on, and joint_states settle short of the chunk's end.
The measured time from the stop input to the first repeated setpoint is printed (run with
``-s``); it includes the DDS trip back to the test, so it is an upper bound. Shadow and
out-of-order chunks never produce a goal.

The gate's ``max_joint_state_age`` is 0.5 s here (0.2 s in the demo config): on the loaded
2-core test machine the 100 Hz joint_states now and then stall past 0.2 s, and the gate then
rightly stops the chunk a test needs running.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time

from action_msgs.msg import GoalStatus, GoalStatusArray
from diagnostic_msgs.msg import DiagnosticArray, KeyValue
import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import qos_profile_action_status_default, qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.ros.convert import chunk_to_msg
from egoroll_ros.testing import ProcessLauncher, RosGraph, goal_result, wait_until
from egoroll_ros.testing.arming import GateArmer
from egoroll_ros.testing.pytest_plugin import isolated_domain

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.safety]

ARM = ['shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
       'wrist_pitch', 'wrist_roll', 'gripper']
START = [0.0, 0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.02]
ROLL = ARM.index('wrist_roll')   # tool0 lies on its axis: rolling it keeps the tool in place
DEADMAN_AXIS, ESTOP_BUTTON = 3, 1                     # config/safety_gate.yaml
LONG_N, LONG_SPEED = 120, 0.4                         # 6 s, 5 s of it at 0.4 rad/s
STOP_BOUND = 2.0                                      # s: generous, shared 2-core machine
# Chunks stay at the measured position for LEAD s before moving: a goal that reaches the
# executor late (hundreds of ms on a loaded machine) then needs no catch-up, which the executor
# would refuse (LIMIT_VIOLATED) instead of running.
LEAD = 1.0


class Graph:
    """The three processes, a tester node with a held Quest deadman, and collectors."""

    def __init__(self, ros: RosGraph, launcher: ProcessLauncher) -> None:
        from ament_index_python.packages import get_package_share_directory

        share = get_package_share_directory('egoroll_ros')
        urdf = f'{share}/urdf/demo_arm.urdf'
        vmax = [2.0] * 7 + [0.1]
        self.ros = ros
        self.launcher = launcher
        launcher.start('sim_robot', 'sim_robot', params=dict(
            joints=ARM, initial_positions=START, max_velocity=vmax, urdf_path=urdf),
            wait_publishers=['joint_states'], wait_services=['sim_robot/set_parameters'])
        launcher.start('trajectory_server', 'trajectory_server', params=dict(
            joints=ARM, max_velocity=vmax, max_acceleration=[20.0] * 7 + [1.0],
            state_timeout=3.0, urdf_path=urdf, blend_time=0.1,
            seam='blend', max_jerk=[1000.0] * 7 + [50.0], max_blend_time=0.4,
            # One 6 s chunk at a time (no newer goal within the default 0.5 s); a descheduled
            # process must not latch DEADLINE_MISSED here (tested in test_trajectory_server).
            command_timeout=0.0, max_late_ticks=0,
            stop_behavior='hold', path_tolerance=[0.0] * 8),   # the stop it measures: hold
            wait_actions=['execute_trajectory'])
        launcher.start('safety_gate', 'safety_gate',
                       params_files=[f'{share}/config/safety_gate.yaml'],
                       params=dict(urdf_path=urdf, require_deadman=True, joy_timeout=1.0,
                                   max_joint_state_age=0.5, diagnostics_period=0.2),
                       wait_subscriptions=['policy/chunk', 'quest/joy'],
                       wait_publishers=['safety/verdict'], wait_services=['safety/reset'])
        node = ros.node('stop_e2e_tester')
        self.node = node
        self.chunk_pub = node.create_publisher(ActionChunk, 'policy/chunk', 10)
        self.joy_pub = node.create_publisher(Joy, 'quest/joy', 10)
        self.verdicts = ros.collect(node, GateVerdict, 'safety/verdict')
        self.states = ros.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
        self.commanded = ros.collect(node, JointState, 'executor/commanded', 100)
        self.status = ros.collect(node, GoalStatusArray, 'execute_trajectory/_action/status',
                                  qos_profile_action_status_default)
        self.diag = ros.collect(node, DiagnosticArray, '/diagnostics')
        self.reset = node.create_client(Trigger, 'safety/reset')
        self.stop_srv = node.create_client(Trigger, 'safety/stop')
        self.params = AsyncParameterClient(node, 'sim_robot')
        self.seq = itertools.count(1)
        self._joy_lock = threading.Lock()
        self._joy = {'axis': 1.0, 'estop': 0}
        self._stop = threading.Event()
        ros.wait_for_subscribers(self.chunk_pub)
        ros.wait_for_subscribers(self.joy_pub)
        ros.wait_for_publishers(self.verdicts.subscription)
        self.states.wait_for(timeout=10.0)
        assert self.params.wait_for_services(timeout_sec=10.0)
        self._thread = threading.Thread(target=self._hold_joy, daemon=True)
        self._thread.start()

    # ---- inputs ----------------------------------------------------------------------------
    def _hold_joy(self) -> None:
        while not self._stop.wait(0.02):
            self.joy()

    def joy(self, axis: float | None = None, estop: int | None = None) -> float:
        """Change the Quest state (if given), publish it now; return the monotonic time."""
        with self._joy_lock:
            if axis is not None:
                self._joy['axis'] = axis
            if estop is not None:
                self._joy['estop'] = estop
            msg = Joy(axes=[0.0, 0.0, 0.0, self._joy['axis']], buttons=[0, self._joy['estop']])
            msg.header.stamp = self.node.get_clock().now().to_msg()
            t = time.monotonic()
            self.joy_pub.publish(msg)
        return t

    def set_fault(self, name: str, value: object) -> float:
        """Set a sim_robot fault parameter; return the monotonic time it took effect by."""
        fut = self.params.set_parameters([Parameter(f'fault.{name}', value=value)])
        wait_until(fut.done, 10.0, f'set fault.{name}')
        assert all(r.successful for r in fut.result().results), fut.result()
        return time.monotonic()

    def measured(self) -> np.ndarray:
        msg = self.states.snapshot()[-1]
        return np.array([msg.position[list(msg.name).index(j)] for j in ARM])

    def send(self, velocity: np.ndarray, n: int, seq: int | None = None,
             shadow: bool = False, ramp: Ramp | None = None,
             lead: float = LEAD) -> tuple[GateVerdict, Ramp, int]:
        """A chunk at constant ``velocity`` after LEAD s at the measured state (or the
        continuation of ``ramp`` from now on); wait for its verdict."""
        seq = next(self.seq) if seq is None else seq
        stamp = self.node.get_clock().now().nanoseconds * 1e-9
        times = 0.05 * np.arange(1, n + 1)
        if ramp is None:
            ramp = Ramp(self.measured(), np.asarray(velocity, dtype=float), stamp, lead)
        pos = ramp.at(stamp + times)
        start = len(self.verdicts.snapshot())
        traj = JointTrajectoryData(tuple(ARM), times, pos, stamp=stamp)
        self.chunk_pub.publish(chunk_to_msg(Chunk(seq, 'ab' * 32, stamp, traj, shadow=shadow)))
        verdict = self.verdicts.wait_for(lambda v: v.sequence == seq and v.shadow == shadow,
                                         10.0, start=start)
        return verdict, ramp, seq

    # ---- observations ----------------------------------------------------------------------
    def goals(self, start: int = 0) -> dict[bytes, int]:
        """Latest status of every goal seen in status messages from index ``start``."""
        out: dict[bytes, int] = {}
        for msg in self.status.snapshot()[start:]:
            for st in msg.status_list:
                out[bytes(st.goal_info.goal_id.uuid)] = st.status
        return out

    def new_goals(self, before: int) -> dict[bytes, int]:
        """Goals that first appear in status messages from index ``before`` on."""
        old = _ids(self.status.snapshot()[:before])
        return {k: v for k, v in self.goals(before).items() if k not in old}

    def settled(self, window: int = 30, tol: float = 1e-4) -> bool:
        msgs = self.states.snapshot()[-window:]
        if len(msgs) < window:
            return False
        roll = [m.position[list(m.name).index('wrist_roll')] for m in msgs]
        return max(roll) - min(roll) < tol

    def first_hold_after(self, t0: float) -> tuple[float, np.ndarray] | None:
        """Time (monotonic) and value of the first executor/commanded setpoint produced after
        ``t0`` (monotonic) that repeats the previous one (the executor holds), or None.

        Setpoints are placed in time by their header stamps (when the executor produced
        them), not by when this process received them: a descheduled test process receives a
        backlog late, and setpoints from before the stop would look like after it."""
        offset = time.time() - time.monotonic()   # ROS (system) clock - steady clock
        msgs = self.commanded.snapshot()
        stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 - offset for m in msgs]
        for k in range(1, len(msgs)):
            if stamps[k - 1] > t0 and list(msgs[k].position) == list(msgs[k - 1].position):
                return stamps[k], np.array(msgs[k].position)
        return None

    def assert_holds(self, value: np.ndarray, count: int = 60) -> None:
        """The next ``count`` setpoints (0.3 s at 200 Hz) all equal ``value``."""
        start = len(self.commanded.snapshot())
        msgs = self.commanded.wait_count(start + count, 10.0)[start:]
        for m in msgs:
            np.testing.assert_array_equal(np.array(m.position), value)

    # ---- set-up ------------------------------------------------------------------------------
    def ready(self) -> None:
        """Faults off, deadman held, e-stop released and reset, arm at rest."""
        self.set_fault('drop_fraction', 0.0)
        self.joy(axis=1.0, estop=0)
        assert self.reset.wait_for_service(timeout_sec=5.0)

        def reset_ok() -> bool:
            fut = self.reset.call_async(Trigger.Request())
            wait_until(fut.done, 5.0, 'safety/reset')
            return fut.result().success

        wait_until(reset_ok, 10.0, 'safety/reset succeeds (e-stop released)', interval=0.1)
        start = len(self.diag.snapshot())
        self.diag.wait_for(lambda d: any(
            'safety gate' in st.name and st.message == 'ok'
            and KeyValue(key='deadman_held', value='True') in st.values
            and KeyValue(key='executor_ready', value='True') in st.values
            for st in d.status), timeout=15.0, start=start)
        n = len(self.states.snapshot())
        self.states.wait_count(n + 30, 10.0)
        wait_until(self.settled, 15.0, 'arm at rest')

    def start_long_chunk(self, attempts: int = 3) -> tuple[np.ndarray, bytes, Ramp]:
        """Send a 6 s wrist-roll chunk, wait until it executes and moves; return its last
        point, goal id and ramp.

        Set-up, not the behaviour under test: when the gate or the executor ends the goal
        before it moves (fail-closed on a joint_states stall of the loaded machine), the
        reason is printed and a new chunk is tried.
        """
        for attempt in range(1, attempts + 1):
            q0 = self.measured()
            velocity = np.zeros(len(ARM))
            velocity[ROLL] = (-1.0 if q0[ROLL] > 0.0 else 1.0) * LONG_SPEED   # stay near
            before = len(self.status.snapshot())
            verdict, ramp, _ = self.send(velocity, LONG_N)
            assert verdict.accepted and verdict.forwarded, verdict.summary
            goal = wait_until(lambda: list(self.new_goals(before)), 10.0,  # noqa: B023
                              'the long chunk becomes a goal')
            assert len(goal) == 1

            def moving_or_ended() -> str:
                status = self.goals().get(goal[0])  # noqa: B023
                if status in (GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED,
                              GoalStatus.STATUS_SUCCEEDED):
                    return 'ended'
                moved = abs(self.measured()[ROLL] - q0[ROLL]) > 0.05  # noqa: B023
                return 'moving' if moved and status == GoalStatus.STATUS_EXECUTING else ''

            outcome = wait_until(moving_or_ended, 15.0, 'the long chunk moves the arm')
            if outcome == 'moving':
                return ramp.at(ramp.stamp + 0.05 * LONG_N), goal[0], ramp
            print(f'\nlong chunk attempt {attempt}: goal ended before the arm moved '
                  f'(status {self.goals().get(goal[0])}); gate verdicts: '
                  f'{[v.summary for v in self.verdicts.snapshot()[-3:]]}')
            self.ready()
        raise AssertionError(f'no long chunk kept executing in {attempts} attempts')

    def assert_stopped(self, t_stop: float, goal: bytes, what: str) -> float:
        """The goal ends CANCELED or FENCED (the gate's two stop paths), commanded holds,
        joint_states settle short of the end.

        Returns:
            seconds from ``t_stop`` to the first repeated (held) setpoint.
        """
        wait_until(lambda: self.goals().get(goal) in (GoalStatus.STATUS_CANCELED,
                                                      GoalStatus.STATUS_ABORTED), 10.0,
                   f'{what}: the running goal ends')
        result = goal_result(self.node, ExecuteTrajectory, 'execute_trajectory', goal)
        assert result.error_code in (ExecuteTrajectory.Result.CANCELED,
                                     ExecuteTrajectory.Result.FENCED), \
            f'{what}: the goal ended {result.error_string}'
        held = wait_until(lambda: self.first_hold_after(t_stop), 10.0,
                          f'{what}: executor/commanded holds')
        latency = held[0] - t_stop
        self.assert_holds(held[1])
        return latency

    def call_stop(self) -> tuple[Trigger.Response, float]:
        """Call safety/stop; return its response and the monotonic time it returned."""
        assert self.stop_srv.wait_for_service(timeout_sec=5.0)
        fut = self.stop_srv.call_async(Trigger.Request())
        wait_until(fut.done, 10.0, 'safety/stop answers')
        return fut.result(), time.monotonic()

    def rearm(self) -> None:
        """A new preflight and start: an accepted shadow chunk, then safety/arm naming it
        (as policy_node's start), arm the stopped gate."""
        verdict, _, _ = self.send(np.zeros(len(ARM)), 20, shadow=True)
        assert verdict.accepted, verdict.summary
        if not hasattr(self, '_armer'):
            self._armer = GateArmer(self.node)
        answer = self._armer.arm(int(verdict.sequence), 'ab' * 32)
        assert answer.success, answer.message

    def setpoints_after(self, t0: float) -> list[tuple[float, np.ndarray]]:
        """executor/commanded setpoints stamped after ``t0`` (monotonic), with the one just
        before them first (stamps are when the executor produced them)."""
        offset = time.time() - time.monotonic()
        msgs = self.commanded.snapshot()
        out = []
        for m in reversed(msgs):          # newest first: only the tail is converted
            t = m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 - offset
            out.append((t, np.array(m.position)))
            if t <= t0:
                break
        return out[::-1]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


class Ramp:
    """Positions ``q0`` for LEAD s after ``stamp``, then moving at ``velocity``."""

    def __init__(self, q0: np.ndarray, velocity: np.ndarray, stamp: float,
                 lead: float = LEAD) -> None:
        self.q0, self.velocity, self.stamp, self.lead = q0, velocity, stamp, lead

    def at(self, t: np.ndarray | float) -> np.ndarray:
        """Positions at ROS times ``t`` (s)."""
        moving = np.maximum(np.asarray(t, dtype=float) - self.stamp - self.lead, 0.0)
        return self.q0 + np.multiply.outer(moving, self.velocity)


def _ids(msgs: list) -> set[bytes]:
    return {bytes(st.goal_info.goal_id.uuid) for m in msgs for st in m.status_list}


@pytest.fixture(scope='module')
def graph(tmp_path_factory):
    with isolated_domain() as domain:
        ros = RosGraph(num_threads=1, domain_id=domain)
        launcher = ProcessLauncher(ros.node('egoroll_test_probe'),
                                   tmp_path_factory.mktemp('stop_e2e_nodes'))
        g = None
        try:
            g = Graph(ros, launcher)
            yield g
        finally:
            if g is not None:
                g.close()
            launcher.stop_all()
            ros.close()


@pytest.fixture
def e2e(graph, request):
    graph.ready()
    graph.rearm()      # a test before may have left the gate stopped (safety/stop)
    yield graph
    failed = any(getattr(request.node, f'rep_{w}', None) is not None
                 and getattr(request.node, f'rep_{w}').failed for w in ('setup', 'call'))
    if failed:
        print('\n===== logs of the node processes (module-wide) =====')
        print(graph.launcher.logs())


def _check_stop(g: Graph, t_stop: float, goal: bytes, what: str) -> float:
    latency = g.assert_stopped(t_stop, goal, what)
    print(f'\n{what}: input -> first held setpoint {latency * 1e3:.1f} ms')
    assert latency < STOP_BOUND, latency
    return latency


def test_estop_cancels_the_running_chunk_and_the_arm_holds(e2e):
    end, goal, ramp = e2e.start_long_chunk()
    t_stop = e2e.joy(estop=1)
    _check_stop(e2e, t_stop, goal, 'e-stop')
    wait_until(e2e.settled, 10.0, 'joint_states settle')
    assert abs(e2e.measured()[ROLL] - end[ROLL]) > 0.5     # stopped well short of the end
    verdict, _, _ = e2e.send(np.zeros(len(ARM)), 30)            # latched until reset
    assert not verdict.forwarded and 'estop' in {v.check for v in verdict.violations}


def test_deadman_release_cancels_the_running_chunk_and_the_arm_holds(e2e):
    end, goal, ramp = e2e.start_long_chunk()
    t_stop = e2e.joy(axis=0.0)
    _check_stop(e2e, t_stop, goal, 'deadman release')
    wait_until(e2e.settled, 10.0, 'joint_states settle')
    assert abs(e2e.measured()[ROLL] - end[ROLL]) > 0.5
    verdict, _, _ = e2e.send(np.zeros(len(ARM)), 30)
    assert not verdict.forwarded and 'deadman' in {v.check for v in verdict.violations}


def test_stale_joint_states_make_the_gate_reject_and_cancel(e2e):
    end, goal, ramp = e2e.start_long_chunk()
    try:
        t_stop = e2e.set_fault('drop_fraction', 1.0)   # sim_robot publishes no joint_states
        _check_stop(e2e, t_stop, goal, 'stale joint_states')
        verdict, _, _ = e2e.send(np.zeros(len(ARM)), 30)
        assert not verdict.forwarded
        assert [v.check for v in verdict.violations] == ['joint_state'], verdict.summary
    finally:
        e2e.set_fault('drop_fraction', 0.0)
    n = len(e2e.states.snapshot())
    e2e.states.wait_count(n + 30, 10.0)
    wait_until(e2e.settled, 10.0, 'joint_states settle')
    assert abs(e2e.measured()[ROLL] - end[ROLL]) > 0.5


def test_shadow_chunk_never_produces_a_goal(e2e):
    before = len(e2e.status.snapshot())
    setpoints = e2e.commanded.snapshot()        # none before the executor's first goal
    velocity = np.zeros(len(ARM))
    velocity[ROLL] = LONG_SPEED
    verdict, _, _ = e2e.send(velocity, 40, shadow=True)
    assert verdict.accepted and verdict.shadow and not verdict.forwarded, verdict.summary
    if setpoints:                                       # executor/commanded does not move
        e2e.assert_holds(np.array(setpoints[-1].position))
    else:
        n = len(e2e.states.snapshot())
        e2e.states.wait_count(n + 50, 10.0)             # 0.5 s of joint_states: no setpoint
        assert e2e.commanded.snapshot() == []
    assert e2e.settled()
    # Positive sync: a live chunk after it is the only new goal.
    live, _, _ = e2e.send(velocity * 0.25, 30)
    assert live.forwarded, live.summary
    wait_until(lambda: GoalStatus.STATUS_SUCCEEDED in e2e.new_goals(before).values(), 10.0,
               'the live chunk runs to the end')
    assert len(e2e.new_goals(before)) == 1


def test_out_of_order_chunk_is_dropped_and_never_reaches_the_executor(e2e):
    end, goal, ramp = e2e.start_long_chunk()
    before = len(e2e.status.snapshot())
    current = next(e2e.seq)                             # the long chunk's is current - 1
    old, _, _ = e2e.send(None, 30, seq=current - 2, ramp=ramp)   # valid but older
    assert not old.forwarded
    # (current - 2 may be the arming preflight's own sequence: then rollout_stopped too)
    checks = [v.check for v in old.violations]
    assert 'old_sequence' in checks and set(checks) <= {'old_sequence', 'rollout_stopped'}, \
        old.summary
    assert e2e.goals()[goal] == GoalStatus.STATUS_EXECUTING   # the running goal goes on
    # current + 1, continuing the running motion (no jump when it preempts)
    newer, _, _ = e2e.send(None, 30, ramp=ramp)
    assert newer.forwarded, newer.summary
    wait_until(lambda: e2e.new_goals(before), 10.0, 'the newer chunk becomes a goal')
    assert e2e.goals()[goal] != GoalStatus.STATUS_EXECUTING or \
        wait_until(lambda: e2e.goals()[goal] != GoalStatus.STATUS_EXECUTING, 10.0, 'preempted')
    # it runs to its last point; it ends there still moving at the ramp's speed, and this
    # executor's stop_behavior is hold, so the final brake may exceed max_acceleration and end
    # it ABORTED (LIMIT_VIOLATED, holding) instead of SUCCEEDED: both mean it ran to its end
    ended = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED)
    wait_until(lambda: any(s in ended for s in e2e.new_goals(before).values()), 10.0,
               'the newer chunk runs to the end')
    assert len(e2e.new_goals(before)) == 1              # only the newer one became a goal


def test_chunk_after_safety_stop_is_not_forwarded_until_a_new_preflight(e2e):
    """safety/stop (what policy/stop calls) cancels, holds, and latches "rollout stopped":
    a valid chunk afterwards is refused with that reason, reset does not re-arm, an accepted
    shadow chunk alone does not either, and only a new preflight and start do."""
    end, goal, ramp = e2e.start_long_chunk()
    res, t_ret = e2e.call_stop()
    assert res.success and 'holds' in res.message, res.message
    _check_stop(e2e, t_ret, goal, 'safety/stop')
    after = e2e.setpoints_after(t_ret)
    assert all(np.array_equal(q, after[0][1]) for _, q in after), 'moved after the stop'
    wait_until(e2e.settled, 10.0, 'joint_states settle')
    verdict, _, _ = e2e.send(np.zeros(len(ARM)), 30)     # valid, from the measured position
    assert not verdict.forwarded
    assert [v.check for v in verdict.violations] == ['rollout_stopped'], verdict.summary
    e2e.ready()                                          # safety/reset: still stopped
    verdict, _, _ = e2e.send(np.zeros(len(ARM)), 30)
    assert [v.check for v in verdict.violations] == ['rollout_stopped'], verdict.summary
    shadow, _, _ = e2e.send(np.zeros(len(ARM)), 30, shadow=True)   # a shadow chunk alone:
    assert shadow.accepted                                          # accepted, but arms nothing
    verdict, _, _ = e2e.send(np.zeros(len(ARM)), 30)
    assert [v.check for v in verdict.violations] == ['rollout_stopped'], verdict.summary
    e2e.rearm()
    verdict, _, _ = e2e.send(np.zeros(len(ARM)), 30)
    assert verdict.forwarded, verdict.summary


RACE_REPS = 100


@pytest.mark.race
@pytest.mark.safety
@pytest.mark.timeout(900)   # 100 repetitions: about 1 min alone, several on a loaded machine
def test_stop_race_no_setpoint_of_the_old_chunk_after_safety_stop_returns(e2e):
    """100 times: a chunk moves the arm, safety/stop is called at a random moment of it, and
    from the stamp of its return on every executor/commanded setpoint repeats the hold."""
    rng = np.random.default_rng(13)
    moved = 0
    for rep in range(RACE_REPS):
        _moving_chunk(e2e, rep)     # then a random few ticks more
        n = len(e2e.commanded.snapshot())
        e2e.commanded.wait_count(n + int(rng.integers(0, 8)), 10.0)
        t_call = time.monotonic()
        res, t_ret = e2e.call_stop()
        assert res.success, f'rep {rep}: {res.message}'
        t_wait = time.monotonic()
        wait_until(lambda t=t_wait: e2e.setpoints_after(t)[1:], 5.0, 'setpoints after the stop',
                   interval=0.01)
        after = e2e.setpoints_after(t_ret)
        bad = [t - t_ret for t, q in after if not np.array_equal(q, after[0][1])]
        assert not bad, f'rep {rep}: setpoints moved {bad} s after safety/stop returned'
        # Did the stop meet a moving arm: did the setpoints still change between the call
        # and the return (the decelerating stop, or the chunk itself)? Measured from the
        # call, not from the return: on a loaded machine the return may come well after the
        # setpoints came to rest.
        pre = [q for t, q in e2e.setpoints_after(t_call - 0.1) if t <= t_call]
        moved += int(len(pre) >= 2 and not np.array_equal(pre[-1], pre[-2]))
        e2e.rearm()
    print(f'\nstop race: {RACE_REPS} repetitions, {moved} called while the setpoints moved')
    # The race was real: the stop was called while the chunk moved the setpoints (the last
    # two setpoints before the call differ). Set-up validity, not the safety assertion above,
    # which holds for every repetition. (Counting setpoint changes between the call and the
    # return instead measured the service's round trip: 4-15 of 100.)
    assert moved >= RACE_REPS // 2


CROSSING_REPS = 40


def _moving_chunk(g: Graph, rep: int) -> Ramp:
    """Send a wrist-roll chunk and wait until it moves the setpoints; return its ramp.
    Set-up: a chunk that reaches the executor later than its lead on a loaded machine is
    refused (LIMIT_VIOLATED: no catch-up); another is sent."""
    q0 = g.measured()
    velocity = np.zeros(len(ARM))
    velocity[ROLL] = (-1.0 if q0[ROLL] > 0.0 else 1.0) * 0.3
    for _attempt in range(5):
        t_send = time.monotonic()
        verdict, ramp, _ = g.send(velocity, 20, lead=0.2)
        assert verdict.forwarded, f'rep {rep}: {verdict.summary}'
        with contextlib.suppress(AssertionError):
            wait_until(lambda t=t_send: any(
                not np.array_equal(q, g.setpoints_after(t)[0][1])
                for _, q in g.setpoints_after(t)), 3.0, 'the chunk moves the setpoints',
                interval=0.01)
            return ramp
    raise AssertionError(f'rep {rep}: no chunk moved the setpoints in 5 attempts')


@pytest.mark.race
@pytest.mark.safety
@pytest.mark.timeout(600)
def test_goal_sent_just_before_safety_stop_never_moves_after_it_returns_fence(e2e):
    """The crossing the heartbeat's motion fence closes: a chunk is published and safety/stop
    called at once, so the gate forwards a goal and stops within a few ms, and the goal can
    reach the executor after the stop's first cancel-all. 40 times: from the stamp of the
    stop's return on, no setpoint moves, and every goal of the stopped rollout ends CANCELED
    or FENCED (the fence in the heartbeat refused it or held it, without waiting for the
    second cancel-all)."""
    rng = np.random.default_rng(31)
    codes: dict[str, int] = {}
    crossed = resumed = rejected = 0
    R = ExecuteTrajectory.Result
    names = {R.CANCELED: 'CANCELED', R.FENCED: 'FENCED', R.PREEMPTED: 'PREEMPTED'}
    for rep in range(CROSSING_REPS):
        ramp = _moving_chunk(e2e, rep)
        before = len(e2e.status.snapshot())
        seq = next(e2e.seq)
        stamp = e2e.node.get_clock().now().nanoseconds * 1e-9
        times = 0.05 * np.arange(1, 21)
        traj = JointTrajectoryData(tuple(ARM), times, ramp.at(stamp + times), stamp=stamp)
        start = len(e2e.verdicts.snapshot())
        n = len(e2e.commanded.snapshot())
        e2e.chunk_pub.publish(chunk_to_msg(Chunk(seq, 'ab' * 32, stamp, traj)))
        e2e.commanded.wait_count(n + int(rng.integers(0, 2)), 10.0)   # 0-5 ms later
        t_call = time.monotonic()
        fut = e2e.stop_srv.call_async(Trigger.Request())
        wait_until(fut.done, 10.0, 'safety/stop answers')
        t_ret = time.monotonic()
        res = fut.result()
        assert res.success, f'rep {rep}: {res.message}'
        verdict = e2e.verdicts.wait_for(lambda v, s=seq: v.sequence == s, 10.0, start=start)
        t_wait = time.monotonic()
        wait_until(lambda t=t_wait: e2e.setpoints_after(t)[1:], 5.0, 'setpoints after the stop',
                   interval=0.01)
        after = e2e.setpoints_after(t_ret)
        bad = [t - t_ret for t, q in after if not np.array_equal(q, after[0][1])]
        assert not bad, f'rep {rep}: setpoints moved {bad} s after safety/stop returned'
        # Every goal of the rollout ended without running on: canceled, fenced, or replaced.
        goals = wait_until(lambda b=before: list(e2e.new_goals(b)), 10.0,
                           'the forwarded goal appears') if verdict.forwarded else []
        for gid in goals:
            result = goal_result(e2e.node, ExecuteTrajectory, 'execute_trajectory', gid)
            assert result.error_code in names, f'rep {rep}: goal ended {result.error_string}'
            codes[names[result.error_code]] = codes.get(names[result.error_code], 0) + 1
        crossed += int(verdict.forwarded)
        if not verdict.accepted:
            # Set-up, not the behaviour under test: on a loaded machine the chunk may fail a
            # check (its age) and latch a fault (on_reject hold), which would block the next
            # repetition's chunk: say why and clear it.
            print(f'\nrep {rep}: the chunk before the stop was rejected: {verdict.summary}')
            rejected += 1
            fut = e2e.reset.call_async(Trigger.Request())
            wait_until(fut.done, 10.0, 'safety/reset')
            assert fut.result().success, fut.result().message
        # Measured, not asserted (the stop's return is the bound): did a goal move the arm
        # again after the executor had held once since the call (the crossing's harm)?
        span = e2e.setpoints_after(t_call)
        held = next((k for k in range(1, len(span)) if np.array_equal(span[k][1],
                                                                      span[k - 1][1])), None)
        resumed += int(held is not None and any(not np.array_equal(q, span[held][1])
                                                for _, q in span[held:]))
        e2e.rearm()
    print(f'\ncrossing: {CROSSING_REPS} repetitions, {crossed} with the chunk forwarded just '
          f'before the stop ({rejected} rejected by a check); goal results {codes}; moved '
          f'again after a hold: {resumed}')
    assert crossed > CROSSING_REPS // 4      # the crossing was set up, not mostly refused
