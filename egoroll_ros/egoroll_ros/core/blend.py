"""Seams without steps: join a new chunk continuously within velocity, acceleration and jerk
limits, and stop with bounded jerk.

Pure module (numpy + ``ruckig``, the jerk-limited online trajectory generator MoveIt 2 uses for
smoothing). Times are float seconds on the caller's clock (the executor's steady clock).

A :class:`BlendedMotion` has three parts:

1. **join** ``[t0, t_join]``: a Ruckig trajectory from the running motion's position,
   velocity and acceleration at ``t0`` to the new chunk's path state at ``t_join``, of exactly
   ``t_join - t0`` seconds, within the per-joint limits;
2. **path** ``[t_join, t_end]``: the chunk itself through every one of its points, with the
   velocities and accelerations it gives or else those of the natural cubic spline through
   its positions, so acceleration is continuous at every knot;
3. **stop** after the last point: a Ruckig deceleration from the path's final state to rest
   (the arm decelerates to a hold at the chunk's end instead of stopping dead when no new
   chunk arrives in time), then a hold.

:func:`join_chunk` searches the shortest join time in ``[min_blend, max_blend]`` (steps of
``step``) that Ruckig can meet and checks the whole motion against the limits; when none fits
it raises ``TrajectoryError('LIMIT_VIOLATED', ...)`` naming the joint and quantity, so the
caller refuses the chunk and keeps what it is running. Nothing is ever clamped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ruckig import ControlInterface, InputParameter, Result, Ruckig, RuckigError, Trajectory

from egoroll_ros.core.trajectory import PiecewiseTrajectory
from egoroll_ros.errors import TrajectoryError

#: Relative slack for floating point in the limit checks (never a tolerance).
LIMIT_SLACK = 1e-6


@dataclass(frozen=True)
class MotionLimits:
    """Per-joint limits of a commanded motion, each shape (J,) and > 0."""

    velocity: np.ndarray
    acceleration: np.ndarray
    jerk: np.ndarray

    def __post_init__(self) -> None:
        for name in ('velocity', 'acceleration', 'jerk'):
            arr = np.asarray(getattr(self, name), dtype=float)
            if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr <= 0.0):
                raise ValueError(f'MotionLimits.{name} must be finite and > 0 per joint')
            object.__setattr__(self, name, arr)

    @property
    def num_joints(self) -> int:
        """Number of joints J."""
        return int(self.velocity.shape[0])


def knot_derivatives(times: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Velocities and accelerations at each point of the natural cubic spline through them.

    The C2 cubic spline (continuous acceleration, zero acceleration at both ends) is the
    interpolant of least integrated squared acceleration; on the demo policy's chunks (points
    50 ms apart with millimetre noise) its jerk was 6x lower than a quintic through
    finite-difference estimates. Solved per joint with numpy (a tridiagonal system).

    Args:
        times: shape (K,), strictly increasing.
        positions: shape (K, J).

    Returns:
        (velocities, accelerations), each shape (K, J).
    """
    k, j = positions.shape
    vel = np.zeros((k, j))
    acc = np.zeros((k, j))
    if k < 2:
        return vel, acc
    h = np.diff(times)
    slopes = np.diff(positions, axis=0) / h[:, None]
    if k >= 3:
        m = np.zeros((k, k))
        m[0, 0] = m[-1, -1] = 1.0
        rows = np.arange(1, k - 1)
        m[rows, rows - 1] = h[:-1]
        m[rows, rows] = 2.0 * (h[:-1] + h[1:])
        m[rows, rows + 1] = h[1:]
        rhs = np.zeros((k, j))
        rhs[1:-1] = 6.0 * (slopes[1:] - slopes[:-1])
        acc = np.linalg.solve(m, rhs)
    vel[:-1] = slopes - h[:, None] * (2.0 * acc[:-1] + acc[1:]) / 6.0
    vel[-1] = slopes[-1] + h[-1] * (acc[-2] + 2.0 * acc[-1]) / 6.0
    return vel, acc


def chunk_path(times: np.ndarray, positions: np.ndarray, velocities: np.ndarray | None = None,
               accelerations: np.ndarray | None = None) -> PiecewiseTrajectory:
    """The chunk as a quintic through its points with their velocities and accelerations
    (continuous acceleration at every knot); missing ones are the natural cubic spline's
    (:func:`knot_derivatives`: the quintic through them is that spline)."""
    times = np.asarray(times, dtype=float)
    positions = np.asarray(positions, dtype=float)
    ev, ea = knot_derivatives(times, positions)
    vel = ev if velocities is None else np.asarray(velocities, dtype=float)
    acc = ea if accelerations is None else np.asarray(accelerations, dtype=float)
    return PiecewiseTrajectory(times, positions, vel, acc, 'quintic')


