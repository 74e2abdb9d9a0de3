"""Test helpers for the safety gate: small URDFs, chunks, and a per-point reference checker.

``reference_check`` is a straightforward per-point Python loop with Pinocchio called directly
for forward kinematics: the independent computation of the property test and the baseline of
``benchmarks/bench_gate.py``.
"""

from __future__ import annotations

import math

import numpy as np

from egoroll_ros.core.gate import GateConfig, prepare
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import Chunk, JointStateData, JointTrajectoryData

ARM = ('pan', 'lift', 'roll', 'wrist', 'gripper')


def _arm(prefix: str, y: float) -> str:
    p = prefix
    return f"""
  <link name="{p}mount"/><link name="{p}l1"/><link name="{p}l2"/><link name="{p}l3"/>
  <link name="{p}l4"/><link name="{p}tool0"/><link name="{p}finger"/>
  <joint name="{p}mount_joint" type="fixed"><parent link="base_link"/><child link="{p}mount"/>
    <origin xyz="0 {y} 0" rpy="0 0 0"/></joint>
  <joint name="{p}pan" type="revolute"><parent link="{p}mount"/><child link="{p}l1"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-2.0" upper="2.0" velocity="2.0" effort="10"/></joint>
  <joint name="{p}lift" type="revolute"><parent link="{p}l1"/><child link="{p}l2"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 1 0"/>
    <limit lower="-1.5" upper="1.5" velocity="2.0" effort="10"/></joint>
  <joint name="{p}roll" type="continuous"><parent link="{p}l2"/><child link="{p}l3"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 0 1"/><limit velocity="3.0" effort="5"/></joint>
  <joint name="{p}wrist" type="revolute"><parent link="{p}l3"/><child link="{p}l4"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 1 0"/>
    <limit lower="-2.0" upper="2.0" velocity="3.0" effort="5"/></joint>
  <joint name="{p}tool_joint" type="fixed"><parent link="{p}l4"/><child link="{p}tool0"/>
    <origin xyz="0 0 0.1"/></joint>
  <joint name="{p}gripper" type="prismatic"><parent link="{p}l4"/><child link="{p}finger"/>
    <origin xyz="0 0 0.05"/><axis xyz="0 1 0"/>
    <limit lower="0.0" upper="0.04" velocity="0.1" effort="5"/></joint>"""


def arm_urdf(prefixes: tuple[str, ...] = ('',)) -> str:
    """A small arm (pan, lift, continuous roll, wrist, prismatic gripper) per prefix.

    Straight up (all zero) the tool0 frame is 0.7 m above ``base_link``, 0.5 m from ``lift``.
    """
    ys = [0.0] if len(prefixes) == 1 else [0.3, -0.3]
    arms = ''.join(_arm(p, y) for p, y in zip(prefixes, ys, strict=True))
    return f'<?xml version="1.0"?>\n<robot name="test_arm">\n  <link name="base_link"/>{arms}\n' \
           '</robot>\n'


def arm_model() -> RobotModel:
    """The single test arm."""
    return RobotModel(arm_urdf(), source='test_arm')


def bimanual_model() -> RobotModel:
    """Two test arms, prefixes ``left_`` and ``right_``."""
    return RobotModel(arm_urdf(('left_', 'right_')), source='test_bimanual')


def arm_config(prefixes: tuple[str, ...] = ('',), **overrides: object) -> GateConfig:
    """A gate configuration for the test arm(s); ``overrides`` replace fields."""
    joints = tuple(p + j for p in prefixes for j in ARM)
    kw: dict = dict(
        joints=joints, ee_frames=tuple(p + 'tool0' for p in prefixes),
        gripper_joints=tuple(p + 'gripper' for p in prefixes),
        gripper_min=(0.0,) * len(prefixes), gripper_max=(0.035,) * len(prefixes),
        max_step=(0.2, 0.2, 0.2, 0.2, 0.01) * len(prefixes),
        acceleration_limits=(20.0, 20.0, 20.0, 20.0, 1.0) * len(prefixes),
        max_start_deviation=(0.15, 0.15, 0.15, 0.15, 0.04) * len(prefixes),
        ee_workspace_min=(-1.0, -1.0, 0.0), ee_workspace_max=(1.0, 1.0, 1.2))
    kw.update(overrides)
    return GateConfig(**kw)


STAMP = 100.0


def make_chunk(joints: tuple[str, ...], times: np.ndarray, positions: np.ndarray,
               sequence: int = 1, stamp: float = STAMP, **traj_kw: object) -> Chunk:
    """A chunk from arrays (positions columns in ``joints`` order)."""
    traj = JointTrajectoryData(joint_names=tuple(joints), times=np.asarray(times, float),
                               positions=np.asarray(positions, float), stamp=stamp, **traj_kw)
    return Chunk(sequence=sequence, policy_id='ab' * 32, stamp=stamp, trajectory=traj)


def linear_chunk(joints: tuple[str, ...], qm: np.ndarray, velocity: np.ndarray,
                 times: np.ndarray, **kw: object) -> Chunk:
    """Points ``qm + velocity * t`` at ``times`` (constant velocity from the measured state)."""
    times = np.asarray(times, float)
    return make_chunk(joints, times, np.asarray(qm) + np.outer(times, velocity), **kw)


