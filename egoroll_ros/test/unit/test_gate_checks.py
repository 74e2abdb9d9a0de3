"""Each safety-gate check: at and just beyond its boundary, and load-bearing on its own."""

from __future__ import annotations

import dataclasses

from gate_testlib import (
    ARM,
    STAMP,
    arm_config,
    arm_model,
    bimanual_model,
    linear_chunk,
    make_chunk,
    measured,
    reference_check,
)
import numpy as np
import pytest

from egoroll_ros.core.gate import (
    OPTIONAL_CHECKS,
    GateConfig,
    check,
)
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.errors import ConfigError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

MODEL = arm_model()
CFG = arm_config()
J = CFG.joints
QM = np.array([0.1, 0.2, 0.0, 0.3, 0.02])
NOW = STAMP + 0.01
DT = 0.05


def times(n: int = 10, dt: float = DT, t0: float | None = None) -> np.ndarray:
    return (dt if t0 is None else t0) + dt * np.arange(n)


def run(chunk: Chunk, qm: np.ndarray | None = QM, cfg: GateConfig = CFG, now: float = NOW,
        received: float = 0.0, steady_now: float | None = 0.0, model=MODEL):
    ms = None if qm is None else measured(cfg.joints, qm, received=received)
    return check(chunk, ms, model, cfg, now=now, steady_now=steady_now)


def checks(verdict) -> set[str]:
    return {v.check for v in verdict.violations}


def good(qm: np.ndarray = QM, v=(0.1, -0.1, 0.2, 0.1, 0.0), n: int = 10) -> Chunk:
    return linear_chunk(J, qm, np.array(v), times(n))


def steps_chunk(qm: np.ndarray, deltas: list[np.ndarray], dts: list[float]) -> Chunk:
    """Points reached by the given per-step deltas and time steps from the measured state."""
    q = np.array(qm, float)
    t, pos, ts = 0.0, [], []
    for d, dt in zip(deltas, dts, strict=True):
        q = q + d
        t += dt
        pos.append(q.copy())
        ts.append(t)
    return make_chunk(J, np.array(ts), np.array(pos))


def test_a_smooth_chunk_is_accepted_with_no_violation_and_its_ee_path():
    verdict = run(good())
    assert verdict.accepted and not verdict.needs_confirmation, verdict.summary
    assert verdict.summary == 'accepted'
    assert verdict.ee_paths.shape == (1, 11, 3)
    assert verdict.check_duration > 0


def test_joint_order_in_the_chunk_does_not_matter():
    chunk = good()
    perm = [4, 2, 0, 3, 1]
    traj = chunk.trajectory
    shuffled = make_chunk(tuple(J[i] for i in perm), traj.times, traj.positions[:, perm])
    assert run(shuffled).accepted


# ---- one chunk per check that ONLY that check rejects (removing a check fails a test) ----

STRAIGHT = np.array([0.0, 0.0, 0.0, 0.0, 0.02])


