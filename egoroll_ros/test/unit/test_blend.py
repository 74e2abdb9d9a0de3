"""Seam blending (core/blend.py): the jerk-limited join, its limits and its refusals."""

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from egoroll_ros.core.blend import (
    MotionLimits,
    RuckigStop,
    _peaks,
    chunk_path,
    join_chunk,
    knot_derivatives,
)
from egoroll_ros.errors import TrajectoryError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

VMAX, AMAX, JMAX = 2.0, 8.0, 400.0
LIM = MotionLimits(np.full(2, VMAX), np.full(2, AMAX), np.full(2, JMAX))
DT = 0.002          # sampled like a 500 Hz executor
SLACK = 1e-6


def _sampled(motion, t0, t1, dt=DT):
    ts = np.arange(t0, t1, dt)
    q = np.array([motion.sample(t)[0] for t in ts])
    v = np.diff(q, axis=0) / dt
    a = np.diff(v, axis=0) / dt
    j = np.diff(a, axis=0) / dt
    return ts, q, v, a, j


def _within(v, a, j, lim=LIM):
    # Finite differences of exact samples are bounded by the continuous maxima.
    assert np.all(np.abs(v) <= lim.velocity * (1 + 1e-3) + 1e-9), np.abs(v).max(0)
    assert np.all(np.abs(a) <= lim.acceleration * (1 + 1e-3) + 1e-6), np.abs(a).max(0)
    assert np.all(np.abs(j) <= lim.jerk * (1 + 1e-3) + 1e-3), np.abs(j).max(0)


def _chunk(t_first, amp, freq, phase, n=20, step=0.05):
    times = t_first + np.arange(n) * step
    pos = np.stack([amp * np.sin(freq * times + phase), 0.5 * amp * np.cos(freq * times)],
                   axis=1)
    return times, pos


@settings(max_examples=60, deadline=None)
@given(v0=st.lists(st.floats(-0.6, 0.6), min_size=2, max_size=2),
       a0=st.lists(st.floats(-3.0, 3.0), min_size=2, max_size=2),
       offset=st.lists(st.floats(-0.03, 0.03), min_size=2, max_size=2),
       amp=st.floats(0.0, 0.15), freq=st.floats(0.5, 3.0), phase=st.floats(-3.0, 3.0))
def test_every_sampled_setpoint_keeps_the_limits_and_the_join_ends_on_the_chunk(
        v0, a0, offset, amp, freq, phase):
    times, pos = _chunk(0.02, amp, freq, phase)
    t0 = 0.08
    path = chunk_path(times, pos)
    q0 = path.sample(t0)[0] + np.array(offset)
    try:
        m = join_chunk(t0, q0, np.array(v0), np.array(a0), times, pos, None, None, LIM,
                       0.1, 0.4, DT / 4)
    except TrajectoryError as exc:
        # Refused, never clamped: only for a reason it names.
        assert exc.code == 'LIMIT_VIOLATED' and 'cannot join' in str(exc)
        return
    assert 0.1 - 1e-9 <= m.t_join - t0 <= 0.4 + 1e-9
    # continuous with the running motion at the seam
    q, v, a = m.sample(t0)
    np.testing.assert_allclose(q, q0, atol=1e-9)
    np.testing.assert_allclose(v, v0, atol=1e-9)
    np.testing.assert_allclose(a, a0, atol=1e-6)
    # ends on the chunk: from t_join on the motion IS the chunk's path, through its points
    for t in np.linspace(m.t_join, times[-1] - 1e-6, 25):
        np.testing.assert_allclose(m.sample(t)[0], path.sample(t)[0], atol=1e-7)
    kept = times >= m.t_join
    for t, p in zip(times[kept], pos[kept], strict=True):
        np.testing.assert_allclose(m.sample(t)[0], p, atol=1e-7)
    # Prepend the running motion's own history (constant acceleration before t0) so the
    # differences across the seam itself are measured as well.
    ts = np.arange(t0 - 3 * DT, m.end_time + 0.05, DT)
    q = np.array([m.sample(t)[0] if t >= t0 else
                  q0 + np.array(v0) * (t - t0) + 0.5 * np.array(a0) * (t - t0) ** 2
                  for t in ts])
    vel = np.diff(q, axis=0) / DT
    acc = np.diff(vel, axis=0) / DT
    jerk = np.diff(acc, axis=0) / DT
    _within(vel, acc, jerk)
    # and it ends at rest after the chunk
    qe, ve, ae = m.sample(m.end_time + 1.0)
    assert np.all(ve == 0.0) and np.all(ae == 0.0)


