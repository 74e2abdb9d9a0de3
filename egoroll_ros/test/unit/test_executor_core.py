"""Executor core: goal validation codes and the state machine, driven by explicit times."""

import numpy as np
import pytest

from egoroll_ros.core.executor import (
    HOLDING,
    STOPPING,
    ExecutorConfig,
    ExecutorCore,
    MeasuredState,
    resolve_position_limits,
    validate_goal,
)
from egoroll_ros.core.types import JointTrajectoryData
from egoroll_ros.errors import ConfigError, TrajectoryError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

J = ('a', 'b')
RATE = 100.0
DT = 1.0 / RATE


def _cfg(**kw):
    # The core alone: no gate heartbeat, no robot model, nothing fed between goals, so the
    # supervision the shipped defaults turn on is off here (each has its own test, which sets
    # it); the seam and stop these tests were written for (splice, hold).
    base = dict(joints=J, control_rate=RATE, state_timeout=0.1, max_velocity=(2.0, 2.0),
                max_acceleration=(40.0, 40.0), heartbeat_timeout=0.0, command_timeout=0.0,
                max_future_stamp=0.0, max_late_ticks=0, stall_timeout=0.0,
                require_position_limits=False, seam='splice', stop_behavior='hold',
                blend_time=0.0, max_blend_time=0.5)
    base.update(kw)
    return ExecutorConfig(**base)


def _traj(times, pos, names=J, stamp=0.0, vel=None):
    return JointTrajectoryData(joint_names=tuple(names), times=np.asarray(times, float),
                               positions=np.asarray(pos, float), stamp=stamp,
                               velocities=None if vel is None else np.asarray(vel, float))


STATE = MeasuredState(np.zeros(2), None, 100.0)


def _validate(traj, seq=1, last=None, measured=STATE, mono=100.0, ros=1000.0, cfg=None):
    return validate_goal(traj, seq, 'test', config=cfg or _cfg(), last_sequence=last,
                         ros_now=ros, mono_now=mono, measured=measured)


def _code(fn):
    with pytest.raises(TrajectoryError) as err:
        fn()
    return err.value.code


GOOD = _traj([0.5, 1.0], [[0.1, 0.1], [0.2, 0.2]])


@pytest.mark.parametrize('traj,code', [
    (_traj([], np.zeros((0, 2))), 'EMPTY_TRAJECTORY'),
    (_traj([0.5], [[0.0, 0.0]], names=('a', 'x')), 'INVALID_JOINTS'),
    (_traj([0.5], [[0.0]], names=('a',)), 'INVALID_JOINTS'),
    (_traj([0.5], [[0.0, 0.0, 0.0]], names=('a', 'b', 'a')), 'INVALID_JOINTS'),
    (_traj([0.5], [[0.0, np.nan]]), 'NON_FINITE'),
    (_traj([np.inf], [[0.0, 0.0]]), 'NON_FINITE'),
    (_traj([0.5], [[0.0, 0.0]], vel=[[0.0, np.inf]]), 'NON_FINITE'),
    (_traj([0.5, 0.5], [[0.0, 0.0], [0.1, 0.1]]), 'TIME_NOT_INCREASING'),
    (_traj([0.5, 0.4], [[0.0, 0.0], [0.1, 0.1]]), 'TIME_NOT_INCREASING'),
    (_traj([0.5], [[0.0, 0.0]], vel=[[0.0]]), 'SIZE_MISMATCH'),
    (_traj([0.1, 0.2], [[0.0, 0.0], [0.1, 0.1]], stamp=990.0), 'TRAJECTORY_IN_PAST'),
])
def test_invalid_goal_is_refused_with_its_code(traj, code):
    assert _code(lambda: _validate(traj)) == code


def test_goal_sequence_must_be_newer_than_the_last_accepted():
    assert _code(lambda: _validate(GOOD, seq=5, last=5)) == 'OLD_SEQUENCE'
    assert _code(lambda: _validate(GOOD, seq=4, last=5)) == 'OLD_SEQUENCE'
    assert _validate(GOOD, seq=6, last=5).sequence == 6


def test_goal_without_or_with_stale_joint_states_is_refused():
    assert _code(lambda: _validate(GOOD, measured=None)) == 'NO_STATE'
    old = MeasuredState(np.zeros(2), None, 99.0)
    assert _code(lambda: _validate(GOOD, measured=old)) == 'STALE_STATE'


def test_goal_times_count_from_the_stamp_and_columns_follow_the_config():
    traj = _traj([0.5, 1.0], [[1.0, 2.0], [3.0, 4.0]], names=('b', 'a'), stamp=999.8)
    g = _validate(traj)
    np.testing.assert_allclose(g.times, [100.3, 100.8])
    np.testing.assert_array_equal(g.positions, [[2.0, 1.0], [4.0, 3.0]])
    g0 = _validate(_traj([0.5], [[0.0, 0.0]]))
    np.testing.assert_allclose(g0.times, [100.5])  # zero stamp = on receipt