def _unique_cases() -> dict[str, dict]:
    z = np.zeros(5)
    cases: dict[str, dict] = {}
    chunk = good()
    traj = chunk.trajectory
    cases['joint_names'] = dict(chunk=make_chunk(('pan', 'lift', 'roll', 'wrist', 'grip'),
                                                 traj.times, traj.positions))
    cases['structure'] = dict(chunk=chunk, cfg=arm_config(max_points=5))
    bad = traj.positions.copy()
    bad[3, 2] = np.nan
    cases['finite'] = dict(chunk=make_chunk(J, traj.times, bad))
    t = traj.times.copy()
    t[4], t[5] = t[5], t[4]
    cases['time_increasing'] = dict(chunk=make_chunk(J, t, traj.positions))
    gap = times(10)
    gap[5:] += 0.6
    cases['point_spacing'] = dict(chunk=linear_chunk(J, QM, np.array([0.1, 0, 0, 0, 0]), gap))
    cases['chunk_age'] = dict(chunk=good(n=20), now=STAMP + 0.55)
    cases['chunk_in_past'] = dict(chunk=good(n=3), now=STAMP + 0.3)
    near = QM.copy()
    near[0] = 1.97
    cases['position_limit'] = dict(chunk=make_chunk(J, times(3), np.tile(
        near + [0.015, 0, 0, 0, 0], (3, 1))), qm=near)
    roll = np.array([0, 0, 1, 0, 0.0])
    cases['max_step'] = dict(chunk=steps_chunk(QM, [z, 0.25 * roll, z], [DT, 0.3, DT]))
    cases['velocity_limit'] = dict(chunk=good(v=(0, 0, 1.7, 0, 0)))
    osc = [(1 if k % 2 else -1) * 0.05 * roll for k in range(10)]
    cases['acceleration_limit'] = dict(chunk=steps_chunk(QM, osc, [DT] * 10))
    # Accelerations of 8 rad/s^2 (limit 20) that flip sign at every point: 320 rad/s^3.
    wig = [(1 if k % 2 else -1) * 0.01 * roll for k in range(10)]
    cases['jerk_limit'] = dict(chunk=steps_chunk(QM, wig, [DT] * 10),
                               cfg=arm_config(jerk_limits=(200.0,)))
    cases['start_deviation'] = dict(chunk=steps_chunk(QM, [0.17 * roll, z, z], [0.2, DT, DT]))
    pan_roll = np.array([0.19, 0, 0.19, 0, 0])
    cases['ee_rotation_jump'] = dict(chunk=steps_chunk(STRAIGHT, [z, pan_roll, z],
                                                       [DT, 0.25, DT]), qm=STRAIGHT)
    lift = np.array([0, 1.0, 0, 0, 0])
    cases['ee_translation_jump'] = dict(chunk=steps_chunk(STRAIGHT, [z, 0.15 * lift, z],
                                                          [DT, 0.25, DT]), qm=STRAIGHT)
    cases['ee_workspace'] = dict(chunk=steps_chunk(STRAIGHT, [z, z], [DT, DT]), qm=STRAIGHT,
                                 cfg=arm_config(ee_workspace_max=(1.0, 1.0, 0.69)))
    cases['ee_hard_translation'] = dict(chunk=steps_chunk(STRAIGHT, [0.02 * lift] * 30,
                                                          [DT] * 30), qm=STRAIGHT)
    cases['gripper_range'] = dict(chunk=make_chunk(J, times(3), np.tile(
        QM + [0, 0, 0, 0, 0.017], (3, 1))), qm=QM + [0, 0, 0, 0, 0.017])
    cases['joint_state'] = dict(chunk=good(), received=-1.0)
    cases['robot_model'] = dict(chunk=good(), model=None)
    return cases


UNIQUE = _unique_cases()


@pytest.mark.parametrize('name', sorted(UNIQUE))
def test_each_check_alone_rejects_its_own_chunk(name):
    verdict = run(**UNIQUE[name])
    assert verdict.rejected, f'{name}: {verdict.summary}'
    hard = {v.check for v in verdict.violations if not v.soft}
    assert hard == {name}, verdict.summary
    if name in OPTIONAL_CHECKS:
        off = dataclasses.replace(UNIQUE[name].get('cfg', CFG),
                                  disabled_checks=frozenset({name}))
        again = run(**{**UNIQUE[name], 'cfg': off})
        assert not again.rejected, f'{name} disabled still rejects: {again.summary}'


def test_every_optional_check_has_a_chunk_only_it_rejects():
    assert set(OPTIONAL_CHECKS) - {'ee_soft_translation'} <= set(UNIQUE)


def test_soft_translation_needs_confirmation_and_hard_rejects():
    lift = np.array([0, 0.02, 0, 0, 0])
    soft = steps_chunk(STRAIGHT, [lift] * 15, [DT] * 15)    # ~0.15 m
    verdict = run(soft, qm=STRAIGHT)
    assert verdict.needs_confirmation and not verdict.rejected, verdict.summary
    assert checks(verdict) == {'ee_soft_translation'}
    assert all(v.soft for v in verdict.violations)
    assert verdict.summary.startswith('needs confirmation')
    off = dataclasses.replace(CFG, disabled_checks=frozenset({'ee_soft_translation'}))
    assert run(soft, qm=STRAIGHT, cfg=off).accepted
    hard = run(**UNIQUE['ee_hard_translation'])
    assert not hard.needs_confirmation


def test_every_violation_is_reported_not_only_the_first():
    chunk = good(v=(0, 0, 1.7, 0, 0), n=10)       # velocity on every step
    verdict = run(chunk, now=STAMP + 0.55)         # and too old
    vel = [v for v in verdict.violations if v.check == 'velocity_limit']
    # The seam (measured -> point 0) is not differenced: the chunk's own steps, points 1..9.
    assert [v.point_index for v in vel] == list(range(1, 10))
    assert all(v.subject == 'roll' and v.limit == pytest.approx(1.5) for v in vel)
    assert vel[0].value == pytest.approx(1.7)
    assert 'chunk_age' in checks(verdict)


