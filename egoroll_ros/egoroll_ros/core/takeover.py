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
from egoroll_ros.core.observation import JOINT_STATES, QUEST_LEFT, QUEST_RIGHT, stale_inputs
from egoroll_ros.errors import ConfigError, EgorollError

#: Quest controllers and the input each pose comes from.
CONTROLLERS = {'left': QUEST_LEFT, 'right': QUEST_RIGHT}
#: ``policy_id`` of the operator's chunks (they come from no policy).
OPERATOR_ID = 'operator'
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
    """

    name: str
    ee_frame: str
    controller: str


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
        max_pose_age: s; an older (or not advancing) controller pose gives no chunk.
        max_joint_state_age: s; takeover needs a joint state at most this old to anchor.
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

    def __post_init__(self) -> None:
        """Validate; ConfigError names the parameter."""
        object.__setattr__(self, 'arms', tuple(self.arms))
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
    def times(self) -> np.ndarray:
        """time_from_start of a teleop chunk's points: lead, lead + 1/rate, ... <= horizon."""
        dt = 1.0 / self.rate
        n = int(math.floor((self.horizon - self.lead) / dt + 1e-9)) + 1
        return self.lead + dt * np.arange(n)


def takeover_config_from_params(values: Mapping[str, object]) -> TakeoverConfig:
    """A :class:`TakeoverConfig` from policy_node's parameter values (``takeover.*``, and
    ``max_age.joint_states``, ``max_age.quest``; ``quest.toggle_button`` must differ from
    ``takeover.button``).

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
    return TakeoverConfig(
        arms=tuple(TakeoverArm(a, f, c) for a, f, c in zip(arms, frames, ctrls, strict=True)),
        rate=float(values.get('takeover.rate', 30.0)),
        lead=float(values.get('takeover.lead', 0.15)),
        horizon=float(values.get('takeover.horizon', 0.5)),
        translation_scale=float(values.get('takeover.translation_scale', 1.0)),
        rotation=np.asarray(values.get('takeover.rotation') or [], dtype=float),
        follow_rotation=bool(values.get('takeover.follow_rotation', True)),
        max_pose_age=float(values.get('max_age.quest', 0.2)),
        max_joint_state_age=float(values.get('max_age.joint_states', 0.1)))


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
            anchors = self._anchor(snapshot, measured_ee, now)
            self._anchors = anchors
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
            self._anchors = self._anchor(snapshot, measured_ee, now)

    def _anchor(self, snapshot: Mapping[str, object],
                measured_ee: Sequence[tuple[np.ndarray, np.ndarray]] | None,
                now: float) -> tuple:
        cfg = self.config
        ages = {CONTROLLERS[a.controller]: cfg.max_pose_age for a in cfg.arms}
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
        return tuple(anchors)

    def end(self, reason: str, now: float) -> bool:
        """Hand control back (or drop it: the rollout stopped). Whether it was active."""
        with self.lock:
            if self._generation is None:
                return False
            self._generation = None
            self._anchors = ()
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
        ages = {CONTROLLERS[a.controller]: cfg.max_pose_age for a in cfg.arms}
        stale = stale_inputs(dict(snapshot), ages, now)
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

    def chunk(self, snapshot: Mapping[str, object], now: float,
              stamp: float) -> CartesianChunk | str:
        """The teleop chunk for the latest controller poses (stamped ``stamp``, the ROS time of
        the sample), or a skip reason. The sequence is 0: the publisher assigns its own."""
        targets = self.targets(snapshot, now)
        if isinstance(targets, str):
            with self.lock:
                self.last_skip = targets
            return targets
        times = self.config.times
        n = times.shape[0]
        arms = tuple(
            CartesianArmTarget(arm=a.name, ee_frame=a.ee_frame, reference_frame=self.base_frame,
                               positions=np.tile(p, (n, 1)),
                               quaternions=np.tile(matrix_to_quat(r), (n, 1)))
            for a, (p, r) in zip(self.config.arms, targets, strict=True))
        with self.lock:
            self.last_skip = ''
        return CartesianChunk(sequence=0, policy_id=OPERATOR_ID, stamp=float(stamp),
                              times=times.copy(), arms=arms)
