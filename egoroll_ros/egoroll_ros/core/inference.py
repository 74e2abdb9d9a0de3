"""Configured policy inference, shared by ``policy_node`` and ``egoroll evaluate``.

One place for: validating the node's policy configuration (:func:`setup_from_params`),
turning a policy output into the chunk positions that are published
(:func:`predict_positions`) and into a :class:`~egoroll_ros.core.types.Chunk`
(:func:`make_chunk`). Loading and checking the checkpoint against the configuration is
:func:`egoroll_ros.policies.loading.load_policy`. No rclpy import.

Cartesian policies (``PolicyMetadata.action_space == 'cartesian'``): :class:`CartesianRuntime`
holds the ONE :class:`~egoroll_ros.core.frames.CartesianCodec` (layout, frame convention,
camera frame pose) through which the policy's output is decoded into base-frame targets
(:func:`predict_cartesian`, :func:`make_cartesian_chunk`) and, when the policy takes
end-effector poses as state, the measured poses (FK of joint_states) are encoded. No IK here:
the safety gate solves it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
import re
from typing import Any

import numpy as np

from egoroll_ros.core.frames import (
    ArmPoses,
    CartesianCodec,
    FrameConvention,
    matrix_to_quat,
    quat_to_matrix,
)
from egoroll_ros.core.observation import CameraConfig, Quest, unwrap_continuous
from egoroll_ros.core.policy import (
    Observation,
    Policy,
    PolicyError,
    PolicyMetadata,
    check_chunk,
)
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.errors import ConfigError, RobotModelError


@dataclass(frozen=True)
class CartesianParams:
    """The validated ``cartesian.*`` and ``urdf_path`` parameters of a policy node.

    Attributes:
        arms, ee_frames, gripper_joints: per configured arm ('' gripper: none).
        urdf_path: URDF file (``package://pkg/...`` resolved) for FK and fixed camera frames.
        camera_poses: configured frame -> (rotation 3x3, translation 3) in the base frame.
        convention: the configured frame convention, None when left at the defaults.
        urdf_text: the URDF itself (the ``robot_description`` topic), used when
            ``urdf_path`` is empty.
        resolve: resolves a ``package://`` ``urdf_path`` to a file (the ROS layer's
            :func:`egoroll_ros.ros.paths.resolve_path`); None: only plain paths.
    """

    arms: tuple[str, ...]
    ee_frames: tuple[str, ...]
    gripper_joints: tuple[str, ...]
    urdf_path: str
    camera_poses: dict[str, tuple[np.ndarray, np.ndarray]]
    convention: FrameConvention | None = None
    urdf_text: str = ''
    resolve: Callable[[str], str] | None = None

    def robot_model(self) -> Any:
        """The robot model from ``urdf_path``, else from ``urdf_text``.

        Raises:
            ConfigError: neither is set, or the URDF is unreadable or malformed (the message
                names where it came from).
        """
        from egoroll_ros.core.robot_model import RobotModel

        if self.urdf_path:
            try:
                return RobotModel.from_file(_resolved(self.urdf_path, self.resolve))
            except (RobotModelError, ConfigError) as exc:
                raise ConfigError(f"parameter 'urdf_path': {exc}") from None
        if not self.urdf_text:
            raise ConfigError("a Cartesian policy needs the robot's URDF (forward kinematics, "
                              "base frame): set 'urdf_path' or publish robot_description")
        try:
            return RobotModel(self.urdf_text)
        except RobotModelError as exc:
            raise ConfigError(f'robot_description: {exc}') from None


@dataclass(frozen=True)
class PolicySetup:
    """The validated joint, camera and Quest configuration of a policy node.

    Attributes:
        joints: controlled joints (state and action columns, in order).
        continuous_columns: columns of the continuous joints (unwrapped).
        cameras: configured cameras.
        quest: Joy axes of grip and trigger.
        cartesian: the Cartesian configuration (None: no ``cartesian.arms``, so a Cartesian
            policy is refused).
    """

    joints: tuple[str, ...]
    continuous_columns: tuple[int, ...]
    cameras: tuple[CameraConfig, ...]
    quest: Quest
    cartesian: CartesianParams | None = None


def _resolved(path: str, resolve: Callable[[str], str] | None) -> str:
    if resolve is not None:
        return resolve(path)
    if path.startswith('package://'):
        raise ConfigError(f"'{path}': package:// paths need a resolver (none given)")
    return path


_CONVENTION_KEYS = ('reference_rotation', 'reference_translation', 'ee_rotation',
                    'ee_translation', 'gripper_scale', 'gripper_offset')


def _cartesian_params(p: Mapping[str, Any], joints: tuple[str, ...],
                      resolve: Callable[[str], str] | None) -> CartesianParams | None:
    arms = tuple(p.get('cartesian.arms') or ())
    if not arms:
        return None
    if len(set(arms)) != len(arms) or not all(arms):
        raise ConfigError("parameter 'cartesian.arms': names must be unique and non-empty")
    frames = tuple(p.get('cartesian.ee_frames') or ())
    if len(frames) != len(arms) or not all(frames):
        raise ConfigError(f"parameter 'cartesian.ee_frames': needs one frame per arm "
                          f'({len(arms)}), got {len(frames)}')
    grips = tuple(p.get('cartesian.gripper_joints') or ()) or ('',) * len(arms)
    if len(grips) != len(arms):
        raise ConfigError("parameter 'cartesian.gripper_joints': needs one entry per arm ('' "
                          'for none) or none at all')
    bad = [g for g in grips if g and g not in joints]
    if bad:
        raise ConfigError(f"parameter 'cartesian.gripper_joints': not in 'joints': {bad}")
    names = tuple(p.get('cartesian.camera_frames') or ())
    vals = np.asarray(p.get('cartesian.camera_poses') or [], dtype=float)
    if vals.size != 7 * len(names) or not np.all(np.isfinite(vals)):
        raise ConfigError(f"parameter 'cartesian.camera_poses': needs 7 finite values (x y z "
                          f'qx qy qz qw, base frame) per camera frame ({len(names)})')
    poses = {}
    for name, v in zip(names, vals.reshape(len(names), 7), strict=True):
        if abs(np.linalg.norm(v[3:]) - 1.0) > 1e-6:
            raise ConfigError(f"parameter 'cartesian.camera_poses': the quaternion of "
                              f"'{name}' is not a unit quaternion")
        poses[name] = (quat_to_matrix(v[3:]), v[:3].copy())
    conv = None
    c = {k: p.get(f'cartesian.convention.{k}') for k in _CONVENTION_KEYS}
    if any(c[k] for k in _CONVENTION_KEYS[:4]) or c['gripper_scale'] not in (None, 1.0) or \
            c['gripper_offset'] not in (None, 0.0):
        kw: dict[str, Any] = {k: np.asarray(c[k], dtype=float) for k in _CONVENTION_KEYS[:4]
                              if c[k]}
        kw.update({k: float(c[k]) for k in _CONVENTION_KEYS[4:] if c[k] is not None})
        try:
            conv = FrameConvention(**kw)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("'convention.", "'cartesian.convention."))\
                from None
    return CartesianParams(arms, frames, grips, str(p.get('urdf_path') or ''), poses, conv,
                           resolve=resolve)


def _cameras(p: Mapping[str, Any]) -> list[CameraConfig]:
    names = p['cameras.names']
    if len(set(names)) != len(names) or any(not re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', n)
                                             for n in names):
        raise ConfigError("parameter 'cameras.names': names must be unique identifiers")
    for key in ('cameras.heights', 'cameras.widths'):
        if len(p[key]) != len(names):
            raise ConfigError(f"parameter '{key}': needs one value per camera ({len(names)}), "
                              f'got {len(p[key])}')
    comp = p['cameras.compressed'] or [False] * len(names)
    if len(comp) != len(names):
        raise ConfigError(f"parameter 'cameras.compressed': needs one value per camera "
                          f'({len(names)}) or none, got {len(comp)}')
    return [CameraConfig(n, h, w, c) for n, h, w, c in
            zip(names, p['cameras.heights'], p['cameras.widths'], comp, strict=True)]


def setup_from_params(p: Mapping[str, Any],
                      resolve: Callable[[str], str] | None = None) -> PolicySetup:
    """Validate the joint, camera and Quest parameters of ``policy_node``.

    Args:
        p: parameter name -> value (as :func:`egoroll_ros.ros.params.declare_params` gives).
        resolve: resolver of a ``package://`` ``urdf_path``
            (:func:`egoroll_ros.ros.paths.resolve_path`); None: plain paths only.

    Raises:
        ConfigError: naming the parameter.
    """
    joints = tuple(p['joints'])
    if not joints or len(set(joints)) != len(joints):
        raise ConfigError("parameter 'joints': must be a non-empty list of unique names")
    bad = [j for j in p['continuous_joints'] if j not in joints]
    if bad:
        raise ConfigError(f"parameter 'continuous_joints': not in 'joints': {bad}")
    for key in ('quest.grip_axes', 'quest.trigger_axes'):
        if len(p[key]) != 2:
            raise ConfigError(f"parameter '{key}': needs [left, right]")
    return PolicySetup(joints, tuple(joints.index(j) for j in p['continuous_joints']),
                       tuple(_cameras(p)),
                       Quest(tuple(p['quest.grip_axes']), tuple(p['quest.trigger_axes'])),
                       _cartesian_params(p, joints, resolve))


class CartesianRuntime:
    """A Cartesian policy's conversions, built once at configure.

    Holds the robot model (for FK of the measured joints and the base frame name), the
    policy's arms and THE codec (layout + frame convention + pose of the policy's frame in
    the base frame) used for both the actions and the end-effector pose state.

    Args:
        meta: the (validated) Cartesian policy metadata.
        setup: the node setup (``setup.cartesian`` must be set).

    Raises:
        ConfigError: no URDF, an unreadable one, an ee frame or camera frame the model
            cannot place (unknown, moving with the joints, defined twice), or an ee frame
            depending on joints that are not configured.
    """

    def __init__(self, meta: PolicyMetadata, setup: PolicySetup) -> None:
        cp, spec = setup.cartesian, meta.cartesian
        self.model = cp.robot_model()
        self.spec = spec
        self.joints = setup.joints
        self.base_frame = self.model.base_frame
        self.arm_names = tuple(a.name for a in spec.arms)
        self.ee_frames = tuple(a.ee_frame for a in spec.arms)
        grip = dict(zip(cp.arms, cp.gripper_joints, strict=True))
        self.gripper_columns = tuple(setup.joints.index(grip[a.name]) if grip.get(a.name)
                                     else -1 for a in spec.arms)
        try:
            self._fk = self.model.fk_plan(self.ee_frames, setup.joints)
        except RobotModelError as exc:
            raise ConfigError(f"parameter 'cartesian.ee_frames': {exc}") from None
        frame_r, frame_t = self.frame_pose(spec.frame, cp)
        self.convention = spec.convention or cp.convention or FrameConvention()
        self.codec = CartesianCodec([a.layout for a in spec.arms], self.convention,
                                    frame_r, frame_t)

    def frame_pose(self, frame: str, cp: CartesianParams) -> tuple[np.ndarray, np.ndarray]:
        """Pose (rotation, translation) of ``frame`` in the base frame.

        Raises:
            ConfigError: unknown, moving, or both in the URDF and configured.
        """
        if frame in ('base', self.base_frame):
            return np.eye(3), np.zeros(3)
        in_urdf = self.model.has_frame(frame)
        if in_urdf and frame in cp.camera_poses:
            raise ConfigError(f"parameter 'cartesian.camera_frames': '{frame}' is also a URDF "
                              'frame; give its pose in one place')
        if frame in cp.camera_poses:
            return cp.camera_poses[frame]
        if not in_urdf:
            raise ConfigError(f"frame '{frame}' is neither in the URDF nor in "
                              "'cartesian.camera_frames'")
        chain = self.model.chain(frame)
        if chain:
            raise ConfigError(f"frame '{frame}' moves with joints {', '.join(chain)}; only "
                              'fixed camera frames are supported')
        t, r = self.model.fk_reference(frame, [], [])
        return np.asarray(r, dtype=float), np.asarray(t, dtype=float)

    def measured_poses(self, joints: np.ndarray) -> list[ArmPoses]:
        """Base-frame end-effector poses (hardware convention) of (N, J) joint positions."""
        q = np.atleast_2d(np.asarray(joints, dtype=float))
        trans, rots = self._fk.compute(q)
        return [ArmPoses(name, trans[f], rots[f],
                         q[:, col] if col >= 0 else None)
                for f, (name, col) in enumerate(zip(self.arm_names, self.gripper_columns,
                                                    strict=True))]

    def encode_state(self, joints: np.ndarray) -> np.ndarray:
        """The policy's end-effector pose state (D,) for measured joints (J,)."""
        return self.codec.encode(self.measured_poses(joints))[0]

    def decode(self, values: np.ndarray) -> tuple[Any, ...]:
        """An (H, D) policy output -> base-frame :class:`CartesianArmTarget` per arm.

        Raises:
            PolicyError: a non-unit quaternion, a degenerate rotation, wrong width.
        """
        from egoroll_ros.core.cartesian import CartesianArmTarget

        try:
            poses = self.codec.decode(values)
        except ValueError as exc:
            raise PolicyError(f'Cartesian policy output: {exc}') from None
        return tuple(CartesianArmTarget(
            arm=p.name, ee_frame=frame, reference_frame=self.base_frame,
            positions=p.positions, quaternions=matrix_to_quat(p.rotations),
            gripper=np.zeros(0) if p.gripper is None else np.asarray(p.gripper, float))
            for p, frame in zip(poses, self.ee_frames, strict=True))


