"""Executor core with seam 'blend': continuous seams within the limits, refusals that keep the
running goal, jerk-limited stops."""

import numpy as np
import pytest
from test_executor_core import DT, Rig, _cfg

from egoroll_ros.core.executor import EXECUTING, HOLDING, STOPPING
from egoroll_ros.errors import ConfigError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

VMAX, AMAX, JMAX = 2.0, 10.0, 400.0
BLEND = dict(seam='blend', max_jerk=(JMAX, JMAX), blend_time=0.1, max_blend_time=0.4,
             max_acceleration=(AMAX, AMAX))


def _diffs(rig, start=0):
    pos = np.array([s.positions for s in rig.setpoints[start:]])
    vel = np.diff(pos, axis=0) / DT
    acc = np.diff(vel, axis=0) / DT
    jerk = np.diff(acc, axis=0) / DT
    return vel, acc, jerk


def _assert_within_limits(rig, start=0):
    vel, acc, jerk = _diffs(rig, start)
    assert np.abs(vel).max() <= VMAX * (1 + 1e-6)
    assert np.abs(acc).max() <= AMAX * (1 + 1e-3)
    assert np.abs(jerk).max() <= JMAX * (1 + 1e-3)


def _chunk(t_now, q_from, slope, seq_time=0.05, n=20):
    times = (np.arange(n) + 1) * seq_time
    pos = np.asarray(q_from) + np.outer(times, slope)
    return times, pos


def test_preemptions_join_without_velocity_or_acceleration_steps():
    rig = Rig(**BLEND)
    rng = np.random.default_rng(3)
    times, pos = _chunk(rig.t, rig.q, [0.3, -0.2])
    rig.goal(times, pos, seq=1)
    rig.run(0.1)
    for seq in range(2, 30):                       # a new chunk every 100 ms, ~15% off course
        slope = rng.uniform(-0.4, 0.4, 2)
        times, pos = _chunk(rig.t, rig.q + rng.uniform(-0.01, 0.01, 2), slope)
        rig.goal(times, pos, seq=seq)
        rig.run(0.1)
    assert [c for _, c in rig.codes()] == ['PREEMPTED'] * 28
    assert rig.core.refused == 0
    _assert_within_limits(rig)


def test_a_chunk_that_cannot_be_joined_is_refused_and_the_running_one_continues():
    rig = Rig(**BLEND)
    times, pos = _chunk(rig.t, rig.q, [0.8, 0.0], n=40)
    rig.goal(times, pos, seq=1)
    rig.run(0.6)
    assert rig.core.state == EXECUTING
    before = len(rig.setpoints)
    # A chunk going back the other way at 0.8 rad/s: reversing onto it within 0.4 s needs more than
    # 10 rad/s^2.
    times2, pos2 = _chunk(rig.t, rig.q, [-0.8, 0.0])
    rig.goal(times2, pos2, seq=2)
    rig.run(DT)
    assert rig.codes() == [(2, 'LIMIT_VIOLATED')]
    assert 'refused at the seam, sequence 1 continues' in rig.outcomes[0].message
    assert rig.core.active_sequence == 1 and rig.core.refused == 1
    rig.run(0.5)
    # still following chunk 1 (moving forward), never clamped onto chunk 2
    vel = np.diff([s.positions[0] for s in rig.setpoints[before - 1:]]) / DT
    assert np.all(vel > 0.5)
    _assert_within_limits(rig)


def test_running_out_of_chunk_decelerates_to_a_hold_within_the_limits():
    rig = Rig(**BLEND, goal_tolerance=(0.05, 0.05))
    times, pos = _chunk(rig.t, rig.q, [0.5, 0.25], n=10)
    rig.goal(times, pos, seq=1)
    rig.run(1.5)
    assert rig.codes() == [(1, 'SUCCESSFUL')]
    assert rig.core.state == HOLDING
    _assert_within_limits(rig)
    assert np.all(rig.setpoints[-1].velocities == 0.0)