def test_a_join_beyond_the_limits_is_refused_not_clamped():
    times, pos = _chunk(0.0, 0.05, 1.0, 0.0)
    # moving fast the other way: cannot reverse onto the chunk within 0.2 s at 8 rad/s^2
    with pytest.raises(TrajectoryError) as err:
        join_chunk(0.05, np.array([0.5, 0.0]), np.array([-1.9, 0.0]), np.zeros(2), times, pos,
                   None, None, LIM, 0.1, 0.2, DT / 4, ('elbow', 'wrist'))
    assert err.value.code == 'LIMIT_VIOLATED'
    assert 'elbow' in str(err.value) or 'wrist' in str(err.value) or 'needs' in str(err.value)


def test_a_chunk_whose_own_path_is_too_jerky_is_refused():
    times = np.arange(1, 21) * 0.05
    pos = np.zeros((20, 2))
    pos[10:, 0] = 0.05            # a 5 cm step between two points 50 ms apart
    with pytest.raises(TrajectoryError) as err:
        join_chunk(0.0, pos[0], np.zeros(2), np.zeros(2), times, pos, None, None, LIM,
                   0.1, 0.4, DT / 4, ('elbow', 'wrist'))
    assert err.value.code == 'LIMIT_VIOLATED'
    assert 'elbow' in str(err.value)


def test_a_chunk_entirely_before_the_earliest_join_is_in_the_past():
    times, pos = _chunk(0.0, 0.05, 1.0, 0.0, n=3)
    with pytest.raises(TrajectoryError) as err:
        join_chunk(1.0, pos[-1], np.zeros(2), np.zeros(2), times, pos, None, None, LIM, 0.1,
                   0.4, DT / 4)
    assert err.value.code == 'TRAJECTORY_IN_PAST'


def test_the_join_takes_the_shortest_feasible_time_within_the_bounds():
    times, pos = _chunk(0.0, 0.1, 2.0, 0.0)
    path = chunk_path(times, pos)
    t0 = 0.1
    q, v, a = path.sample(t0)
    m = join_chunk(t0, q, v, a, times, pos, None, None, LIM, 0.1, 0.4, DT / 4)
    assert m.t_join == pytest.approx(t0 + 0.1)    # already on the chunk: the shortest join
    far = join_chunk(t0, q + 0.05, v, a, times, pos, None, None, LIM, 0.1, 0.4, DT / 4)
    assert far.t_join > m.t_join                    # 5 cm off needs longer within the limits


# Steady-clock times the executor runs at: just booted, up 12 h, 11.6 days, 100 days.
CLOCKS = [0.0, 43_559.0, 1e6, 8.64e6]


@pytest.mark.parametrize('clock', CLOCKS)
def test_running_out_of_chunk_decelerates_to_rest_within_the_limits(clock):
    times = np.arange(1, 11) * 0.05
    pos = np.stack([0.3 * times, -0.2 * times], axis=1)        # moving at the last point
    times = times + clock
    m = join_chunk(clock, pos[0] - 0.015, np.array([0.3, -0.2]), np.zeros(2), times, pos, None,
                   None, LIM, 0.1, 0.4, DT / 4)
    assert m.end_time > times[-1]
    # The stop starts from the path's own state at its last point: not from rest (before,
    # at a steady clock of 43,559 s ``end - 1e-12`` rounded to the end, where the path is
    # already at rest, so the velocity stepped from 0.3 rad/s to 0 at the chunk's end).
    end = m.path.derivatives_many(np.array([times[-1]]))
    for got, want in zip(m.sample(times[-1]), end[:3], strict=False):
        np.testing.assert_allclose(got, want[0], atol=1e-9)
    assert abs(m.sample(times[-1])[1][0] - 0.3) < 0.05
    _, q, v, a, j = _sampled(m, times[-1] - 0.1, m.end_time + 0.05)
    _within(v, a, j)
    assert np.all(np.abs(v[-5:]) < 1e-9)
    # it stops close past the chunk's end, not dead at it and not far beyond
    assert np.all(np.abs(q[-1] - pos[-1]) < 0.02)


def test_ruckig_stop_is_jerk_limited():
    stop = RuckigStop(1.0, np.zeros(2), np.array([1.5, -1.0]), np.array([2.0, 0.0]), LIM)
    _, _, v, a, j = _sampled(stop, 1.0 - 3 * DT, stop.end_time + 0.05)
    _within(v[3:], a[3:], j[3:])
    assert stop.sample(stop.end_time + 1)[1].tolist() == [0.0, 0.0]