def _ruckig(n: int, q: np.ndarray, v: np.ndarray, a: np.ndarray, limits: MotionLimits,
            target: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
            minimum_duration: float = 0.0) -> Trajectory:
    """One Ruckig trajectory: to ``target`` (position interface), or to rest (velocity
    interface) when ``target`` is None. Raises RuckigError on invalid input."""
    inp = InputParameter(n)
    inp.current_position = q.tolist()
    inp.current_velocity = v.tolist()
    inp.current_acceleration = a.tolist()
    inp.max_velocity = limits.velocity.tolist()
    inp.max_acceleration = limits.acceleration.tolist()
    inp.max_jerk = limits.jerk.tolist()
    if target is None:
        inp.control_interface = ControlInterface.Velocity
        inp.target_velocity = [0.0] * n
        inp.target_acceleration = [0.0] * n
    else:
        inp.target_position = target[0].tolist()
        inp.target_velocity = target[1].tolist()
        inp.target_acceleration = target[2].tolist()
        if minimum_duration > 0.0:
            inp.minimum_duration = float(minimum_duration)
    traj = Trajectory(n)
    result = Ruckig(n).calculate(inp, traj)
    if result not in (Result.Working, Result.Finished):
        raise RuckigError(f'ruckig: {result}')
    return traj


def _at(traj: Trajectory, tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q, v, a = traj.at_time(min(max(tau, 0.0), traj.duration))
    return np.asarray(q), np.asarray(v), np.asarray(a)


class RuckigStop:
    """Decelerate from ``(positions, velocities, accelerations)`` at ``t0`` to rest within the
    velocity, acceleration and jerk limits (Ruckig, velocity interface), then hold.

    Raises:
        TrajectoryError: ``LIMIT_VIOLATED`` when the start state is outside the limits.
    """

    def __init__(self, t0: float, positions: np.ndarray, velocities: np.ndarray,
                 accelerations: np.ndarray, limits: MotionLimits) -> None:
        self.t0 = float(t0)
        q, v, a = (np.asarray(x, dtype=float) for x in (positions, velocities, accelerations))
        try:
            self._traj = _ruckig(len(q), q, v, a, limits, None)
        except RuckigError as exc:
            raise TrajectoryError('LIMIT_VIOLATED', f'cannot decelerate: {exc}') from None
        self._final = _at(self._traj, self._traj.duration)[0]

    @property
    def end_time(self) -> float:
        """Time when every joint is at rest."""
        return self.t0 + float(self._traj.duration)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, velocity and acceleration at ``t`` (the start before ``t0``)."""
        if t >= self.end_time:
            z = np.zeros_like(self._final)
            return self._final.copy(), z, z.copy()
        return _at(self._traj, t - self.t0)

    def knots(self, count: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``count`` samples from ``t0`` to ``end_time`` as (times, pos, vel, acc)."""
        ts = np.linspace(self.t0, max(self.end_time, self.t0 + 1e-3), count)
        rows = [self.sample(t) for t in ts]
        return (ts, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
                np.array([r[2] for r in rows]))


class BlendedMotion:
    """Join, path, stop (see the module docstring). Build it with :func:`join_chunk`.

    Attributes:
        t0: start of the join; t_join: where the path takes over; path: the chunk's path.
        first_point: index of the first chunk point at or after ``t_join``.
    """

    def __init__(self, t0: float, join: Trajectory, t_join: float, path: PiecewiseTrajectory,
                 stop: RuckigStop, first_point: int) -> None:
        self.t0 = float(t0)
        self.t_join = float(t_join)
        self.path = path
        self.first_point = int(first_point)
        self._join = join
        self._stop = stop
        # Ruckig meets its target to about 1e-8; a quintic from rest to the remaining error
        # makes the join end EXACTLY on the path (at 500 Hz a 1e-8 rad step alone is a
        # 1 rad/s^3 finite-difference jerk); its own jerk is ~1e-4 rad/s^3.
        end = _at(join, join.duration)
        goal = path.sample(self.t_join)
        z = np.zeros_like(end[0])
        err = [g - e for g, e in zip(goal, end, strict=True)]
        self._fix = PiecewiseTrajectory(np.array([self.t0, self.t_join]), np.stack([z, err[0]]),
                                        np.stack([z, err[1]]), np.stack([z, err[2]]),
                                        'quintic') if self.t_join > self.t0 else None

    @property
    def start_time(self) -> float:
        """Start of the join."""
        return self.t0

    @property
    def path_end(self) -> float:
        """Time of the chunk's last point (the stop starts there)."""
        return self.path.end_time

    @property
    def end_time(self) -> float:
        """Time at rest after the final deceleration."""
        return self._stop.end_time

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, velocity and acceleration at ``t`` (each shape (J,))."""
        if t < self.t_join:
            q, v, a = _at(self._join, t - self.t0)
            if self._fix is not None:
                fq, fv, fa = self._fix.sample(t)
                q, v, a = q + fq, v + fv, a + fa
            return q, v, a
        if t < self.path.end_time:
            return self.path.sample(t)
        return self._stop.sample(t)

    def sample_grid(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions, velocities, accelerations at each of ``ts``, shapes (M, J)."""
        ts = np.asarray(ts, dtype=float)
        n = self.path.num_joints
        q, v, a = (np.empty((len(ts), n)) for _ in range(3))
        on_path = (ts >= self.t_join) & (ts < self.path.end_time)
        if np.any(on_path):
            pq, pv, pa, _ = self.path.derivatives_many(ts[on_path])
            q[on_path], v[on_path], a[on_path] = pq, pv, pa
        in_join = ts < self.t_join
        for i in np.nonzero(in_join)[0].tolist():
            q[i], v[i], a[i] = _at(self._join, float(ts[i]) - self.t0)
        if self._fix is not None and np.any(in_join):
            # the end correction, vectorised (one call per sample made a join at 500 Hz take
            # ~4x longer); the same sum as :meth:`sample`.
            fq, fv, fa, _ = self._fix.derivatives_many(ts[in_join])
            q[in_join] += fq
            v[in_join] += fv
            a[in_join] += fa
        for i in np.nonzero(~on_path & ~in_join)[0].tolist():
            q[i], v[i], a[i] = self._stop.sample(float(ts[i]))
        return q, v, a

    def knots(self, step: float = 0.02) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray]:
        """Samples every ``step`` s over the join and the stop, and the path's own points, as
        (times, positions, velocities, accelerations), for a downstream trajectory
        controller."""
        join_ts = np.arange(self.t0, self.t_join, step)
        path_ts = self.path.times[self.path.times >= self.t_join]
        stop_ts = np.append(np.arange(self.path.end_time + step, self.end_time, step),
                            self.end_time)
        ts = np.unique(np.concatenate([join_ts, [self.t_join], path_ts, stop_ts]))
        # A trajectory controller needs strictly increasing times (its time_from_start has
        # nanosecond resolution): merge knots closer than a microsecond (t_join on a chunk
        # point, the last path point on the stop's first sample).
        ts = ts[np.concatenate([[True], np.diff(ts) > 1e-6])]
        q, v, a = self.sample_grid(ts)
        return ts, q, v, a