def test_bad_config_names_the_parameter():
    with pytest.raises(ConfigError, match='max_velocity'):
        _cfg(max_velocity=(1.0,))
    with pytest.raises(ConfigError, match='stop_behavior'):
        _cfg(stop_behavior='coast')
    with pytest.raises(ConfigError, match='path_tolerance'):
        _cfg(path_tolerance=(-1.0, 0.0))


class Rig:
    """A core with a perfectly tracking fake robot, stepped tick by tick."""

    def __init__(self, **kw):
        self.core = ExecutorCore(_cfg(**kw))
        self.t = 100.0
        self.q = np.zeros(2)
        self.track = True
        self.setpoints = []
        self.outcomes = []
        self.core.update_measured(self.q, None, self.t)

    def goal(self, times, pos, seq, key=None, heartbeat=0, **kw):
        g = validate_goal(_traj(times, pos, **kw), seq, 't', config=self.core.config,
                          last_sequence=self.core.last_sequence, ros_now=self.t,
                          mono_now=self.t, measured=self.core.measured)
        self.core.submit(g, key if key is not None else seq, heartbeat)
        return g

    def run(self, seconds, fresh=True):
        for _ in range(int(round(seconds / DT))):
            self.t += DT
            if fresh:
                self.core.update_measured(self.q, None, self.t)
            res = self.core.tick(self.t)
            self.outcomes += res.outcomes
            if res.setpoint is not None:
                self.setpoints.append(res.setpoint)
                if self.track:
                    self.q = res.setpoint.positions.copy()
        return self

    def codes(self):
        return [(o.key, o.code) for o in self.outcomes]


def test_goal_executes_to_success_and_reaches_the_last_point():
    rig = Rig(goal_tolerance=(0.01, 0.01))
    rig.goal([0.5, 1.0], [[0.2, 0.1], [0.4, 0.3]], seq=1)
    rig.run(1.2)
    assert rig.codes() == [(1, 'SUCCESSFUL')]
    assert rig.outcomes[0].points_executed == 2
    np.testing.assert_allclose(rig.setpoints[-1].positions, [0.4, 0.3])
    assert rig.core.state == HOLDING


def test_newer_goal_preempts_at_the_next_tick_without_a_step():
    rig = Rig()
    rig.goal([1.0, 2.0], [[0.5, 0.5], [1.0, 1.0]], seq=1)
    rig.run(0.6)
    n = len(rig.setpoints)
    rig.goal([0.5, 1.0], [[-0.2, 0.0], [0.0, 0.0]], seq=2)
    assert rig.codes() == []
    rig.run(DT)
    assert rig.codes() == [(1, 'PREEMPTED')]
    rig.run(1.5)
    assert rig.codes()[-1] == (2, 'SUCCESSFUL')
    pos = np.array([s.positions for s in rig.setpoints])
    assert np.max(np.abs(np.diff(pos, axis=0))) <= 2.0 * DT * (1 + 1e-6)
    # the first setpoint after the switch continues the old one
    assert np.max(np.abs(pos[n] - pos[n - 1])) <= 2.0 * DT


def test_cancel_switches_to_hold_before_it_returns():
    rig = Rig()
    rig.goal([1.0, 2.0], [[0.5, 0.5], [1.0, 1.0]], seq=1)
    rig.run(0.5)
    last = rig.setpoints[-1].positions.copy()
    assert rig.core.cancel(1, rig.t)
    assert [o.code for o in rig.core.take_outcomes()] == ['CANCELED']
    rig.run(0.3)
    for s in rig.setpoints[-30:]:
        np.testing.assert_array_equal(s.positions, last)


def test_cancel_of_the_pending_goal_stops_the_goal_it_replaced():
    rig = Rig()
    rig.goal([1.0, 2.0], [[0.5, 0.5], [1.0, 1.0]], seq=1)
    rig.run(0.5)
    rig.goal([1.0], [[0.1, 0.1]], seq=2)
    assert rig.core.cancel(2, rig.t)
    assert sorted(o.code for o in rig.core.take_outcomes()) == ['CANCELED', 'PREEMPTED']
    first = rig.run(DT).setpoints[-1].positions.copy()
    rig.run(0.2)
    np.testing.assert_array_equal(rig.setpoints[-1].positions, first)


