"""Human takeover (intervention) from the Quest: the operator drives the end effectors.

Pure (numpy; no rclpy, no messages). ``policy_node`` holds one :class:`Takeover` and calls it:

- :meth:`Takeover.begin` when the operator takes over (a Quest button or ``policy/takeover``)
  during a running rollout. It anchors each configured arm: the controller's pose at that
  moment and the arm's MEASURED end-effector pose (forward kinematics of ``joint_states``).
  Refused, with the reason, when the rollout is not running, a controller pose or the joint
  state is missing or stale, or a pose is malformed.
- :meth:`Takeover.chunk` at the teleop rate: the controller's displacement since the anchor,
  mapped into the robot's base frame (:func:`map_pose`), moves the end effector from its
  anchored pose; the result is a short Cartesian chunk (:class:`CartesianChunk`, checked by
  the safety gate like any Cartesian chunk: Cartesian checks, IK, every joint check, deadman).
  A stale or malformed controller pose gives no chunk (a skip reason): the executor finishes
  the last short chunk and holds.
- :meth:`Takeover.end` when the operator hands back (the same button or service), and
  :meth:`Takeover.sync` whenever the rollout may have stopped: a takeover lives only inside the
  running rollout that it began in.

Handover without a jump, both ways: the first teleop target IS the measured pose (zero
displacement), and the policy's next chunk after the handback is predicted from the measured
state; the executor's seam (blend or splice) joins each new chunk to the running setpoint.

The gripper (an arm with ``gripper_joint``): the operator's analog axis (the controller's
trigger) commands it, in the same teleop chunk, through the same gate checks (the gate's
``gripper_range``, ``max_step``, velocity, ...). The axis maps linearly from its released value
(``gripper_open``) to its fully pressed value (``gripper_closed``) (:func:`gripper_command`).
At takeover (and at each re-anchor) the gripper holds its MEASURED position until the axis
picks it up (:class:`GripperPickup`: its command comes within ``gripper_pickup`` of the
measured position, or crosses it), so a trigger that is not where the fingers are does not
make the gripper jump (or drop what it holds). Without ``gripper_joint`` the chunk carries no
gripper values: the gate holds the gripper at its measured position.

The mapping (:func:`map_pose`), with ``M`` = :attr:`TakeoverConfig.rotation` (controller
reference frame -> robot base frame) and ``s`` = :attr:`TakeoverConfig.translation_scale`::

    p_target = p_ee0 + s * M (p_ctrl - p_ctrl0)
    R_target = M (R_ctrl R_ctrl0^T) M^T R_ee0        (R_ee0 when follow_rotation is off)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
import math
import threading

import numpy as np

from egoroll_ros.core.cartesian import CartesianArmTarget, CartesianChunk
from egoroll_ros.core.frames import matrix_to_quat, quat_to_matrix
from egoroll_ros.core.observation import (
    JOINT_STATES,
    QUEST_JOY,
    QUEST_LEFT,
    QUEST_RIGHT,
    stale_inputs,
)
from egoroll_ros.errors import ConfigError, EgorollError

#: Quest controllers and the input each pose comes from.
CONTROLLERS = {'left': QUEST_LEFT, 'right': QUEST_RIGHT}
#: ``policy_id`` of the operator's chunks (they come from no policy).
OPERATOR_ID = 'operator'
#: Largest quest/joy axis index a parameter may name (as the parameters' declared range).
MAX_AXIS = 255
#: A controller quaternion's norm must be 1 within this (bridges send float32 values); it is
#: then normalised. Further off: the pose is refused, never repaired.
QUAT_TOLERANCE = 1e-3


class TakeoverError(EgorollError):
    """A takeover request that cannot be honoured; the message says why."""


@dataclass(frozen=True)
class TakeoverArm:
    """One arm the operator drives.

    Attributes:
        name: arm name as the safety gate knows it (``cartesian_arms``).
        ee_frame: its end-effector frame (URDF frame; the gate's ``cartesian_ee_frames``).
        controller: ``'left'`` or ``'right'``: the Quest controller whose pose drives it.
        gripper_joint: the joint the operator's gripper commands go to (the gate's
            ``cartesian_gripper_joints`` entry of this arm); '' for none.
        gripper_axis: quest/joy axis commanding the gripper (-1 when ``gripper_joint`` is '').
        gripper_open, gripper_closed: the gripper position (m or rad, as in joint_states) the
            axis commands when released and when fully pressed.
    """

    name: str
    ee_frame: str
    controller: str
    gripper_joint: str = ''
    gripper_axis: int = -1
    gripper_open: float = 0.0
    gripper_closed: float = 0.0

    @property
    def has_gripper(self) -> bool:
        """Whether the operator commands this arm's gripper."""
        return bool(self.gripper_joint)