def test_cancel_with_decelerate_is_jerk_limited():
    rig = Rig(**BLEND, stop_behavior='decelerate')
    times, pos = _chunk(rig.t, rig.q, [1.0, -1.0], n=40)
    rig.goal(times, pos, seq=1)
    rig.run(0.6)
    assert rig.core.cancel(1, rig.t)
    assert rig.core.state == STOPPING
    rig.run(0.6)
    assert rig.core.state == HOLDING
    _assert_within_limits(rig)


def test_from_rest_the_first_chunk_starts_at_the_measured_position():
    rig = Rig(**BLEND)
    rig.q = np.array([0.02, -0.01])
    rig.core.update_measured(rig.q, None, rig.t)
    times, pos = _chunk(rig.t, [0.0, 0.0], [0.2, 0.2])
    rig.goal(times, pos, seq=1)
    rig.run(DT)
    np.testing.assert_allclose(rig.setpoints[0].positions, [0.02, -0.01], atol=1e-3)


@pytest.mark.parametrize('kw,name', [
    (dict(seam='blend', blend_time=0.1), 'max_jerk'),
    (dict(seam='blend', max_jerk=(1.0,), blend_time=0.1), 'max_jerk'),
    (dict(seam='blend', max_jerk=(1.0, -1.0), blend_time=0.1), 'max_jerk'),
    (dict(seam='blend', max_jerk=(1.0, 1.0)), 'blend_time'),
    (dict(seam='blend', max_jerk=(1.0, 1.0), blend_time=0.3, max_blend_time=0.2),
     'max_blend_time'),
    (dict(seam='smooth'), 'seam'),
    (dict(BLEND, blend_join='gentle'), 'blend_join'),
])
def test_bad_blend_config_names_the_parameter(kw, name):
    with pytest.raises(ConfigError, match=name):
        _cfg(**kw)


class LaggingRig(Rig):
    """A robot that follows each setpoint with a first-order lag (as sim_robot does), so the
    measured positions trail the commanded ones while moving and converge at rest."""

    def run(self, seconds, fresh=True):
        for _ in range(int(round(seconds / DT))):
            self.t += DT
            self.core.update_measured(self.q, None, self.t)
            res = self.core.tick(self.t)
            self.outcomes += res.outcomes
            if res.setpoint is not None:
                self.setpoints.append(res.setpoint)
                self.q = self.q + 0.1 * (res.setpoint.positions - self.q)
        return self


@pytest.mark.parametrize('gap', [0.0, 0.05, 0.3])
def test_a_chunk_after_the_last_one_ran_out_joins_the_commanded_hold_without_a_step(gap):
    # The chunk runs out (inference slower than the chunk): the executor decelerates to a hold
    # and the goal ends SUCCESSFUL while the lagging arm is still within goal_tolerance of it.
    # The next chunk continues the command stream from the hold (or the deceleration still
    # running), not from the lagging measured position: no position step.
    rig = LaggingRig(**BLEND, goal_tolerance=(0.05, 0.05))
    times, pos = _chunk(rig.t, rig.q, [0.5, -0.3], n=10)
    rig.goal(times, pos, seq=1)
    rig.run(0.5)
    wait = 0
    while rig.codes() != [(1, 'SUCCESSFUL')] and wait < 200:
        rig.run(DT)
        wait += 1
    assert rig.codes() == [(1, 'SUCCESSFUL')] and rig.core.state == HOLDING
    rig.run(gap)
    assert np.any(np.abs(rig.q - rig.setpoints[-1].positions) > 1e-6)  # the arm still lags
    times2, pos2 = _chunk(rig.t, rig.setpoints[-1].positions, [-0.2, 0.4], n=10)
    rig.goal(times2, pos2, seq=2)
    rig.run(0.3)
    assert rig.core.active_sequence == 2 and rig.core.state == EXECUTING
    _assert_within_limits(rig)


