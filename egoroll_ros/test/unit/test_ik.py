"""IK accuracy on the demo arm and on real robot URDFs, seeding, limits and branch flips."""

from __future__ import annotations

from pathlib import Path
import sysconfig

import numpy as np
import pytest

from egoroll_ros.core.ik import ArmIk, IkParams
from egoroll_ros.core.robot_model import RobotModel

DEMO = Path(__file__).resolve().parents[2] / 'urdf' / 'demo_arm.urdf'
ERD = Path(sysconfig.get_paths()['purelib']) / 'cmeel.prefix/share/example-robot-data/robots'
ROBOTS = {
    'demo_arm': (DEMO, 'tool0'),
    'panda': (ERD / 'panda_description/urdf/panda.urdf', 'panda_hand'),
    'ur5': (ERD / 'ur_description/urdf/ur5_robot.urdf', 'tool0'),
}


def _finite_bounds(ik: ArmIk) -> tuple[np.ndarray, np.ndarray]:
    lo = np.where(np.isfinite(ik.lower), ik.lower, -np.pi)
    hi = np.where(np.isfinite(ik.upper), ik.upper, np.pi)
    return lo, hi


@pytest.mark.parametrize('robot', sorted(ROBOTS))
def test_random_reachable_poses_are_solved_within_1mm_and_1mrad(robot):
    path, frame = ROBOTS[robot]
    model = RobotModel.from_file(path)
    ik = ArmIk(model, frame)
    lo, hi = _finite_bounds(ik)
    rng = np.random.default_rng(7)
    for _ in range(100):
        q_true = rng.uniform(lo + 0.1, hi - 0.1)
        p, r = ik.fk(q_true)
        seed = np.clip(q_true + rng.normal(scale=0.05, size=q_true.shape), lo, hi)
        res = ik.solve_path(p[None], r[None], seed)
        assert res.ok, (res.failure, res.failure_value)
        # Independent check: Pinocchio's own FK of the solution.
        p_ref, r_ref = model.fk_reference(frame, ik.joints, res.positions[0])
        assert np.linalg.norm(p_ref - p) < 1e-3
        cos = (np.trace(r_ref.T @ r) - 1.0) / 2.0
        assert np.arccos(np.clip(cos, -1, 1)) < 1e-3
        assert np.all(res.positions[0] >= ik.lower) and np.all(res.positions[0] <= ik.upper)


@pytest.mark.parametrize('robot', sorted(ROBOTS))
def test_a_path_is_followed_from_the_measured_seed(robot):
    path, frame = ROBOTS[robot]
    ik = ArmIk(RobotModel.from_file(path), frame)
    lo, hi = _finite_bounds(ik)
    q0 = 0.6 * lo + 0.4 * hi
    qs = q0 + np.linspace(0, 1, 51)[1:, None] * 0.1 * (hi - lo) / 2
    poses = [ik.fk(q) for q in qs]
    res = ik.solve_path(np.array([p for p, _ in poses]), np.array([r for _, r in poses]), q0)
    assert res.ok
    assert np.all(res.position_errors < 1e-4) and np.all(res.rotation_errors < 1e-4)
    assert np.abs(np.diff(np.vstack([q0, res.positions]), axis=0)).max() < 0.1


def test_an_unreachable_pose_does_not_converge():
    ik = ArmIk(RobotModel.from_file(DEMO), 'tool0')
    q0 = np.zeros(7)
    p, r = ik.fk(q0)
    res = ik.solve_path((p + [0, 0, 0.5])[None], r[None], q0)      # above the stretched arm
    assert not res.ok and res.failure == 'ik_not_converged' and res.failed_point == 0
    assert res.failure_value > res.failure_limit


def test_joint_limits_are_respected_so_a_pose_beyond_them_fails():
    model = RobotModel.from_file(DEMO)
    ik = ArmIk(model, 'tool0')
    q = np.array([0.0, 0.5, 0.0, 1.0, 0.0, 0.5, 0.0])
    target = q.copy()
    target[0] = 2.95                                            # pan limit is 2.9
    p, r = ik.fk(target)
    limited = ArmIk(model, 'tool0', lower=ik.lower, upper=np.where(
        np.arange(7) == 0, 2.0, ik.upper), params=IkParams(max_joint_jump=10.0))
    res = limited.solve_path(p[None], r[None], q)
    assert not res.ok or res.positions[0][0] <= 2.0
    assert np.all(res.positions[:, 0] <= 2.0)


def wrist_flip_case() -> tuple[ArmIk, np.ndarray, np.ndarray, np.ndarray]:
    """Demo arm with the wrist nearly straight (wrist_pitch 0.002): forearm_roll and wrist_roll
    almost align, so a 0.02 rad turn of tool0 about the base x axis needs the rolls to swing
    by ~0.9 rad. Returns (ik, q0, target position, target rotation)."""
    ik = ArmIk(RobotModel.from_file(DEMO), 'tool0')
    q0 = np.array([0.0, 0.3, 0.0, 0.0, 0.0, 0.002, 0.0])
    p, r = ik.fk(q0)
    a = 0.02
    turn = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    return ik, q0, p, turn @ r


def test_near_the_wrist_singularity_a_small_rotation_is_a_branch_flip():
    ik, q0, p, r = wrist_flip_case()
    res = ik.solve_path(p[None], r[None], q0)
    assert not res.ok
    assert res.failure == 'ik_branch_flip', res.failure
    assert res.failure_joint in ('forearm_roll', 'wrist_roll')
    assert res.failure_value > 0.35
    # The same target with a permissive jump limit converges: the rejection is the flip.
    loose = ArmIk(RobotModel.from_file(DEMO), 'tool0', params=IkParams(max_joint_jump=3.0))
    assert loose.solve_path(p[None], r[None], q0).ok