def limit_violation(motion: BlendedMotion, limits: MotionLimits, t_from: float,
                    step: float) -> tuple[str, float] | None:
    """Where ``motion`` exceeds a limit most from ``t_from`` on, as (message, time), or None.

    Velocity and acceleration are checked on a grid of ``step`` (plus the path's knots); jerk
    analytically on the path and, on the Ruckig parts (which Ruckig keeps within the limits
    by construction), as the finite difference of acceleration on the grid.
    """
    ts = np.arange(t_from, motion.end_time + step, step)
    ts = np.union1d(ts[ts <= motion.end_time], motion.path.times[motion.path.times >= t_from])
    _, v, a = motion.sample_grid(ts)
    names = ('velocity', 'acceleration')
    for name, values, lim in zip(names, (v, a), (limits.velocity, limits.acceleration),
                                 strict=True):
        excess = np.abs(values) - lim * (1.0 + LIMIT_SLACK)
        if np.any(excess > 0.0):
            i, j = np.unravel_index(int(np.argmax(excess / lim)), excess.shape)
            return (f'joint {j}: {name} {values[i, j]:.4g} exceeds its limit {lim[j]:g} '
                    f'{ts[i] - t_from:.3f} s after the seam', float(ts[i]))
    on_path = (ts >= motion.t_join) & (ts <= motion.path.end_time)
    jerk = np.zeros_like(a)
    if np.any(on_path):
        jerk[on_path] = motion.path.derivatives_many(ts[on_path])[3]
    if len(ts) >= 2:
        fd = np.diff(a, axis=0) / np.diff(ts)[:, None]
        off = ~(on_path[1:] & on_path[:-1])
        jerk[1:][off] = fd[off]
    excess = np.abs(jerk) - limits.jerk * (1.0 + LIMIT_SLACK) - 1e-9
    if np.any(excess > 0.0):
        i, j = np.unravel_index(int(np.argmax(excess / limits.jerk)), excess.shape)
        return (f'joint {j}: jerk {jerk[i, j]:.4g} exceeds its limit {limits.jerk[j]:g} '
                f'{ts[i] - t_from:.3f} s after the seam', float(ts[i]))
    return None


