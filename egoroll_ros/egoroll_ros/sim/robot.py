"""A simulated arm for tests and the demo: first-order lag with velocity limits, faults.

Pure module (numpy only). Times are steady-clock seconds given by the caller.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from egoroll_ros.core.trajectory import PiecewiseTrajectory
from egoroll_ros.errors import ConfigError


class SimArm:
    """Joints that follow a target with a first-order lag, each speed limited.

    ``q' = (target - q) / tau``, then ``|q'| <= max_velocity``. The target is either a fixed
    position (streamed setpoints) or a trajectory sampled at the current time (a forwarded
    joint trajectory). When frozen the joints stop where they are.

    Args:
        initial: shape (J,) start positions.
        time_constant: tau in seconds (> 0).
        max_velocity: shape (J,), > 0.
    """

    def __init__(self, initial: np.ndarray, time_constant: float,
                 max_velocity: np.ndarray) -> None:
        self.q = np.asarray(initial, dtype=float).copy()
        self.v = np.zeros_like(self.q)
        self.vmax = np.asarray(max_velocity, dtype=float)
        if self.vmax.shape != self.q.shape or np.any(self.vmax <= 0.0):
            raise ConfigError("parameter 'max_velocity': one value > 0 per joint required")
        if not time_constant > 0.0:
            raise ConfigError("parameter 'time_constant': must be > 0")
        self.time_constant = float(time_constant)
        self.extra_lag = 0.0
        self.frozen = False
        self.target = self.q.copy()
        self.trajectory: PiecewiseTrajectory | None = None
        self._t: float | None = None

    def set_target(self, positions: np.ndarray) -> None:
        """Follow a fixed target position from now on."""
        self.target = np.asarray(positions, dtype=float).copy()
        self.trajectory = None

    def set_trajectory(self, trajectory: PiecewiseTrajectory) -> None:
        """Follow ``trajectory`` (sampled at each step's time) from now on."""
        self.trajectory = trajectory

    def step(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Integrate up to ``now`` and return (positions, velocities)."""
        if self._t is None:
            self._t = now
            return self.q.copy(), self.v.copy()
        dt = now - self._t
        self._t = now
        if dt <= 0.0:
            return self.q.copy(), self.v.copy()
        if self.frozen:
            self.v = np.zeros_like(self.q)
            return self.q.copy(), self.v.copy()
        target = self.trajectory.sample(now)[0] if self.trajectory is not None else self.target
        tau = self.time_constant + self.extra_lag
        q_next = target + (self.q - target) * np.exp(-dt / tau)
        step = np.clip(q_next - self.q, -self.vmax * dt, self.vmax * dt)
        self.q = self.q + step
        self.v = step / dt
        return self.q.copy(), self.v.copy()


class DelayLine:
    """Returns values as they were ``latency`` seconds ago (the oldest kept when too young)."""

    def __init__(self, horizon: float = 5.0) -> None:
        self._buf: deque[tuple[float, object]] = deque()
        self.horizon = horizon

    def push(self, t: float, value: object) -> None:
        """Record ``value`` at time ``t`` (non-decreasing)."""
        self._buf.append((t, value))
        while len(self._buf) > 1 and self._buf[1][0] < t - self.horizon:
            self._buf.popleft()

    def at(self, t: float) -> object | None:
        """The latest value recorded at or before ``t``; None when nothing is that old."""
        best = None
        for ts, value in self._buf:
            if ts <= t:
                best = value
            else:
                break
        return best
