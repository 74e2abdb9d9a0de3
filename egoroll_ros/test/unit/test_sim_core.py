"""Simulated arm: first-order lag, velocity limits, freeze, extra lag, trajectories, delay."""

import numpy as np
import pytest

from egoroll_ros.core.trajectory import splice
from egoroll_ros.errors import ConfigError
from egoroll_ros.sim.robot import DelayLine, SimArm


def _run(arm, t0, seconds, dt=0.001):
    t = t0
    for _ in range(int(round(seconds / dt))):
        t += dt
        q, v = arm.step(t)
    return t, q, v


def test_arm_follows_a_target_with_a_first_order_lag():
    arm = SimArm(np.zeros(2), 0.1, np.array([100.0, 100.0]))
    arm.step(0.0)
    arm.set_target(np.array([1.0, -1.0]))
    _, q, _ = _run(arm, 0.0, 0.1)
    np.testing.assert_allclose(q, [1 - np.exp(-1), -(1 - np.exp(-1))], rtol=1e-6)


def test_arm_speed_never_exceeds_max_velocity():
    arm = SimArm(np.zeros(1), 0.001, np.array([0.5]))
    arm.step(0.0)
    arm.set_target(np.array([10.0]))
    _, q, v = _run(arm, 0.0, 1.0)
    assert q[0] == pytest.approx(0.5) and v[0] == pytest.approx(0.5)


def test_frozen_arm_stays_put_and_extra_lag_slows_it():
    arm = SimArm(np.zeros(1), 0.05, np.array([10.0]))
    arm.step(0.0)
    arm.set_target(np.array([1.0]))
    arm.frozen = True
    t, q, v = _run(arm, 0.0, 0.2)
    assert q[0] == 0.0 and v[0] == 0.0
    arm.frozen = False
    slow = SimArm(np.zeros(1), 0.05, np.array([10.0]))
    slow.extra_lag = 0.5
    slow.step(t)
    slow.set_target(np.array([1.0]))
    _, qs, _ = _run(slow, t, 0.1)
    _, qf, _ = _run(arm, t, 0.1)
    assert qs[0] < qf[0] / 3


def test_arm_follows_a_forwarded_trajectory():
    arm = SimArm(np.zeros(1), 0.005, np.array([10.0]))
    arm.step(0.0)
    traj, _ = splice(0.0, np.zeros(1), np.zeros(1), np.zeros(1), np.array([0.5, 1.0]),
                     np.array([[0.5], [1.0]]), None, None)
    arm.set_trajectory(traj)
    _, q, _ = _run(arm, 0.0, 1.2)
    assert q[0] == pytest.approx(1.0, abs=1e-3)


def test_bad_arm_settings_are_refused():
    with pytest.raises(ConfigError, match='max_velocity'):
        SimArm(np.zeros(2), 0.1, np.array([1.0]))
    with pytest.raises(ConfigError, match='time_constant'):
        SimArm(np.zeros(1), 0.0, np.array([1.0]))


def test_delay_line_returns_the_value_from_latency_ago():
    d = DelayLine(horizon=1.0)
    assert d.at(0.0) is None
    for i in range(100):
        d.push(i * 0.01, i)
    assert d.at(0.995) == 99
    assert d.at(0.5) == 50
    assert d.at(-1.0) is None