def predict_positions(policy: Policy, obs: Observation,
                      continuous_columns: Sequence[int]) -> np.ndarray:
    """Run the policy on ``obs``; the checked (H, J) chunk positions, continuous joints
    unwrapped relative to the measured state.

    Raises:
        PolicyError: inference failed, wrong shape or non-finite output.
    """
    arr = check_chunk(policy.predict_chunk(obs), policy.metadata)
    return unwrap_continuous(arr, obs.state, continuous_columns)


def make_chunk(meta: PolicyMetadata, joints: Sequence[str], positions: np.ndarray,
               stamp: float, latency: float, shadow: bool = False, sequence: int = 0) -> Chunk:
    """The chunk published for ``positions`` predicted from the observation at ``stamp``."""
    traj = JointTrajectoryData(joint_names=tuple(joints), times=meta.point_times(),
                               positions=positions, stamp=stamp)
    return Chunk(sequence=sequence, policy_id=meta.fingerprint, stamp=stamp, trajectory=traj,
                 shadow=shadow, inference_latency=latency)


def predict_cartesian(policy: Policy, obs: Observation, runtime: CartesianRuntime
                      ) -> tuple[Any, ...]:
    """Run a Cartesian policy on ``obs``: its checked (H, D) output decoded through the
    runtime's codec (dataset convention -> hardware, policy frame -> base frame).

    Returns:
        One :class:`~egoroll_ros.core.cartesian.CartesianArmTarget` per arm.

    Raises:
        PolicyError: inference failed, wrong shape, non-finite or undecodable output.
    """
    return runtime.decode(check_chunk(policy.predict_chunk(obs), policy.metadata))


def make_cartesian_chunk(meta: PolicyMetadata, targets: Sequence[Any], stamp: float,
                         latency: float, shadow: bool = False, sequence: int = 0) -> Any:
    """The :class:`~egoroll_ros.core.cartesian.CartesianChunk` published for ``targets``."""
    from egoroll_ros.core.cartesian import CartesianChunk

    return CartesianChunk(sequence=sequence, policy_id=meta.fingerprint, stamp=stamp,
                          times=meta.point_times(), arms=tuple(targets), shadow=shadow,
                          inference_latency=latency)
