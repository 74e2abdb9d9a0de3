"""The safety gate's checks: validate an action chunk against the robot's limits.

:func:`check` reports **every** violation it finds (check name, joint or frame, point index,
value and limit), vectorised with numpy over the whole chunk; forward kinematics of the
configured end-effector frames is batched (:class:`~egoroll_ros.core.robot_model.FkPlan`).
The gate never edits a chunk: it accepts, asks for confirmation (only soft limits crossed) or
rejects.

Rules worth knowing (see ``docs/safety_gate.md``):

- Joint values are compared RAW, as the executor will interpolate through them. Continuous
  joints have no position limit, but a wrap-around (``3.1`` next to ``-3.1``) is a 6.2 rad step
  and is rejected by ``max_step`` / ``velocity_limit``; the policy must unwrap relative to the
  measured state.
- The measured state is point "-1" of the chunk at ``time_from_start = 0`` (the observation
  time): ``max_step``, ``start_deviation``, the end-effector jump checks and the soft/hard
  translation limits include the step from it to the first point.
- Velocity, acceleration and jerk are finite differences over the chunk's OWN points: the
  seam (the step from the running motion into the chunk) is not differenced here. The gate
  sees the arm at the observation, the executor joins the chunk later from the motion it is
  actually running, and only the executor knows that motion at that time; it joins within
  its velocity, acceleration and jerk limits or refuses the join (docs/executor.md), so no
  step the limits forbid reaches the motors. A seam judged from a guessed running state
  rejected chunks whenever inference, transport or a takeover shifted the timing (issue 22).

No rclpy import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
import functools
import math
import time

import numpy as np

from egoroll_ros.core.robot_model import CONTINUOUS, PRISMATIC, FkPlan, RobotModel
from egoroll_ros.core.types import Chunk, JointStateData
from egoroll_ros.core.validation import check_structure
from egoroll_ros.errors import ConfigError, RobotModelError

WHOLE_CHUNK = -1


#: Checks run on every chunk by :func:`check` that a configuration may turn off.
OPTIONAL_CHECKS = (
    'point_spacing', 'chunk_age', 'chunk_in_past', 'position_limit', 'max_step',
    'velocity_limit', 'acceleration_limit', 'jerk_limit', 'start_deviation', 'ee_rotation_jump',
    'ee_translation_jump', 'ee_workspace', 'ee_soft_translation', 'ee_hard_translation',
    'gripper_range',
)
#: Checks that can never be turned off (without them the others are meaningless).
STRUCTURAL_CHECKS = ('robot_model', 'joint_state', 'joint_names', 'structure', 'finite',
                     'time_increasing')


@dataclass(frozen=True)
class Violation:
    """One reason a chunk failed a check (or, when ``soft``, needs confirmation).

    Attributes:
        check: stable snake_case check name (``egoroll_interfaces/msg/Violation``).
        subject: joint or frame name; empty for chunk-wide checks.
        point_index: index of the point in the chunk as received, or ``WHOLE_CHUNK``.
        value: the measured quantity (SI units), NaN when not applicable.
        limit: the limit it was compared with, NaN when not applicable.
        message: human-readable explanation.
        soft: True for a soft limit (needs operator confirmation, not a rejection).
    """

    check: str
    subject: str
    point_index: int
    value: float
    limit: float
    message: str
    soft: bool = False


@dataclass
class Verdict:
    """The outcome of :func:`check`.

    Attributes:
        violations: every violation found.
        check_duration: seconds the checks took.
        ee_frames: the end-effector frames of ``ee_paths``.
        ee_paths: shape (F, M, 3) positions in the robot's base frame, or None when not
            computed; row 0 is the measured pose when the measured state was usable.
    """

    violations: list[Violation] = field(default_factory=list)
    check_duration: float = 0.0
    ee_frames: tuple[str, ...] = ()
    ee_paths: np.ndarray | None = None
    #: Stage that decided: for a rejection (or a confirmation) the stage whose checks found
    #: it ('cartesian', 'ik', 'joint'; the node may say 'node' for deadman/e-stop/...), for an
    #: acceptance the last stage run ('joint'). See core/cartesian.py.
    stage: str = 'joint'

    @property
    def accepted(self) -> bool:
        """Every check passed."""
        return not self.violations

    @property
    def needs_confirmation(self) -> bool:
        """Only soft limits were crossed: execute after an operator confirms."""
        return bool(self.violations) and all(v.soft for v in self.violations)

    @property
    def rejected(self) -> bool:
        """A hard check failed."""
        return any(not v.soft for v in self.violations)

    def counts(self) -> dict[str, int]:
        """Number of violations per check name."""
        out: dict[str, int] = {}
        for v in self.violations:
            out[v.check] = out.get(v.check, 0) + 1
        return out

    @property
    def summary(self) -> str:
        """One line for humans: the decision and the violations per check."""
        if self.accepted:
            return 'accepted'
        head = 'needs confirmation' if self.needs_confirmation else 'rejected'
        parts = ', '.join(f'{k} x{n}' for k, n in self.counts().items())
        return f'{head}: {parts}; first: {self.violations[0].message}'


def _tuple(value: float | Sequence[float]) -> tuple[float, ...]:
    if isinstance(value, (int, float)):
        return (float(value),)
    return tuple(float(v) for v in value)


@dataclass(frozen=True)
class GateConfig:
    """Limits and switches of the safety gate. Field names are the node's parameter names.

    Per-joint fields (``max_step``, ``max_start_deviation``, ``acceleration_limits``,
    ``jerk_limits``) take one
    value for every joint or one per joint in ``joints`` order. Every check is on; a check is
    off only when named in ``disabled_checks``.

    Attributes:
        joints: the controlled joints, in order.
        ee_frames: end-effector frames checked by forward kinematics.
        gripper_joints, gripper_min, gripper_max: gripper joints and their allowed range.
        min_point_spacing, max_point_spacing: seconds between consecutive points.
        max_points: most points a chunk may have.
        max_chunk_age: s, oldest observation stamp accepted on arrival.
        max_future_stamp: s, how far in the future a stamp may be (clock offset).
        max_joint_state_age: s (steady clock), oldest measured state accepted.
        position_margin: rad, kept away from each revolute joint's URDF limits.
        prismatic_position_margin: m, the same for prismatic joints.
        position_limits: ``(joint, lower, upper)`` overrides, within the URDF limits; the
            margin is not applied to them.
        max_step: rad (m for prismatic), largest change between consecutive points.
        velocity_scale: fraction of the URDF velocity limits allowed.
        acceleration_limits: rad/s^2 (m/s^2).
        jerk_limits: rad/s^3 (m/s^3), finite differences of those accelerations.
        max_start_deviation: rad (m), first point vs the measured position.
        ee_max_rotation_step: rad, geodesic angle between consecutive end-effector poses.
        ee_max_translation_step: m, distance between consecutive end-effector positions.
        ee_workspace_min, ee_workspace_max: box in the base frame, or empty (check off).
        ee_soft_translation: m from the measured pose; beyond needs confirmation.
        ee_hard_translation: m from the measured pose; beyond rejects (> soft).
        disabled_checks: names from :data:`OPTIONAL_CHECKS` that are turned off.
    """

    joints: tuple[str, ...]
    ee_frames: tuple[str, ...] = ()
    gripper_joints: tuple[str, ...] = ()
    gripper_min: tuple[float, ...] = ()
    gripper_max: tuple[float, ...] = ()
    min_point_spacing: float = 0.005
    max_point_spacing: float = 0.5
    max_points: int = 1000
    max_chunk_age: float = 0.5
    max_future_stamp: float = 0.1
    max_joint_state_age: float = 0.2
    position_margin: float = 0.02
    prismatic_position_margin: float = 0.0
    position_limits: tuple[tuple[str, float, float], ...] = ()
    max_step: tuple[float, ...] = (0.2,)
    velocity_scale: float = 0.5
    acceleration_limits: tuple[float, ...] = (20.0,)
    jerk_limits: tuple[float, ...] = (5000.0,)
    max_start_deviation: tuple[float, ...] = (0.15,)
    ee_max_rotation_step: float = 0.3
    ee_max_translation_step: float = 0.05
    ee_workspace_min: tuple[float, ...] = ()
    ee_workspace_max: tuple[float, ...] = ()
    ee_soft_translation: float = 0.10
    ee_hard_translation: float = 0.25
    disabled_checks: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        """Normalise sequences to tuples and validate; ConfigError names the field."""
        set_ = functools.partial(object.__setattr__, self)
        set_('joints', tuple(self.joints))
        set_('ee_frames', tuple(self.ee_frames))
        set_('gripper_joints', tuple(self.gripper_joints))
        for name in ('gripper_min', 'gripper_max', 'max_step', 'acceleration_limits',
                     'jerk_limits', 'max_start_deviation', 'ee_workspace_min', 'ee_workspace_max'):
            set_(name, _tuple(getattr(self, name)))
        set_('position_limits', tuple((str(j), float(lo), float(hi))
                                      for j, lo, hi in self.position_limits))
        set_('disabled_checks', frozenset(self.disabled_checks))
        self._validate()

    def _validate(self) -> None:
        def bad(name: str, why: str) -> ConfigError:
            return ConfigError(f"parameter '{name}': {why}")

        if not self.joints:
            raise bad('joints', 'needs at least one joint')
        if len(set(self.joints)) != len(self.joints):
            raise bad('joints', 'has duplicates')
        for f in fields(self):
            v = getattr(self, f.name)
            vals = v if isinstance(v, tuple) and v and isinstance(v[0], float) else (
                [v] if isinstance(v, float) else [])
            for x in vals:
                if not math.isfinite(x):
                    raise bad(f.name, f'{x!r} is not finite')
        for name in ('min_point_spacing', 'max_point_spacing', 'max_chunk_age',
                     'max_joint_state_age', 'velocity_scale', 'ee_max_rotation_step',
                     'ee_max_translation_step', 'ee_soft_translation', 'ee_hard_translation'):
            if not getattr(self, name) > 0.0:
                raise bad(name, f'must be > 0, got {getattr(self, name)}')
        for name in ('max_future_stamp', 'position_margin', 'prismatic_position_margin'):
            if getattr(self, name) < 0.0:
                raise bad(name, f'must be >= 0, got {getattr(self, name)}')
        if self.max_points < 1:
            raise bad('max_points', 'must be >= 1')
        if not self.min_point_spacing < self.max_point_spacing:
            raise bad('max_point_spacing', 'must be above min_point_spacing')
        if not self.ee_hard_translation > self.ee_soft_translation:
            raise bad('ee_hard_translation', f'must be above ee_soft_translation '
                      f'({self.ee_soft_translation})')
        if self.velocity_scale > 1.0:
            raise bad('velocity_scale', 'must be <= 1 (the URDF limit is the ceiling)')
        for name in ('max_step', 'acceleration_limits', 'jerk_limits', 'max_start_deviation'):
            v = getattr(self, name)
            if len(v) not in (1, len(self.joints)):
                raise bad(name, f'needs 1 value or one per joint ({len(self.joints)}), '
                          f'got {len(v)}')
            if any(not x > 0.0 for x in v):
                raise bad(name, 'every value must be > 0')
        if len(self.gripper_min) != len(self.gripper_joints) or \
                len(self.gripper_max) != len(self.gripper_joints):
            raise bad('gripper_min', 'gripper_min and gripper_max need one value per gripper '
                      'joint')
        for j, lo, hi in zip(self.gripper_joints, self.gripper_min, self.gripper_max,
                                   strict=True):
            if j not in self.joints:
                raise bad('gripper_joints', f"'{j}' is not in joints")
            if not lo < hi:
                raise bad('gripper_min', f"'{j}': {lo} is not below gripper_max {hi}")
        for j, lo, hi in self.position_limits:
            if j not in self.joints:
                raise bad('position_limit_joints', f"'{j}' is not in joints")
            if not lo < hi:
                raise bad('position_limit_lower', f"'{j}': {lo} is not below "
                          f'position_limit_upper {hi}')
        ws = (self.ee_workspace_min, self.ee_workspace_max)
        if any(ws) and (len(ws[0]) != 3 or len(ws[1]) != 3):
            raise bad('ee_workspace_min', 'ee_workspace_min and ee_workspace_max need 3 values '
                      'each (x, y, z), or both empty')
        if any(ws) and not all(a < b for a, b in zip(*ws, strict=True)):
            raise bad('ee_workspace_max', 'must be above ee_workspace_min on every axis')
        unknown = self.disabled_checks - set(OPTIONAL_CHECKS)
        if unknown:
            raise bad('disabled_checks', f'cannot turn off {", ".join(sorted(unknown))} '
                      f'(optional checks: {", ".join(OPTIONAL_CHECKS)})')

    def enabled(self, name: str) -> bool:
        """Whether check ``name`` runs."""
        return name not in self.disabled_checks

    def checks_off(self) -> dict[str, str]:
        """Every optional check that does not run with this configuration, and why (issue
        24.4: a check that is off is never silent). Keys are :data:`OPTIONAL_CHECKS` names."""
        off = {name: 'disabled by parameter disabled_checks'
               for name in OPTIONAL_CHECKS if name in self.disabled_checks}
        if not self.ee_frames:
            for name in ('ee_rotation_jump', 'ee_translation_jump', 'ee_workspace',
                         'ee_soft_translation', 'ee_hard_translation'):
                off.setdefault(name, 'no ee_frames configured (no end-effector is checked)')
        elif not self.workspace_configured:
            off.setdefault('ee_workspace', 'no ee_workspace_min/max configured')
        if not self.gripper_joints:
            off.setdefault('gripper_range', 'no gripper_joints configured')
        return {name: off[name] for name in OPTIONAL_CHECKS if name in off}

    @property
    def workspace_configured(self) -> bool:
        """Whether a workspace box is configured."""
        return bool(self.ee_workspace_min)


def config_from_params(values: dict) -> GateConfig:
    """A :class:`GateConfig` from the safety_gate node's parameter values (name -> value).

    Raises:
        ConfigError: naming the parameter.
    """
    lim_j = values['position_limit_joints']
    lo, hi = values['position_limit_lower'], values['position_limit_upper']
    if not len(lim_j) == len(lo) == len(hi):
        raise ConfigError("parameter 'position_limit_lower': position_limit_joints, _lower and "
                          '_upper need the same length')
    names = {f for f in GateConfig.__dataclass_fields__}
    kwargs = {k: v for k, v in values.items() if k in names}
    kwargs['position_limits'] = tuple(zip(lim_j, lo, hi, strict=True))
    kwargs['disabled_checks'] = frozenset(values['disabled_checks'])
    return GateConfig(**kwargs)


@dataclass(frozen=True)
class Limits:
    """Per-joint limits resolved from the URDF and a :class:`GateConfig`, in ``joints`` order.

    Built by :func:`prepare`; the tests' reference implementation reads the same numbers.
    """

    joints: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    continuous: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    max_step: np.ndarray
    jerk: np.ndarray
    start_deviation: np.ndarray
    gripper_cols: np.ndarray
    gripper_min: np.ndarray
    gripper_max: np.ndarray
    fk: FkPlan | None
    workspace_min: np.ndarray | None = None     # (3, 1, 1): batch-last FK layout
    workspace_max: np.ndarray | None = None


def _per_joint(values: tuple[float, ...], n: int) -> np.ndarray:
    return np.full(n, values[0]) if len(values) == 1 else np.array(values, dtype=float)


@functools.lru_cache(maxsize=16)
def prepare(robot_model: RobotModel, config: GateConfig) -> Limits:
    """Resolve the limits of ``config`` against ``robot_model`` (cached per pair).

    Raises:
        ConfigError: a configured joint or frame does not fit the model, or an override lies
            outside the URDF limits.
    """
    n = len(config.joints)
    lower, upper = np.empty(n), np.empty(n)
    velocity = np.empty(n)
    continuous = np.zeros(n, dtype=bool)
    overrides = {j: (lo, hi) for j, lo, hi in config.position_limits}
    for i, name in enumerate(config.joints):
        info = robot_model.joints.get(name)
        if info is None:
            raise ConfigError(f"parameter 'joints': '{name}' is not a movable joint of the "
                              f'robot model ({robot_model.source})')
        velocity[i] = info.velocity * config.velocity_scale
        if info.kind == CONTINUOUS:
            continuous[i] = True
            lower[i], upper[i] = -np.inf, np.inf
            if name in overrides:
                lower[i], upper[i] = overrides[name]
            continue
        if name in overrides:
            lo, hi = overrides[name]
            if lo < info.lower or hi > info.upper:
                raise ConfigError(f"parameters 'position_limit_lower'/'position_limit_upper': "
                                  f"'{name}' [{lo}, {hi}] is outside the URDF limits "
                                  f'[{info.lower}, {info.upper}]')
            lower[i], upper[i] = lo, hi
            continue
        margin = config.prismatic_position_margin if info.kind == PRISMATIC \
            else config.position_margin
        lower[i], upper[i] = info.lower + margin, info.upper - margin
        if not lower[i] < upper[i]:
            raise ConfigError(f"parameter 'position_margin': leaves no range for '{name}' "
                              f'[{info.lower}, {info.upper}]')
    col = {n: i for i, n in enumerate(config.joints)}
    fk = None
    if config.ee_frames:
        try:
            fk = robot_model.fk_plan(config.ee_frames, config.joints)
        except RobotModelError as exc:
            raise ConfigError(f"parameter 'ee_frames': {exc}") from None
    return Limits(
        joints=config.joints, lower=lower, upper=upper, continuous=continuous,
        velocity=velocity, acceleration=_per_joint(config.acceleration_limits, n),
        max_step=_per_joint(config.max_step, n), jerk=_per_joint(config.jerk_limits, n),
        start_deviation=_per_joint(config.max_start_deviation, n),
        gripper_cols=np.array([col[j] for j in config.gripper_joints], dtype=int),
        gripper_min=np.array(config.gripper_min, dtype=float),
        gripper_max=np.array(config.gripper_max, dtype=float), fk=fk,
        workspace_min=np.array(config.ee_workspace_min, dtype=float).reshape(-1, 1, 1),
        workspace_max=np.array(config.ee_workspace_max, dtype=float).reshape(-1, 1, 1))


def rotation_angles(r_a: np.ndarray, r_b: np.ndarray) -> np.ndarray:
    """Geodesic angle (rad) between rotation matrices ``r_a[..., :, :]`` and ``r_b``."""
    rel = np.swapaxes(r_a, -1, -2) @ r_b
    tr = rel[..., 0, 0] + rel[..., 1, 1] + rel[..., 2, 2]
    sx = rel[..., 2, 1] - rel[..., 1, 2]
    sy = rel[..., 0, 2] - rel[..., 2, 0]
    sz = rel[..., 1, 0] - rel[..., 0, 1]
    return np.arctan2(np.sqrt(sx * sx + sy * sy + sz * sz), tr - 1.0)


class _Collector:
    """Accumulates violations from boolean masks without Python loops on the accept path."""

    def __init__(self) -> None:
        self.items: list[Violation] = []

    def one(self, check: str, subject: str, index: int, value: float, limit: float,
            message: str, soft: bool = False) -> None:
        self.items.append(Violation(check, subject, int(index), float(value), float(limit),
                                    message, soft))

    def mask(self, check: str, bad: np.ndarray, values: np.ndarray, limits: np.ndarray,
             subjects: Sequence[str], index_offset: int, text: str,
             soft: bool = False) -> None:
        """Add one violation per True in ``bad`` (shape (K, S): rows are points).

        ``values`` and ``limits`` may be anything that broadcasts to ``bad``'s shape; they are
        only expanded when there is something to report (the accept path stays cheap).
        """
        if not bad.any():
            return
        values = np.broadcast_to(values, bad.shape)
        limits = np.broadcast_to(limits, bad.shape)
        rows, cols = np.nonzero(bad)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            idx = r + index_offset
            value, limit = float(values[r, c]), float(limits[r, c])
            where = f'point {idx}' if idx >= 0 else 'measured state'
            self.items.append(Violation(
                check, subjects[c], idx, value, limit,
                f"{check}: '{subjects[c]}' at {where}: {text.format(v=value, lim=limit)}",
                soft))


def check(chunk: Chunk, measured_state: JointStateData | None,
          robot_model: RobotModel | None, config: GateConfig, now: float,
          steady_now: float | None = None) -> Verdict:
    """Validate ``chunk`` and report every violation.

    Args:
        chunk: the chunk as received.
        measured_state: the latest joint state (None when none was received).
        robot_model: the robot model (None when no valid model is loaded: everything is
            rejected with a ``robot_model`` violation).
        config: the gate's configuration.
        now: ROS-clock time of arrival in seconds (for ``chunk_age`` / ``chunk_in_past``).
        steady_now: ``time.monotonic()`` at arrival; when given, a measured state received
            more than ``max_joint_state_age`` earlier is stale.
    Returns:
        The verdict; ``check_duration`` is filled in.
    """
    t0 = time.perf_counter()
    out = _Collector()
    verdict = Verdict(violations=out.items, ee_frames=config.ee_frames)
    try:
        _check(chunk, measured_state, robot_model, config, now, steady_now, out, verdict)
    finally:
        verdict.check_duration = time.perf_counter() - t0
    return verdict


def _measured(measured_state: JointStateData | None, config: GateConfig,
              steady_now: float | None, out: _Collector) -> np.ndarray | None:
    if measured_state is None:
        out.one('joint_state', '', WHOLE_CHUNK, math.nan, math.nan,
                'joint_state: no joint_states received yet')
        return None
    if steady_now is not None:
        age = steady_now - measured_state.received
        if age > config.max_joint_state_age:
            out.one('joint_state', '', WHOLE_CHUNK, age, config.max_joint_state_age,
                    f'joint_state: the latest joint_states is {age:.3f} s old (max '
                    f'{config.max_joint_state_age} s)')
            return None
    qm = measured_state.ordered(config.joints)
    if qm is None:
        missing = [j for j in config.joints if j not in measured_state.names]
        out.one('joint_state', missing[0], WHOLE_CHUNK, math.nan, math.nan,
                f'joint_state: joint_states lacks {", ".join(missing)}')
        return None
    if not np.isfinite(qm).all():
        bad = [j for j, v in zip(config.joints, qm, strict=True) if not math.isfinite(v)]
        out.one('joint_state', bad[0], WHOLE_CHUNK, math.nan, math.nan,
                f'joint_state: non-finite measured position of {", ".join(bad)}')
        return None
    return qm


def _check(chunk: Chunk, measured_state: JointStateData | None,
           robot_model: RobotModel | None, config: GateConfig, now: float,
           steady_now: float | None, out: _Collector, verdict: Verdict) -> None:
    if robot_model is None:
        out.one('robot_model', '', WHOLE_CHUNK, math.nan, math.nan,
                'robot_model: no valid robot model (robot_description / urdf_path)')
        return
    try:
        lim = prepare(robot_model, config)
    except ConfigError as exc:
        out.one('robot_model', '', WHOLE_CHUNK, math.nan, math.nan,
                f'robot_model: the configuration does not fit the model: {exc}')
        return
    qm = _measured(measured_state, config, steady_now, out)
    traj = chunk.trajectory
    joints = config.joints
    nj = len(joints)

    # --- structure (shared with the executor: core/validation.py) ----------------------------
    structure = check_structure(traj, joints)
    for p in structure.problems:
        if p.check in ('joint_names', 'structure'):
            out.one(p.check, p.subject, p.index, p.value, math.nan, p.message)
    if any(p.check in ('joint_names', 'structure') for p in structure.problems):
        return
    n = len(structure.times)
    if n > config.max_points:
        out.one('structure', '', WHOLE_CHUNK, n, config.max_points,
                f'structure: {n} points, at most {config.max_points}')
    if not structure.usable:
        for p in structure.problems:
            out.one(p.check, p.subject, p.index, p.value, math.nan, p.message)
        return
    pos, times = structure.positions, structure.times
    vel_decl, acc_decl = structure.velocities, structure.accelerations

    # --- time ------------------------------------------------------------------------------
    dts = times[1:] - times[:-1]
    t_first = float(times[0])
    monotonic = not structure.problems
    increasing = t_first >= 0.0 and monotonic
    if t_first < 0.0:
        out.one('time_increasing', '', 0, times[0], 0.0,
                f'time_increasing: point 0 has negative time_from_start {times[0]:.6g} s')
    for p in structure.problems:
        out.one(p.check, p.subject, p.index, p.value, 0.0, p.message)
    if config.enabled('point_spacing') and n > 1 and not (
            float(dts.min()) >= config.min_point_spacing
            and float(dts.max()) <= config.max_point_spacing):
        bad = (dts < config.min_point_spacing) & (dts > 0.0)
        for i in np.nonzero(bad)[0].tolist():
            out.one('point_spacing', '', i + 1, dts[i], config.min_point_spacing,
                    f'point_spacing: point {i + 1} is {dts[i]:.6g} s after the previous one '
                    f'(min {config.min_point_spacing} s)')
        for i in np.nonzero(dts > config.max_point_spacing)[0].tolist():
            out.one('point_spacing', '', i + 1, dts[i], config.max_point_spacing,
                    f'point_spacing: point {i + 1} is {dts[i]:.6g} s after the previous one '
                    f'(max {config.max_point_spacing} s)')
    age = now - chunk.stamp
    if config.enabled('chunk_age'):
        if age > config.max_chunk_age:
            out.one('chunk_age', '', WHOLE_CHUNK, age, config.max_chunk_age,
                    f'chunk_age: observation is {age:.3f} s old on arrival '
                    f'(max {config.max_chunk_age} s)')
        elif age < -config.max_future_stamp:
            out.one('chunk_age', '', WHOLE_CHUNK, age, -config.max_future_stamp,
                    f'chunk_age: observation stamp is {-age:.3f} s in the future '
                    f'(max {config.max_future_stamp} s)')
    t_last = float(times[-1])
    if config.enabled('chunk_in_past') and chunk.stamp + t_last <= now:
        out.one('chunk_in_past', '', n - 1, chunk.stamp + times[-1] - now, 0.0,
                f'chunk_in_past: the last point was due {now - chunk.stamp - times[-1]:.3f} '
                's before arrival')

    # --- joint space -----------------------------------------------------------------------
    if config.enabled('position_limit'):
        lo, hi = lim.lower, lim.upper
        out.mask('position_limit', pos < lo, pos, lo, joints, 0, '{v:.6g} below {lim:.6g}')
        out.mask('position_limit', pos > hi, pos, hi, joints, 0, '{v:.6g} above {lim:.6g}')
    if config.enabled('gripper_range') and lim.gripper_cols.size:
        g = pos[:, lim.gripper_cols]
        gnames = config.gripper_joints
        glo, ghi = lim.gripper_min, lim.gripper_max
        out.mask('gripper_range', g < glo, g, glo, gnames, 0, '{v:.6g} below {lim:.6g}')
        out.mask('gripper_range', g > ghi, g, ghi, gnames, 0, '{v:.6g} above {lim:.6g}')
    if qm is not None:
        full = np.empty((n + 1, nj))
        full[0] = qm
        full[1:] = pos
    else:
        full = pos
    steps = full[1:] - full[:-1]
    offset = 0 if qm is not None else 1      # step k ends at point k + offset
    if config.enabled('max_step') and steps.size:
        mx = lim.max_step
        out.mask('max_step', np.abs(steps) > mx, steps, mx, joints, offset,
                 'step {v:.6g} exceeds {lim:.6g}')
    if qm is not None and config.enabled('start_deviation'):
        dev = (pos[0] - qm)[None, :]
        sd = lim.start_deviation[None, :]
        out.mask('start_deviation', np.abs(dev) > sd, dev, sd, joints, 0,
                 '{v:.6g} from the measured position (max {lim:.6g})')
    if increasing:
        _dynamics_checks(out, pos, times, lim, joints, config, vel_decl, acc_decl)

    # --- end effectors ---------------------------------------------------------------------
    if lim.fk is None:
        return
    # Batch-last layout, (3, F, M) and (3, 3, F, M): long numpy inner loops, no copies.
    trans, rots = lim.fk.compute_batch_last(full)
    verdict.ee_paths = trans.transpose(1, 2, 0)                         # (F, M, 3) view
    _ee_path_checks(out, trans, rots, config.ee_frames, config, qm is not None)


def _dynamics_checks(out: _Collector, pos: np.ndarray, times: np.ndarray, lim: Limits,
                     joints: Sequence[str], config: GateConfig,
                     vel_decl: np.ndarray | None, acc_decl: np.ndarray | None) -> None:
    """Velocity, acceleration and jerk by finite differences over the chunk's own points (the
    seam is the executor's: see the module docstring), and the declared ones. A velocity
    violation names the point ending its step (1 ...)."""
    dts = times[1:] - times[:-1]
    vel = (pos[1:] - pos[:-1]) / dts[:, None]
    if config.enabled('velocity_limit'):
        vl = lim.velocity
        out.mask('velocity_limit', np.abs(vel) > vl, vel, vl, joints, 1,
                 'finite-difference velocity {v:.6g} exceeds {lim:.6g}')
        if vel_decl is not None:
            out.mask('velocity_limit', np.abs(vel_decl) > vl, vel_decl, vl, joints, 0,
                     'declared velocity {v:.6g} exceeds {lim:.6g}')
    if config.enabled('jerk_limit') and vel.shape[0] >= 3:
        _jerk_check(out, vel, dts, lim.jerk, joints, 1)
    if config.enabled('acceleration_limit'):
        al = lim.acceleration
        if vel.shape[0] >= 2:
            acc, _ = _derived(vel, dts)
            out.mask('acceleration_limit', np.abs(acc) > al, acc, al, joints, 1,
                     'finite-difference acceleration {v:.6g} exceeds {lim:.6g}')
        if acc_decl is not None:
            out.mask('acceleration_limit', np.abs(acc_decl) > al, acc_decl, al, joints, 0,
                     'declared acceleration {v:.6g} exceeds {lim:.6g}')


def _derived(vel: np.ndarray, vdt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Finite-difference accelerations and jerks of a velocity chain (see
    :func:`_jerk_check` for the jerk's definition)."""
    mid = 0.5 * (vdt[1:] + vdt[:-1])
    acc = (vel[1:] - vel[:-1]) / mid[:, None]
    span = (vdt[:-2] + vdt[1:-1] + vdt[2:]) / 3.0
    jerk = (acc[1:] - acc[:-1]) / span[:, None] if acc.shape[0] >= 2 else acc[:0]
    return acc, jerk