def _rotation(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    m = np.asarray(values, dtype=float)
    if m.size == 0:
        return np.eye(3)
    if m.size != 9 or not np.isfinite(m).all():
        raise ConfigError(f"parameter '{name}': needs 9 finite values (row-major 3x3), got "
                          f'{m.size}')
    m = m.reshape(3, 3)
    if not (np.allclose(m @ m.T, np.eye(3), atol=1e-6) and np.linalg.det(m) > 0):
        raise ConfigError(f"parameter '{name}': not a rotation matrix (orthonormal, det +1)")
    return m


def _check_gripper(a: TakeoverArm) -> None:
    if not a.has_gripper:
        if a.gripper_axis != -1:
            raise ConfigError(f"parameter 'takeover.gripper_axes': arm '{a.name}' has no "
                              f'gripper joint, so its axis must be -1, got {a.gripper_axis}')
        return
    if not 0 <= a.gripper_axis <= MAX_AXIS:
        raise ConfigError(f"parameter 'takeover.gripper_axes': arm '{a.name}' (gripper "
                          f"'{a.gripper_joint}'): axis {a.gripper_axis} is out of range "
                          f'(a quest/joy axis index, 0..{MAX_AXIS})')
    lo, hi = a.gripper_open, a.gripper_closed
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
        raise ConfigError(f"parameter 'takeover.gripper_open': arm '{a.name}': open {lo} and "
                          f'closed {hi} (takeover.gripper_closed) must be finite and differ')


@dataclass(frozen=True)
class TakeoverConfig:
    """Takeover settings (the ``takeover.*`` parameters of policy_node).

    Attributes:
        arms: the arms the operator drives (every arm of the gate's ``cartesian_arms``: a
            Cartesian chunk must name each configured arm). Empty: takeover is off.
        rate: teleop chunks per second (Hz).
        lead: s from a chunk's stamp (the controller sample) to its first point; at least the
            executor's ``blend_time`` plus transport, or the executor drops the point.
        horizon: s from the stamp to the chunk's last point: the chunk holds the target from
            ``lead`` to ``horizon`` (points ``1/rate`` apart), so the arm comes to rest at the
            last target when no new chunk arrives.
        translation_scale: end-effector metres per controller metre.
        rotation: controller reference frame -> robot base frame (3x3).
        follow_rotation: the end effector also turns as the controller turns (else it keeps
            its orientation at takeover).
        max_pose_age: s; an older (or not advancing) controller pose gives no chunk (also
            quest/joy, when an arm's gripper is commanded from it).
        max_joint_state_age: s; takeover needs a joint state at most this old to anchor.
        gripper_axis_range: the gripper axis value (released, fully pressed); a value outside
            gives no chunk (never clamped).
        gripper_pickup: the axis picks up the held gripper when its command comes within this
            fraction of ``|gripper_closed - gripper_open|`` of the measured position.
    """

    arms: tuple[TakeoverArm, ...] = ()
    rate: float = 30.0
    lead: float = 0.15
    horizon: float = 0.5
    translation_scale: float = 1.0
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    follow_rotation: bool = True
    max_pose_age: float = 0.2
    max_joint_state_age: float = 0.1
    gripper_axis_range: tuple[float, float] = (0.0, 1.0)
    gripper_pickup: float = 0.05

    def __post_init__(self) -> None:
        """Validate; ConfigError names the parameter."""
        object.__setattr__(self, 'arms', tuple(self.arms))
        rng = tuple(float(v) for v in self.gripper_axis_range)
        if len(rng) != 2 or not all(math.isfinite(v) for v in rng) or rng[0] == rng[1]:
            raise ConfigError("parameter 'takeover.gripper_axis_range': needs 2 finite, "
                              f'different values (released, fully pressed), got {rng}')
        object.__setattr__(self, 'gripper_axis_range', rng)
        if not (math.isfinite(self.gripper_pickup) and 0.0 < self.gripper_pickup <= 1.0):
            raise ConfigError("parameter 'takeover.gripper_pickup': must be in (0, 1], got "
                              f'{self.gripper_pickup}')
        for a in self.arms:
            _check_gripper(a)
        grips = [a.gripper_joint for a in self.arms if a.has_gripper]
        if len(set(grips)) != len(grips):
            raise ConfigError(f"parameter 'takeover.gripper_joints': {grips}: one gripper "
                              'joint per arm')
        object.__setattr__(self, 'rotation', _rotation(self.rotation, 'takeover.rotation'))
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names) or any(not n for n in names):
            raise ConfigError("parameter 'takeover.arms': names must be unique and non-empty")
        for a in self.arms:
            if not a.ee_frame:
                raise ConfigError(f"parameter 'takeover.ee_frames': arm '{a.name}' has no "
                                  'frame')
            if a.controller not in CONTROLLERS:
                raise ConfigError(f"parameter 'takeover.controllers': arm '{a.name}': "
                                  f"{a.controller!r} is not one of {sorted(CONTROLLERS)}")
        ctrls = [a.controller for a in self.arms]
        if len(set(ctrls)) != len(ctrls):
            raise ConfigError("parameter 'takeover.controllers': one controller drives one "
                              'arm only')
        for name in ('rate', 'lead', 'horizon', 'translation_scale', 'max_pose_age',
                     'max_joint_state_age'):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0.0):
                raise ConfigError(f"parameter 'takeover.{name}': must be > 0, got {v}")
        if not self.horizon >= self.lead:
            raise ConfigError(f"parameter 'takeover.horizon': must be >= takeover.lead "
                              f'({self.lead}), got {self.horizon}')

    @property
    def enabled(self) -> bool:
        """Whether any arm is configured."""
        return bool(self.arms)

    @property
    def grippers(self) -> bool:
        """Whether the operator commands any gripper (quest/joy is then a takeover input)."""
        return any(a.has_gripper for a in self.arms)

    @property
    def times(self) -> np.ndarray:
        """time_from_start of a teleop chunk's points: lead, lead + 1/rate, ... <= horizon."""
        dt = 1.0 / self.rate
        n = int(math.floor((self.horizon - self.lead) / dt + 1e-9)) + 1
        return self.lead + dt * np.arange(n)


