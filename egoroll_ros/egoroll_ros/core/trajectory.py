"""Trajectory sampling for the executor: piecewise polynomials, splicing and stop motions.

Pure module (numpy only). Times are float seconds on one clock chosen by the caller (the
executor uses ``time.monotonic()``). Every motion offers ``sample(t)`` returning position,
velocity and acceleration arrays, ``end_time`` and ``knots()`` (points for forwarding to a
downstream trajectory controller).

Interpolation between knots:
- ``linear``: straight lines; velocity is piecewise constant (discontinuous at knots).
- ``cubic``: cubic Hermite through positions and velocities. Missing velocities are estimated
  (average of the adjacent slopes, zero where the slope changes sign so a knot that is a local
  extremum is not overshot; zero at the last knot so the trajectory ends at rest).
- ``quintic``: quintic through positions, velocities and accelerations (missing velocities are
  estimated as for cubic; accelerations must be given for every point).
- ``auto``: quintic when accelerations are given, otherwise cubic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from egoroll_ros.errors import TrajectoryError

INTERPOLATIONS = ('auto', 'linear', 'cubic', 'quintic')


def estimate_velocities(times: np.ndarray, positions: np.ndarray,
                        start_velocity: np.ndarray | None = None) -> np.ndarray:
    """Velocities at each knot of a position-only path.

    Interior knots get the mean of the adjacent segment slopes, or zero where the slopes have
    opposite signs (or either is zero). The first knot gets ``start_velocity`` (zero when None)
    and the last knot zero.

    Args:
        times: shape (K,), strictly increasing.
        positions: shape (K, J).
        start_velocity: shape (J,) or None.

    Returns:
        Shape (K, J).
    """
    k, j = positions.shape
    vel = np.zeros((k, j))
    if k >= 3:
        dt = np.diff(times)[:, None]
        slopes = np.diff(positions, axis=0) / dt
        left, right = slopes[:-1], slopes[1:]
        mean = 0.5 * (left + right)
        vel[1:-1] = np.where(left * right > 0.0, mean, 0.0)
    if start_velocity is not None:
        vel[0] = start_velocity
    return vel


def _quintic_coeffs(q0, v0, a0, q1, v1, a1, T):  # noqa: ANN001, ANN202 - internal, arrays
    T2, T3, T4, T5 = T * T, T ** 3, T ** 4, T ** 5
    c0, c1, c2 = q0, v0, 0.5 * a0
    dq = q1 - q0
    c3 = (20 * dq - (8 * v1 + 12 * v0) * T - (3 * a0 - a1) * T2) / (2 * T3)
    c4 = (-30 * dq + (14 * v1 + 16 * v0) * T + (3 * a0 - 2 * a1) * T2) / (2 * T4)
    c5 = (12 * dq - 6 * (v1 + v0) * T + (a1 - a0) * T2) / (2 * T5)
    return np.stack([c0, c1, c2, c3, c4, c5])


def _cubic_coeffs(q0, v0, q1, v1, T):  # noqa: ANN001, ANN202 - internal, arrays
    dq = q1 - q0
    c2 = (3 * dq - (2 * v0 + v1) * T) / (T * T)
    c3 = (-2 * dq + (v0 + v1) * T) / (T ** 3)
    z = np.zeros_like(q0)
    return np.stack([q0, v0, c2, c3, z, z])


@dataclass
class PiecewiseTrajectory:
    """A joint trajectory through knots, sampled with one interpolation kind.

    Before the first knot the trajectory holds the first knot; after the last knot it holds the
    last knot at rest.

    Attributes:
        times: shape (K,), strictly increasing knot times.
        positions, velocities, accelerations: shape (K, J) each.
        kind: ``'linear'``, ``'cubic'`` or ``'quintic'``.
    """

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    kind: str

    def __post_init__(self) -> None:
        k = len(self.times)
        if k < 1 or self.positions.shape[0] != k:
            raise TrajectoryError('INVALID_GOAL', 'a trajectory needs at least one knot')
        if k > 1 and np.any(np.diff(self.times) <= 0.0):
            raise TrajectoryError('TIME_NOT_INCREASING', 'knot times must strictly increase')
        if self.kind not in ('linear', 'cubic', 'quintic'):
            raise TrajectoryError('INVALID_GOAL', f'unknown interpolation {self.kind!r}')
        # coefficients per segment: (K-1, 6, J), every segment at once (a Python loop over
        # the segments cost milliseconds per chunk in the seam join)
        if k > 1:
            T = np.diff(self.times)[:, None]
            q0, q1 = self.positions[:-1], self.positions[1:]
            if self.kind == 'linear':
                z = np.zeros_like(q0)
                coeffs = np.stack([q0, (q1 - q0) / T, z, z, z, z])
            elif self.kind == 'cubic':
                coeffs = _cubic_coeffs(q0, self.velocities[:-1], q1, self.velocities[1:], T)
            else:
                coeffs = _quintic_coeffs(q0, self.velocities[:-1], self.accelerations[:-1],
                                         q1, self.velocities[1:], self.accelerations[1:], T)
            self._coeffs = np.ascontiguousarray(coeffs.transpose(1, 0, 2))
        else:
            self._coeffs = np.zeros((0, 6, self.positions.shape[1]))

    @property
    def start_time(self) -> float:
        """Time of the first knot."""
        return float(self.times[0])

    @property
    def end_time(self) -> float:
        """Time of the last knot."""
        return float(self.times[-1])

    @property
    def num_joints(self) -> int:
        """Number of joints J."""
        return int(self.positions.shape[1])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, velocity and acceleration at time ``t`` (each shape (J,))."""
        if len(self.times) == 1 or t < self.times[0]:
            z = np.zeros(self.num_joints)
            return self.positions[0].copy(), z, z.copy()
        if t >= self.times[-1]:
            z = np.zeros(self.num_joints)
            return self.positions[-1].copy(), z, z.copy()
        i = int(np.searchsorted(self.times, t, side='right')) - 1
        i = min(max(i, 0), len(self.times) - 2)
        return _eval(self._coeffs[i], t - self.times[i])

    def sample_many(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities at each time in ``ts`` (shape (M,)); shapes (M, J)."""
        ts = np.asarray(ts, dtype=float)
        m, j = len(ts), self.num_joints
        pos = np.empty((m, j))
        vel = np.zeros((m, j))
        before = ts < self.times[0]
        after = ts >= self.times[-1]
        pos[before] = self.positions[0]
        pos[after] = self.positions[-1]
        inside = ~(before | after)
        if np.any(inside) and len(self.times) > 1:
            idx = np.clip(np.searchsorted(self.times, ts[inside], side='right') - 1, 0,
                          len(self.times) - 2)
            tau = (ts[inside] - self.times[idx])[:, None]
            c = self._coeffs[idx]  # (m', 6, J)
            pos[inside] = c[:, 0] + tau * (c[:, 1] + tau * (c[:, 2] + tau * (
                c[:, 3] + tau * (c[:, 4] + tau * c[:, 5]))))
            vel[inside] = c[:, 1] + tau * (2 * c[:, 2] + tau * (3 * c[:, 3] + tau * (
                4 * c[:, 4] + tau * 5 * c[:, 5])))
        return pos, vel

    def knots(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The knots as (times, positions, velocities, accelerations)."""
        return self.times, self.positions, self.velocities, self.accelerations

    def derivatives_many(self, ts: np.ndarray) -> tuple[np.ndarray, ...]:
        """Position, velocity, acceleration and jerk at each time in ``ts`` (shape (M,)).

        Inside the knot span only (times outside are clamped to it); each result has shape
        (M, J).
        """
        ts = np.clip(np.asarray(ts, dtype=float), self.times[0], self.times[-1])
        if len(self.times) < 2:
            z = np.zeros((len(ts), self.num_joints))
            return np.broadcast_to(self.positions[0], z.shape).copy(), z, z.copy(), z.copy()
        idx = np.clip(np.searchsorted(self.times, ts, side='right') - 1, 0, len(self.times) - 2)
        tau = (ts - self.times[idx])[:, None]
        c = self._coeffs[idx]
        q = c[:, 0] + tau * (c[:, 1] + tau * (c[:, 2] + tau * (c[:, 3] + tau * (
            c[:, 4] + tau * c[:, 5]))))
        v = c[:, 1] + tau * (2 * c[:, 2] + tau * (3 * c[:, 3] + tau * (4 * c[:, 4] + tau * 5 *
                                                                        c[:, 5])))
        a = 2 * c[:, 2] + tau * (6 * c[:, 3] + tau * (12 * c[:, 4] + tau * 20 * c[:, 5]))
        j = 6 * c[:, 3] + tau * (24 * c[:, 4] + tau * 60 * c[:, 5])
        return q, v, a, j


def _eval(c: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = c[0] + tau * (c[1] + tau * (c[2] + tau * (c[3] + tau * (c[4] + tau * c[5]))))
    v = c[1] + tau * (2 * c[2] + tau * (3 * c[3] + tau * (4 * c[4] + tau * 5 * c[5])))
    a = 2 * c[2] + tau * (6 * c[3] + tau * (12 * c[4] + tau * 20 * c[5]))
    return q, v, a


def hold(t: float, positions: np.ndarray) -> PiecewiseTrajectory:
    """A motion that stays at ``positions`` from time ``t`` on."""
    p = np.asarray(positions, dtype=float).reshape(1, -1)
    z = np.zeros_like(p)
    return PiecewiseTrajectory(np.array([float(t)]), p.copy(), z, z.copy(), 'cubic')


class DecelerationStop:
    """Each joint brakes from ``(positions, velocities)`` at ``max_acceleration`` until at rest.

    Args:
        t0: start time.
        positions, velocities: state at ``t0``, shape (J,).
        max_acceleration: shape (J,), > 0.
    """

    def __init__(self, t0: float, positions: np.ndarray, velocities: np.ndarray,
                 max_acceleration: np.ndarray) -> None:
        self.t0 = float(t0)
        self.q0 = np.asarray(positions, dtype=float).copy()
        self.v0 = np.asarray(velocities, dtype=float).copy()
        self.amax = np.asarray(max_acceleration, dtype=float)
        self.stop_after = np.abs(self.v0) / self.amax  # per joint
        self.decel = -np.sign(self.v0) * self.amax

    @property
    def end_time(self) -> float:
        """Time when the last joint comes to rest."""
        return self.t0 + float(np.max(self.stop_after, initial=0.0))

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, velocity and acceleration at ``t`` (holds the start before ``t0``)."""
        tau = np.clip(t - self.t0, 0.0, self.stop_after)
        moving = (t - self.t0) < self.stop_after
        q = self.q0 + self.v0 * tau + 0.5 * self.decel * tau * tau
        v = np.where(moving, self.v0 + self.decel * tau, 0.0)
        a = np.where(moving, self.decel, 0.0)
        return q, v, a

    def knots(self, count: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``count`` samples from ``t0`` to ``end_time`` as (times, pos, vel, acc)."""
        end = max(self.end_time, self.t0 + 1e-3)
        ts = np.linspace(self.t0, end, count)
        rows = [self.sample(t) for t in ts]
        return (ts, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
                np.array([r[2] for r in rows]))


def resolve_kind(interpolation: str, has_accelerations: bool) -> str:
    """The interpolation actually used: ``auto`` becomes quintic or cubic."""
    if interpolation not in INTERPOLATIONS:
        raise TrajectoryError('INVALID_GOAL', f'unknown interpolation {interpolation!r}')
    if interpolation == 'auto':
        return 'quintic' if has_accelerations else 'cubic'
    if interpolation == 'quintic' and not has_accelerations:
        return 'cubic'
    return interpolation


def splice(t: float, position: np.ndarray, velocity: np.ndarray, acceleration: np.ndarray,
           times: np.ndarray, positions: np.ndarray, velocities: np.ndarray | None,
           accelerations: np.ndarray | None, interpolation: str = 'auto',
           lead: float = 0.0) -> tuple[PiecewiseTrajectory, int]:
    """A trajectory that starts at the given state at ``t`` and passes through every point later
    than ``t + lead``.

    The blend into the first future point starts from ``position`` and ``velocity`` (and
    ``acceleration`` for quintic), so a preempting trajectory continues the current setpoint.

    Args:
        t: splice time (same clock as ``times``).
        position, velocity, acceleration: current setpoint, shape (J,).
        times: shape (N,), absolute point times, strictly increasing.
        positions: shape (N, J); velocities, accelerations: shape (N, J) or None.
        interpolation: one of :data:`INTERPOLATIONS`.
        lead: points due within ``lead`` seconds of ``t`` are dropped like past ones, so the
            blend from the current setpoint into the new path lasts at least that long (a
            chunk that arrives late would otherwise have to be joined within a few ms).

    Returns:
        The trajectory and the index (in ``times``) of the first point kept.

    Raises:
        TrajectoryError: ``TRAJECTORY_IN_PAST`` when no point is later than ``t``.
    """
    first = int(np.searchsorted(times, t + lead, side='right'))
    if first >= len(times):
        raise TrajectoryError('TRAJECTORY_IN_PAST',
                              f'every point is in the past or within the blend time {lead:g} s '
                              f'(last point {t - times[-1]:.3f} s ago)')
    kind = resolve_kind(interpolation, accelerations is not None)
    kt = np.concatenate([[t], times[first:]])
    kq = np.vstack([position, positions[first:]])
    if velocities is not None:
        kv = np.vstack([velocity, velocities[first:]])
    else:
        kv = estimate_velocities(kt, kq, start_velocity=velocity)
    if accelerations is not None:
        ka = np.vstack([acceleration, accelerations[first:]])
    else:
        ka = np.zeros_like(kq)
    return PiecewiseTrajectory(kt, kq, kv, ka, kind), first


def max_speed_ratio(traj: PiecewiseTrajectory, max_velocity: np.ndarray, t_from: float,
                    step: float) -> tuple[float, int, float]:
    """The largest ``|velocity| / max_velocity`` over a dense grid from ``t_from`` to the end.

    Returns:
        (ratio, joint index, time) of the worst sample.
    """
    end = max(traj.end_time, t_from)
    n = max(2, int(np.ceil((end - t_from) / step)) + 1)
    ts = np.linspace(t_from, end, n)
    # include the knots themselves (cubic extrema may sit near them)
    ts = np.union1d(ts, traj.times[traj.times >= t_from])
    _, vel = traj.sample_many(ts)
    ratio = np.abs(vel) / max_velocity
    flat = int(np.argmax(ratio))
    i, j = divmod(flat, ratio.shape[1])
    return float(ratio[i, j]), int(j), float(ts[i])


def max_acceleration_ratio(traj: PiecewiseTrajectory, max_acceleration: np.ndarray,
                           t_from: float, step: float, period: float,
                           start_velocity: np.ndarray | None = None) -> tuple[float, int, float]:
    """The largest ``|acceleration| / max_acceleration`` of ``traj`` from ``t_from`` until its
    last knot.

    Acceleration is sampled on a grid of ``step`` plus both ends of every segment (a cubic's
    acceleration is linear within a segment, a quintic's is checked on the grid). A velocity
    step (linear interpolation at a knot, or at ``t_from`` from ``start_velocity``) counts as
    the step divided by ``period``: what one control period of setpoints turns it into. The
    last segment (the brake into the last knot, where estimated velocities end at rest) and the
    stop after it are not included: a goal replaced before its end, as a stream of chunks
    is, never makes them; when one is reached, the executor's check of every setpoint acts.

    Returns:
        (ratio, joint index, time) of the worst sample.
    """
    amax = np.asarray(max_acceleration, dtype=float)
    n = traj.num_joints
    if len(traj.times) < 2 or traj.end_time <= t_from:
        return 0.0, 0, float(t_from)
    end = float(traj.times[-2]) if len(traj.times) > 2 else traj.end_time
    if end <= t_from:
        return 0.0, 0, float(t_from)
    ts = np.linspace(t_from, end, max(2, int(np.ceil((end - t_from) / step)) + 1))
    ts = np.union1d(ts, traj.times[(traj.times >= t_from) & (traj.times <= end)])
    rows, acc = [], []
    if traj.kind == 'linear':
        slopes = np.diff(traj.positions, axis=0) / np.diff(traj.times)[:, None]
        jumps = np.abs(np.diff(slopes, axis=0)) / period
        keep = (traj.times[1:-1] >= t_from) & (traj.times[1:-1] <= end)
        rows.append(traj.times[1:-1][keep])
        acc.append(jumps[keep])
        if start_velocity is not None:
            i = max(int(np.searchsorted(traj.times, t_from, side='right')) - 1, 0)
            rows.append(np.array([t_from]))
            acc.append(np.abs(slopes[min(i, len(slopes) - 1)] - start_velocity)[None] / period)
    else:
        _, _, a_grid, _ = traj.derivatives_many(ts)
        rows.append(ts)
        acc.append(np.abs(a_grid))
        # Both ends of every segment from t_from on (a cubic's extremes sit there).
        dt = np.diff(traj.times)
        live = (traj.times[1:] > t_from) & (traj.times[1:] <= end)
        c = traj._coeffs[live]
        t = dt[live][:, None]
        rows.append(traj.times[1:][live])
        acc.append(np.abs(2 * c[:, 2] + t * (6 * c[:, 3] + t * (12 * c[:, 4] +
                                                                t * 20 * c[:, 5]))))
    if not rows:
        return 0.0, 0, float(t_from)
    times = np.concatenate(rows)
    ratio = np.concatenate([a.reshape(-1, n) for a in acc]) / amax
    if ratio.size == 0:
        return 0.0, 0, float(t_from)
    flat = int(np.argmax(ratio))
    i, j = divmod(flat, n)
    return float(ratio[i, j]), int(j), float(times[i])