def _jerk_check(out: _Collector, vel: np.ndarray, vdt: np.ndarray, limit: np.ndarray,
                joints: Sequence[str], voff: int) -> None:
    """Jerk by finite differences: 6x the third divided difference over four consecutive
    points (of the accelerations the acceleration check computes, over a third of the time
    those four points span: for any spacing a weighted mean of the path's jerk there); a
    violation names the third of the four points.

    Args:
        vel: (S, J) finite-difference velocities of S consecutive steps; vdt: (S,) their
            durations; voff: chunk index of the point ending step 0.
    """
    _, jerk = _derived(vel, vdt)
    out.mask('jerk_limit', np.abs(jerk) > limit, jerk, limit, joints, voff + 1,
             'finite-difference jerk {v:.6g} exceeds {lim:.6g}')


def ee_pose_path_checks(trans: np.ndarray, rots: np.ndarray, frames: Sequence[str],
                        config: GateConfig, measured_first: bool) -> list[Violation]:
    """The end-effector checks on given pose paths (the Cartesian stage of the gate).

    Same checks, names, limits and switches as the end-effector part of :func:`check` (which
    computes its paths by forward kinematics of the joint chunk): ``ee_rotation_jump``,
    ``ee_translation_jump``, ``ee_workspace``, ``ee_hard_translation`` and (soft)
    ``ee_soft_translation``.

    Args:
        trans: (F, M, 3) positions in the base frame.
        rots: (F, M, 3, 3) orientations.
        frames: the F frame names (violation subjects).
        config: limits and disabled checks.
        measured_first: row 0 of each path is the measured pose (then chunk point k is row
            k + 1 and the soft/hard translation limits apply from row 0).

    Returns:
        Every violation found, point indices in the chunk's numbering.
    """
    out = _Collector()
    # One implementation, on the batch-last layout check() uses: (3, F, M) and (3, 3, F, M).
    _ee_path_checks(out, np.asarray(trans).transpose(2, 0, 1),
                    np.asarray(rots).transpose(2, 3, 0, 1), frames, config, measured_first)
    return out.items