def test_cancel_decelerates_within_acceleration_limits():
    rig = Rig(stop_behavior='decelerate', max_acceleration=(5.0, 5.0))
    rig.goal([1.0, 2.0], [[1.0, 1.0], [2.0, 2.0]], seq=1)
    rig.run(0.9)
    assert rig.core.cancel(1, rig.t)
    assert rig.core.state == STOPPING
    n = len(rig.setpoints)
    rig.run(1.0)
    vel = np.array([s.velocities for s in rig.setpoints[n:]])
    assert np.all(np.abs(np.diff(vel, axis=0)) <= 5.0 * DT + 1e-9)
    assert np.all(vel[-1] == 0.0) and rig.core.state == HOLDING


def test_path_violation_aborts_and_holds_at_the_measured_position():
    rig = Rig(path_tolerance=(0.05, 0.05))
    rig.goal([1.0], [[1.0, 1.0]], seq=1)
    rig.run(0.2)
    rig.track = False  # the robot freezes
    rig.run(0.8)
    assert rig.codes() == [(1, 'PATH_TOLERANCE_VIOLATED')]
    np.testing.assert_array_equal(rig.setpoints[-1].positions, rig.q)


def test_goal_tolerance_waits_goal_time_tolerance_then_aborts():
    rig = Rig(goal_tolerance=(0.01, 0.01), goal_time_tolerance=0.2)
    rig.goal([0.5], [[0.5, 0.5]], seq=1)
    rig.track = False
    rig.run(0.6)
    assert rig.codes() == []
    rig.run(0.2)
    assert rig.codes() == [(1, 'GOAL_TOLERANCE_VIOLATED')]


def test_stale_joint_states_abort_execution_and_hold():
    rig = Rig()
    rig.goal([1.0], [[1.0, 1.0]], seq=1)
    rig.run(0.2)
    rig.run(0.2, fresh=False)
    assert rig.codes() == [(1, 'STALE_STATE')]
    assert rig.core.state == HOLDING


def test_command_timeout_aborts_when_no_new_goal_arrives():
    rig = Rig(command_timeout=0.3)
    rig.goal([2.0], [[1.0, 1.0]], seq=1)
    rig.run(0.25)
    assert rig.codes() == []
    rig.run(0.1)
    assert rig.codes() == [(1, 'COMMAND_TIMEOUT')]


def test_new_execution_after_a_halt_starts_from_the_measured_position():
    rig = Rig()
    rig.goal([1.0], [[1.0, 1.0]], seq=1)
    rig.run(0.5)
    rig.core.cancel(1, rig.t)
    rig.q = np.array([0.05, -0.05])  # the robot sagged away from the hold setpoint
    rig.track = False
    rig.run(0.1)
    rig.goal([1.0], [[0.0, 0.0]], seq=2)
    rig.run(DT)
    np.testing.assert_allclose(rig.setpoints[-1].positions, rig.q, atol=2.0 * DT)


def test_a_splice_faster_than_max_velocity_is_refused_with_limit_violated():
    rig = Rig()
    rig.goal([0.1], [[1.0, 0.0]], seq=1)
    rig.run(DT)
    assert rig.codes() == [(1, 'LIMIT_VIOLATED')]
    assert 'joint a' in rig.outcomes[0].message


def test_past_points_are_dropped_and_counted_as_executed():
    rig = Rig()
    g = validate_goal(_traj([0.1, 0.2, 0.6], [[0.0, 0.0], [0.0, 0.0], [0.3, 0.3]],
                            stamp=rig.t - 0.3), 1, 't', config=rig.core.config,
                      last_sequence=None, ros_now=rig.t, mono_now=rig.t,
                      measured=rig.core.measured)
    rig.core.submit(g, 1)
    rig.run(DT)
    assert rig.core.motion.times[1] == pytest.approx(rig.t - DT + 0.3)
    rig.run(0.4)
    assert rig.codes() == [(1, 'SUCCESSFUL')]
    assert rig.outcomes[0].points_executed == 3


def test_idle_output_silent_publishes_nothing_when_holding():
    rig = Rig(idle_output='silent')
    rig.run(0.1)
    assert rig.setpoints == []
    rig.goal([0.3], [[0.1, 0.1]], seq=1)
    rig.run(0.5)
    n = len(rig.setpoints)
    rig.run(0.2)
    assert len(rig.setpoints) == n and n > 0


def test_halt_ends_every_goal_with_its_code():
    rig = Rig()
    rig.goal([1.0], [[0.5, 0.5]], seq=1)
    rig.run(0.1)
    rig.goal([1.0], [[0.5, 0.5]], seq=2)
    rig.core.halt(rig.t, 'SHUTDOWN', 'bye')
    assert sorted(rig.core.take_outcomes(), key=lambda o: o.key)[1].code == 'SHUTDOWN'


