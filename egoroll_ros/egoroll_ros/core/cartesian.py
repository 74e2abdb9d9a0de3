"""The safety gate's Cartesian path: pose checks, then IK, then every joint-space check.

A Cartesian chunk (``ActionChunk.action_space == CARTESIAN``) carries, per configured arm,
end-effector target poses in the robot's base frame. :func:`check_cartesian` runs three
stages and stops at the first stage that rejects:

1. ``cartesian``: structure (arms, frames, sizes, finite values, unit quaternions), the
   measured joint state, then the end-effector checks on the TARGET poses with the measured
   pose as point -1 (:func:`egoroll_ros.core.gate.ee_pose_path_checks`: rotation jump,
   translation jump, workspace box, soft and hard translation from the measured pose, per arm).
2. ``ik``: per arm, damped least squares (:class:`egoroll_ros.core.ik.ArmIk`) seeded from the
   measured joints for point 0 and from the previous solution after, within the gate's joint
   limits; a point that does not converge, or a branch flip, rejects the whole chunk.
3. ``joint``: the joint chunk built from the IK solutions (joints outside every arm's chain
   hold their measured positions; gripper joints take the chunk's gripper values) goes
   through :func:`egoroll_ros.core.gate.check` unchanged. That joint chunk is what the gate
   forwards to the executor.

No rclpy import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
import functools
import math
import time
from typing import Any

import numpy as np

from egoroll_ros.core.frames import quat_to_matrix
from egoroll_ros.core.gate import (
    WHOLE_CHUNK,
    GateConfig,
    Verdict,
    _Collector,
    _measured,
    check,
    ee_pose_path_checks,
    prepare,
)
from egoroll_ros.core.ik import ArmIk, IkParams, IkResult
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import Chunk, JointStateData, JointTrajectoryData
from egoroll_ros.errors import ConfigError, RobotModelError

STAGE_CARTESIAN = 'cartesian'
STAGE_IK = 'ik'
STAGE_JOINT = 'joint'

#: A target quaternion's norm must be 1 within this (messages carry float64).
GATE_QUAT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class CartesianArmConfig:
    """One arm the gate accepts Cartesian targets for.

    Attributes:
        name: arm name used in chunks.
        ee_frame: its end-effector frame (IK target).
        gripper_joint: the joint the chunk's gripper values command ('' for none).
    """

    name: str
    ee_frame: str
    gripper_joint: str = ''


@dataclass(frozen=True)
class CartesianConfig:
    """Arms and IK parameters of the gate's Cartesian path (node parameters ``cartesian_*``
    and ``ik_*``)."""

    arms: tuple[CartesianArmConfig, ...] = ()
    ik: IkParams = field(default_factory=IkParams)

    def __post_init__(self) -> None:
        """Validate; ConfigError names the parameter."""
        object.__setattr__(self, 'arms', tuple(self.arms))
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names) or any(not n for n in names):
            raise ConfigError("parameter 'cartesian_arms': names must be unique and non-empty")
        frames = [a.ee_frame for a in self.arms]
        if len(set(frames)) != len(frames) or any(not f for f in frames):
            raise ConfigError("parameter 'cartesian_ee_frames': frames must be unique and "
                              'non-empty')


def cartesian_config_from_params(values: Mapping[str, Any]) -> CartesianConfig:
    """A :class:`CartesianConfig` from the safety_gate node's parameter values.

    Raises:
        ConfigError: naming the parameter.
    """
    arms = list(values.get('cartesian_arms') or [])
    frames = list(values.get('cartesian_ee_frames') or [])
    grippers = list(values.get('cartesian_gripper_joints') or [])
    if len(frames) != len(arms):
        raise ConfigError("parameter 'cartesian_ee_frames': needs one frame per "
                          f'cartesian_arms entry ({len(arms)}), got {len(frames)}')
    if grippers and len(grippers) != len(arms):
        raise ConfigError("parameter 'cartesian_gripper_joints': needs one entry per arm "
                          "('' for none) or none at all")
    grippers = grippers or [''] * len(arms)
    ik = IkParams(**{k[3:]: values[k] for k in (
        'ik_position_tolerance', 'ik_rotation_tolerance', 'ik_max_iterations', 'ik_damping',
        'ik_max_iteration_step', 'ik_max_joint_jump') if k in values})
    return CartesianConfig(tuple(CartesianArmConfig(a, f, g) for a, f, g in
                                 zip(arms, frames, grippers, strict=True)), ik)


@dataclass(frozen=True)
class CartesianArmTarget:
    """One arm's part of a Cartesian chunk, as plain data.

    Attributes:
        arm, ee_frame, reference_frame: as in ``CartesianArmTrajectory``.
        positions: (N, 3) m.
        quaternions: (N, 4) x, y, z, w.
        gripper: (N,) or (0,) (hold the gripper at its measured position).
    """

    arm: str
    ee_frame: str
    reference_frame: str
    positions: np.ndarray
    quaternions: np.ndarray
    gripper: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class CartesianChunk:
    """A Cartesian action chunk as plain data (``ActionChunk`` with action_space CARTESIAN).

    Attributes:
        sequence, policy_id, stamp, shadow, inference_latency: as in :class:`Chunk`.
        times: (N,) seconds from ``stamp`` of each point.
        arms: one entry per arm.
    """

    sequence: int
    policy_id: str
    stamp: float
    times: np.ndarray
    arms: tuple[CartesianArmTarget, ...]
    shadow: bool = False
    inference_latency: float = 0.0


@dataclass(frozen=True)
class _Arm:
    config: CartesianArmConfig
    ik: ArmIk
    cols: np.ndarray          # columns of the arm's chain joints in GateConfig.joints
    gripper_col: int          # -1 for none


@dataclass(frozen=True)
class PreparedCartesian:
    """Arms resolved against the robot model and the gate's joint configuration."""

    arms: tuple[_Arm, ...]
    by_name: dict[str, int]


