"""The trajectory structure check shared by the gate and the executor (core/validation.py)."""

from __future__ import annotations

import math

from gate_testlib import arm_config, arm_model
import numpy as np
import pytest

from egoroll_ros.core.executor import ExecutorConfig, MeasuredState, validate_goal
from egoroll_ros.core.gate import check
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.core.validation import check_structure
from egoroll_ros.errors import TrajectoryError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

CONFIG = arm_config()
J = CONFIG.joints
N = len(J)
EXECUTOR = ExecutorConfig(joints=J, max_velocity=(1.0,) * N, max_acceleration=(5.0,) * N,
                          max_jerk=(100.0,) * N)


def _traj(times, pos, names=J, vel=None) -> JointTrajectoryData:
    return JointTrajectoryData(joint_names=tuple(names), times=np.asarray(times, float),
                               positions=np.asarray(pos, float), stamp=10.0,
                               velocities=None if vel is None else np.asarray(vel, float))


def test_a_well_formed_trajectory_comes_back_in_configured_order():
    names = tuple(reversed(J))
    pos = np.arange(2 * N, dtype=float).reshape(2, N)
    s = check_structure(_traj([0.1, 0.2], pos, names=names), J)
    assert s.problems == [] and s.usable and s.error() is None
    np.testing.assert_array_equal(s.positions, pos[:, ::-1])


BAD_NAN = np.zeros((1, N))
BAD_NAN[0, 1] = math.nan

CASES = [
    (_traj([0.1], np.zeros((1, N + 1)), names=(*J, J[0])), 'joint_names', 'INVALID_JOINTS',
     f'duplicate: {J[0]}'),
    (_traj([0.1], np.zeros((1, N)), names=(*J[:-1], 'x')), 'joint_names', 'INVALID_JOINTS',
     'unknown: x'),
    (_traj([0.1], np.zeros((1, N - 1)), names=J[:-1]), 'joint_names', 'INVALID_JOINTS',
     f'missing: {J[-1]}'),
    (_traj([], np.zeros((0, N))), 'structure', 'EMPTY_TRAJECTORY', 'no points'),
    (_traj([0.1], np.zeros((1, N)), vel=[[0.0]]), 'structure', 'SIZE_MISMATCH', 'velocities'),
    (_traj([0.1, 0.2], np.zeros((1, N))), 'structure', 'SIZE_MISMATCH', 'positions'),
    (_traj([0.1], BAD_NAN), 'finite', 'NON_FINITE', f"'{J[1]}' at point 0: positions"),
    (_traj([math.inf], np.zeros((1, N))), 'finite', 'NON_FINITE', 'time_from_start of point 0'),
    (_traj([0.2, 0.2], np.zeros((2, N))), 'time_increasing', 'TIME_NOT_INCREASING', 'point 1'),
]


@pytest.mark.parametrize('traj, stage, code, text', CASES)
def test_the_gate_and_the_executor_refuse_the_same_structure_for_the_same_reason(
        traj, stage, code, text):
    s = check_structure(traj, J)
    assert s.problems and s.problems[0].check == stage
    err = s.error()
    assert err.code == code and text in str(err)
    with pytest.raises(TrajectoryError) as exc:
        validate_goal(traj, 1, 'gate', config=EXECUTOR, last_sequence=None,
                      ros_now=10.0, mono_now=10.0,
                      measured=MeasuredState(np.zeros(N), None, 10.0))
    assert exc.value.code == code and text in str(exc.value)
    verdict = check(Chunk(sequence=1, policy_id='ab' * 32, stamp=10.0, trajectory=traj),
                    None, arm_model(), CONFIG, now=10.0)
    assert verdict.rejected and stage in {v.check for v in verdict.violations}