def measured(joints: tuple[str, ...], q: np.ndarray, received: float = 0.0) -> JointStateData:
    """A measured state."""
    return JointStateData(names=tuple(joints), positions=np.asarray(q, float),
                          received=received)


def reference_check(chunk: Chunk, qm: np.ndarray | None, model: RobotModel,
                    config: GateConfig, now: float) -> set[tuple[str, str, int]]:
    """Every (check, subject, point_index) violation, by a per-point loop and Pinocchio.

    Covers the numeric checks (not joint names, shapes or finiteness, which the chunks of the
    property test and the benchmark always satisfy). Uses the same resolved limits
    (:func:`prepare`) and the same rules as the gate (see ``docs/safety_gate.md``).
    """
    lim = prepare(model, config)
    traj = chunk.trajectory
    idx = [traj.joint_names.index(j) for j in config.joints]
    pts = [[float(traj.positions[i][k]) for k in idx] for i in range(traj.num_points)]
    times = [float(t) for t in traj.times]
    out: set[tuple[str, str, int]] = set()
    joints = config.joints
    n = len(pts)
    for i in range(n):
        if i == 0 and times[0] < 0:
            out.add(('time_increasing', '', 0))
        if i > 0:
            dt = times[i] - times[i - 1]
            if dt <= 0:
                out.add(('time_increasing', '', i))
            elif dt < config.min_point_spacing or dt > config.max_point_spacing:
                out.add(('point_spacing', '', i))
    increasing = times[0] >= 0 and all(times[i] > times[i - 1] for i in range(1, n))
    age = now - chunk.stamp
    if age > config.max_chunk_age or age < -config.max_future_stamp:
        out.add(('chunk_age', '', -1))
    if chunk.stamp + times[-1] <= now:
        out.add(('chunk_in_past', '', n - 1))
    seq_q = ([list(qm)] if qm is not None else []) + pts
    off = 0 if qm is not None else 1
    for i in range(n):
        for j, name in enumerate(joints):
            if pts[i][j] < lim.lower[j] or pts[i][j] > lim.upper[j]:
                out.add(('position_limit', name, i))
        for g, gname in enumerate(config.gripper_joints):
            value = pts[i][joints.index(gname)]
            if value < config.gripper_min[g] or value > config.gripper_max[g]:
                out.add(('gripper_range', gname, i))
    for k in range(1, len(seq_q)):
        for j, name in enumerate(joints):
            if abs(seq_q[k][j] - seq_q[k - 1][j]) > lim.max_step[j]:
                out.add(('max_step', name, k - 1 + off - (0 if qm is not None else 0)))
    if qm is not None:
        for j, name in enumerate(joints):
            if abs(pts[0][j] - qm[j]) > lim.start_deviation[j]:
                out.add(('start_deviation', name, 0))
    if increasing:
        # Without the executor's commanded state (this reference never has one) the seam,
        # measured state -> first point, is not differenced: velocities, accelerations and
        # jerks come from the chunk's own points only (velocity k ends at point k + 1).
        vq, vt, voff = pts, times, 1
        vel = []
        for k in range(1, len(vq)):
            dt = vt[k] - vt[k - 1]
            vel.append([(vq[k][j] - vq[k - 1][j]) / dt for j in range(len(joints))])
            for j, name in enumerate(joints):
                if abs(vel[-1][j]) > lim.velocity[j]:
                    out.add(('velocity_limit', name, k - 1 + voff))
        acc = []
        for k in range(1, len(vel)):
            mid = 0.5 * ((vt[k + 1] - vt[k]) + (vt[k] - vt[k - 1]))
            acc.append([(vel[k][j] - vel[k - 1][j]) / mid for j in range(len(joints))])
            for j, name in enumerate(joints):
                if abs(acc[-1][j]) > lim.acceleration[j]:
                    out.add(('acceleration_limit', name, k - 1 + voff))
        for k in range(1, len(acc)):
            dt = (vt[k + 2] - vt[k - 1]) / 3.0   # a third of the four points' span
            for j, name in enumerate(joints):
                if abs((acc[k][j] - acc[k - 1][j]) / dt) > lim.jerk[j]:
                    out.add(('jerk_limit', name, k + voff))
    for frame in config.ee_frames:
        poses = [model.fk_reference(frame, joints, q) for q in seq_q]
        for k in range(1, len(poses)):
            (p0, r0), (p1, r1) = poses[k - 1], poses[k]
            cos = (np.trace(r0.T @ r1) - 1.0) / 2.0
            angle = math.acos(min(1.0, max(-1.0, cos)))
            if angle > config.ee_max_rotation_step:
                out.add(('ee_rotation_jump', frame, k - 1 + off))
            if math.dist(p0, p1) > config.ee_max_translation_step:
                out.add(('ee_translation_jump', frame, k - 1 + off))
        chunk_poses = poses[1:] if qm is not None else poses
        for i, (p, _) in enumerate(chunk_poses):
            if config.ee_workspace_min and any(
                    p[a] < config.ee_workspace_min[a] or p[a] > config.ee_workspace_max[a]
                    for a in range(3)):
                out.add(('ee_workspace', frame, i))
            if qm is not None:
                d = math.dist(p, poses[0][0])
                if d > config.ee_hard_translation:
                    out.add(('ee_hard_translation', frame, i))
                elif d > config.ee_soft_translation:
                    out.add(('ee_soft_translation', frame, i))
    return {v for v in out if v[0] not in config.disabled_checks}
