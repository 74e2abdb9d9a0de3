"""The policy contract: the Policy interface, its metadata and the observation it consumes.

Pure (numpy only, no rclpy, no message types, no backend): backends in
:mod:`egoroll_ros.policies` implement :class:`Policy`, and their registry
(:mod:`egoroll_ros.policies.registry`) finds them by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
import math
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.core.frames import ArmLayout, FrameConvention, layout_width, rotation_size
from egoroll_ros.errors import CheckpointError, ConfigError, EgorollError

#: Non-image, non-state inputs a policy may declare (the node can supply these from Quest).
EXTRA_FEATURES = {
    'quest.grip': 2,          # left, right grip axis values
    'quest.trigger': 2,       # left, right trigger axis values
    'quest.left_pose': 7,     # x y z qx qy qz qw
    'quest.right_pose': 7,
}


class PolicyError(EgorollError):
    """Inference failed (exception in the model, malformed or non-finite output)."""


class PolicyCrashError(PolicyError):
    """The process running the policy died."""


class PolicyTimeoutError(PolicyError):
    """The policy did not answer within its time limit."""


@dataclass(frozen=True)
class ImageFeature:
    """An image input of the policy: the camera it comes from and the size it wants.

    Attributes:
        camera: configured camera name supplying it.
        height, width: pixels the policy expects (the node resizes to this).
        channels: 3 (RGB, uint8) is the only layout supported.
    """

    camera: str
    height: int
    width: int
    channels: int = 3


#: ``PolicyMetadata.action_space`` values.
ACTION_SPACES = ('joint', 'cartesian')
#: ``CartesianSpec.state`` values: the measured joints, or the measured end-effector poses.
STATE_KINDS = ('joint', 'ee_pose')


@dataclass(frozen=True)
class CartesianArm:
    """One arm of a Cartesian policy: its columns are position (3), rotation, gripper (0/1).

    Attributes:
        name: arm name (must be a configured arm, ``cartesian.arms``).
        ee_frame: end-effector frame the poses are for (URDF frame).
        rotation: rotation representation (``core.frames``: quat_xyzw, quat_wxyz, rot6d,
            rpy:<axes>).
        gripper: whether one gripper value follows the rotation.
    """

    name: str
    ee_frame: str
    rotation: str = 'quat_xyzw'
    gripper: bool = True

    @property
    def layout(self) -> ArmLayout:
        """The arm's column layout for :class:`~egoroll_ros.core.frames.CartesianCodec`."""
        return ArmLayout(self.name, self.rotation, self.gripper)


def _convention_json(c: FrameConvention) -> dict[str, Any]:
    return {'reference_rotation': np.asarray(c.reference_rotation).reshape(9).tolist(),
            'reference_translation': np.asarray(c.reference_translation).tolist(),
            'ee_rotation': np.asarray(c.ee_rotation).reshape(9).tolist(),
            'ee_translation': np.asarray(c.ee_translation).tolist(),
            'gripper_scale': float(c.gripper_scale), 'gripper_offset': float(c.gripper_offset)}


def convention_from_json(d: dict[str, Any]) -> FrameConvention:
    """A :class:`FrameConvention` from its JSON form (missing keys: identity/defaults).

    Raises:
        ConfigError: a value is not a rotation, not 3 finite values, or the gripper scale is 0.
    """
    kw: dict[str, Any] = {}
    for key in ('reference_rotation', 'ee_rotation'):
        if d.get(key) is not None:
            kw[key] = np.asarray(d[key], dtype=float).reshape(-1)
    for key in ('reference_translation', 'ee_translation'):
        if d.get(key) is not None:
            kw[key] = np.asarray(d[key], dtype=float)
    for key in ('gripper_scale', 'gripper_offset'):
        if d.get(key) is not None:
            kw[key] = float(d[key])
    return FrameConvention(**kw)