def _gripper_params(values: Mapping[str, object], arms: list[str]) -> list[tuple]:
    """Per arm ``(joint, axis, open, closed)`` from ``takeover.gripper_*`` (all empty: no
    gripper anywhere)."""
    joints = list(values.get('takeover.gripper_joints') or [])
    axes = list(values.get('takeover.gripper_axes') or [])
    opens = list(values.get('takeover.gripper_open') or [])
    closes = list(values.get('takeover.gripper_closed') or [])
    if not joints:
        given = [k for k, v in (('takeover.gripper_axes', axes), ('takeover.gripper_open', opens),
                                ('takeover.gripper_closed', closes)) if v]
        if given:
            raise ConfigError(f"parameter '{given[0]}': set, but takeover.gripper_joints is "
                              'empty (which joint would it command?)')
        return [('', -1, 0.0, 0.0)] * len(arms)
    for name, v in (('takeover.gripper_joints', joints), ('takeover.gripper_axes', axes),
                    ('takeover.gripper_open', opens), ('takeover.gripper_closed', closes)):
        if len(v) != len(arms):
            raise ConfigError(f"parameter '{name}': needs one entry per takeover.arms entry "
                              f"({len(arms)}; '' / -1 for an arm without gripper), got {len(v)}")
    configured = list(values.get('joints') or [])
    missing = [j for j in joints if j and j not in configured]
    if missing:
        raise ConfigError(f"parameter 'takeover.gripper_joints': {missing} not in 'joints' "
                          f'{configured}')
    # the same arm's gripper joint for the policy's Cartesian chunks must be the same joint
    policy_grip = dict(zip(values.get('cartesian.arms') or [],
                           values.get('cartesian.gripper_joints') or [], strict=False))
    for arm, j in zip(arms, joints, strict=True):
        if j and policy_grip.get(arm) and policy_grip[arm] != j:
            raise ConfigError(f"parameter 'takeover.gripper_joints': arm '{arm}' has gripper "
                              f"'{j}', but cartesian.gripper_joints gives it "
                              f"'{policy_grip[arm]}'")
    clutch = values.get('takeover.clutch_axis', -1)
    for arm, j, ax in zip(arms, joints, axes, strict=True):
        if j and isinstance(clutch, int) and clutch >= 0 and ax == clutch:
            raise ConfigError(f"parameter 'takeover.gripper_axes': arm '{arm}': axis {ax} is "
                              'also takeover.clutch_axis; one axis, one meaning')
    return [(j, int(ax), float(o), float(c))
            for j, ax, o, c in zip(joints, axes, opens, closes, strict=True)]