# ---- supervision: the interlock heartbeat and missed deadlines ---------------------------
def test_goal_without_an_interlock_heartbeat_is_refused_heartbeat_lost():
    rig = Rig(heartbeat_timeout=0.2)
    err = rig.core.supervision_error(rig.t)
    assert err is not None and err.code == 'HEARTBEAT_LOST' and 'no interlock' in str(err)
    rig.core.update_heartbeat(rig.t, True, 'ok')
    assert rig.core.supervision_error(rig.t + 0.1) is None
    assert rig.core.supervision_error(rig.t + 0.25).code == 'HEARTBEAT_LOST'


def test_heartbeat_silence_aborts_the_goal_and_holds_within_one_tick():
    rig = Rig(heartbeat_timeout=0.2)
    rig.core.update_heartbeat(rig.t, True, 'ok')
    rig.goal([2.0], [[1.0, 1.0]], seq=1)
    rig.run(0.19)
    assert rig.codes() == [] and rig.setpoints[-1].positions[0] > 0.0
    rig.run(0.03)       # heartbeat now older than 0.2 s
    assert rig.codes() == [(1, 'HEARTBEAT_LOST')]
    assert rig.core.state == HOLDING
    held = rig.setpoints[-1].positions.copy()
    n = len(rig.setpoints)
    rig.run(0.5)
    assert all(np.array_equal(s.positions, held) for s in rig.setpoints[n:])


@pytest.mark.parametrize('state', ['estop', 'stopped', 'fault', 'deadman_released'])
def test_a_new_goal_is_refused_interlock_while_the_gates_heartbeat_forbids_motion(state):
    rig = Rig(heartbeat_timeout=0.2)
    rig.core.update_heartbeat(rig.t, False, state)
    err = rig.core.admission_error(rig.t)
    assert err is not None and err.code == 'INTERLOCK' and state in str(err)
    rig.core.update_heartbeat(rig.t, True, 'ok')
    assert rig.core.admission_error(rig.t) is None
    # unsupervised (no gate): the heartbeat's word is not asked for
    assert Rig().core.admission_error(0.0) is None
    # a goal the fence covers is left to submit, which says FENCED (the precise reason)
    rig.core.update_heartbeat(rig.t, False, state, fence=5)
    assert rig.core.admission_error(rig.t, 5) is None
    assert _code(lambda: rig.goal([0.5], [[0.5, 0.5]], seq=5)) == 'FENCED'
    assert rig.core.admission_error(rig.t, 6).code == 'INTERLOCK'


def test_heartbeats_keep_a_goal_running_to_success():
    rig = Rig(heartbeat_timeout=0.2)
    for _ in range(60):
        rig.core.update_heartbeat(rig.t, True, 'ok')
        if rig.core.last_sequence is None:
            rig.goal([0.5], [[0.5, 0.5]], seq=1)
        rig.run(0.02)
    assert rig.codes() == [(1, 'SUCCESSFUL')]


def test_a_stalled_or_jumping_ros_clock_cannot_disable_the_heartbeat_watchdog():
    """The watchdog lives on the steady clock the core is given; the ROS time a goal is
    validated with moves the goal's points, never the watchdog."""
    rig = Rig(heartbeat_timeout=0.2)
    rig.core.update_heartbeat(rig.t, True, 'ok')
    g = validate_goal(_traj([0.5, 5.0], [[0.1, 0.1], [1.0, 1.0]], stamp=500.0), 1, 't',
                      config=rig.core.config, last_sequence=None, ros_now=500.0,
                      mono_now=rig.t, measured=rig.core.measured)   # ROS clock jumped back
    rig.core.submit(g, 1)
    rig.run(0.3)
    assert rig.codes() == [(1, 'HEARTBEAT_LOST')]


# ---- the motion fence (InterlockHeartbeat.fence_sequence) ---------------------------------
# (heartbeat_timeout 0 here: the fence acts whether or not the heartbeat's age is supervised)
def test_a_goal_at_or_below_the_fence_is_refused_fenced_one_above_runs():
    rig = Rig()
    rig.core.update_heartbeat(rig.t, False, 'stopped', fence=7, counter=1)
    for seq in (5, 7):
        assert _code(lambda s=seq: rig.goal([0.5], [[0.5, 0.5]], seq=s)) == 'FENCED'
    assert rig.core.last_sequence is None      # a refused goal is not the last accepted one
    rig.goal([0.5], [[0.5, 0.5]], seq=8, heartbeat=2)
    rig.core.update_heartbeat(rig.t, True, 'ok', fence=7, counter=2)
    rig.run(0.7)
    assert rig.codes() == [(8, 'SUCCESSFUL')]


def test_a_fence_over_the_running_goal_ends_it_fenced_and_holds_at_once():
    rig = Rig()
    rig.core.update_heartbeat(rig.t, True, 'ok')
    rig.goal([2.0], [[1.0, 1.0]], seq=3)
    rig.run(0.3)
    last = rig.setpoints[-1].positions.copy()
    assert last[0] > 0.0
    assert rig.core.update_heartbeat(rig.t, False, 'stopped', fence=3)   # not at the tick
    assert [(o.key, o.code) for o in rig.core.take_outcomes()] == [(3, 'FENCED')]
    assert rig.core.state == HOLDING
    n = len(rig.setpoints)
    rig.core.update_heartbeat(rig.t, False, 'stopped', fence=3)
    rig.run(0.5)
    assert all(np.array_equal(s.positions, last) for s in rig.setpoints[n:])


