"""Human takeover from the Quest (core/takeover.py): pose mapping, teleop chunks, states."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from egoroll_ros.core.cartesian import CartesianArmConfig, CartesianConfig, check_cartesian
from egoroll_ros.core.frames import matrix_to_quat, quat_to_matrix
from egoroll_ros.core.gate import GateConfig
from egoroll_ros.core.observation import (
    JOINT_STATES,
    QUEST_JOY,
    QUEST_LEFT,
    QUEST_RIGHT,
    LatestInputs,
)
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.takeover import (
    OPERATOR_ID,
    GripperPickup,
    Takeover,
    TakeoverArm,
    TakeoverConfig,
    TakeoverError,
    gripper_command,
    map_pose,
    measured_poses,
    pose_from_tuple,
    takeover_config_from_params,
)
from egoroll_ros.core.types import JointStateData
from egoroll_ros.errors import ConfigError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

URDF = Path(__file__).resolve().parents[2] / 'urdf'
JOINTS = ('shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
          'wrist_pitch', 'wrist_roll', 'gripper')
Q0 = np.array([0.0, -0.5, 0.0, 1.0, 0.0, 0.5, 0.0, 0.02])
ARM = TakeoverArm('arm', 'tool0', 'right')
CFG = TakeoverConfig(arms=(ARM,))


def rot_z(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rot_x(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def pose(p, r) -> tuple[float, ...]:
    return (*np.asarray(p, float), *matrix_to_quat(np.asarray(r, float)))


@pytest.fixture(scope='module')
def demo():
    return RobotModel.from_file(URDF / 'demo_arm.urdf')


def inputs(t: float, ctrl=None, q=Q0, joint_stamp=None, axes=None,
           joints=JOINTS) -> LatestInputs:
    store = LatestInputs([JOINT_STATES, QUEST_JOY, QUEST_LEFT, QUEST_RIGHT])
    js = JointStateData(joints, np.asarray(q, float), stamp=t, received=t)
    store.put(JOINT_STATES, js, t if joint_stamp is None else joint_stamp, t)
    if ctrl is not None:
        store.put(QUEST_RIGHT, ctrl, t, t)
    if axes is not None:
        store.put(QUEST_JOY, ((0, 0, 0, 0), tuple(axes)), t, t)
    return store


# ---- mapping ---------------------------------------------------------------------------------
def test_controller_at_its_anchor_maps_to_the_measured_pose_exactly():
    c0 = (np.array([0.3, -0.2, 1.1]), rot_x(0.7) @ rot_z(0.2))
    ee0 = (np.array([0.5, 0.0, 0.4]), rot_z(-1.0))
    p, r = map_pose(c0, ee0, c0, CFG)
    assert np.allclose(p, ee0[0], atol=1e-15) and np.allclose(r, ee0[1], atol=1e-12)


def test_controller_displacement_moves_the_end_effector_in_the_base_frame():
    # Quest frame y-up, x right, z back; base frame z-up: M maps Quest axes to base axes
    m = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    cfg = TakeoverConfig(arms=(ARM,), rotation=m.ravel(), translation_scale=0.5)
    c0 = (np.array([0.1, 1.2, -0.3]), rot_z(0.4))
    ee0 = (np.array([0.5, 0.1, 0.4]), rot_x(0.3))
    up = (c0[0] + [0.0, 0.2, 0.0], c0[1])          # controller 20 cm up (Quest +y)
    p, r = map_pose(c0, ee0, up, cfg)
    assert np.allclose(p, ee0[0] + [0.0, 0.0, 0.1])  # end effector 10 cm up (base +z)
    assert np.allclose(r, ee0[1])                    # no rotation when the hand does not turn


def test_controller_rotation_turns_the_end_effector_about_the_mapped_axis():
    m = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    cfg = TakeoverConfig(arms=(ARM,), rotation=m.ravel())
    c0 = (np.zeros(3), rot_x(0.5))
    ee0 = (np.array([0.5, 0.1, 0.4]), rot_x(0.3))
    # the hand turns 0.2 rad about the Quest's vertical (+y), i.e. the base's +z
    turned = (np.zeros(3), quat_to_matrix(np.array([0.0, np.sin(0.1), 0.0, np.cos(0.1)]))
              @ c0[1])
    p, r = map_pose(c0, ee0, turned, cfg)
    assert np.allclose(p, ee0[0])
    assert np.allclose(r, rot_z(0.2) @ ee0[1], atol=1e-12)
    fixed = TakeoverConfig(arms=(ARM,), rotation=m.ravel(), follow_rotation=False)
    assert np.allclose(map_pose(c0, ee0, turned, fixed)[1], ee0[1])


def test_a_non_unit_controller_quaternion_is_refused_not_renormalised():
    with pytest.raises(TakeoverError, match='quaternion norm'):
        pose_from_tuple((0, 0, 0, 0, 0, 0, 0.9), 'quest/right_pose')
    with pytest.raises(TakeoverError, match='7 finite'):
        pose_from_tuple((0, 0, float('nan'), 0, 0, 0, 1), 'quest/right_pose')
    p, r = pose_from_tuple((1, 2, 3, 0, 0, 0, 1.0000004), 'x')   # float32 noise: accepted
    assert np.allclose(r, np.eye(3))


# ---- configuration ---------------------------------------------------------------------------
def test_config_errors_name_the_parameter():
    with pytest.raises(ConfigError, match="'takeover.ee_frames'"):
        takeover_config_from_params({'takeover.arms': ['arm'], 'takeover.ee_frames': [],
                                     'takeover.controllers': ['right']})
    with pytest.raises(ConfigError, match="'takeover.controllers'"):
        takeover_config_from_params({'takeover.arms': ['arm'], 'takeover.ee_frames': ['t'],
                                     'takeover.controllers': ['middle']})
    with pytest.raises(ConfigError, match="'takeover.rotation'"):
        TakeoverConfig(arms=(ARM,), rotation=[1, 0, 0, 0, 1, 0, 0, 0, -1])   # a reflection
    with pytest.raises(ConfigError, match="'takeover.horizon'"):
        TakeoverConfig(arms=(ARM,), lead=0.3, horizon=0.2)
    with pytest.raises(ConfigError, match="'takeover.controllers'"):
        TakeoverConfig(arms=(ARM, TakeoverArm('b', 'tool1', 'right')))
    with pytest.raises(ConfigError, match="'takeover.button'.*toggle"):
        takeover_config_from_params({'takeover.arms': ['arm'], 'takeover.ee_frames': ['t'],
                                     'takeover.controllers': ['right'], 'takeover.button': 2,
                                     'quest.toggle_button': 2})
    cfg = takeover_config_from_params({'takeover.arms': [], 'takeover.ee_frames': [],
                                       'takeover.controllers': []})
    assert not cfg.enabled


def test_chunk_times_hold_the_target_from_lead_to_horizon_at_the_teleop_rate():
    cfg = TakeoverConfig(arms=(ARM,), rate=20.0, lead=0.15, horizon=0.3)
    assert np.allclose(cfg.times, [0.15, 0.2, 0.25, 0.3])
    assert np.allclose(TakeoverConfig(arms=(ARM,), lead=0.2, horizon=0.2).times, [0.2])


# ---- state machine ---------------------------------------------------------------------------
def anchor_pose(demo):
    return measured_poses(demo, CFG, JOINTS, Q0)


def test_takeover_is_refused_unless_configured_running_and_fresh(demo):
    ctrl = pose([0, 1, 0], np.eye(3))
    t = 10.0
    with pytest.raises(TakeoverError, match='not configured'):
        Takeover(TakeoverConfig(), 'base_link').begin(1, True, inputs(t, ctrl).snapshot(),
                                                      anchor_pose(demo), t)
    tk = Takeover(CFG, 'base_link')
    with pytest.raises(TakeoverError, match='running rollout'):
        tk.begin(1, False, inputs(t, ctrl).snapshot(), anchor_pose(demo), t)
    with pytest.raises(TakeoverError, match='quest/right_pose never received'):
        tk.begin(1, True, inputs(t).snapshot(), anchor_pose(demo), t)
    with pytest.raises(TakeoverError, match='quest/right_pose is 0.5'):
        tk.begin(1, True, inputs(t - 0.5, ctrl).snapshot(), anchor_pose(demo), t)
    with pytest.raises(TakeoverError, match='no robot model'):
        tk.begin(1, True, inputs(t, ctrl).snapshot(), None, t)
    assert not tk.active and not tk.segments
    assert 'operator has control' in tk.begin(1, True, inputs(t, ctrl).snapshot(),
                                              anchor_pose(demo), t)
    assert tk.active and tk.generation == 1
    with pytest.raises(TakeoverError, match='already'):
        tk.begin(1, True, inputs(t, ctrl).snapshot(), anchor_pose(demo), t)


def test_handback_and_rollout_end_close_the_intervention_segment(demo):
    ctrl = pose([0, 1, 0], np.eye(3))
    tk = Takeover(CFG, 'base_link')
    tk.begin(3, True, inputs(1.0, ctrl).snapshot(), anchor_pose(demo), 1.0)
    assert not tk.sync(3, True, 1.5)
    assert tk.end('handed back', 2.0) and not tk.active
    assert not tk.end('again', 2.1)
    tk.begin(3, True, inputs(3.0, ctrl).snapshot(), anchor_pose(demo), 3.0)
    assert tk.sync(4, False, 3.5) and not tk.active      # stopped: the takeover ends with it
    assert [(s.start, s.end, s.ended_by) for s in tk.segments] == [
        (1.0, 2.0, 'handed back'), (3.0, 3.5, 'the rollout ended')]
    assert isinstance(tk.chunk(inputs(4.0, ctrl).snapshot(), 4.0, 4.0), str)


# ---- teleop chunks through the gate's Cartesian path -----------------------------------------
GATE = GateConfig(joints=JOINTS, ee_frames=('tool0',), gripper_joints=('gripper',),
                  gripper_min=(0.0,), gripper_max=(0.04,), ee_workspace_min=(-0.9, -0.9, 0.05),
                  ee_workspace_max=(0.9, 0.9, 1.2))
CART = CartesianConfig((CartesianArmConfig('arm', 'tool0', 'gripper'),))


def test_first_teleop_chunk_is_the_measured_pose_and_the_gate_accepts_it(demo):
    c0 = pose([0.2, 1.0, -0.3], rot_x(0.4))
    tk = Takeover(CFG, demo.base_frame)
    tk.begin(1, True, inputs(5.0, c0).snapshot(), anchor_pose(demo), 5.0)
    ch = tk.chunk(inputs(5.0, c0).snapshot(), 5.01, 100.0)
    assert not isinstance(ch, str), ch
    assert ch.policy_id == OPERATOR_ID and not ch.shadow and ch.stamp == 100.0
    (arm,) = ch.arms
    assert (arm.arm, arm.ee_frame, arm.reference_frame) == ('arm', 'tool0', 'base_link')
    p0, r0 = anchor_pose(demo)[0]
    assert np.allclose(arm.positions, p0, atol=1e-12)
    assert arm.gripper.size == 0               # the gripper holds its measured position
    js = JointStateData(JOINTS, Q0, stamp=100.0, received=5.0)
    out = check_cartesian(ch, js, demo, GATE, CART, now=100.01, steady_now=5.01)
    assert out.verdict.accepted, out.verdict.summary
    # no jump: the IK solution is the measured joint state
    assert np.abs(out.joint_chunk.trajectory.positions - Q0).max() < 1e-3


def test_teleop_chunk_follows_the_controller_and_a_stale_pose_gives_no_chunk(demo):
    c0 = (np.array([0.2, 1.0, -0.3]), np.eye(3))
    tk = Takeover(CFG, demo.base_frame)
    tk.begin(1, True, inputs(5.0, pose(*c0)).snapshot(), anchor_pose(demo), 5.0)
    moved = pose(c0[0] + [0.0, 0.0, 0.01], rot_z(0.02))
    ch = tk.chunk(inputs(5.1, moved).snapshot(), 5.1, 100.1)
    p0, r0 = anchor_pose(demo)[0]
    assert np.allclose(ch.arms[0].positions - p0, [0.0, 0.0, 0.01], atol=1e-12)
    assert np.allclose(quat_to_matrix(ch.arms[0].quaternions[0]), rot_z(0.02) @ r0, atol=1e-9)
    js = JointStateData(JOINTS, Q0, stamp=100.1, received=5.1)
    out = check_cartesian(ch, js, demo, GATE, CART, now=100.11, steady_now=5.11)
    assert out.verdict.accepted, out.verdict.summary
    # the IK solution reaches the target
    trans, _ = demo.fk(['tool0'], JOINTS, out.joint_chunk.trajectory.positions)
    assert np.abs(trans[0] - (p0 + [0.0, 0.0, 0.01])).max() < 1e-3
    skip = tk.chunk(inputs(5.1, moved).snapshot(), 5.5, 100.5)
    assert isinstance(skip, str) and 'quest/right_pose' in skip and tk.last_skip == skip


def test_a_controller_jump_is_a_chunk_the_gate_rejects_never_a_clamped_one(demo):
    c0 = (np.array([0.2, 1.0, -0.3]), np.eye(3))
    tk = Takeover(CFG, demo.base_frame)
    tk.begin(1, True, inputs(5.0, pose(*c0)).snapshot(), anchor_pose(demo), 5.0)
    far = pose(c0[0] + [0.3, 0.0, 0.0], c0[1])
    ch = tk.chunk(inputs(5.1, far).snapshot(), 5.1, 100.1)
    p0, _ = anchor_pose(demo)[0]
    assert np.allclose(ch.arms[0].positions[0], p0 + [0.3, 0.0, 0.0])   # as mapped
    js = JointStateData(JOINTS, Q0, stamp=100.1, received=5.1)
    out = check_cartesian(ch, js, demo, GATE, CART, now=100.11, steady_now=5.11)
    assert out.verdict.rejected
    assert {'ee_translation_jump', 'ee_hard_translation'} <= set(out.verdict.counts())


def test_clutch_reanchor_makes_the_hand_motion_meanwhile_move_nothing(demo):
    c0 = (np.array([0.2, 1.0, -0.3]), np.eye(3))
    tk = Takeover(CFG, demo.base_frame)
    tk.begin(1, True, inputs(5.0, pose(*c0)).snapshot(), anchor_pose(demo), 5.0)
    # the hand moved 5 cm while the clutch was released; the arm had stopped at Q1
    q1 = Q0 + np.array([0.02, 0.0, 0.0, -0.03, 0.0, 0.0, 0.0, 0.0])
    away = pose(c0[0] + [0.05, 0.0, 0.0], c0[1])
    tk.reanchor(inputs(6.0, away, q=q1).snapshot(), measured_poses(demo, CFG, JOINTS, q1), 6.0)
    ch = tk.chunk(inputs(6.0, away, q=q1).snapshot(), 6.0, 101.0)
    p1, _ = measured_poses(demo, CFG, JOINTS, q1)[0]
    assert np.allclose(ch.arms[0].positions[0], p1, atol=1e-12)   # from where the arm is
    with pytest.raises(TakeoverError, match='quest/right_pose is'):
        tk.reanchor(inputs(6.0, away, q=q1).snapshot(), anchor_pose(demo), 6.5)
    tk.end('handed back', 7.0)
    with pytest.raises(TakeoverError, match='not taken over'):
        tk.reanchor(inputs(7.0, away).snapshot(), anchor_pose(demo), 7.0)


# ---- the gripper during a takeover -----------------------------------------------------------
GRIP_ARM = TakeoverArm('arm', 'tool0', 'right', gripper_joint='gripper', gripper_axis=2,
                       gripper_open=0.04, gripper_closed=0.0)
GRIP_CFG = TakeoverConfig(arms=(GRIP_ARM,))
GRIP_PARAMS = {'joints': list(JOINTS), 'takeover.arms': ['arm'], 'takeover.ee_frames': ['tool0'],
               'takeover.controllers': ['right'], 'takeover.clutch_axis': 3,
               'takeover.gripper_joints': ['gripper'], 'takeover.gripper_axes': [2],
               'takeover.gripper_open': [0.04], 'takeover.gripper_closed': [0.0]}


def trigger(v: float) -> tuple[float, ...]:
    """quest/joy axes: the right trigger (axis 2) at ``v``, the grip (axis 3) held."""
    return (0.0, 0.0, v, 1.0)


def test_gripper_config_from_params_and_its_errors_name_the_parameter():
    cfg = takeover_config_from_params(GRIP_PARAMS)
    assert cfg.grippers and cfg.arms[0] == GRIP_ARM
    assert takeover_config_from_params({**GRIP_PARAMS, 'cartesian.arms': ['arm'],
                                        'cartesian.gripper_joints': ['gripper']}).arms == cfg.arms
    assert not takeover_config_from_params({**GRIP_PARAMS, 'takeover.gripper_joints': [],
                                            'takeover.gripper_axes': [],
                                            'takeover.gripper_open': [],
                                            'takeover.gripper_closed': []}).grippers
    bad = [({'takeover.gripper_joints': ['finger']}, r"'takeover.gripper_joints'.*'finger'.*not "
            "in 'joints'"),
           ({'takeover.gripper_axes': [-1]}, r"'takeover.gripper_axes'.*axis -1 is out of range"),
           ({'takeover.gripper_axes': [300]}, r"'takeover.gripper_axes'.*axis 300 is out of "
            'range'),
           ({'takeover.gripper_axes': [3]}, r"'takeover.gripper_axes'.*also "
            'takeover.clutch_axis'),
           ({'takeover.gripper_axes': []}, r"'takeover.gripper_axes': needs one entry"),
           ({'takeover.gripper_closed': [0.04]}, r"'takeover.gripper_open'.*must be finite and "
            'differ'),
           ({'takeover.gripper_joints': [], 'takeover.gripper_open': [], 'takeover.gripper_closed':
             []}, r"'takeover.gripper_axes': set, but takeover.gripper_joints is empty"),
           ({'takeover.gripper_joints': ['']}, r"'takeover.gripper_axes'.*has no gripper joint"),
           ({'takeover.gripper_axis_range': [1.0, 1.0]}, r"'takeover.gripper_axis_range'"),
           ({'takeover.gripper_axis_range': []}, r"'takeover.gripper_axis_range'"),
           ({'takeover.gripper_pickup': 0.0}, r"'takeover.gripper_pickup'"),
           ({'cartesian.arms': ['arm'], 'cartesian.gripper_joints': ['wrist_roll']},
            r"'takeover.gripper_joints': arm 'arm' has gripper 'gripper', but "
            r"cartesian.gripper_joints gives it 'wrist_roll'")]
    for change, match in bad:
        with pytest.raises(ConfigError, match=match):
            takeover_config_from_params({**GRIP_PARAMS, **change})


def test_gripper_command_maps_the_axis_linearly_and_refuses_what_is_outside():
    assert gripper_command(GRIP_ARM, trigger(0.0), (0.0, 1.0)) == pytest.approx(0.04)
    assert gripper_command(GRIP_ARM, trigger(1.0), (0.0, 1.0)) == pytest.approx(0.0)
    assert gripper_command(GRIP_ARM, trigger(0.25), (0.0, 1.0)) == pytest.approx(0.03)
    # a joy driver whose trigger rests at 1 and reads -1 fully pressed
    assert gripper_command(GRIP_ARM, trigger(0.0), (1.0, -1.0)) == pytest.approx(0.02)
    with pytest.raises(TakeoverError, match=r'axis 2 .* is 1.2, outside'):
        gripper_command(GRIP_ARM, trigger(1.2), (0.0, 1.0))      # never clamped
    with pytest.raises(TakeoverError, match='quest/joy has 2 axes.*axis 2'):
        gripper_command(GRIP_ARM, (0.0, 1.0), (0.0, 1.0))


def test_gripper_pickup_holds_the_measured_position_until_the_command_reaches_it():
    g = GripperPickup(0.02, 0.002)
    assert g.update(0.04) == 0.02 and g.update(0.03) == 0.02 and not g.engaged
    assert g.update(0.018) == 0.018 and g.engaged        # moved through 0.02 between samples
    assert g.update(0.01) == 0.01
    near = GripperPickup(0.02, 0.002)
    assert near.update(0.0215) == 0.0215 and near.engaged      # within the tolerance at once


def test_takeover_gripper_needs_a_fresh_joy_with_the_axis_and_the_joint(demo):
    ctrl = pose([0, 1, 0], np.eye(3))
    tk = Takeover(GRIP_CFG, demo.base_frame)
    with pytest.raises(TakeoverError, match='quest/joy never received'):
        tk.begin(1, True, inputs(5.0, ctrl).snapshot(), anchor_pose(demo), 5.0)
    with pytest.raises(TakeoverError, match='quest/joy has 2 axes'):
        tk.begin(1, True, inputs(5.0, ctrl, axes=(0.0, 1.0)).snapshot(), anchor_pose(demo), 5.0)
    with pytest.raises(TakeoverError, match=r"joint_states has no 'gripper'"):
        tk.begin(1, True, inputs(5.0, ctrl, q=Q0[:7], joints=JOINTS[:7],
                                 axes=trigger(0.0)).snapshot(), anchor_pose(demo), 5.0)
    assert not tk.active
    tk.begin(1, True, inputs(5.0, ctrl, axes=trigger(0.0)).snapshot(), anchor_pose(demo), 5.0)
    # the joy goes stale: no chunk (as a stale controller pose)
    store = inputs(5.0, ctrl, axes=trigger(0.0))
    store.put(QUEST_RIGHT, ctrl, 5.4, 5.4)
    skip = tk.chunk(store.snapshot(), 5.4, 100.4)
    assert isinstance(skip, str) and 'quest/joy' in skip
    # an axis value outside its range: no chunk, never a clamped one
    skip = tk.chunk(inputs(5.5, ctrl, axes=trigger(1.5)).snapshot(), 5.5, 100.5)
    assert isinstance(skip, str) and 'outside' in skip


def test_operator_gripper_goes_through_the_gate_without_a_jump_at_takeover(demo):
    c0 = pose([0.2, 1.0, -0.3], np.eye(3))
    tk = Takeover(GRIP_CFG, demo.base_frame)
    # measured gripper 0.02 (Q0); the trigger is released (commands 0.04, open)
    tk.begin(1, True, inputs(5.0, c0, axes=trigger(0.0)).snapshot(), anchor_pose(demo), 5.0)

    def gated(t: float, v: float):
        ch = tk.chunk(inputs(t, c0, axes=trigger(v)).snapshot(), t, 100.0 + t)
        assert not isinstance(ch, str), ch
        js = JointStateData(JOINTS, Q0, stamp=100.0 + t, received=t)
        out = check_cartesian(ch, js, demo, GATE, CART, now=100.01 + t, steady_now=t + 0.01)
        return ch, out

    ch, out = gated(5.0, 0.0)
    assert np.allclose(ch.arms[0].gripper, 0.02)           # held: no jump to the trigger's 0.04
    assert out.verdict.accepted, out.verdict.summary
    assert np.allclose(out.joint_chunk.trajectory.positions[:, JOINTS.index('gripper')], 0.02)
    assert tk.grippers_held == ['arm']
    gated(5.05, 0.3)                                        # 0.028: still held
    ch, out = gated(5.1, 0.55)                              # 0.018: through 0.02, picked up
    assert np.allclose(ch.arms[0].gripper, 0.018) and tk.grippers_held == []
    assert out.verdict.accepted, out.verdict.summary
    # the joint chunk the gate forwards (what executor/commanded and the export's action
    # carry) has the operator's gripper command
    assert np.allclose(out.joint_chunk.trajectory.positions[:, JOINTS.index('gripper')], 0.018)
    # a gripper command beyond the gate's range is rejected by the gate, never clamped
    wide = TakeoverConfig(arms=(TakeoverArm('arm', 'tool0', 'right', 'gripper', 2, 0.05, 0.0),))
    tk = Takeover(wide, demo.base_frame)
    tk.begin(1, True, inputs(5.0, c0, axes=trigger(0.6)).snapshot(), anchor_pose(demo), 5.0)
    ch, out = gated(5.0, 0.0)
    ch, out = gated(5.02, 0.58)                     # 0.021: picked up
    ch, out = gated(5.04, 0.1)                      # 0.045, beyond gripper_max 0.04
    assert np.allclose(ch.arms[0].gripper, 0.045)
    assert out.verdict.rejected and 'gripper_range' in out.verdict.counts()


def test_reanchor_holds_the_gripper_at_its_new_measured_position(demo):
    c0 = pose([0.2, 1.0, -0.3], np.eye(3))
    tk = Takeover(GRIP_CFG, demo.base_frame)
    tk.begin(1, True, inputs(5.0, c0, axes=trigger(0.5)).snapshot(), anchor_pose(demo), 5.0)
    ch = tk.chunk(inputs(5.0, c0, axes=trigger(0.5)).snapshot(), 5.0, 100.0)
    assert np.allclose(ch.arms[0].gripper, 0.02) and tk.grippers_held == []   # at it already
    q1 = Q0.copy()
    q1[-1] = 0.01
    # the clutch was released and the trigger let go meanwhile (0.04): re-anchored, it holds
    tk.reanchor(inputs(6.0, c0, q=q1, axes=trigger(0.0)).snapshot(),
                measured_poses(demo, GRIP_CFG, JOINTS, q1), 6.0)
    ch = tk.chunk(inputs(6.0, c0, q=q1, axes=trigger(0.0)).snapshot(), 6.0, 101.0)
    assert np.allclose(ch.arms[0].gripper, 0.01) and tk.grippers_held == ['arm']
    tk.end('handed back', 7.0)
    assert tk.grippers_held == []


def test_a_teleop_chunk_runs_from_where_the_arm_is_to_the_operators_target(demo):
    # Issue 22: the arm still runs the policy's chunk at the takeover, so it is not at the
    # anchor. A chunk holding the target from its first point is a step the executor may not
    # join; the gap then grows until start_deviation faults the rollout. From the measured
    # pose now, the chunk starts next to the arm and reaches the target at its last point.
    c0 = (np.array([0.2, 1.0, -0.3]), np.eye(3))
    tk = Takeover(CFG, demo.base_frame)
    tk.begin(1, True, inputs(5.0, pose(*c0)).snapshot(), anchor_pose(demo), 5.0)
    moved = pose(c0[0] + [0.0, 0.0, 0.03], rot_z(0.2))
    p0, r0 = anchor_pose(demo)[0]
    here = (p0 + np.array([0.04, 0.0, -0.02]), rot_z(-0.1) @ r0)     # the arm ran on
    ch = tk.chunk(inputs(5.1, moved).snapshot(), 5.1, 100.1, [here])
    arm = ch.arms[0]
    target_p, target_r = p0 + [0.0, 0.0, 0.03], rot_z(0.2) @ r0
    times = CFG.times
    s = times / times[-1]
    np.testing.assert_allclose(arm.positions, here[0] + s[:, None] * (target_p - here[0]),
                               atol=1e-12)
    np.testing.assert_allclose(quat_to_matrix(arm.quaternions[-1]), target_r, atol=1e-9)
    # the rotation turns monotonically along the geodesic, in proportion to time
    angles = [np.arccos(np.clip((np.trace(here[1].T @ quat_to_matrix(q)) - 1) / 2, -1, 1))
              for q in arm.quaternions]
    np.testing.assert_allclose(angles, s * angles[-1], atol=1e-9)
    assert angles[-1] == pytest.approx(0.3, abs=1e-9)
    # the first point is on the way, not at the target (a held target would be s = 1)
    assert s[0] < 0.5
    # a pose count that does not match the arms gives no chunk
    assert isinstance(tk.chunk(inputs(5.1, moved).snapshot(), 5.1, 100.1, []), str)
