"""Trajectory sampling: interpolation kinds, velocity estimation, splicing, stop motions."""

import numpy as np
import pytest

from egoroll_ros.core.trajectory import (
    DecelerationStop,
    PiecewiseTrajectory,
    estimate_velocities,
    hold,
    max_speed_ratio,
    resolve_kind,
    splice,
)
from egoroll_ros.errors import TrajectoryError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun


def _traj(kind, times, pos, vel=None, acc=None):
    pos = np.asarray(pos, dtype=float).reshape(len(times), -1)
    vel = estimate_velocities(np.asarray(times, float), pos) if vel is None else np.asarray(vel,
                                                                                            float)
    acc = np.zeros_like(pos) if acc is None else np.asarray(acc, float)
    return PiecewiseTrajectory(np.asarray(times, float), pos, vel.reshape(pos.shape),
                               acc.reshape(pos.shape), kind)


@pytest.mark.parametrize('kind', ['linear', 'cubic', 'quintic'])
def test_every_kind_passes_exactly_through_the_knots(kind):
    times = [0.0, 0.3, 0.7, 1.0]
    pos = [[0.0, 1.0], [0.5, 0.5], [0.2, 0.0], [1.0, -1.0]]
    tr = _traj(kind, times, pos)
    for t, q in zip(times, pos, strict=True):
        np.testing.assert_allclose(tr.sample(t)[0], q, atol=1e-12)


def test_linear_sampling_is_a_straight_line_with_constant_velocity():
    tr = _traj('linear', [0.0, 2.0], [[0.0], [4.0]])
    q, v, a = tr.sample(0.5)
    assert q[0] == pytest.approx(1.0) and v[0] == pytest.approx(2.0) and a[0] == 0.0


def test_cubic_matches_given_boundary_velocities():
    tr = _traj('cubic', [0.0, 1.0], [[0.0], [1.0]], vel=[[0.5], [2.0]])
    assert tr.sample(0.0)[1][0] == pytest.approx(0.5)
    assert tr.sample(1.0 - 1e-9)[1][0] == pytest.approx(2.0, abs=1e-6)


def test_quintic_matches_given_boundary_accelerations():
    tr = _traj('quintic', [0.0, 1.0], [[0.0], [1.0]], vel=[[0.0], [0.0]], acc=[[1.0], [-2.0]])
    assert tr.sample(0.0)[2][0] == pytest.approx(1.0)
    assert tr.sample(1.0 - 1e-9)[2][0] == pytest.approx(-2.0, abs=1e-5)


def test_estimated_velocities_are_zero_at_extrema_and_at_the_end():
    times = np.array([0.0, 1.0, 2.0, 3.0])
    pos = np.array([[0.0], [1.0], [0.0], [1.0]])
    v = estimate_velocities(times, pos)
    assert v[1, 0] == 0.0 and v[2, 0] == 0.0 and v[3, 0] == 0.0
    v = estimate_velocities(times, np.array([[0.0], [1.0], [3.0], [4.0]]),
                            start_velocity=np.array([0.7]))
    assert v[0, 0] == 0.7 and v[1, 0] == pytest.approx(1.5) and v[-1, 0] == 0.0


def test_sampling_outside_the_knots_holds_the_ends_at_rest():
    tr = _traj('cubic', [1.0, 2.0], [[0.0], [1.0]])
    q, v, _ = tr.sample(0.0)
    assert q[0] == 0.0 and v[0] == 0.0
    q, v, _ = tr.sample(5.0)
    assert q[0] == 1.0 and v[0] == 0.0


def test_sample_many_agrees_with_sample():
    tr = _traj('quintic', [0.0, 0.4, 1.0], [[0.0, 1.0], [0.3, 0.2], [1.0, -0.5]],
               acc=np.ones((3, 2)))
    ts = np.linspace(-0.1, 1.2, 57)
    pos, vel = tr.sample_many(ts)
    for i, t in enumerate(ts):
        q, v, _ = tr.sample(t)
        np.testing.assert_allclose(pos[i], q, atol=1e-12)
        np.testing.assert_allclose(vel[i], v, atol=1e-12)