def test_a_fence_with_stop_behavior_decelerate_brakes_within_max_acceleration():
    rig = Rig(stop_behavior='decelerate')
    rig.core.update_heartbeat(rig.t, True, 'ok')
    rig.goal([2.0], [[1.0, 1.0]], seq=3)
    rig.run(0.5)
    rig.core.update_heartbeat(rig.t, False, 'stopped', fence=3)
    assert rig.core.state == STOPPING
    rig.run(0.5)
    assert rig.core.state == HOLDING


def test_a_fence_over_a_pending_goal_ends_it_before_it_moves():
    rig = Rig()
    rig.core.update_heartbeat(rig.t, True, 'ok')
    rig.goal([0.5], [[0.5, 0.5]], seq=4)          # submitted, not yet adopted by a tick
    rig.core.update_heartbeat(rig.t, False, 'stopped', fence=4)
    rig.outcomes += rig.core.take_outcomes()
    rig.run(0.3)
    assert rig.codes() == [(4, 'FENCED')]
    assert all(np.array_equal(s.positions, np.zeros(2)) for s in rig.setpoints)


def test_a_fence_below_the_running_goal_never_touches_it_a_crossing_heartbeat_is_harmless():
    """A heartbeat with the fence of an earlier stop arriving after a newer goal (the two
    topics are unordered) leaves the newer goal running: its counter says it was sent before
    the goal."""
    rig = Rig()
    rig.core.update_heartbeat(rig.t, False, 'stopped', fence=5, counter=1)
    rig.goal([0.5], [[0.5, 0.5]], seq=6, heartbeat=3)
    rig.run(0.1)
    assert not rig.core.update_heartbeat(rig.t, False, 'stopped', fence=5, counter=2)  # late
    assert not rig.core.update_heartbeat(rig.t, True, 'ok', fence=2, counter=3)
    rig.run(0.6)
    assert rig.codes() == [(6, 'SUCCESSFUL')] and rig.core.fence == 5


def test_the_fence_is_a_floor_a_lower_one_later_does_not_lower_it():
    """A restarted gate starts its fence at 0 again: the executor keeps the highest seen."""
    rig = Rig()
    rig.core.update_heartbeat(rig.t, False, 'stopped', fence=9)
    rig.core.update_heartbeat(rig.t, True, 'ok', fence=0)
    assert _code(lambda: rig.goal([0.5], [[0.5, 0.5]], seq=9)) == 'FENCED'
    assert rig.core.diagnostics(rig.t)['motion_fence'] == '9'


def test_a_fence_over_the_running_goal_lets_a_newer_pending_goal_take_over_from_rest():
    rig = Rig()
    rig.core.update_heartbeat(rig.t, True, 'ok')
    rig.goal([2.0], [[1.0, 1.0]], seq=3)
    rig.run(0.3)
    rig.goal([0.5], [[0.2, 0.2]], seq=4, heartbeat=2)   # forwarded after a re-arm
    rig.core.update_heartbeat(rig.t, False, 'stopped', fence=3, counter=1)
    rig.outcomes += rig.core.take_outcomes()
    rig.run(1.0)
    assert rig.codes() == [(3, 'FENCED'), (4, 'SUCCESSFUL')]


def test_consecutive_missed_deadlines_abort_deadline_missed_and_hold():
    rig = Rig(max_late_ticks=5)
    rig.goal([2.0], [[1.0, 1.0]], seq=1)
    rig.run(0.1)
    for _ in range(4):
        rig.core.note_deadline(rig.t, 1)
    rig.core.note_deadline(rig.t, 0)          # an on-time tick resets the count
    for _ in range(4):
        rig.core.note_deadline(rig.t, 1)
    assert rig.codes() == []
    rig.core.note_deadline(rig.t, 1)
    rig.run(0.01)
    assert rig.codes() == [(1, 'DEADLINE_MISSED')] and rig.core.state == HOLDING


def test_one_long_stall_counts_every_missed_deadline():
    rig = Rig(max_late_ticks=20)
    rig.goal([2.0], [[1.0, 1.0]], seq=1)
    rig.run(0.1)
    rig.core.note_deadline(rig.t, 25)
    rig.run(0.01)
    assert rig.codes() == [(1, 'DEADLINE_MISSED')]