# ---- boundaries: at the limit passes, just beyond fails ----

def test_position_limit_boundary_includes_margin():
    upper = 2.0 - CFG.position_margin
    at = QM.copy()
    at[0] = upper
    chunk = make_chunk(J, times(3), np.tile(at, (3, 1)))
    assert run(chunk, qm=at).accepted
    beyond = at.copy()
    beyond[0] = np.nextafter(upper, 3.0)
    v = run(make_chunk(J, times(3), np.tile(beyond, (3, 1))), qm=at)
    assert checks(v) == {'position_limit'}
    assert v.violations[0].limit == upper and v.violations[0].subject == 'pan'


def test_max_step_boundary():
    cfg = arm_config(max_step=(0.25, 0.25, 0.25, 0.25, 0.01))
    qm = np.array([0.0, 0.0, 0.5, 0.0, 0.02])
    z = np.zeros(5)
    at = steps_chunk(qm, [z, np.array([0, 0, 0.25, 0, 0]), z], [DT, 0.5, DT])
    assert 'max_step' not in checks(run(at, qm=qm, cfg=cfg))
    beyond = steps_chunk(qm, [z, np.array([0, 0, 0.25 + 1e-9, 0, 0]), z], [DT, 0.5, DT])
    v = run(beyond, qm=qm, cfg=cfg)
    assert {(x.check, x.subject, x.point_index) for x in v.violations} == {('max_step', 'roll', 1)}


def test_gripper_range_boundary():
    at = QM + [0, 0, 0, 0, 0.015]                  # 0.035 exactly
    assert run(make_chunk(J, times(3), np.tile(at, (3, 1))), qm=at).accepted
    beyond = at + [0, 0, 0, 0, 1e-9]
    assert checks(run(make_chunk(J, times(3), np.tile(beyond, (3, 1))), qm=at)) == \
        {'gripper_range'}


def test_chunk_age_boundary_and_future_stamp():
    assert 'chunk_age' not in checks(run(good(n=20), now=STAMP + 0.5))
    assert 'chunk_age' in checks(run(good(n=20), now=STAMP + 0.5 + 1e-6))
    assert 'chunk_age' not in checks(run(good(n=20), now=STAMP - 0.1))
    assert 'chunk_age' in checks(run(good(n=20), now=STAMP - 0.1 - 1e-6))


def test_joint_state_staleness_boundary():
    assert run(good(), received=0.0, steady_now=0.2).accepted
    assert checks(run(good(), received=0.0, steady_now=0.2 + 1e-6)) == {'joint_state'}


def test_missing_measured_state_rejects_with_joint_state():
    verdict = run(good(), qm=None)
    assert checks(verdict) == {'joint_state'}
    partial = measured(J[:4], QM[:4])
    v = check(good(), partial, MODEL, CFG, now=NOW)
    assert checks(v) == {'joint_state'} and 'gripper' in v.violations[0].message


# ---- continuous joints ----

def test_continuous_joint_has_no_position_limit_but_its_steps_count():
    far = QM.copy()
    far[2] = 12.0                                   # ~2 turns: legal for a continuous joint
    assert run(good(qm=far), qm=far).accepted


def test_wrap_around_on_a_continuous_joint_is_a_huge_step_and_rejected():
    qm = QM.copy()
    qm[2] = 3.1
    pos = np.tile(qm, (5, 1))
    pos[:, 2] = -3.1                                # same angle modulo 2 pi, 6.2 rad of travel
    verdict = run(make_chunk(J, times(5), pos), qm=qm)
    assert verdict.rejected
    step = [v for v in verdict.violations if v.check == 'max_step']
    assert step and step[0].subject == 'roll' and step[0].value == pytest.approx(-6.2)
    # The end effector's rotation barely changes (0.08 rad): only the raw joint checks see it.
    assert 'ee_rotation_jump' not in checks(verdict)


def test_unwrapped_continuous_chunk_beyond_pi_is_legal():
    qm = QM.copy()
    qm[2] = 3.1
    assert run(good(qm=qm, v=(0, 0, 1.0, 0, 0)), qm=qm).accepted    # goes to 3.6 rad


# ---- bimanual: two end-effector frames ----