def test_a_refused_chunk_after_the_last_one_ran_out_leaves_the_hold_unchanged():
    rig = Rig(**BLEND, goal_tolerance=(0.05, 0.05))
    times, pos = _chunk(rig.t, rig.q, [0.5, -0.3], n=10)
    rig.goal(times, pos, seq=1)
    rig.run(1.0)
    assert rig.codes() == [(1, 'SUCCESSFUL')]
    hold = rig.setpoints[-1].positions.copy()
    # 1 rad away in 150 ms: no join within the limits.
    rig.goal(np.array([0.15, 0.2]), hold + [[1.0, 0.0], [1.0, 0.0]], seq=2)
    rig.run(0.2)
    assert rig.codes()[-1] == (2, 'LIMIT_VIOLATED')
    assert rig.core.state == HOLDING
    np.testing.assert_array_equal(rig.setpoints[-1].positions, hold)
    _assert_within_limits(rig)


def _cancel(rig, when):
    assert rig.core.cancel(1, when)


def _halt(rig, when):
    rig.core.halt(when, 'SHUTDOWN', 'the server is shutting down')


@pytest.mark.parametrize('late', [0.25, 0.5, 0.9])
@pytest.mark.parametrize('stop', [_cancel, _halt], ids=['cancel', 'halt'])
def test_a_stop_between_ticks_continues_when_the_next_tick_runs_late(stop, late):
    # The cancel (or a halt: the server's shutdown, supervision from a callback) arrives after
    # the next tick's deadline has passed but before that tick runs (the tick waited for the
    # lock): the stop continues the command stream from the last setpoint, so the late tick's
    # setpoint at its deadline is no position shifted by the lateness (that was 15 rad/s^2
    # and 1400 rad/s^3 at 500 Hz).
    rig = Rig(**BLEND, stop_behavior='decelerate')
    times, pos = _chunk(rig.t, rig.q, [0.8, -0.8], n=40)
    rig.goal(times, pos, seq=1)
    rig.run(0.6)
    start = len(rig.setpoints) - 3
    stop(rig, rig.t + (1.0 + late) * DT)
    assert rig.core.state == STOPPING
    rig.run(0.6)
    assert rig.core.state == HOLDING
    _assert_within_limits(rig, start)


@pytest.mark.parametrize('seed', range(4))
def test_a_goal_pending_when_the_running_one_is_canceled_continues_the_decelerating_stop(seed):
    # A cancel-all reaches the running goal a moment before the newer pending one; the tick
    # between them adopted the pending goal from the measured positions, a jump of the arm's
    # tracking lag (here 3 mrad: ~750 rad/s^2 at 500 Hz). It now joins from the stop motion.
    rng = np.random.default_rng(seed)
    rig = Rig(**BLEND, stop_behavior='decelerate')
    times, pos = _chunk(rig.t, rig.q, rng.uniform(-0.5, 0.5, 2), n=40)
    rig.goal(times, pos, seq=1)
    rig.run(0.3)
    start = len(rig.setpoints) - 3
    times, pos = _chunk(rig.t, rig.q + rng.uniform(-0.005, 0.005, 2),
                        rng.uniform(-0.5, 0.5, 2), n=40)
    rig.goal(times, pos, seq=2)                  # pending: joins at the next tick
    lagging = rig.setpoints[-1].positions - 0.003
    rig.core.update_measured(lagging, None, rig.t)
    assert rig.core.cancel(1, rig.t + 0.5 * DT)
    rig.run(DT, fresh=False)
    assert rig.core.active_sequence == 2 and rig.core.state == EXECUTING
    rig.run(0.5)
    _assert_within_limits(rig, start)


def test_a_goal_after_a_cancel_still_starts_from_the_measured_positions():
    rig = Rig(**BLEND, stop_behavior='decelerate')
    times, pos = _chunk(rig.t, rig.q, [0.5, -0.5], n=40)
    rig.goal(times, pos, seq=1)
    rig.run(0.3)
    assert rig.core.cancel(1, rig.t)
    rig.run(0.2, fresh=False)
    measured = rig.setpoints[-1].positions - 0.003
    rig.core.update_measured(measured, None, rig.t)
    times, pos = _chunk(rig.t, measured, [0.5, -0.5], n=40)
    rig.goal(times, pos, seq=2)
    rig.run(DT, fresh=False)
    assert rig.core.active_sequence == 2
    np.testing.assert_allclose(rig.setpoints[-1].positions, measured, atol=VMAX * DT)