def test_supervision_config_is_validated():
    with pytest.raises(ConfigError, match='heartbeat_timeout'):
        _cfg(heartbeat_timeout=-1.0)
    with pytest.raises(ConfigError, match='max_late_ticks'):
        _cfg(max_late_ticks=-1)


def test_setpoint_beyond_the_executors_own_position_limit_aborts_and_holds_unclamped():
    rig = Rig(position_lower=(-1.0, -1.0), position_upper=(0.5, 1.0))
    rig.goal([1.0], [[0.8, 0.2]], seq=1)     # joint a would pass 0.5
    rig.run(1.2)
    (key, code), = rig.codes()
    assert code == 'LIMIT_VIOLATED'
    msg = rig.outcomes[0].message
    assert 'joint a' in msg and '0.5' in msg, msg
    assert rig.core.state == HOLDING
    assert all(s.positions[0] <= 0.5 for s in rig.setpoints)
    held = rig.setpoints[-1].positions[0]
    assert 0.4 < held <= 0.5            # held where it was, not clamped onto the limit


def test_position_limits_need_one_value_per_joint_and_lower_below_upper():
    with pytest.raises(ConfigError, match='position_lower'):
        _cfg(position_lower=(0.0,), position_upper=(1.0, 1.0))
    with pytest.raises(ConfigError, match='lower must be below upper'):
        _cfg(position_lower=(1.0, 0.0), position_upper=(0.0, 1.0))


def test_a_splice_beyond_max_acceleration_is_refused_before_any_motion():
    rig = Rig(max_acceleration=(10.0, 10.0))
    rig.goal([0.5], [[0.0, 0.5]], seq=1)     # cubic from rest: 12 rad/s^2 on joint b
    rig.run(DT)
    assert rig.codes() == [(1, 'LIMIT_VIOLATED')]
    msg = rig.outcomes[0].message
    assert 'joint b' in msg and 'max_acceleration 10' in msg, msg
    assert all(np.array_equal(s.positions, np.zeros(2)) for s in rig.setpoints)


def test_every_setpoint_is_checked_against_max_acceleration_and_held_unclamped():
    """Linear interpolation turns a knot's velocity step into one period of acceleration, which
    the goal keeps (~0.075 rad/s in 0.01 s = 7.5 rad/s^2); ticks 3 ms apart across that knot
    would send it as ~25 rad/s^2: the setpoint is refused, the goal aborts LIMIT_VIOLATED
    naming the joint, the value and the limit, and the arm holds at the last setpoint sent."""
    rig = Rig(max_acceleration=(10.0, 10.0), interpolation='linear')
    rig.goal([0.1, 0.2], [[0.005, 0.0], [0.018, 0.0]], seq=1)
    rig.run(0.05)
    knot = rig.core.motion.times[1]
    ticks = [knot - 0.003, knot, knot + 0.003]
    assert rig.t < ticks[0]
    for t in ticks:
        rig.t = t
        rig.core.update_measured(rig.q, None, t)
        res = rig.core.tick(t)
        rig.outcomes += res.outcomes
        rig.setpoints.append(res.setpoint)
    assert rig.codes() == [(1, 'LIMIT_VIOLATED')]
    msg = rig.outcomes[0].message
    assert 'acceleration of joint a' in msg and 'max_acceleration 10' in msg, msg
    value = float(msg.split('joint a ')[1].split()[0])
    assert value > 20.0     # ~0.075 rad/s in 3 ms
    assert rig.core.state == HOLDING
    np.testing.assert_array_equal(rig.setpoints[-1].positions, rig.setpoints[-2].positions)
    rig.run(0.2)
    assert all(np.array_equal(s.positions, rig.setpoints[-1].positions)
               for s in rig.setpoints[-21:])


def test_motions_within_max_acceleration_never_abort_whatever_the_tick_jitter():
    """The check is a divided difference at the setpoints' own times: ticks late by up to two
    periods (as on a loaded machine) see the same motion, so a deceleration at exactly
    max_acceleration and jerk-limited blends pass."""
    rng = np.random.default_rng(7)
    for extra in ({'stop_behavior': 'decelerate'},
                  {'seam': 'blend', 'max_jerk': (400.0, 400.0), 'blend_time': 0.1}):
        rig = Rig(max_acceleration=(5.0, 5.0), **extra)
        blend = 'seam' in extra

        def chunk(slope, rig=rig):
            times = np.arange(1, 21) * 0.05
            return times, rig.q + np.outer(times, slope)

        if blend:
            rig.goal(*chunk([0.3, -0.2]), seq=1)
        else:
            rig.goal([2.0], [[1.0, -0.5]], seq=1)
        for i in range(300):
            rig.t += DT * rng.choice([0.3, 1.0, 1.0, 2.0, 2.7])
            rig.core.update_measured(rig.q, None, rig.t)
            if blend and i in (40, 80):
                rig.goal(*chunk([-0.3, 0.3] if i == 40 else [0.2, 0.1]), seq=i)
            if not blend and i == 100:
                assert rig.core.cancel(1, rig.t) and rig.core.state == STOPPING
            res = rig.core.tick(rig.t)
            rig.outcomes += res.outcomes
            if res.setpoint is not None:
                rig.q = res.setpoint.positions.copy()
        codes = [c for _, c in rig.codes()]
        assert codes == (['PREEMPTED', 'PREEMPTED', 'SUCCESSFUL'] if blend else ['CANCELED']), \
            rig.outcomes
        assert rig.core.state == HOLDING