def takeover_config_from_params(values: Mapping[str, object]) -> TakeoverConfig:
    """A :class:`TakeoverConfig` from policy_node's parameter values (``takeover.*``,
    ``joints``, and ``max_age.joint_states``, ``max_age.quest``; ``quest.toggle_button`` must
    differ from ``takeover.button``, a gripper axis from ``takeover.clutch_axis``, and every
    ``takeover.gripper_joints`` entry must be in ``joints``).

    Raises:
        ConfigError: naming the parameter.
    """
    arms = list(values.get('takeover.arms') or [])
    frames = list(values.get('takeover.ee_frames') or [])
    ctrls = list(values.get('takeover.controllers') or [])
    if len(frames) != len(arms):
        raise ConfigError(f"parameter 'takeover.ee_frames': needs one frame per takeover.arms "
                          f'entry ({len(arms)}), got {len(frames)}')
    if len(ctrls) != len(arms):
        raise ConfigError(f"parameter 'takeover.controllers': needs one controller (left or "
                          f'right) per takeover.arms entry ({len(arms)}), got {len(ctrls)}')
    button, toggle = values.get('takeover.button', -1), values.get('quest.toggle_button', -1)
    if arms and isinstance(button, int) and button >= 0 and button == toggle:
        raise ConfigError(f"parameter 'takeover.button': {button} is also quest.toggle_button "
                          '(start/stop); one button, one meaning')
    grips = _gripper_params(values, arms)
    return TakeoverConfig(
        arms=tuple(TakeoverArm(a, f, c, *g)
                   for a, f, c, g in zip(arms, frames, ctrls, grips, strict=True)),
        rate=float(values.get('takeover.rate', 30.0)),
        lead=float(values.get('takeover.lead', 0.15)),
        horizon=float(values.get('takeover.horizon', 0.5)),
        translation_scale=float(values.get('takeover.translation_scale', 1.0)),
        rotation=np.asarray(values.get('takeover.rotation') or [], dtype=float),
        follow_rotation=bool(values.get('takeover.follow_rotation', True)),
        max_pose_age=float(values.get('max_age.quest', 0.2)),
        max_joint_state_age=float(values.get('max_age.joint_states', 0.1)),
        gripper_axis_range=tuple(values.get('takeover.gripper_axis_range', (0.0, 1.0))),
        gripper_pickup=float(values.get('takeover.gripper_pickup', 0.05)))