def test_the_chunk_path_is_the_c2_spline_through_every_point():
    times = np.array([0.0, 0.05, 0.12, 0.2, 0.25])
    pos = np.array([[0.0], [0.01], [0.015], [0.012], [0.02]])
    path = chunk_path(times, pos)
    for t, p in zip(times, pos, strict=True):
        np.testing.assert_allclose(path.sample(t - 1e-12 if t == times[-1] else t)[0], p,
                                   atol=1e-9)
    # acceleration continuous at every interior knot, zero at both ends
    for t in times[1:-1]:
        left = path.sample(t - 1e-9)[2]
        right = path.sample(t + 1e-9)[2]
        np.testing.assert_allclose(left, right, atol=1e-4)
    _, acc = knot_derivatives(times, pos)
    assert acc[0, 0] == pytest.approx(0.0) and acc[-1, 0] == pytest.approx(0.0)


def test_limits_must_be_positive():
    with pytest.raises(ValueError):
        MotionLimits(np.ones(2), np.ones(2), np.array([1.0, 0.0]))


def test_knots_for_a_trajectory_controller_are_strictly_increasing_in_nanoseconds():
    # t_join lands a hair off a chunk point (0.1 s + float error) and the stop's first sample
    # follows the last point: a trajectory controller refuses equal time_from_start values.
    times, pos = _chunk(0.0, 0.1, 2.0, 0.0)
    path = chunk_path(times, pos)
    t0 = 0.1 - 1e-13
    q, v, a = path.sample(t0)
    m = join_chunk(t0, q, v, a, times, pos, None, None, LIM, 0.1, 0.4, DT / 4)
    ts, kq, kv, ka = m.knots()
    ns = np.round(ts * 1e9).astype(np.int64)
    assert np.all(np.diff(ns) > 0), ts
    assert kq.shape == (len(ts), 2) and np.all(np.isfinite(kq))


@settings(max_examples=80, deadline=None)
@given(noise=st.floats(0.0, 0.004), seed=st.integers(0, 2**31 - 1),
       step_at=st.integers(-1, 19), step=st.floats(-0.02, 0.02),
       v0=st.lists(st.floats(-0.6, 0.6), min_size=2, max_size=2),
       a0=st.lists(st.floats(-1.3 * AMAX, 1.3 * AMAX), min_size=2, max_size=2))
def test_a_noisy_or_stepped_chunk_is_joined_within_the_limits_or_refused(
        noise, seed, step_at, step, v0, a0):
    # Chunks whose own path often exceeds the limits (noise of millimetres between points
    # 50 ms apart, a step somewhere), and running states beyond the acceleration limit (Ruckig
    # then brakes from outside the limits): the check, not Ruckig, keeps these in the limits.
    rng = np.random.default_rng(seed)
    times, pos = _chunk(0.02, 0.1, 2.0, 0.3)
    pos = pos + rng.normal(0.0, 1.0, pos.shape) * noise
    if step_at >= 0:
        pos[step_at:, 0] += step
    t0 = 0.08
    q0 = chunk_path(times, pos).sample(t0)[0]
    try:
        m = join_chunk(t0, q0, np.array(v0), np.array(a0), times, pos, None, None, LIM,
                       0.1, 0.4, DT / 4)
    except TrajectoryError as exc:
        assert exc.code == 'LIMIT_VIOLATED' and 'cannot join' in str(exc)
        return
    ts = np.arange(t0 - 3 * DT, m.end_time + 0.05, DT)
    q = np.array([m.sample(t)[0] if t >= t0 else
                  q0 + np.array(v0) * (t - t0) + 0.5 * np.array(a0) * (t - t0) ** 2
                  for t in ts])
    vel = np.diff(q, axis=0) / DT
    acc = np.diff(vel, axis=0) / DT
    _within(vel, acc, np.diff(acc, axis=0) / DT)


def test_the_path_check_finds_each_segments_exact_peaks():
    # Exact per-segment peaks of |v|, |a|, |jerk| are never below a dense sampling and close
    # to it, also from a time inside the segment (where a join lands).
    rng = np.random.default_rng(5)
    for trial in range(60):
        k = int(rng.integers(2, 8))
        t = np.cumsum(rng.uniform(0.01, 0.1, k))
        p = chunk_path(t, rng.normal(size=(k, 3)) * 0.1, rng.normal(size=(k, 3)),
                       rng.normal(size=(k, 3)) * 5)
        dt = np.diff(t)
        lo = rng.uniform(0.0, 0.5, k - 1) * dt * (trial % 2)
        peaks = _peaks(p._coeffs, lo, dt)
        for s in range(k - 1):
            ts = np.linspace(t[s] + lo[s], t[s + 1], 4001)
            _, v, a, j = p.derivatives_many(ts[:-1])
            for i, x in enumerate((v, a, j)):
                dense = np.abs(x).max(0)
                assert np.all(peaks[2 * i][s] >= dense - 1e-9 * (1 + dense))
                assert np.all(peaks[2 * i][s] <= dense + 2e-3 * (1 + dense))