def join_chunk(t0: float, position: np.ndarray, velocity: np.ndarray,
               acceleration: np.ndarray, times: np.ndarray, positions: np.ndarray,
               velocities: np.ndarray | None, accelerations: np.ndarray | None,
               limits: MotionLimits, min_blend: float, max_blend: float,
               step: float, joint_names: tuple[str, ...] | None = None) -> BlendedMotion:
    """Join the chunk ``(times, positions, ...)`` from the state at ``t0`` continuously in
    position, velocity and acceleration, within ``limits``.

    The join ends on the chunk's path at the earliest ``t_join`` in ``[t0 + min_blend,
    t0 + max_blend]`` (searched in steps of ``step``, never before the chunk's first point)
    that Ruckig reaches in exactly ``t_join - t0`` within the limits; from there the motion
    IS the chunk's path, then decelerates to rest after its last point.

    Args:
        t0: the seam time (the executor's tick).
        position, velocity, acceleration: state of the running motion at ``t0``, shape (J,).
        times: shape (N,), absolute, strictly increasing point times of the chunk.
        positions: (N, J); velocities, accelerations: (N, J) or None (estimated).
        limits: per-joint velocity, acceleration and jerk limits.
        min_blend, max_blend: bounds of the join duration (s), 0 < min_blend <= max_blend.
        step: search step and check grid (s), e.g. a quarter of the control period.
        joint_names: names for the messages (indices when None).

    Returns:
        The motion, every sample of which is within ``limits``.

    Raises:
        TrajectoryError: ``TRAJECTORY_IN_PAST`` when the chunk ends before ``t0 + min_blend``;
            ``LIMIT_VIOLATED`` when no join within ``max_blend`` keeps the limits, or the
            chunk's own path exceeds them (the message names joint, quantity and time).
    """
    times = np.asarray(times, dtype=float)
    q0, v0, a0 = (np.asarray(x, dtype=float) for x in (position, velocity, acceleration))
    n = len(q0)
    if not 0.0 < min_blend <= max_blend or step <= 0.0:
        raise ValueError('join_chunk needs 0 < min_blend <= max_blend and step > 0')
    names = joint_names or tuple(str(i) for i in range(n))

    def named(msg: str) -> str:
        if msg.startswith('joint '):
            j = int(msg.split(':')[0].split()[1])
            return f'joint {names[j]}' + msg[msg.index(':'):]
        return msg

    earliest = max(t0 + min_blend, float(times[0]))
    if earliest > times[-1]:
        raise TrajectoryError('TRAJECTORY_IN_PAST', f'the chunk ends '
                              f'{t0 + min_blend - times[-1]:.3f} s before the earliest join '
                              f'(blend time {min_blend:g} s)')
    latest = min(t0 + max_blend, float(times[-1]))
    path = chunk_path(times, positions, velocities, accelerations)
    stop_state = path.sample(path.end_time - 1e-12) if len(times) > 1 else \
        (path.positions[-1], np.zeros(n), np.zeros(n))
    try:
        stop = RuckigStop(path.end_time, *stop_state, limits)
    except TrajectoryError as exc:
        raise TrajectoryError('LIMIT_VIOLATED', f'the chunk ends outside the limits: {exc}') \
            from None
    last_reason = 'no join time was tried'
    candidates = np.arange(earliest, latest + 0.5 * step, step)
    if len(candidates) == 0 or candidates[-1] < latest - 1e-12:
        candidates = np.append(candidates, latest)
    for t_join in candidates.tolist():
        t_join = min(t_join, latest)
        target = path.sample(t_join)
        if np.any(np.abs(target[1]) > limits.velocity) or \
                np.any(np.abs(target[2]) > limits.acceleration):
            last_reason = (f'the chunk itself exceeds the velocity or acceleration limits at '
                           f'{t_join - t0:.3f} s')
            continue
        try:
            join = _ruckig(n, q0, v0, a0, limits, target, minimum_duration=t_join - t0)
        except RuckigError as exc:
            last_reason = f'ruckig: {exc}'.strip()
            continue
        if join.duration > (t_join - t0) + 1e-6:
            last_reason = (f'reaching the chunk needs {join.duration:.3f} s, more than the '
                           f'{t_join - t0:.3f} s to the join point')
            continue
        first = int(np.searchsorted(times, t_join, side='left'))
        motion = BlendedMotion(t0, join, t_join, path, stop, first)
        bad = limit_violation(motion, limits, t0, step)
        if bad is None:
            return motion
        last_reason = bad[0]
        if bad[1] >= t_join:
            break   # the chunk's own path (not the join) exceeds a limit: no later join helps
    raise TrajectoryError('LIMIT_VIOLATED', f'cannot join the chunk within {max_blend:g} s '
                          f'inside the velocity/acceleration/jerk limits: {named(last_reason)}')