def _ee_path_checks(out: _Collector, trans: np.ndarray, rots: np.ndarray,
                    frames: Sequence[str], config: GateConfig, measured_first: bool) -> None:
    """The end-effector checks on pose paths in batch-last layout (long numpy inner loops).

    Args:
        trans: (3, F, M) positions; rots: (3, 3, F, M) orientations; row/column M indexes
            the path, whose first entry is the measured pose when ``measured_first``.
    """
    offset = 0 if measured_first else 1      # step k ends at point k + offset
    if trans.shape[2] >= 2:
        if config.enabled('ee_rotation_jump'):
            # rotation_angles() of consecutive poses, on this layout: rel = Ra^T Rb.
            rel = np.einsum('kifm,kjfm->ijfm', rots[..., :-1], rots[..., 1:])
            tr = rel[0, 0] + rel[1, 1] + rel[2, 2]
            sx = rel[2, 1] - rel[1, 2]
            sy = rel[0, 2] - rel[2, 0]
            sz = rel[1, 0] - rel[0, 1]
            ang = np.arctan2(np.sqrt(sx * sx + sy * sy + sz * sz), tr - 1.0).T  # (M-1, F)
            lm = config.ee_max_rotation_step
            out.mask('ee_rotation_jump', ang > lm, ang, lm, frames, offset,
                     'rotates {v:.6g} rad from the previous pose (max {lim:.6g})')
        if config.enabled('ee_translation_jump'):
            d = trans[:, :, 1:] - trans[:, :, :-1]
            jump = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).T     # (M-1, F)
            lm = config.ee_max_translation_step
            out.mask('ee_translation_jump', jump > lm, jump, lm, frames, offset,
                     'moves {v:.6g} m from the previous pose (max {lim:.6g})')
    pts = trans[:, :, 1:] if measured_first else trans                 # chunk points only
    if config.enabled('ee_workspace') and config.workspace_configured:
        wmin = np.asarray(config.ee_workspace_min, dtype=float).reshape(3, 1, 1)
        wmax = np.asarray(config.ee_workspace_max, dtype=float).reshape(3, 1, 1)
        outside = (pts < wmin) | (pts > wmax)
        if outside.any():
            pts_f = pts.transpose(1, 2, 0)                                # (F, N, 3)
            wmin, wmax = wmin.ravel(), wmax.ravel()
            for f, i, ax in zip(*np.nonzero(outside.transpose(1, 2, 0)), strict=True):
                v = float(pts_f[f, i, ax])
                limit = float(wmin[ax] if v < wmin[ax] else wmax[ax])
                out.one('ee_workspace', frames[f], int(i), v, limit,
                        f"ee_workspace: '{frames[f]}' at point {int(i)}: {'xyz'[ax]} = "
                        f'{v:.4g} m is outside [{wmin[ax]:.4g}, {wmax[ax]:.4g}]')
    if measured_first:
        d = pts - trans[:, :, :1]
        dist = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).T          # (N, F)
        hard = config.ee_hard_translation
        soft = config.ee_soft_translation
        if config.enabled('ee_hard_translation'):
            out.mask('ee_hard_translation', dist > hard, dist, hard, frames, 0,
                     '{v:.4g} m from the measured pose (hard limit {lim:.4g})')
        beyond_soft = dist > soft
        if config.enabled('ee_hard_translation'):
            beyond_soft &= dist <= hard
        if config.enabled('ee_soft_translation'):
            out.mask('ee_soft_translation', beyond_soft, dist, soft, frames, 0,
                     '{v:.4g} m from the measured pose (soft limit {lim:.4g}: needs '
                     'confirmation)', soft=True)