def pose_from_tuple(value: Sequence[float], what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y, z, qx, qy, qz, qw)`` as (position (3,), rotation (3, 3)).

    Raises:
        TakeoverError: not 7 finite values, or a quaternion whose norm is off by more than
            :data:`QUAT_TOLERANCE` (naming ``what``).
    """
    v = np.asarray(value, dtype=float)
    if v.shape != (7,) or not np.isfinite(v).all():
        raise TakeoverError(f'{what}: not 7 finite values (x y z qx qy qz qw)')
    norm = float(np.linalg.norm(v[3:]))
    if abs(norm - 1.0) > QUAT_TOLERANCE:
        raise TakeoverError(f'{what}: quaternion norm {norm:.6g} (a unit quaternion is '
                            'required)')
    return v[:3].copy(), quat_to_matrix(v[3:] / norm)


def map_pose(ctrl0: tuple[np.ndarray, np.ndarray], ee0: tuple[np.ndarray, np.ndarray],
             ctrl: tuple[np.ndarray, np.ndarray],
             config: TakeoverConfig) -> tuple[np.ndarray, np.ndarray]:
    """The end-effector target for controller pose ``ctrl`` (see the module docstring).

    Args:
        ctrl0: controller (position, rotation) at takeover, in the controller's frame.
        ee0: end effector (position, rotation) at takeover, measured, in the base frame.
        ctrl: controller (position, rotation) now.
        config: scale, frame rotation, follow_rotation.

    Returns:
        (position (3,), rotation (3, 3)) in the base frame; ``ee0`` itself when ``ctrl`` is
        ``ctrl0``.
    """
    m = config.rotation
    p = ee0[0] + config.translation_scale * (m @ (ctrl[0] - ctrl0[0]))
    if not config.follow_rotation:
        return p, ee0[1].copy()
    delta = m @ (ctrl[1] @ ctrl0[1].T) @ m.T
    r = delta @ ee0[1]
    # re-orthonormalise the product (float noise only, never a correction of the input)
    u, _, vt = np.linalg.svd(r)
    return p, u @ vt


def gripper_command(arm: TakeoverArm, axes: Sequence[float],
                    axis_range: tuple[float, float]) -> float:
    """The gripper position the operator commands: ``axes[arm.gripper_axis]`` mapped linearly
    from ``axis_range`` (released, fully pressed) to (``gripper_open``, ``gripper_closed``).

    Raises:
        TakeoverError: the axis is missing from ``axes``, not finite, or outside
            ``axis_range`` (never clamped).
    """
    i = arm.gripper_axis
    if not 0 <= i < len(axes):
        raise TakeoverError(f"quest/joy has {len(axes)} axes; arm '{arm.name}' commands its "
                            f'gripper from axis {i} (takeover.gripper_axes)')
    v = float(axes[i])
    lo, hi = axis_range
    f = (v - lo) / (hi - lo)
    if not (math.isfinite(v) and 0.0 <= f <= 1.0):
        raise TakeoverError(f"quest/joy axis {i} (arm '{arm.name}' gripper) is {v}, outside "
                            f'takeover.gripper_axis_range {list(axis_range)}')
    return arm.gripper_open + f * (arm.gripper_closed - arm.gripper_open)


class GripperPickup:
    """One arm's gripper during a takeover: held at its measured position ``held`` (at the
    anchor) until the operator's command picks it up, then the command itself.

    The command picks it up when it comes within ``tolerance`` of ``held``, or when two
    consecutive commands lie on either side of it (the trigger moved through it between two
    samples).

    Args:
        held: the measured gripper position at the anchor.
        tolerance: pick-up distance (same unit).
    """

    def __init__(self, held: float, tolerance: float) -> None:
        self.held = float(held)
        self.tolerance = float(tolerance)
        self.engaged = False
        self._last: float | None = None

    def update(self, command: float) -> float:
        """The gripper position to command for the operator's ``command`` now."""
        if self.engaged:
            return command
        d = command - self.held
        if abs(d) <= self.tolerance or (self._last is not None and (d > 0) != (self._last > 0)):
            self.engaged = True
            return command
        self._last = d
        return self.held


