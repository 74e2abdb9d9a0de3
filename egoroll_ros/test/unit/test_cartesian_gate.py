"""The gate's Cartesian path: Cartesian checks first, then IK, then the joint-space checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from egoroll_ros.core.cartesian import (
    CartesianArmConfig,
    CartesianArmTarget,
    CartesianChunk,
    CartesianConfig,
    cartesian_config_from_params,
    check_cartesian,
)
from egoroll_ros.core.frames import matrix_to_quat
from egoroll_ros.core.gate import GateConfig
from egoroll_ros.core.ik import IkParams
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import JointStateData
from egoroll_ros.errors import ConfigError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

URDF = Path(__file__).resolve().parents[2] / 'urdf'
ARM_JOINTS = ('shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
              'wrist_pitch', 'wrist_roll')
JOINTS = ARM_JOINTS + ('gripper',)
NOW = 100.0
DT = 0.05


@pytest.fixture(scope='module')
def demo():
    return RobotModel.from_file(URDF / 'demo_arm.urdf')


@pytest.fixture(scope='module')
def bimanual():
    return RobotModel.from_file(URDF / 'demo_bimanual.urdf')


def gate_config(joints=JOINTS, frames=('tool0',), grippers=('gripper',), **kw) -> GateConfig:
    base = dict(joints=joints, ee_frames=frames, gripper_joints=grippers,
                gripper_min=(0.0,) * len(grippers), gripper_max=(0.04,) * len(grippers),
                ee_workspace_min=(-0.9, -0.9, 0.05), ee_workspace_max=(0.9, 0.9, 1.2))
    base.update(kw)
    return GateConfig(**base)


CART = CartesianConfig((CartesianArmConfig('arm', 'tool0', 'gripper'),))
Q0 = np.array([0.1, 0.4, 0.0, 1.0, 0.0, 0.6, 0.0, 0.02])


def state(q, names=JOINTS) -> JointStateData:
    return JointStateData(names=tuple(names), positions=np.asarray(q, float), stamp=NOW,
                          received=0.0)


def fk_path(model, frame, joints, qs):
    trans, rots = model.fk([frame], joints, np.asarray(qs))
    return trans[0], rots[0]


def target(arm, frame, base, pos, rot, grip=None) -> CartesianArmTarget:
    return CartesianArmTarget(arm, frame, base, np.asarray(pos), matrix_to_quat(rot),
                              np.zeros(0) if grip is None else np.asarray(grip, float))


def chunk(*arms, n=None, seq=1) -> CartesianChunk:
    n = n or len(arms[0].positions)
    return CartesianChunk(seq, 'f' * 64, NOW, (np.arange(n) + 1.0) * DT, tuple(arms))


def smooth(model, n=20, delta=(0.1, -0.05, 0.1, 0.1, -0.1, 0.1, 0.2)):
    qs = Q0[:7] + np.linspace(0, 1, n + 1)[1:, None] * np.asarray(delta)
    pos, rot = fk_path(model, 'tool0', ARM_JOINTS, qs)
    return qs, pos, rot


def test_a_smooth_cartesian_chunk_is_accepted_and_its_ik_chunk_reaches_the_poses(demo):
    qs, pos, rot = smooth(demo)
    grip = np.linspace(0.02, 0.03, len(pos))
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', pos, rot, grip)),
                          state(Q0), demo, gate_config(), CART, NOW)
    assert out.verdict.accepted, out.verdict.summary
    assert out.verdict.stage == 'joint'
    jc = out.joint_chunk
    assert jc.trajectory.joint_names == JOINTS and jc.sequence == 1 and jc.stamp == NOW
    assert np.allclose(jc.trajectory.times, (np.arange(20) + 1) * DT)
    assert np.allclose(jc.trajectory.positions[:, 7], grip)
    p2, r2 = fk_path(demo, 'tool0', JOINTS, jc.trajectory.positions)
    assert np.linalg.norm(p2 - pos, axis=1).max() < 1e-3
    assert out.ik['arm'].ok and out.ik['arm'].rotation_errors.max() < 1e-3


def test_empty_gripper_holds_the_measured_gripper(demo):
    _, pos, rot = smooth(demo)
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', pos, rot)), state(Q0), demo,
                          gate_config(), CART, NOW)
    assert out.verdict.accepted
    assert np.all(out.joint_chunk.trajectory.positions[:, 7] == Q0[7])


def test_fine_in_joint_space_but_a_rotation_jump_is_rejected_at_the_cartesian_stage(demo):
    """wrist_roll turns 0.33 rad in one step: within a permissive joint-space configuration
    (max_step 0.5) and the IK jump limit (0.35), but tool0 rotates 0.33 rad > 0.3."""
    qs = np.tile(Q0[:7], (4, 1))
    qs[2:, 6] += 0.33
    pos, rot = fk_path(demo, 'tool0', ARM_JOINTS, qs)
    cfg = gate_config(max_step=(0.5,), ee_max_rotation_step=0.3, acceleration_limits=(1e3,),
                      velocity_scale=1.0, max_point_spacing=0.5)
    c = CartesianChunk(1, 'f' * 64, NOW, np.arange(1, 5) * 0.2,
                       (target('arm', 'tool0', 'base_link', pos, rot),))
    out = check_cartesian(c, state(Q0), demo, cfg, CART, NOW)
    assert out.verdict.rejected and out.verdict.stage == 'cartesian'
    assert {v.check for v in out.verdict.violations} == {'ee_rotation_jump'}
    assert out.verdict.violations[0].point_index == 2 and out.joint_chunk is None
    # Its joint-space version passes every joint check (the rotation check switched off):
    # only the Cartesian stage stops it.
    loose = gate_config(max_step=(0.5,), ee_max_rotation_step=0.3, acceleration_limits=(1e3,),
                        velocity_scale=1.0, disabled_checks={'ee_rotation_jump'})
    assert check_cartesian(c, state(Q0), demo, loose, CART, NOW).verdict.accepted


def test_translation_jump_workspace_and_hard_translation_at_the_cartesian_stage(demo):
    _, pos, rot = smooth(demo, n=5)
    jumpy = pos.copy()
    jumpy[3:] += [0.0, 0.0, 0.06]
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', jumpy, rot)), state(Q0),
                          demo, gate_config(), CART, NOW)
    assert out.verdict.stage == 'cartesian'
    assert [(v.check, v.point_index) for v in out.verdict.violations] == \
        [('ee_translation_jump', 3)]
    far = pos + [0.0, 0.0, 0.3]
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', far, rot)), state(Q0), demo,
                          gate_config(ee_max_translation_step=1.0), CART, NOW)
    assert 'ee_hard_translation' in {v.check for v in out.verdict.violations}
    low = pos.copy()
    low[:, 2] = 0.0
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', low, rot)), state(Q0), demo,
                          gate_config(ee_max_translation_step=1.0, ee_hard_translation=2.0,
                                      ee_soft_translation=1.0), CART, NOW)
    assert {v.check for v in out.verdict.violations} == {'ee_workspace'}
    assert out.verdict.stage == 'cartesian'


def test_soft_translation_needs_confirmation_from_the_cartesian_stage(demo):
    qs = Q0[:7] + np.linspace(0, 1, 21)[1:, None] * np.array([0.25, 0, 0, 0, 0, 0, 0])
    pos, rot = fk_path(demo, 'tool0', ARM_JOINTS, qs)
    cfg = gate_config(ee_soft_translation=0.05, ee_hard_translation=0.5)
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', pos, rot)), state(Q0), demo,
                          cfg, CART, NOW)
    assert out.verdict.needs_confirmation and out.verdict.stage == 'cartesian'
    assert out.joint_chunk is not None     # forwarded only after confirmation


def test_ik_failure_rejects_the_whole_chunk_at_the_ik_stage(demo):
    _, pos, rot = smooth(demo, n=5)
    bad = pos.copy()
    q_up = np.zeros(7)
    p_up, _ = fk_path(demo, 'tool0', ARM_JOINTS, [q_up])
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', bad, rot)), state(Q0), demo,
                          gate_config(), CART, NOW)
    assert out.verdict.accepted
    # Point 3 asks for an orientation the wrist cannot reach at that position: IK fails.
    rot2 = rot.copy()
    rot2[3:] = rot[3:] @ np.diag([1.0, -1.0, -1.0])      # flipped tool, far from the path
    cfg = gate_config(ee_max_rotation_step=4.0)
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', bad, rot2)), state(Q0),
                          demo, cfg, CART, NOW)
    assert out.verdict.rejected and out.verdict.stage == 'ik'
    assert {v.check for v in out.verdict.violations} <= {'ik_not_converged', 'ik_branch_flip'}
    assert out.verdict.violations[0].point_index == 3 and out.joint_chunk is None


def test_unreachable_point_is_ik_not_converged(demo):
    q_up = np.zeros(8)
    q_up[7] = 0.02
    pos, rot = fk_path(demo, 'tool0', ARM_JOINTS, np.zeros((3, 7)))
    pos = pos + np.array([[0, 0, 0.0], [0, 0, 0.02], [0, 0, 0.04]])      # beyond full reach
    cfg = gate_config(ee_workspace_min=(), ee_workspace_max=())
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', pos, rot)), state(q_up),
                          demo, cfg, CART, NOW)
    assert out.verdict.stage == 'ik'
    assert [v.check for v in out.verdict.violations] == ['ik_not_converged']
    assert out.verdict.violations[0].point_index == 1


def test_branch_flip_rejects_at_the_ik_stage(demo):
    q0 = np.array([0.0, 0.3, 0.0, 0.0, 0.0, 0.002, 0.0, 0.02])
    p, r = fk_path(demo, 'tool0', ARM_JOINTS, [q0[:7]])
    a = 0.02
    turn = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    pos = np.repeat(p, 3, axis=0)
    rot = np.array([r[0], turn @ r[0], turn @ r[0]])
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', pos, rot)), state(q0), demo,
                          gate_config(), CART, NOW)
    assert out.verdict.stage == 'ik'
    assert [(v.check, v.point_index) for v in out.verdict.violations] == [('ik_branch_flip', 1)]


def test_joint_checks_run_on_the_ik_result(demo):
    """A path the IK follows fine but whose joint speed is too high: joint stage."""
    qs, pos, rot = smooth(demo, n=20, delta=(0.5, 0, 0, 0, 0, 0, 0))
    fast = chunk(target('arm', 'tool0', 'base_link', pos, rot))
    fast = CartesianChunk(1, 'f' * 64, NOW, np.arange(1, 21) * 0.006, fast.arms)
    out = check_cartesian(fast, state(Q0), demo, gate_config(), CART, NOW)
    assert out.verdict.rejected and out.verdict.stage == 'joint'
    assert 'velocity_limit' in {v.check for v in out.verdict.violations}


def test_structure_errors_reject_before_anything_else(demo):
    _, pos, rot = smooth(demo, n=4)
    cases = {
        'wrong reference frame': (target('arm', 'tool0', 'camera_link', pos, rot), 'structure'),
        'wrong ee frame': (target('arm', 'flange_link', 'base_link', pos, rot), 'structure'),
        'unknown arm': (target('left', 'tool0', 'base_link', pos, rot), 'arm_names'),
        'gripper size': (target('arm', 'tool0', 'base_link', pos, rot, [0.01]), 'structure'),
    }
    for name, (arm, check_name) in cases.items():
        out = check_cartesian(chunk(arm), state(Q0), demo, gate_config(), CART, NOW)
        assert out.verdict.rejected and out.verdict.stage == 'cartesian', name
        assert check_name in {v.check for v in out.verdict.violations}, name
    bad_q = target('arm', 'tool0', 'base_link', pos, rot)
    object.__setattr__(bad_q, 'quaternions', bad_q.quaternions * 1.01)
    out = check_cartesian(chunk(bad_q), state(Q0), demo, gate_config(), CART, NOW)
    assert {v.check for v in out.verdict.violations} == {'structure'}
    nan = pos.copy()
    nan[1, 0] = np.nan
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', nan, rot)), state(Q0), demo,
                          gate_config(), CART, NOW)
    assert [(v.check, v.point_index) for v in out.verdict.violations] == [('finite', 1)]
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', pos, rot)), None, demo,
                          gate_config(), CART, NOW)
    assert [v.check for v in out.verdict.violations] == ['joint_state']
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', pos, rot)), state(Q0), demo,
                          gate_config(), CartesianConfig(), NOW)
    assert out.verdict.rejected and 'not enabled' in out.verdict.summary


BI_ARM = tuple(f'{s}_{j}' for s in ('left', 'right') for j in ARM_JOINTS)
BI = BI_ARM + ('left_gripper', 'right_gripper')
BI_CART = CartesianConfig((CartesianArmConfig('left', 'left_tool0', 'left_gripper'),
                           CartesianArmConfig('right', 'right_tool0', 'right_gripper')))


def bi_config(**kw):
    return gate_config(joints=BI, frames=('left_tool0', 'right_tool0'),
                       grippers=('left_gripper', 'right_gripper'), ee_workspace_min=(),
                       ee_workspace_max=(), **kw)


def bi_state():
    q = np.concatenate([Q0[:7], Q0[:7] * [-1, 1, -1, 1, -1, 1, -1], [0.01, 0.02]])
    return q, state(q, BI)


def bi_targets(model, q, n=50):
    out = []
    for k, side in enumerate(('left', 'right')):
        qa = q[7 * k:7 * k + 7] + np.linspace(0, 1, n + 1)[1:, None] * 0.05
        pos, rot = fk_path(model, f'{side}_tool0', BI_ARM[7 * k:7 * k + 7], qa)
        out.append(target(side, f'{side}_tool0', model.base_frame, pos, rot,
                          np.full(n, 0.01 * (k + 1))))
    return out


def test_bimanual_chunk_is_solved_per_arm(bimanual):
    q, js = bi_state()
    left, right = bi_targets(bimanual, q)
    out = check_cartesian(chunk(right, left), js, bimanual, bi_config(), BI_CART, NOW)
    assert out.verdict.accepted, out.verdict.summary
    pos = out.joint_chunk.trajectory.positions
    for side, tgt in (('left', left), ('right', right)):
        cols = [BI.index(f'{side}_{j}') for j in ARM_JOINTS]
        p2, _ = fk_path(bimanual, f'{side}_tool0', [BI[c] for c in cols], pos[:, cols])
        assert np.linalg.norm(p2 - tgt.positions, axis=1).max() < 1e-3
    assert np.allclose(pos[:, BI.index('left_gripper')], 0.01)
    assert np.allclose(pos[:, BI.index('right_gripper')], 0.02)
    # One arm's jump rejects the whole chunk, naming that arm's frame.
    jumpy = CartesianArmTarget('right', 'right_tool0', bimanual.base_frame,
                               right.positions + np.where(np.arange(50) >= 30, 0.1, 0.0)[:, None],
                               right.quaternions, right.gripper)
    out = check_cartesian(chunk(left, jumpy), js, bimanual, bi_config(), BI_CART, NOW)
    assert out.verdict.stage == 'cartesian'
    assert {v.subject for v in out.verdict.violations} == {'right_tool0'}
    # A missing arm is a structure problem, not "hold the other arm".
    out = check_cartesian(chunk(left), js, bimanual, bi_config(), BI_CART, NOW)
    assert [v.check for v in out.verdict.violations] == ['arm_names']


def test_configuration_errors_name_the_parameter(demo):
    with pytest.raises(ConfigError, match='cartesian_ee_frames'):
        cartesian_config_from_params({'cartesian_arms': ['a', 'b'],
                                      'cartesian_ee_frames': ['tool0']})
    with pytest.raises(ConfigError, match='ik_max_joint_jump'):
        IkParams(max_joint_jump=0.0)
    bad = CartesianConfig((CartesianArmConfig('arm', 'tool0', 'shoulder_pan'),))
    _, pos, rot = smooth(demo, n=3)
    out = check_cartesian(chunk(target('arm', 'tool0', 'base_link', pos, rot)), state(Q0), demo,
                          gate_config(), bad, NOW)
    assert [v.check for v in out.verdict.violations] == ['robot_model']