@functools.lru_cache(maxsize=16)
def prepare_cartesian(robot_model: RobotModel, config: GateConfig,
                      cconfig: CartesianConfig) -> PreparedCartesian:
    """Resolve the arms: IK solvers within the gate's joint limits (cached per triple).

    Raises:
        ConfigError: an arm's frame is unknown, its chain has a joint that is not controlled
            or belongs to another arm, or its gripper joint is not controlled.
    """
    lim = prepare(robot_model, config)
    col = {n: i for i, n in enumerate(config.joints)}
    arms, used = [], {}
    for a in cconfig.arms:
        try:
            chain = robot_model.chain(a.ee_frame)
        except RobotModelError as exc:
            raise ConfigError(f"parameter 'cartesian_ee_frames': {exc}") from None
        missing = [j for j in chain if j not in col]
        if missing:
            raise ConfigError(f"parameter 'cartesian_ee_frames': '{a.ee_frame}' depends on "
                              f'joints not in joints: {", ".join(missing)}')
        for j in chain:
            if j in used:
                raise ConfigError(f"parameter 'cartesian_ee_frames': joint '{j}' is in the "
                                  f"chains of arms '{used[j]}' and '{a.name}'")
            used[j] = a.name
        cols = np.array([col[j] for j in chain], dtype=int)
        ik = ArmIk(robot_model, a.ee_frame, lim.lower[cols], lim.upper[cols], cconfig.ik)
        if a.gripper_joint and a.gripper_joint not in col:
            raise ConfigError(f"parameter 'cartesian_gripper_joints': '{a.gripper_joint}' is "
                              'not in joints')
        if a.gripper_joint in chain:
            raise ConfigError(f"parameter 'cartesian_gripper_joints': '{a.gripper_joint}' "
                              f"moves '{a.ee_frame}'")
        arms.append(_Arm(a, ik, cols, col[a.gripper_joint] if a.gripper_joint else -1))
    return PreparedCartesian(tuple(arms), {a.config.name: i for i, a in enumerate(arms)})


@dataclass
class CartesianOutcome:
    """Result of :func:`check_cartesian`.

    Attributes:
        verdict: every violation found; ``verdict.stage`` says which stage decided.
        joint_chunk: the IK joint chunk (the one to forward), None when IK did not run or
            failed.
        ik: per arm name, the IK result (residuals, iterations).
        ik_chunk: the IK joint chunk whenever IK succeeded for every arm, even when the
            joint stage then rejected it (for reports such as ``egoroll evaluate``; never
            forwarded).
    """

    verdict: Verdict
    joint_chunk: Chunk | None = None
    ik: dict[str, IkResult] = field(default_factory=dict)
    ik_chunk: Chunk | None = None


def check_cartesian(chunk: CartesianChunk, measured_state: JointStateData | None,
                    robot_model: RobotModel | None, config: GateConfig,
                    cconfig: CartesianConfig, now: float,
                    steady_now: float | None = None) -> CartesianOutcome:
    """Validate a Cartesian chunk: Cartesian checks, IK, then every joint-space check.

    Args:
        chunk: the chunk as received.
        measured_state: the latest joint state (None when none yet).
        robot_model: the robot model (None: rejected with ``robot_model``).
        config: the gate's (joint-space and end-effector) configuration.
        cconfig: arms and IK parameters.
        now, steady_now: as for :func:`egoroll_ros.core.gate.check`.

    Returns:
        The outcome; its verdict's ``check_duration`` covers all stages.
    """
    t0 = time.perf_counter()
    out = _Collector()
    verdict = Verdict(violations=out.items, stage=STAGE_CARTESIAN,
                      ee_frames=tuple(a.ee_frame for a in cconfig.arms))
    result = CartesianOutcome(verdict)
    try:
        _check(chunk, measured_state, robot_model, config, cconfig, now, steady_now, out,
               result)
    finally:
        result.verdict.check_duration = time.perf_counter() - t0
    return result


