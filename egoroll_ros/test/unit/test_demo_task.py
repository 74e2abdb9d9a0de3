"""The scripted reach task and its expert, validated offline on the installed demo arm."""

import numpy as np
import pytest

from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.errors import ConfigError
from egoroll_ros.sim import demo_task
from egoroll_ros.sim.demo_task import (
    DEMO_JOINTS,
    HOME,
    ExpertConfig,
    ReachExpert,
    Workspace,
    reached,
    rollout,
)

STARTS = {
    'home': HOME,
    'straight_up': (0.0,) * 8,
    'twisted': (-0.8, 0.6, -0.5, 1.5, 0.5, 1.2, -2.0, 0.04),
}
WS = Workspace()
TARGETS = {
    'centre': tuple((np.add(WS.lower, WS.upper) / 2).tolist()),
    'near_low_right': (WS.lower[0], WS.lower[1], WS.lower[2]),
    'far_high_left': (WS.upper[0], WS.upper[1], WS.upper[2]),
    'far_low_left': (WS.upper[0], WS.upper[1], WS.lower[2]),
}


@pytest.fixture(scope='module')
def model():
    return RobotModel.from_file(demo_task.demo_urdf_path())


@pytest.fixture(scope='module')
def expert(model):
    return ReachExpert(model)


@pytest.mark.parametrize('start', sorted(STARTS))
@pytest.mark.parametrize('target', sorted(TARGETS))
def test_expert_reaches_the_target_within_thirty_chunks(expert, start, target):
    result = rollout(expert, STARTS[start], TARGETS[target], max_chunks=30,
                     points_per_chunk=10)
    assert result.reached, f'{start} -> {target}: {result.final_distance:.3f} m left'
    assert reached(expert.tool_position(result.final_positions), TARGETS[target])


@pytest.mark.parametrize('start', sorted(STARTS))
def test_expert_chunks_stay_within_the_urdf_limits(model, expert, start):
    target = TARGETS['far_low_left']
    result = rollout(expert, STARTS[start], target, max_chunks=30, points_per_chunk=10)
    assert result.chunks
    for q0, chunk in zip(result.starts, result.chunks, strict=True):
        assert chunk.joint_names == DEMO_JOINTS
        assert chunk.positions.shape == (20, 8) and np.all(np.isfinite(chunk.positions))
        assert np.allclose(np.diff(chunk.times), 0.05) and chunk.times[0] == pytest.approx(0.05)
        path = np.vstack([q0, chunk.positions])
        speed = np.abs(np.diff(path, axis=0)) / 0.05
        for j, name in enumerate(DEMO_JOINTS):
            info = model.joints[name]
            assert np.all(speed[:, j] <= info.velocity + 1e-9), name
            if not info.continuous:
                assert np.all(chunk.positions[:, j] >= info.lower), name
                assert np.all(chunk.positions[:, j] <= info.upper), name
        assert np.allclose(chunk.velocities, np.diff(path, axis=0) / 0.05)


def test_expert_keeps_wrist_roll_and_gripper_nearly_still(expert):
    result = rollout(expert, HOME, TARGETS['far_low_left'], max_chunks=30, points_per_chunk=10)
    moved = np.abs(result.final_positions - np.asarray(HOME))
    assert moved[DEMO_JOINTS.index('wrist_roll')] < 0.15
    assert moved[DEMO_JOINTS.index('gripper')] == 0.0
    assert moved.max() > 0.3  # the arm did move


def test_every_chunk_stays_within_the_demo_gates_soft_translation_limit(expert):
    result = rollout(expert, STARTS['straight_up'], TARGETS['near_low_right'], max_chunks=30,
                     points_per_chunk=10)
    for q0, chunk in zip(result.starts, result.chunks, strict=True):
        tool0 = expert.tool_position(q0)
        far = max(np.linalg.norm(expert.tool_position(q) - tool0) for q in chunk.positions)
        assert far < 0.09


def test_expert_is_smooth_across_chunk_boundaries(expert):
    result = rollout(expert, HOME, TARGETS['far_high_left'], max_chunks=30, points_per_chunk=10)
    assert len(result.chunks) >= 2
    for prev, nxt in zip(result.chunks, result.chunks[1:], strict=False):
        # The next chunk (planned from the 10th point) continues the previous one.
        assert np.allclose(nxt.positions[:10], prev.positions[10:], atol=1e-6)


def test_expert_holds_still_at_the_target(expert):
    target = expert.tool_position(HOME)
    chunk = expert.chunk(HOME, target)
    assert np.allclose(chunk.positions, np.asarray(HOME), atol=1e-3)


def test_workspace_sampling_is_seeded_and_inside_the_box():
    a = [WS.sample(np.random.default_rng(7)) for _ in range(3)]
    b = [WS.sample(np.random.default_rng(7)) for _ in range(3)]
    assert np.array_equal(a, b)
    rng = np.random.default_rng(1)
    assert all(WS.contains(WS.sample(rng)) for _ in range(100))
    assert not WS.contains((0.0, 0.0, 0.0))


def test_reached_uses_the_tolerance():
    assert reached((0.4, 0.0, 0.2), (0.4, 0.0, 0.229))
    assert not reached((0.4, 0.0, 0.2), (0.4, 0.0, 0.231))
    assert reached((0.4, 0.0, 0.2), (0.4, 0.0, 0.25), tolerance=0.06)


def test_expert_refuses_unknown_joints_and_bad_tuning(model):
    with pytest.raises(ConfigError, match='elbow_typo'):
        ReachExpert(model, joint_names=DEMO_JOINTS[:3] + ('elbow_typo',) + DEMO_JOINTS[4:])
    with pytest.raises(ConfigError, match='weights'):
        ReachExpert(model, config=ExpertConfig(weights=(1.0,)))
