"""One rollout step (core/step.py) through the policy's action space (core/action_space.py):
the same call for joint and Cartesian policies, no caller branching on the action space."""

from __future__ import annotations

from pathlib import Path

from cartesian_fakes import BACKEND as CART_BACKEND
from cartesian_fakes import write_checkpoint
import numpy as np
from policy_fakes import BACKEND, JOINTS, make_fake_checkpoint
import pytest

from egoroll_ros.core.action_space import CartesianActionSpace, JointActionSpace
from egoroll_ros.core.cartesian import CartesianChunk
from egoroll_ros.core.gate import GateConfig
from egoroll_ros.core.inference import setup_from_params
from egoroll_ros.core.observation import JOINT_STATES, LatestInputs, StaleInputError
from egoroll_ros.core.policy import CartesianArm, CartesianSpec
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.step import rollout_step
from egoroll_ros.core.types import Chunk, JointStateData
from egoroll_ros.policies.loading import load_policy
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME

URDF = Path(__file__).resolve().parents[2] / 'urdf' / 'demo_arm.urdf'


def _params(backend: str, cartesian: bool) -> dict:
    p = {'joints': list(JOINTS), 'continuous_joints': [], 'cameras.names': [],
         'cameras.heights': [], 'cameras.widths': [], 'cameras.compressed': [],
         'quest.grip_axes': [-1, -1], 'quest.trigger_axes': [-1, -1],
         'policy.backend': backend, 'policy.isolated': False, 'policy.num_threads': 0,
         'policy.expected_fingerprint': '', 'max_age.camera': 0.2,
         'max_age.joint_states': 0.1, 'max_age.quest': 0.2, 'max_clock_offset': 0.5,
         'urdf_path': str(URDF),
         'cartesian.camera_frames': [], 'cartesian.camera_poses': []}
    if cartesian:
        p.update({'cartesian.arms': ['arm'], 'cartesian.ee_frames': ['tool0'],
                  'cartesian.gripper_joints': ['gripper']})
    return p


def _inputs(q, t: float = 5.0) -> LatestInputs:
    store = LatestInputs([JOINT_STATES])
    store.put(JOINT_STATES, JointStateData(tuple(DEMO_JOINTS), np.asarray(q, float),
                                           received=t), t, t)
    return store


@pytest.fixture(params=['joint', 'cartesian'])
def loaded(request, tmp_path):
    assert tuple(JOINTS) == DEMO_JOINTS
    if request.param == 'joint':
        path, p = make_fake_checkpoint(tmp_path / 'ck'), _params(BACKEND, False)
    else:
        spec = CartesianSpec((CartesianArm('arm', 'tool0', 'rot6d', True),))
        path, p = write_checkpoint(tmp_path / 'ck', spec), _params(CART_BACKEND, True)
    lp = load_policy(p, setup_from_params(p), str(path), 'python', lambda _: None)
    yield request.param, lp
    lp.policy.close()


def test_one_step_makes_the_chunk_of_the_policys_action_space(loaded):
    kind, lp = loaded
    assert lp.space.name == kind
    step = rollout_step(lp.builder, _inputs(HOME), lp.space, 5.0, 123.0, sequence=7)
    assert step.chunk.stamp == 123.0 and step.chunk.sequence == 7
    assert 0.0 <= step.assembly <= step.latency == step.chunk.inference_latency
    np.testing.assert_array_equal(step.observation.joints, HOME)
    if kind == 'joint':
        assert isinstance(lp.space, JointActionSpace) and isinstance(step.chunk, Chunk)
        np.testing.assert_array_equal(lp.space.joint_path(step.output),
                                      step.chunk.trajectory.positions)
        assert lp.space.ee_targets(step.output) is None
    else:
        assert isinstance(lp.space, CartesianActionSpace)
        assert isinstance(step.chunk, CartesianChunk)
        assert lp.space.joint_path(step.output) is None
        trans, rots = lp.space.ee_targets(step.output)
        h = lp.policy.metadata.chunk_length
        assert trans.shape == (1, h, 3) and rots.shape == (1, h, 3, 3)


def test_the_gate_judges_a_joint_chunk_and_executes_its_own_positions(loaded):
    kind, lp = loaded
    if kind != 'joint':
        pytest.skip('the Cartesian path (IK in the gate) is covered by test_evaluate_cartesian')
    step = rollout_step(lp.builder, _inputs(HOME), lp.space, 5.0, 5.0)
    js = JointStateData(tuple(JOINTS), np.asarray(HOME, float), received=5.0)
    out = lp.space.check(step.chunk, js, RobotModel.from_file(URDF),
                         GateConfig(joints=tuple(JOINTS)), None, 5.0, 5.0)
    assert out.verdict.accepted, out.verdict.summary
    np.testing.assert_array_equal(out.joint_positions, step.chunk.trajectory.positions)


def test_a_stale_input_stops_the_step_before_the_policy_runs(loaded):
    _, lp = loaded
    with pytest.raises(StaleInputError):
        rollout_step(lp.builder, _inputs(HOME, t=1.0), lp.space, 5.0, 5.0)