def _path(times: np.ndarray, current: tuple[np.ndarray, np.ndarray] | None,
          p: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions (N, 3), quaternions (N, 4)) of one arm's teleop chunk: from ``current`` to
    the target ``(p, r)`` in proportion to time_from_start (reached at the last point), or
    the target held when ``current`` is None (see :meth:`Takeover.chunk`)."""
    n = times.shape[0]
    if current is None:
        return np.tile(p, (n, 1)), np.tile(matrix_to_quat(r), (n, 1))
    import pinocchio as pin

    p0, r0 = (np.asarray(x, dtype=float) for x in current)
    s = times / times[-1]
    positions = p0[None, :] + s[:, None] * (np.asarray(p, float) - p0)[None, :]
    w = pin.log3(r0.T @ np.asarray(r, float))
    quats = np.stack([matrix_to_quat(r0 @ pin.exp3(k * w)) for k in s])
    return positions, quats


def measured_poses(model: object, config: TakeoverConfig, names: Sequence[str],
                   positions: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per configured arm, the end-effector (position, rotation) in the base frame for the
    measured joint ``positions`` (named ``names``), by the robot model's forward kinematics.

    Raises:
        TakeoverError: a frame is unknown or the state lacks a joint of its chain.
    """
    frames = [a.ee_frame for a in config.arms]
    try:
        trans, rots = model.fk(frames, list(names), np.asarray(positions, dtype=float))
    except (EgorollError, KeyError, ValueError) as exc:
        raise TakeoverError(f'takeover refused: forward kinematics of {frames}: {exc}') \
            from None
    return [(np.asarray(trans[f, 0]), np.asarray(rots[f, 0])) for f in range(len(frames))]


@dataclass(frozen=True)
class Segment:
    """One intervention: steady start, end (None while it lasts) and why it ended."""

    start: float
    end: float | None = None
    ended_by: str = ''