URDF = {'a': (-1.0, 0.5), 'b': (-np.inf, np.inf), 'gripper': (0.0, 0.04)}


def test_position_limits_come_from_the_urdf_and_configured_ones_may_only_tighten():
    lo, hi = resolve_position_limits(_cfg(), URDF, 'arm.urdf')
    np.testing.assert_array_equal(lo, [-1.0, -np.inf])
    np.testing.assert_array_equal(hi, [0.5, np.inf])          # b is continuous
    lo, hi = resolve_position_limits(_cfg(position_lower=(-0.5, -3.0),
                                          position_upper=(0.4, 3.0)), URDF, 'arm.urdf')
    np.testing.assert_array_equal(lo, [-0.5, -3.0])
    np.testing.assert_array_equal(hi, [0.4, 3.0])
    with pytest.raises(ConfigError, match=r"'a' \[-0.5, 0.6\] is outside the URDF limits "
                       r'\[-1, 0.5\] of arm.urdf'):
        resolve_position_limits(_cfg(position_lower=(-0.5, -3.0), position_upper=(0.6, 3.0)),
                                URDF, 'arm.urdf')
    with pytest.raises(ConfigError, match="'b' is not a movable joint of arm.urdf"):
        resolve_position_limits(_cfg(), {'a': (-1.0, 1.0)}, 'arm.urdf')
    assert resolve_position_limits(_cfg(), None) is None


def test_without_position_limits_goals_are_refused_until_a_fitting_robot_model_arrives():
    rig = Rig(require_position_limits=True)
    err = rig.core.supervision_error(rig.t)
    assert err is not None and err.code == 'NO_ROBOT_MODEL' and 'robot_description' in str(err)
    rig.core.set_urdf_limits(URDF, 'robot_description', rig.t)
    assert rig.core.supervision_error(rig.t) is None
    rig.goal([1.0], [[0.8, 0.2]], seq=1)     # joint a would pass the URDF's 0.5
    rig.run(1.2)
    assert rig.codes() == [(1, 'LIMIT_VIOLATED')]
    assert 'joint a' in rig.outcomes[0].message and '0.5' in rig.outcomes[0].message
    assert 'robot_description' in rig.outcomes[0].message
    assert all(s.positions[0] <= 0.5 for s in rig.setpoints)
    # A new description that does not fit ends the running goal and refuses new ones.
    rig.goal([2.0], [[0.0, 0.5]], seq=2)
    rig.run(0.2)
    rig.core.set_urdf_limits({'a': (-1.0, 1.0)}, 'robot_description', rig.t)
    rig.run(DT)
    assert rig.codes()[-1] == (2, 'NO_ROBOT_MODEL')
    assert rig.core.supervision_error(rig.t).code == 'NO_ROBOT_MODEL'


def test_config_from_params_takes_each_field_from_the_parameter_of_its_name():
    import dataclasses

    from egoroll_ros.nodes.trajectory_server import PARAMS

    p = {spec.name: spec.default for spec in PARAMS}
    p.update(joints=['a', 'b'], max_velocity=[1.0, 2.0], max_acceleration=[5.0, 6.0],
             path_tolerance=[0.1, 0.2], command_timeout=0.25, stop_behavior='hold',
             max_jerk=[100.0, 100.0])
    cfg = ExecutorConfig.from_params(p)
    assert cfg.joints == ('a', 'b') and cfg.max_velocity == (1.0, 2.0)
    assert cfg.path_tolerance == (0.1, 0.2) and cfg.command_timeout == 0.25
    names = {spec.name for spec in PARAMS}
    assert {f.name for f in dataclasses.fields(ExecutorConfig)} <= names   # each has its param
    with pytest.raises(ConfigError, match="'max_velocity'"):
        ExecutorConfig.from_params({**p, 'max_velocity': [1.0]})