@dataclass(frozen=True)
class CartesianSpec:
    """What a Cartesian policy's vectors mean.

    Attributes:
        arms: per-arm layout, in column order (position 3 + rotation + gripper per arm).
        frame: frame the poses are expressed in: ``'base'`` (the robot's URDF root) or a camera
            frame whose pose in the base frame the configuration supplies (a fixed URDF frame
            or ``cartesian.camera_frames``/``camera_poses``).
        convention: the dataset <-> hardware convention of the training data (None: the
            node's configured one, identity by default). ONE object for actions and
            observations.
        state: ``'joint'``: the state vector is the measured joints (configured order);
            ``'ee_pose'``: the measured end-effector poses (FK of joint_states), encoded in
            the same layout and through the same convention as the actions.
    """

    arms: tuple[CartesianArm, ...]
    frame: str = 'base'
    convention: FrameConvention | None = None
    state: str = 'joint'

    @property
    def width(self) -> int:
        """Columns of one action (and of an ``ee_pose`` state)."""
        return layout_width([a.layout for a in self.arms])

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {'arms': [[a.name, a.ee_frame, a.rotation, a.gripper] for a in self.arms],
                'frame': self.frame, 'state': self.state,
                'convention': None if self.convention is None else
                _convention_json(self.convention)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CartesianSpec:
        """Inverse of :meth:`to_json`.

        Raises:
            CheckpointError: malformed.
        """
        try:
            conv = d.get('convention')
            return cls(arms=tuple(CartesianArm(str(n), str(f), str(r), bool(g))
                                  for n, f, r, g in d['arms']),
                       frame=str(d.get('frame', 'base')), state=str(d.get('state', 'joint')),
                       convention=None if conv is None else convention_from_json(conv))
        except (KeyError, TypeError, ValueError, ConfigError) as exc:
            raise CheckpointError(f'Cartesian policy metadata malformed: {exc}') from None


@dataclass(frozen=True)
class CartesianSupply:
    """What the node's configuration can supply to a Cartesian policy.

    Attributes:
        ee_frames: configured arm -> end-effector frame (``cartesian.arms``/``ee_frames``).
        gripper_joints: configured arm -> gripper joint ('' for none).
        frames: frames other than ``'base'`` whose pose in the base frame is known (fixed
            URDF frames and configured camera frames).
        convention_configured: the configuration sets a non-default frame convention.
    """

    ee_frames: dict[str, str]
    gripper_joints: dict[str, str]
    frames: frozenset[str] = frozenset()
    convention_configured: bool = False


@dataclass(frozen=True)
class PolicyMetadata:
    """What a loaded policy consumes and produces.

    Attributes:
        backend: backend name that loaded it.
        fingerprint: lowercase sha256 hex over weights, config and normalisation statistics.
        image_features: image inputs, in the order the model takes them.
        state_size: length of the state vector (the configured joints, in order; for a
            Cartesian policy with ``cartesian.state == 'ee_pose'`` the layout width).
        action_size: columns of a predicted chunk (the joint count, or for a Cartesian
            policy the layout width).
        chunk_length: rows H of a predicted chunk.
        step_period: seconds between consecutive points of a chunk.
        time_from_start: optional explicit per-point offsets (length H); default
            ``(k + 1) * step_period``.
        extra_features: names from :data:`EXTRA_FEATURES` the policy also needs.
        normalization: the statistics the policy applies (for reports; checked present).
        action_space: ``'joint'`` (absolute joint targets; the default) or ``'cartesian'``
            (end-effector poses per arm, laid out as ``cartesian`` says).
        cartesian: the Cartesian layout, frame, convention and state kind (Cartesian only).
        rtc: the policy does real-time chunking (:class:`RtcRequest`): it inpaints the seam
            with the unexecuted rest of a previous chunk of its own (LeRobot's RTC for
            flow-matching policies, enabled by ``policy.rtc``). False: ``Observation.rtc`` is
            ignored.
    """

    backend: str
    fingerprint: str
    image_features: tuple[ImageFeature, ...]
    state_size: int
    action_size: int
    chunk_length: int
    step_period: float
    time_from_start: tuple[float, ...] | None = None
    extra_features: tuple[str, ...] = ()
    normalization: dict[str, Any] = field(default_factory=dict)
    action_space: str = 'joint'
    cartesian: CartesianSpec | None = None
    rtc: bool = False

    def point_times(self) -> np.ndarray:
        """Seconds from the observation stamp of each of the H points."""
        if self.time_from_start is not None:
            return np.asarray(self.time_from_start, dtype=float)
        return (np.arange(self.chunk_length, dtype=float) + 1.0) * self.step_period

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (for the isolated backend's protocol)."""
        return {
            'backend': self.backend, 'fingerprint': self.fingerprint,
            'image_features': [[f.camera, f.height, f.width, f.channels]
                               for f in self.image_features],
            'state_size': self.state_size, 'action_size': self.action_size,
            'chunk_length': self.chunk_length, 'step_period': self.step_period,
            'time_from_start': list(self.time_from_start) if self.time_from_start else None,
            'extra_features': list(self.extra_features), 'normalization': self.normalization,
            'action_space': self.action_space,
            'cartesian': None if self.cartesian is None else self.cartesian.to_json(),
            'rtc': self.rtc,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PolicyMetadata:
        """Inverse of :meth:`to_json`.

        Raises:
            CheckpointError: a field is missing or has the wrong type.
        """
        try:
            return cls(
                backend=str(d['backend']), fingerprint=str(d['fingerprint']),
                image_features=tuple(ImageFeature(str(c), int(h), int(w), int(ch))
                                     for c, h, w, ch in d['image_features']),
                state_size=int(d['state_size']), action_size=int(d['action_size']),
                chunk_length=int(d['chunk_length']), step_period=float(d['step_period']),
                time_from_start=tuple(float(t) for t in d['time_from_start'])
                if d.get('time_from_start') else None,
                extra_features=tuple(str(e) for e in d.get('extra_features', ())),
                normalization=dict(d.get('normalization') or {}),
                action_space=str(d.get('action_space', 'joint')),
                cartesian=CartesianSpec.from_json(d['cartesian'])
                if d.get('cartesian') is not None else None,
                rtc=bool(d.get('rtc', False)))
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f'policy metadata malformed: {exc!r}') from None


@dataclass(frozen=True)
class RtcRequest:
    """Real-time chunking guidance for one inference (LeRobot's RTC; ``PolicyMetadata.rtc``).

    The chunk the executor is running is one this policy predicted earlier, from the
    observation stamped ``prefix_stamp``; ``executed`` of its points are due at or before the
    new observation's first point (its first point is aligned with point ``executed`` of
    that chunk), and ``inference_delay`` points of the new chunk will be due before it can
    land (the node's measured inference latency in steps). The policy freezes those points to
    the running chunk's and blends the rest (LeRobot: ``prev_chunk_left_over`` = that
    chunk's unexecuted rows in the model's own action space, ``inference_delay``).

    Attributes:
        prefix_stamp: ``Observation.stamp`` of the prediction being executed.
        executed: its rows already executed (>= 0; the leftover starts there).
        inference_delay: steps of the new chunk due before it lands (>= 0).
    """

    prefix_stamp: float
    executed: int
    inference_delay: int

    def __post_init__(self) -> None:
        if not math.isfinite(self.prefix_stamp) or int(self.executed) != self.executed or \
                self.executed < 0 or int(self.inference_delay) != self.inference_delay or \
                self.inference_delay < 0:
            raise ValueError(f'RtcRequest needs a finite prefix_stamp and integers executed, '
                             f'inference_delay >= 0, got {self}')

    def to_json(self) -> dict[str, Any]:
        """JSON form (for the isolated backend's protocol)."""
        return {'prefix_stamp': float(self.prefix_stamp), 'executed': int(self.executed),
                'inference_delay': int(self.inference_delay)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RtcRequest:
        """Inverse of :meth:`to_json`.

        Raises:
            PolicyError: malformed.
        """
        try:
            return cls(float(d['prefix_stamp']), int(d['executed']), int(d['inference_delay']))
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyError(f'malformed RTC request {d!r}: {exc}') from None


@dataclass(frozen=True)
class Observation:
    """One observation as the policy sees it.

    Attributes:
        images: camera name -> uint8 array (height, width, 3), RGB, at the declared size.
        state: float64 array (state_size,): the joints in the configured order, or for a
            Cartesian policy declaring ``ee_pose`` state the encoded end-effector poses.
        extras: name -> float64 array for each declared extra feature.
        stamp: observation time in seconds (ROS clock).
        joints: the measured joint positions in configured order (equal to ``state`` for
            joint-state policies); None when not assembled by the node.
        rtc: real-time chunking guidance (None: none; a policy without ``metadata.rtc``
            ignores it).
    """

    images: dict[str, np.ndarray]
    state: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    stamp: float = 0.0
    joints: np.ndarray | None = None
    rtc: RtcRequest | None = None


class Policy(ABC):
    """A loaded policy: ``reset()`` at the start of a rollout, then ``predict_chunk`` per step.

    Subclasses implement :meth:`load` (a classmethod building the instance from a checkpoint
    directory; it must never unpickle anything and never write next to the checkpoint),
    :attr:`metadata` and :meth:`predict_chunk`.
    """

    @classmethod
    @abstractmethod
    def load(cls, path: str | Path, **options: Any) -> Policy:
        """Load the checkpoint at ``path``.

        Raises:
            CheckpointError: missing, malformed or unsafe files, missing normalisation.
        """

    @property
    @abstractmethod
    def metadata(self) -> PolicyMetadata:
        """What the policy consumes and produces."""

    def reset(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Forget any state carried between steps (called at each rollout start)."""

    @abstractmethod
    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """Predict an (H, A) chunk: absolute joint targets in SI units, or for a Cartesian
        policy (``metadata.action_space == 'cartesian'``) end-effector poses per arm in the
        policy's layout, frame and dataset convention (the node converts them).

        Raises:
            PolicyError: inference failed.
        """

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources (child processes, files). Safe to call twice."""


def validate_metadata(meta: PolicyMetadata, joints: list[str] | tuple[str, ...],
                      cameras: dict[str, tuple[int, int]],
                      extras_available: set[str] | None = None,
                      cartesian: CartesianSupply | None = None) -> None:
    """Check that this configuration can feed the policy and execute its output.

    Args:
        meta: the loaded policy's metadata.
        joints: configured joints (state and action columns, in order).
        cameras: configured camera name -> (height, width) expected from the camera.
        extras_available: extra features the node can supply (default: all known).
        cartesian: what the configuration supplies to a Cartesian policy (None: nothing,
            so a Cartesian policy is refused).

    Raises:
        CheckpointError: naming the reason (action size, state size, missing camera or
            feature, missing normalisation, bad chunk timing, empty fingerprint; for a
            Cartesian policy: layout, arms, frames or convention the configuration cannot
            supply).
    """
    problems = []
    if not meta.fingerprint or len(meta.fingerprint) != 64:
        problems.append('the policy has no valid fingerprint')
    if meta.action_space == 'cartesian':
        problems += _cartesian_problems(meta, joints, cartesian)
    elif meta.action_space != 'joint':
        problems.append(f"action space '{meta.action_space}' is unknown "
                        f"({', '.join(ACTION_SPACES)})")
    else:
        if meta.cartesian is not None:
            problems.append("the policy declares a Cartesian layout but action space 'joint'")
        if meta.action_size != len(joints):
            problems.append(f'action size {meta.action_size} differs from the {len(joints)} '
                            f'configured joints')
        if meta.state_size != len(joints):
            problems.append(f'state size {meta.state_size} differs from the {len(joints)} '
                            f'configured joints')
    for f in meta.image_features:
        if f.camera not in cameras:
            problems.append(f"image feature from camera '{f.camera}' cannot be supplied "
                            f"(configured cameras: {', '.join(cameras) or 'none'})")
        if f.channels != 3 or f.height <= 0 or f.width <= 0:
            problems.append(f"image feature '{f.camera}' has an unsupported shape "
                            f'{f.height}x{f.width}x{f.channels}')
    supplied = set(EXTRA_FEATURES) if extras_available is None else extras_available
    for e in meta.extra_features:
        if e not in supplied:
            problems.append(f"input feature '{e}' cannot be supplied")
    if meta.chunk_length < 1:
        problems.append(f'chunk length {meta.chunk_length} < 1')
    if not (math.isfinite(meta.step_period) and meta.step_period > 0):
        problems.append(f'step period {meta.step_period} is not a positive number')
    times = meta.point_times()
    if len(times) != meta.chunk_length or not np.all(np.isfinite(times)) or \
            np.any(times <= 0) or np.any(np.diff(times) <= 0):
        problems.append('time_from_start is not H strictly increasing positive values')
    for key in ('state', 'action'):
        if key not in meta.normalization:
            problems.append(f"normalisation statistics for '{key}' are missing")
    if problems:
        raise CheckpointError('policy refused: ' + '; '.join(problems))


def _cartesian_problems(meta: PolicyMetadata, joints: list[str] | tuple[str, ...],
                        supply: CartesianSupply | None) -> list[str]:
    spec = meta.cartesian
    if spec is None:
        return ["action space 'cartesian' without a Cartesian layout (arms, frame)"]
    problems = []
    names = [a.name for a in spec.arms]
    if not names or len(set(names)) != len(names):
        problems.append('the Cartesian layout needs at least one arm, names unique')
    try:
        for a in spec.arms:
            rotation_size(a.rotation)
        width = spec.width
    except ConfigError as exc:
        return problems + [f'Cartesian layout: {exc}']
    if meta.action_size != width:
        problems.append(f'action size {meta.action_size} differs from the Cartesian layout '
                        f'width {width} (position 3 + rotation + gripper per arm)')
    if spec.state not in STATE_KINDS:
        problems.append(f"Cartesian state '{spec.state}' is unknown ({', '.join(STATE_KINDS)})")
    elif spec.state == 'joint' and meta.state_size != len(joints):
        problems.append(f'state size {meta.state_size} differs from the {len(joints)} '
                        f'configured joints')
    elif spec.state == 'ee_pose' and meta.state_size != width:
        problems.append(f'state size {meta.state_size} differs from the Cartesian layout '
                        f'width {width} (end-effector pose state)')
    if supply is None or not supply.ee_frames:
        problems.append("the policy is Cartesian but the configuration supplies no arms "
                        "(parameters 'cartesian.arms', 'cartesian.ee_frames')")
        return problems
    for a in spec.arms:
        if a.name not in supply.ee_frames:
            problems.append(f"arm '{a.name}' is not configured (cartesian.arms: "
                            f"{', '.join(supply.ee_frames)})")
            continue
        if supply.ee_frames[a.name] != a.ee_frame:
            problems.append(f"arm '{a.name}': the policy's end-effector frame '{a.ee_frame}' "
                            f"differs from the configured '{supply.ee_frames[a.name]}'")
        if a.gripper and not supply.gripper_joints.get(a.name):
            problems.append(f"arm '{a.name}' has a gripper value but no gripper joint is "
                            "configured (cartesian.gripper_joints)")
    extra = [n for n in supply.ee_frames if n not in names]
    if extra:
        problems.append(f"configured arms the policy does not drive: {', '.join(extra)} "
                        '(the gate would reject every chunk)')
    if spec.frame != 'base' and spec.frame not in supply.frames:
        problems.append(f"the policy's poses are in frame '{spec.frame}', whose pose the "
                        'configuration cannot supply (not a fixed URDF frame, not in '
                        'cartesian.camera_frames)')
    if spec.convention is not None and supply.convention_configured:
        problems.append('both the policy and the configuration (cartesian.convention.*) '
                        'declare a frame convention; keep one')
    return problems


def check_chunk(chunk: Any, meta: PolicyMetadata) -> np.ndarray:
    """Return ``chunk`` as a float64 (H, A) array, or raise.

    Raises:
        PolicyError: wrong shape, or a non-finite value (naming where).
    """
    try:
        arr = np.asarray(chunk, dtype=float)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f'policy output is not numeric: {exc}') from None
    want = (meta.chunk_length, meta.action_size)
    if arr.shape != want:
        raise PolicyError(f'policy output has shape {arr.shape}, expected {want}')
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise PolicyError(f'policy output is non-finite ({int(bad.sum())} values; first at '
                          f'point {row}, column {col}: {arr[row, col]})')
    return arr