def _structure(chunk: CartesianChunk, robot_model: RobotModel, config: GateConfig,
               prep: PreparedCartesian, out: _Collector) -> int:
    """Structure violations of a Cartesian chunk; returns N (points)."""
    times = np.asarray(chunk.times, dtype=float)
    n = times.shape[0] if times.ndim == 1 else 0
    if n < 1:
        out.one('structure', '', WHOLE_CHUNK, n, math.nan,
                'structure: a Cartesian chunk needs N >= 1 points (trajectory.points with '
                'time_from_start)')
    elif n > config.max_points:
        out.one('structure', '', WHOLE_CHUNK, n, config.max_points,
                f'structure: {n} points, at most {config.max_points}')
    if not prep.arms:
        out.one('structure', '', WHOLE_CHUNK, math.nan, math.nan,
                'structure: Cartesian chunks are not enabled (no cartesian_arms configured)')
        return n
    seen = set()
    for a in chunk.arms:
        if a.arm in seen:
            out.one('arm_names', a.arm, WHOLE_CHUNK, math.nan, math.nan,
                    f"arm_names: arm '{a.arm}' appears more than once")
            continue
        seen.add(a.arm)
        if a.arm not in prep.by_name:
            out.one('arm_names', a.arm, WHOLE_CHUNK, math.nan, math.nan,
                    f"arm_names: '{a.arm}' is not a configured arm "
                    f"({', '.join(prep.by_name)})")
            continue
        arm = prep.arms[prep.by_name[a.arm]]
        if a.ee_frame != arm.config.ee_frame:
            out.one('structure', a.arm, WHOLE_CHUNK, math.nan, math.nan,
                    f"structure: arm '{a.arm}' names ee_frame '{a.ee_frame}', configured "
                    f"'{arm.config.ee_frame}'")
        if a.reference_frame != robot_model.base_frame:
            out.one('structure', a.arm, WHOLE_CHUNK, math.nan, math.nan,
                    f"structure: arm '{a.arm}' poses are in '{a.reference_frame}'; the gate "
                    f"accepts the base frame '{robot_model.base_frame}' only")
        pos, quat, grip = (np.asarray(x, dtype=float) for x in
                           (a.positions, a.quaternions, a.gripper))
        if pos.shape != (n, 3) or quat.shape != (n, 4):
            out.one('structure', a.arm, WHOLE_CHUNK, math.nan, math.nan,
                    f"structure: arm '{a.arm}' has {pos.shape[0] if pos.ndim else 0} poses "
                    f'for {n} points')
            continue
        if grip.shape not in ((n,), (0,)) or (grip.size and arm.gripper_col < 0):
            out.one('structure', a.arm, WHOLE_CHUNK, grip.size, n,
                    f"structure: arm '{a.arm}' has {grip.size} gripper values for {n} points "
                    f"(gripper joint: '{arm.config.gripper_joint or 'none'}')")
            continue
        for label, arr in (('position', pos), ('quaternion', quat), ('gripper', grip)):
            if not arr.size:
                continue
            rows = np.nonzero(~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1))[0]
            for i in rows.tolist():
                out.one('finite', a.arm, i, math.nan, math.nan,
                        f"finite: arm '{a.arm}' {label} at point {i} is not finite")
        norms = np.linalg.norm(quat, axis=1)
        for i in np.nonzero(np.abs(norms - 1.0) > GATE_QUAT_TOLERANCE)[0].tolist():
            if math.isfinite(norms[i]):
                out.one('structure', a.arm, i, norms[i], 1.0,
                        f"structure: arm '{a.arm}' quaternion at point {i} has norm "
                        f'{norms[i]:.9g} (unit quaternions only)')
    for name in prep.by_name:
        if name not in seen:
            out.one('arm_names', name, WHOLE_CHUNK, math.nan, math.nan,
                    f"arm_names: configured arm '{name}' is missing")
    return n