# ---- the executor holds on the gate's word (issue 23.3) ----------------------------------
@pytest.mark.parametrize('state', ['estop', 'stopped', 'fault', 'deadman_released'])
def test_a_heartbeat_sent_after_the_goal_that_forbids_motion_halts_it_at_once(state):
    """Independently of the cancel-all: the running goal ends INTERLOCK in the call that
    delivers the heartbeat, and the setpoints hold from the next tick on."""
    rig = Rig(heartbeat_timeout=0.2)
    rig.core.update_heartbeat(rig.t, True, 'ok', counter=10)
    rig.goal([2.0], [[1.0, 1.0]], seq=1, heartbeat=10)
    for _ in range(15):
        rig.core.update_heartbeat(rig.t, True, 'ok', counter=10)
        rig.run(0.02)
    moving = rig.setpoints[-1].positions.copy()
    assert moving[0] > 0.0
    assert rig.core.update_heartbeat(rig.t, False, state, counter=11)
    assert [(o.key, o.code) for o in rig.core.take_outcomes()] == [(1, 'INTERLOCK')]
    n = len(rig.setpoints)
    for _ in range(20):
        rig.core.update_heartbeat(rig.t, False, state, counter=12)
        rig.run(0.02)
    assert all(np.array_equal(s.positions, moving) for s in rig.setpoints[n:])


def test_a_goal_claiming_a_far_future_heartbeat_is_still_halted_by_the_next_ones():
    """A goal's heartbeat claim is bounded to HEARTBEAT_LEAD beyond the newest received: a
    goal that claims 10**18 (any node can write it) is halted by the heartbeats after that."""
    from egoroll_ros.core.executor import HEARTBEAT_LEAD

    rig = Rig(heartbeat_timeout=0.2)
    rig.core.update_heartbeat(rig.t, True, 'ok', counter=100)
    rig.goal([2.0], [[1.0, 1.0]], seq=1, heartbeat=10**18)
    rig.run(0.02)
    assert not rig.core.update_heartbeat(rig.t, False, 'estop', counter=100 + HEARTBEAT_LEAD)
    assert rig.core.update_heartbeat(rig.t, False, 'estop', counter=101 + HEARTBEAT_LEAD)
    rig.outcomes += rig.core.take_outcomes()
    assert rig.codes() == [(1, 'INTERLOCK')]


def test_a_restarted_gates_first_heartbeat_forbidding_motion_halts_every_goal():
    """A counter below the newest one is a new gate: its word covers every goal."""
    rig = Rig(heartbeat_timeout=0.2)
    rig.core.update_heartbeat(rig.t, True, 'ok', counter=500)
    rig.goal([2.0], [[1.0, 1.0]], seq=1, heartbeat=500)
    rig.run(0.1)
    assert rig.core.update_heartbeat(rig.t, False, 'stopped', counter=1)
    rig.outcomes += rig.core.take_outcomes()
    assert rig.codes() == [(1, 'INTERLOCK')]


# ---- a stalled control loop (issue 22.4) -------------------------------------------------
def test_a_stalled_control_loop_ends_the_goal_stalled_and_refuses_goals_until_the_gate_stops():
    rig = Rig(heartbeat_timeout=0.5, stall_timeout=1.0)
    rig.core.update_heartbeat(rig.t, True, 'ok', counter=1)
    rig.goal([5.0], [[2.0, 2.0]], seq=1, heartbeat=1)
    for _ in range(10):
        rig.core.update_heartbeat(rig.t, True, 'ok', counter=1)
        rig.run(0.02)
    before = rig.setpoints[-1].positions.copy()
    # the process was stopped for 1.5 s: the next tick learns it from its missed deadlines
    rig.t += 1.5
    rig.core.update_heartbeat(rig.t, True, 'ok', counter=2)     # queued while stalled
    rig.core.note_deadline(rig.t, int(1.5 / DT))
    rig.outcomes += rig.core.take_outcomes()
    assert rig.codes() == [(1, 'STALLED')]
    rig.run(0.1)
    # held exactly at the last setpoint sent before the gap (the driver held it meanwhile)
    assert all(np.array_equal(s.positions, before) for s in rig.setpoints[-10:])
    # a goal queued while stalled is refused until the gate says the rollout is stopped
    err = rig.core.admission_error(rig.t, 2)
    assert err is not None and err.code == 'STALLED'
    rig.core.update_heartbeat(rig.t, False, 'stopped', counter=3)
    assert rig.core.admission_error(rig.t, 2).code == 'INTERLOCK'
    rig.core.update_heartbeat(rig.t, True, 'ok', counter=4)      # a new preflight and start
    assert rig.core.admission_error(rig.t, 2) is None


def test_a_gap_shorter_than_the_stall_timeout_is_only_late_ticks():
    rig = Rig(heartbeat_timeout=0.0, stall_timeout=1.0)
    rig.goal([5.0], [[2.0, 2.0]], seq=1)
    rig.run(0.1)
    rig.t += 0.5
    rig.core.note_deadline(rig.t, int(0.5 / DT))
    rig.run(0.1)
    assert rig.codes() == [] and rig.core.late_ticks >= int(0.5 / DT)