def test_the_join_search_tries_a_bounded_number_of_join_times(monkeypatch):
    # At 500 Hz a quarter-period step over a 0.3 s window would be 600 join times.
    from egoroll_ros.core import blend
    times, pos = _chunk(0.0, 0.05, 1.0, 0.0)
    tried = []
    real = blend._ruckig

    def counting(*args, **kwargs):
        tried.append(kwargs.get('minimum_duration'))
        return real(*args, **kwargs)
    monkeypatch.setattr(blend, '_ruckig', counting)
    with pytest.raises(TrajectoryError):   # 1.5 rad away: not within 0.4 s at 8 rad/s^2
        join_chunk(0.05, np.array([1.5, 0.0]), np.zeros(2), np.zeros(2), times, pos, None,
                   None, LIM, 0.1, 0.4, DT / 4)
    joins = [d for d in tried if d is not None]
    assert 1 < len(joins) <= blend.MAX_CANDIDATES
    assert min(joins) == pytest.approx(0.1) and max(joins) == pytest.approx(0.4)


@pytest.mark.parametrize('clock', CLOCKS)
def test_the_join_spreads_a_velocity_change_over_its_whole_time(clock):
    # A seam as the demo policy makes them: the running motion at 0.3 rad/s, the new chunk
    # (stamped at its observation, before the seam) at 0.25 rad/s from 1 mm further on.
    # Time-optimal Ruckig (the full limits, stretched to the join time) changes the velocity
    # in a burst at the jerk limit and coasts; the correction reaches the same point of the
    # chunk at the same time with a fraction of the acceleration and jerk, spread over it.
    from egoroll_ros.core.blend import PathCorrection, _ruckig
    t0 = clock + 0.01
    times = clock + 0.05 * np.arange(0, 20)
    pos = np.stack([0.001 + 0.25 * (times - clock), np.zeros(20)], axis=1)
    q0, v0, a0 = np.array([0.3 * 0.01, 0.0]), np.array([0.3, 0.0]), np.zeros(2)
    m = join_chunk(t0, q0, v0, a0, times, pos, None, None, LIM, 0.1, 0.4, DT / 4)
    assert isinstance(m.join, PathCorrection)
    only_ruckig = join_chunk(t0, q0, v0, a0, times, pos, None, None, LIM, 0.1, 0.4, DT / 4,
                             correction=False)     # blend_join: ruckig
    assert not isinstance(only_ruckig.join, PathCorrection)
    assert m.t_join == pytest.approx(t0 + 0.1)
    fastest = _ruckig(2, q0, v0, a0, LIM, m.path.sample(m.t_join), minimum_duration=0.1)
    taus = np.linspace(0.0, 0.1, 401)
    full = np.array([fastest.at_time(t)[2] for t in taus])[:, 0]
    ours = np.array([m.sample(t0 + t)[2] for t in taus])[:, 0]
    assert np.abs(ours).max() < 0.5 * np.abs(full).max()    # measured 1.69 against 4.5
    half = len(taus) // 2
    assert np.abs(full[half // 2:-half // 2]).max() < 1e-6   # Ruckig's coast in between
    assert np.abs(ours[half:]).max() > 0.3 * np.abs(ours[:half]).max()   # ours: spread
    _, _, v, a, j = _sampled(m, t0, m.t_join + 0.05)
    _within(v, a, j)
    assert np.abs(j).max() < 0.5 * JMAX


def test_an_offset_the_correction_cannot_take_within_the_limits_is_joined_by_ruckig():
    from egoroll_ros.core.blend import RuckigJoin
    times = 0.05 * np.arange(0, 20)
    pos = np.stack([0.25 * times, np.zeros(20)], axis=1)
    # 3 cm behind the chunk: the correction over 0.1 s needs ~17 rad/s^2 (> 8); Ruckig
    # reaches the chunk later within the limits
    q0 = np.array([0.25 * 0.01 - 0.03, 0.0])
    m = join_chunk(0.01, q0, np.array([0.25, 0.0]), np.zeros(2), times, pos, None, None, LIM,
                   0.1, 0.4, DT / 4)
    assert isinstance(m.join, RuckigJoin)
    _, _, v, a, j = _sampled(m, 0.01, m.end_time + 0.05)
    _within(v, a, j)