def _check(chunk: CartesianChunk, measured_state: JointStateData | None,
           robot_model: RobotModel | None, config: GateConfig, cconfig: CartesianConfig,
           now: float, steady_now: float | None, out: _Collector,
           result: CartesianOutcome) -> None:
    verdict = result.verdict
    if robot_model is None:
        out.one('robot_model', '', WHOLE_CHUNK, math.nan, math.nan,
                'robot_model: no valid robot model (robot_description / urdf_path)')
        return
    try:
        prep = prepare_cartesian(robot_model, config, cconfig)
    except ConfigError as exc:
        out.one('robot_model', '', WHOLE_CHUNK, math.nan, math.nan,
                f'robot_model: the Cartesian configuration does not fit the model: {exc}')
        return
    qm = _measured(measured_state, config, steady_now, out)
    n = _structure(chunk, robot_model, config, prep, out)
    if out.items:
        return      # structure, finiteness or the measured state: nothing to check against

    # --- stage 1: Cartesian checks of the target poses ---------------------------------------
    targets = {a.arm: a for a in chunk.arms}
    nf = len(prep.arms)
    trans = np.empty((nf, n + 1, 3))
    rots = np.empty((nf, n + 1, 3, 3))
    for f, arm in enumerate(prep.arms):
        tgt = targets[arm.config.name]
        trans[f, 0], rots[f, 0] = arm.ik.fk(qm[arm.cols])
        trans[f, 1:] = tgt.positions
        rots[f, 1:] = quat_to_matrix(np.asarray(tgt.quaternions, dtype=float))
    verdict.ee_paths = trans
    out.items.extend(ee_pose_path_checks(trans, rots, verdict.ee_frames, config, True))
    if verdict.rejected:
        return

    # --- stage 2: IK, per arm ----------------------------------------------------------------
    verdict.stage = STAGE_IK
    positions = np.tile(qm, (n, 1))
    for f, arm in enumerate(prep.arms):
        res = arm.ik.solve_path(trans[f, 1:], rots[f, 1:], qm[arm.cols])
        result.ik[arm.config.name] = res
        if not res.ok:
            frame, k = arm.config.ee_frame, res.failed_point
            if res.failure == 'ik_branch_flip':
                out.one('ik_branch_flip', res.failure_joint, k, res.failure_value,
                        res.failure_limit,
                        f"ik_branch_flip: '{frame}' at point {k}: joint "
                        f"'{res.failure_joint}' jumps {res.failure_value:.4g} from the "
                        f'previous solution (max {res.failure_limit:.4g}): a branch flip')
            else:
                unit = 'm' if res.failure_joint == 'position' else 'rad'
                out.one('ik_not_converged', frame, k, res.failure_value, res.failure_limit,
                        f"ik_not_converged: '{frame}' at point {k}: {res.failure_joint} "
                        f'error {res.failure_value:.4g} {unit} after '
                        f'{cconfig.ik.max_iterations} iterations (tolerance '
                        f'{res.failure_limit:.4g} {unit})')
            continue
        positions[:, arm.cols] = res.positions
        tgt = targets[arm.config.name]
        if arm.gripper_col >= 0 and np.asarray(tgt.gripper).size:
            positions[:, arm.gripper_col] = tgt.gripper
    if verdict.rejected:
        return

    # --- stage 3: every joint-space check on the IK result -----------------------------------
    traj = JointTrajectoryData(joint_names=config.joints, times=np.asarray(chunk.times, float),
                               positions=positions, stamp=chunk.stamp)
    joint_chunk = Chunk(sequence=chunk.sequence, policy_id=chunk.policy_id, stamp=chunk.stamp,
                        trajectory=traj, shadow=chunk.shadow,
                        inference_latency=chunk.inference_latency)
    result.ik_chunk = joint_chunk
    jv = check(joint_chunk, measured_state, robot_model, config, now, steady_now)
    cart_soft = list(out.items)
    out.items.extend(jv.violations)
    if jv.rejected or not cart_soft:
        verdict.stage = STAGE_JOINT
    else:
        verdict.stage = STAGE_CARTESIAN        # the Cartesian stage asked for confirmation
    if not verdict.rejected:
        result.joint_chunk = joint_chunk


def arm_targets_from_poses(names: Sequence[str], ee_frames: Sequence[str], base_frame: str,
                           poses: Sequence[Any]) -> tuple[CartesianArmTarget, ...]:
    """Targets from :class:`egoroll_ros.core.frames.ArmPoses` (base frame, hardware
    convention), as the policy node publishes them (rotations become xyzw quaternions)."""
    from egoroll_ros.core.frames import matrix_to_quat

    out = []
    for name, frame, p in zip(names, ee_frames, poses, strict=True):
        out.append(CartesianArmTarget(
            arm=name, ee_frame=frame, reference_frame=base_frame,
            positions=np.asarray(p.positions, dtype=float),
            quaternions=matrix_to_quat(p.rotations),
            gripper=np.zeros(0) if p.gripper is None else np.asarray(p.gripper, float)))
    return tuple(out)