def test_bimanual_reports_the_offending_arm_frame_only():
    model = bimanual_model()
    cfg = arm_config(('left_', 'right_'))
    qm = np.zeros(10)
    qm[[4, 9]] = 0.02
    z = np.zeros(10)
    jump = np.zeros(10)
    jump[6] = 0.15                                  # right lift
    q, t, pos, ts = qm.copy(), 0.0, [], []
    for d, dt in ((z, DT), (jump, 0.25), (z, DT)):
        q, t = q + d, t + dt
        pos.append(q.copy())
        ts.append(t)
    chunk = make_chunk(cfg.joints, np.array(ts), np.array(pos))
    ms = measured(cfg.joints, qm)
    verdict = check(chunk, ms, model, cfg, now=NOW)
    assert {(v.check, v.subject) for v in verdict.violations} == \
        {('ee_translation_jump', 'right_tool0')}
    assert verdict.ee_paths.shape == (2, 4, 3)
    assert verdict.ee_paths[0, 0, 1] == pytest.approx(0.3)      # left arm mounted at +y
    assert reference_check(chunk, qm, model, cfg, NOW) == \
        {(v.check, v.subject, v.point_index) for v in verdict.violations}


# ---- configuration errors name the parameter ----

@pytest.mark.parametrize('kw, name', [
    (dict(ee_hard_translation=0.05), 'ee_hard_translation'),
    (dict(max_step=(0.1, 0.2)), 'max_step'),
    (dict(disabled_checks=frozenset({'finite'})), 'disabled_checks'),
    (dict(velocity_scale=1.5), 'velocity_scale'),
    (dict(position_limits=(('nope', 0.0, 1.0),)), 'position_limit_joints'),
    (dict(position_limits=(('pan', 1.0, 0.5),)), 'position_limit_lower'),
    (dict(ee_workspace_min=(0, 0)), 'ee_workspace_min'),
])
def test_bad_configuration_names_the_parameter(kw, name):
    with pytest.raises(ConfigError, match=f"'{name}'"):
        arm_config(**kw)


def test_position_limit_override_must_lie_within_the_urdf():
    cfg = arm_config(position_limits=(('pan', -2.5, 1.0),))
    verdict = run(good(), cfg=cfg)
    assert checks(verdict) == {'robot_model'} and 'position_limit_lower' in verdict.summary
    tight = arm_config(position_limits=(('pan', -1.0, 0.105),))
    assert checks(run(good(), cfg=tight)) == {'position_limit'}


def test_config_for_another_robot_rejects_with_robot_model():
    cfg = GateConfig(joints=('a', 'b'))
    chunk = Chunk(1, 'x', STAMP, JointTrajectoryData(('a', 'b'), np.array([0.1]),
                                                     np.zeros((1, 2)), stamp=STAMP))
    verdict = check(chunk, measured(('a', 'b'), np.zeros(2)), MODEL, cfg, now=NOW)
    assert checks(verdict) == {'robot_model'}


def test_ee_frame_depending_on_an_uncontrolled_joint_is_a_model_mismatch():
    cfg = GateConfig(joints=('pan', 'lift'), ee_frames=('tool0',))
    chunk = make_chunk(('pan', 'lift'), times(2), np.zeros((2, 2)))
    verdict = check(chunk, measured(('pan', 'lift'), np.zeros(2)), MODEL, cfg, now=NOW)
    assert checks(verdict) == {'robot_model'} and 'roll' in verdict.summary


def test_declared_velocities_and_accelerations_are_checked():
    chunk = good()
    tr = chunk.trajectory
    vel = np.zeros_like(tr.positions)
    vel[2, 1] = 1.2                                 # lift limit 2.0 * 0.5
    acc = np.zeros_like(tr.positions)
    acc[4, 0] = 25.0
    c = make_chunk(J, tr.times, tr.positions, velocities=vel, accelerations=acc)
    got = {(v.check, v.subject, v.point_index) for v in run(c).violations}
    assert got == {('velocity_limit', 'lift', 2), ('acceleration_limit', 'pan', 4)}


def test_all_arm_joints_are_in_the_test_config():
    assert J == ARM