class Takeover:
    """The takeover state machine (thread-safe; see the module docstring).

    Args:
        config: the takeover settings.
        base_frame: the robot's base frame (the reference frame of every teleop pose).
    """

    def __init__(self, config: TakeoverConfig, base_frame: str = '') -> None:
        self.config = config
        self.base_frame = base_frame
        self.lock = threading.RLock()
        self._generation: int | None = None
        self._anchors: tuple[tuple[tuple[np.ndarray, np.ndarray],
                                   tuple[np.ndarray, np.ndarray]], ...] = ()
        self._grips: tuple[GripperPickup | None, ...] = ()
        self.segments: list[Segment] = []
        self.chunks = 0
        self.last_skip = ''

    @property
    def active(self) -> bool:
        """Whether the operator has control."""
        with self.lock:
            return self._generation is not None

    @property
    def generation(self) -> int | None:
        """The rollout generation the takeover belongs to (None: not active)."""
        with self.lock:
            return self._generation

    def begin(self, generation: int, running: bool, snapshot: Mapping[str, object],
              measured_ee: Sequence[tuple[np.ndarray, np.ndarray]] | None,
              now: float) -> str:
        """Take over from the policy.

        Args:
            generation: the current rollout generation.
            running: whether that rollout is RUNNING.
            snapshot: the latest inputs (:meth:`LatestInputs.snapshot`): the controller poses
                and ``joint_states`` must be fresh at steady time ``now``.
            measured_ee: per configured arm, the measured end-effector (position, rotation)
                in the base frame (forward kinematics of the joint state in ``snapshot``);
                None when no robot model is available.
            now: steady time.

        Returns:
            A human message.

        Raises:
            TakeoverError: not configured, not running, already taken over, stale or
                malformed inputs, no robot model.
        """
        cfg = self.config
        if not cfg.enabled:
            raise TakeoverError('takeover is not configured (parameter takeover.arms is empty)')
        with self.lock:
            if not running:
                raise TakeoverError('takeover needs a running rollout (start it first)')
            if self._generation is not None:
                raise TakeoverError('the operator has control already')
            self._anchors, self._grips = self._anchor(snapshot, measured_ee, now)
            self._generation = int(generation)
            self.segments.append(Segment(now))
            self.last_skip = ''
        names = ', '.join(f'{a.name} <- {a.controller} controller' for a in cfg.arms)
        return f'operator has control ({names}); the policy runs in shadow'

    def reanchor(self, snapshot: Mapping[str, object],
                 measured_ee: Sequence[tuple[np.ndarray, np.ndarray]] | None,
                 now: float) -> None:
        """Anchor again at the current controller and measured end-effector poses (the clutch:
        after the operator let go, the hand's motion meanwhile moves nothing).

        Raises:
            TakeoverError: not active, or stale or malformed inputs (as :meth:`begin`).
        """
        with self.lock:
            if self._generation is None:
                raise TakeoverError('not taken over')
            self._anchors, self._grips = self._anchor(snapshot, measured_ee, now)

    def _anchor(self, snapshot: Mapping[str, object],
                measured_ee: Sequence[tuple[np.ndarray, np.ndarray]] | None,
                now: float) -> tuple[tuple, tuple[GripperPickup | None, ...]]:
        cfg = self.config
        ages = self._ages()
        ages[JOINT_STATES] = cfg.max_joint_state_age
        stale = stale_inputs(dict(snapshot), ages, now)
        if stale:
            raise TakeoverError('takeover refused: ' + '; '.join(s.describe() for s in stale))
        if measured_ee is None:
            raise TakeoverError('takeover refused: no robot model (urdf_path or '
                                'robot_description) for the measured end-effector pose')
        if len(measured_ee) != len(cfg.arms):
            raise TakeoverError(f'takeover refused: {len(measured_ee)} measured poses for '
                                f'{len(cfg.arms)} arms')
        anchors = []
        for arm, ee in zip(cfg.arms, measured_ee, strict=True):
            ctrl = pose_from_tuple(snapshot[CONTROLLERS[arm.controller]].value,
                                   CONTROLLERS[arm.controller])
            p, r = (np.asarray(x, dtype=float) for x in ee)
            if p.shape != (3,) or r.shape != (3, 3) or not (
                    np.isfinite(p).all() and np.isfinite(r).all()):
                raise TakeoverError(f"takeover refused: arm '{arm.name}': no finite "
                                    'measured end-effector pose')
            anchors.append((ctrl, (p, r)))
        return tuple(anchors), self._gripper_anchors(snapshot)

    def _ages(self) -> dict[str, float]:
        cfg = self.config
        ages = {CONTROLLERS[a.controller]: cfg.max_pose_age for a in cfg.arms}
        if cfg.grippers:
            ages[QUEST_JOY] = cfg.max_pose_age
        return ages

    def _gripper_anchors(self, snapshot: Mapping[str, object]
                         ) -> tuple[GripperPickup | None, ...]:
        """Per arm, its gripper held at the measured position (None: no gripper); the
        operator's axis must be there and in range already."""
        cfg = self.config
        if not cfg.grippers:
            return (None,) * len(cfg.arms)
        js = snapshot[JOINT_STATES].value
        names = list(js.names)
        axes = snapshot[QUEST_JOY].value[1]
        out: list[GripperPickup | None] = []
        for arm in cfg.arms:
            if not arm.has_gripper:
                out.append(None)
                continue
            if arm.gripper_joint not in names:
                raise TakeoverError(f"takeover refused: joint_states has no '"
                                    f"{arm.gripper_joint}' (arm '{arm.name}' gripper, "
                                    'takeover.gripper_joints)')
            held = float(np.asarray(js.positions, dtype=float)[names.index(arm.gripper_joint)])
            if not math.isfinite(held):
                raise TakeoverError(f"takeover refused: measured '{arm.gripper_joint}' is "
                                    f'{held}')
            try:
                gripper_command(arm, axes, cfg.gripper_axis_range)
            except TakeoverError as exc:
                raise TakeoverError(f'takeover refused: {exc}') from None
            out.append(GripperPickup(held, cfg.gripper_pickup *
                                     abs(arm.gripper_closed - arm.gripper_open)))
        return tuple(out)

    def end(self, reason: str, now: float) -> bool:
        """Hand control back (or drop it: the rollout stopped). Whether it was active."""
        with self.lock:
            if self._generation is None:
                return False
            self._generation = None
            self._anchors = ()
            self._grips = ()
            last = self.segments[-1]
            self.segments[-1] = Segment(last.start, now, reason)
            return True

    def sync(self, generation: int, running: bool, now: float) -> bool:
        """End a takeover whose rollout is over (stopped, faulted, restarted); whether it did."""
        with self.lock:
            if self._generation is not None and (not running or generation != self._generation):
                return self.end('the rollout ended', now)
            return False

    def targets(self, snapshot: Mapping[str, object],
                now: float) -> list[tuple[np.ndarray, np.ndarray]] | str:
        """Per arm, the end-effector target for the latest controller poses, or a skip reason
        (not active, a stale or malformed controller pose)."""
        cfg = self.config
        with self.lock:
            if self._generation is None:
                return 'not taken over'
            anchors = self._anchors
        stale = stale_inputs(dict(snapshot), self._ages(), now)
        if stale:
            return '; '.join(s.describe() for s in stale)
        out = []
        for arm, (ctrl0, ee0) in zip(cfg.arms, anchors, strict=True):
            try:
                ctrl = pose_from_tuple(snapshot[CONTROLLERS[arm.controller]].value,
                                       CONTROLLERS[arm.controller])
            except TakeoverError as exc:
                return str(exc)
            out.append(map_pose(ctrl0, ee0, ctrl, cfg))
        return out

    def gripper_targets(self, snapshot: Mapping[str, object]) -> list[float | None] | str:
        """Per arm, the gripper position to command (None: the arm has no gripper, the gate
        holds it at its measured position), or a skip reason (a missing or out-of-range
        axis). Call after :meth:`targets` found the inputs fresh. Advances the pick-up."""
        cfg = self.config
        with self.lock:
            grips = self._grips
            if self._generation is None:
                return 'not taken over'
            if not cfg.grippers:
                return [None] * len(cfg.arms)
            axes = snapshot[QUEST_JOY].value[1]
            commands: list[float | None] = []
            for arm in cfg.arms:
                try:
                    commands.append(gripper_command(arm, axes, cfg.gripper_axis_range)
                                    if arm.has_gripper else None)
                except TakeoverError as exc:
                    return str(exc)
            return [None if g is None else g.update(c)
                    for g, c in zip(grips, commands, strict=True)]

    @property
    def grippers_held(self) -> list[str]:
        """Arms whose gripper still holds its measured position (waiting for the pick-up)."""
        with self.lock:
            return [a.name for a, g in zip(self.config.arms, self._grips, strict=False)
                    if g is not None and not g.engaged]

    def chunk(self, snapshot: Mapping[str, object], now: float, stamp: float,
              current: Sequence[tuple[np.ndarray, np.ndarray]] | None = None
              ) -> CartesianChunk | str:
        """The teleop chunk for the latest controller poses and gripper axes (stamped
        ``stamp``, the ROS time of the sample), or a skip reason. The sequence is 0: the
        publisher assigns its own.

        ``current``: per arm, the measured end-effector (position, rotation) now. Given, the
        chunk is a path from there to the operator's target, reached at the last point
        (positions linearly, rotations along the geodesic, in proportion to time_from_start),
        not the target held from the first point: a step target that the arm, still running
        the policy's chunk at the takeover, cannot reach within the executor's join limits is
        refused at the seam, the policy's chunk runs on, and the next teleop chunk starts
        further from the arm until ``start_deviation`` faults the rollout (issue 22). From the
        current pose each chunk starts where the arm is, so that gap never accumulates.
        None: the target held (a caller without a measured pose)."""
        targets = self.targets(snapshot, now)
        grips = targets if isinstance(targets, str) else self.gripper_targets(snapshot)
        if isinstance(grips, str):
            with self.lock:
                self.last_skip = grips
            return grips
        times = self.config.times
        n = times.shape[0]
        if current is not None and len(current) != len(targets):
            return f'{len(current)} measured poses for {len(targets)} arms'
        paths = [_path(times, None if current is None else current[i], p, r)
                 for i, (p, r) in enumerate(targets)]
        arms = tuple(
            CartesianArmTarget(arm=a.name, ee_frame=a.ee_frame, reference_frame=self.base_frame,
                               positions=pos, quaternions=quats,
                               gripper=np.zeros(0) if g is None else np.full(n, g))
            for a, (pos, quats), g in zip(self.config.arms, paths, grips, strict=True))
        with self.lock:
            self.last_skip = ''
        return CartesianChunk(sequence=0, policy_id=OPERATOR_ID, stamp=float(stamp),
                              times=times.copy(), arms=arms)