def test_splice_starts_at_the_current_state_and_drops_past_points():
    times = np.array([0.5, 1.0, 1.5, 2.0])
    pos = np.array([[0.0], [1.0], [2.0], [3.0]])
    q0, v0 = np.array([0.9]), np.array([0.4])
    tr, first = splice(1.2, q0, v0, np.zeros(1), times, pos, None, None, 'cubic')
    assert first == 2
    q, v, _ = tr.sample(1.2)
    assert q[0] == pytest.approx(0.9) and v[0] == pytest.approx(0.4)
    assert tr.sample(1.5)[0][0] == pytest.approx(2.0)
    np.testing.assert_array_equal(tr.times, [1.2, 1.5, 2.0])


def test_splice_with_a_blend_time_drops_points_due_too_soon_to_reach_smoothly():
    times = np.array([1.25, 1.5, 2.0])
    pos = np.array([[1.0], [2.0], [3.0]])
    q0, v0 = np.array([0.9]), np.zeros(1)
    # Without a lead, 1.25 is joined 0.05 s after the splice: 0.1 rad in 50 ms.
    tr, first = splice(1.2, q0, v0, np.zeros(1), times, pos, None, None, 'cubic')
    assert first == 0
    tr, first = splice(1.2, q0, v0, np.zeros(1), times, pos, None, None, 'cubic', lead=0.1)
    assert first == 1
    np.testing.assert_array_equal(tr.times, [1.2, 1.5, 2.0])
    with pytest.raises(TrajectoryError) as err:
        splice(1.2, q0, v0, np.zeros(1), times, pos, None, None, 'cubic', lead=1.0)
    assert err.value.code == 'TRAJECTORY_IN_PAST'


def test_splice_of_a_trajectory_entirely_in_the_past_is_refused():
    with pytest.raises(TrajectoryError) as err:
        splice(3.0, np.zeros(1), np.zeros(1), np.zeros(1), np.array([1.0, 2.0]),
               np.zeros((2, 1)), None, None)
    assert err.value.code == 'TRAJECTORY_IN_PAST'


def test_auto_interpolation_is_quintic_only_with_accelerations():
    assert resolve_kind('auto', True) == 'quintic'
    assert resolve_kind('auto', False) == 'cubic'
    assert resolve_kind('linear', True) == 'linear'


def test_knot_times_must_strictly_increase():
    with pytest.raises(TrajectoryError) as err:
        _traj('cubic', [0.0, 1.0, 1.0], [[0.0], [1.0], [2.0]], vel=np.zeros((3, 1)))
    assert err.value.code == 'TIME_NOT_INCREASING'


def test_deceleration_stop_brakes_at_max_acceleration_and_stays_at_rest():
    stop = DecelerationStop(10.0, np.array([0.0, 1.0]), np.array([2.0, -1.0]),
                            np.array([4.0, 4.0]))
    assert stop.end_time == pytest.approx(10.5)
    q, v, a = stop.sample(10.25)
    np.testing.assert_allclose(v, [1.0, 0.0])
    q, v, a = stop.sample(11.0)
    np.testing.assert_allclose(q, [0.5, 1.0 - 0.125])
    np.testing.assert_allclose(v, [0.0, 0.0])
    ts, pos, vel, _ = stop.knots(5)
    assert ts[0] == 10.0 and ts[-1] == pytest.approx(10.5)


def test_hold_stays_put():
    h = hold(1.0, np.array([0.3, 0.4]))
    np.testing.assert_array_equal(h.sample(7.0)[0], [0.3, 0.4])
    np.testing.assert_array_equal(h.sample(7.0)[1], [0.0, 0.0])


def test_max_speed_ratio_finds_the_fastest_joint():
    tr = _traj('linear', [0.0, 1.0], [[0.0, 0.0], [1.0, 3.0]])
    ratio, j, _ = max_speed_ratio(tr, np.array([2.0, 2.0]), 0.0, 0.01)
    assert j == 1 and ratio == pytest.approx(1.5)