def test_chunks_are_checked_against_the_state_their_observation_saw():
    """A moving arm: point 0 continues from the state at the observation stamp; the newer
    measurement (the arm kept moving during inference) must not make it look like a reversal.
    The history keeps its seconds at any rate: at 1 kHz the state 0.3 s back is still there."""
    from egoroll_ros.core.joint_state_vetting import JointStateHistory
    from egoroll_ros.core.types import JointStateData

    names = ('a', 'b')
    history = JointStateHistory(5.0)
    assert history.measured_at(10.0) is None
    for k in range(30):
        history.append(JointStateData(names, np.array([0.01 * k, 0.0]), stamp=10.0 + 0.01 * k,
                                      received=100.0 + 0.01 * k))
    seen = history.measured_at(10.105)
    assert seen.stamp == pytest.approx(10.10) and seen.positions[0] == pytest.approx(0.10)
    assert seen.received == history[-1].received, 'staleness is judged on the newest sample'
    oldest = history.measured_at(9.0)
    assert oldest.stamp == history[0].stamp and oldest.received == history[-1].received
    assert history.measured_at(11.0) is history[-1]
    fast = JointStateHistory(5.0)
    for k in range(8000):                                    # 8 s of a 1 kHz broadcaster
        fast.append(JointStateData(names, np.array([k * 1e-3, 0.0]), stamp=k * 1e-3,
                                   received=k * 1e-3))
    assert fast.measured_at(7.999 - 0.3).stamp == pytest.approx(7.699)
    assert fast[0].stamp >= 7.999 - 5.0 - 0.07 and len(fast) <= 5000 + 64


def _run_q(chunk: Chunk, cfg: GateConfig = CFG, qm=QM):
    return check(chunk, measured(cfg.joints, qm), MODEL, cfg, now=NOW, steady_now=0.0)


# ---- the seam is the executor's: the gate judges the chunk's own points ---------------------

def test_a_chunk_leaving_at_a_velocity_the_arm_is_not_running_is_judged_by_its_own_points():
    # A straight line at -0.5 rad/s on 'pan' from the measured position. Whatever the arm is
    # doing when it arrives (running +0.5 rad/s, say), the gate judges what the chunk asks
    # for: no acceleration along it. The executor joins it from its actual running state
    # within its limits or refuses the join (test_executor_blend), the one layer that knows
    # that state at the join time.
    cfg = arm_config(acceleration_limits=(10.0,), jerk_limits=(100.0,))
    back = good(v=(-0.5, 0.0, 0.0, 0.0, 0.0))
    assert _run_q(back, cfg).accepted
    # A chunk that turns round WITHIN its own points is rejected at the point where it does.
    turn = back.trajectory.positions.copy()
    turn[5:, 0] = turn[4, 0] + 0.5 * (turn[5:, 0] - turn[4, 0]) * -1.0
    v = _run_q(make_chunk(J, back.trajectory.times, turn), cfg)
    assert checks(v) == {'acceleration_limit', 'jerk_limit'}
    assert min(x.point_index for x in v.violations if x.check == 'acceleration_limit') == 4


def _lagging_gripper(lag: float = 0.004, v: float = -0.03):
    """The executor closes the gripper at ``v`` (limit 0.05 m/s); the measured position lags
    its setpoint by ``lag``; the next chunk continues the setpoint's motion (a takeover's
    teleop chunk while the gripper moves)."""
    qc = QM.copy()
    qc[4] -= lag
    vel = np.array([0.0, 0.0, 0.0, 0.0, v])
    return linear_chunk(J, qc, vel, times())


def test_a_chunk_continuing_the_setpoint_is_accepted_though_the_measured_state_lags():
    # Differenced from the lagging measured position the seam would look like 0.11 m/s
    # (> 0.05): the defect of issue 22 (a takeover faulted the rollout).
    chunk = _lagging_gripper()
    verdict = _run_q(chunk)
    assert verdict.accepted, verdict.summary


def test_the_first_step_is_still_bounded_against_the_measured_position():
    chunk = _lagging_gripper()
    # start_deviation 0.04 and max_step 0.01 on the gripper: 15 mm from the measured position.
    far = make_chunk(J, chunk.trajectory.times,
                     chunk.trajectory.positions + np.array([0, 0, 0, 0, -0.011]))
    assert 'max_step' in checks(_run_q(far))
    # and every step between the chunk's own points is checked, named from point 1
    fast = linear_chunk(J, QM, np.array([1.2, 0, 0, 0, 0]), times())
    assert {(v.subject, v.point_index) for v in _run_q(fast).violations
            if v.check == 'velocity_limit'} == {('pan', k) for k in range(1, 10)}


