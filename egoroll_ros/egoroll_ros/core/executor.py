"""The trajectory executor's logic: goal validation and the control state machine.

Pure module (numpy only), driven by explicit time arguments so tests run in milliseconds. The
``trajectory_server`` node owns one :class:`ExecutorCore`, calls :func:`validate_goal` for each
goal, :meth:`ExecutorCore.submit` / :meth:`ExecutorCore.cancel` from its action callbacks and
:meth:`ExecutorCore.tick` from its control thread, all under ONE lock that also covers the
publish of the tick's setpoint. That lock is what makes "stop means stop" hold: once
``cancel`` has returned, every later tick samples the stop motion, never the old trajectory.

All times given to :class:`ExecutorCore` are steady-clock seconds (``time.monotonic()``).
Goal point times are converted to that clock once, at validation.

Error codes are the names of the ``ExecuteTrajectory`` result constants (see :data:`CODES`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import dataclasses
from dataclasses import dataclass, field
import math
from typing import Any

import numpy as np

from egoroll_ros.core.blend import BlendedMotion, MotionLimits, RuckigStop, join_chunk
from egoroll_ros.core.trajectory import (
    INTERPOLATIONS,
    DecelerationStop,
    PiecewiseTrajectory,
    hold,
    max_acceleration_ratio,
    max_speed_ratio,
    splice,
)
from egoroll_ros.core.types import JointTrajectoryData
from egoroll_ros.core.validation import check_structure
from egoroll_ros.errors import ConfigError, TrajectoryError

#: The ExecuteTrajectory result constants, by name (checked against the .action by a test).
CODES: dict[str, int] = {
    'SUCCESSFUL': 0, 'INVALID_GOAL': -1, 'INVALID_JOINTS': -2, 'SIZE_MISMATCH': -3,
    'NON_FINITE': -4, 'TIME_NOT_INCREASING': -5, 'EMPTY_TRAJECTORY': -6, 'OLD_SEQUENCE': -7,
    'TRAJECTORY_IN_PAST': -8, 'NO_STATE': -9, 'STALE_STATE': -10, 'PREEMPTED': -11,
    'CANCELED': -12, 'PATH_TOLERANCE_VIOLATED': -13, 'GOAL_TOLERANCE_VIOLATED': -14,
    'COMMAND_TIMEOUT': -15, 'LIMIT_VIOLATED': -16, 'SHUTDOWN': -17, 'HEARTBEAT_LOST': -18,
    'SOURCE_REFUSED': -20, 'DEADLINE_MISSED': -21, 'NO_ROBOT_MODEL': -22, 'FENCED': -23,
    'INTERLOCK': -24, 'STALLED': -25, 'AUTH_FAILED': -26, 'FUTURE_STAMP': -27,
    'START_JUMP': -28,
}

STOP_BEHAVIORS = ('hold', 'decelerate')
#: How a new goal replaces the running one: ``splice`` (cubic/quintic from the current
#: setpoint into the goal's points, no jerk bound; refused beyond max_acceleration) or
#: ``blend`` (a jerk-limited join within max_velocity/max_acceleration/max_jerk, see
#: core/blend.py; refused when it cannot be done within max_blend_time, and the running goal
#: continues).
SEAMS = ('splice', 'blend')
#: The kind of join seam ``blend`` prefers (core/blend.py): ``correction`` (the new chunk's
#: path plus a fading quintic correction, the change of velocity spread over the join; Ruckig
#: where it cannot keep the limits) or ``ruckig`` (always Ruckig: time-optimal bursts).
BLEND_JOINS = ('correction', 'ruckig')
IDLE_OUTPUTS = ('hold', 'silent')

# States of the executor.
IDLE = 'idle'            # nothing commanded yet (or silent after a stop)
EXECUTING = 'executing'  # following a goal's trajectory
STOPPING = 'stopping'    # decelerating after cancel/abort
HOLDING = 'holding'      # at rest at the hold setpoint

# Relative slack of the per-tick step guard (floating point only, never a tolerance).
STEP_SLACK = 1e-6


@dataclass(frozen=True)
class ExecutorConfig:
    """Executor settings: trajectory_server's parameters of the same names (docs/parameters.md
    for each one's meaning).

    The defaults here ARE the node's defaults (its parameter spec reads them from this class:
    one definition), and they are the safe values (issue 24.3): every supervision on
    (command, heartbeat, late-tick and stall timeouts, future stamps, position limits
    required), a jerk-limited seam (``blend``: ``max_jerk`` is then required) and a
    decelerating stop. Per-joint arrays have one value per joint; a tolerance of 0 disables
    that joint's check.
    """

    joints: tuple[str, ...]
    control_rate: float = 200.0
    state_timeout: float = 0.1
    command_timeout: float = 0.5
    #: s: a goal whose header.stamp lies further ahead of the ROS clock is refused
    #: FUTURE_STAMP (a ROS clock that jumped back, or a goal from before the jump); 0 = off.
    max_future_stamp: float = 0.5
    path_tolerance: tuple[float, ...] = ()
    goal_tolerance: tuple[float, ...] = ()
    #: rad (m): a goal after a halt starts from the measured positions only when each lies
    #: within path_tolerance + this of the hold setpoint (joints with a path tolerance), else
    #: START_JUMP: the arm tracks its hold setpoint, so a larger gap means joint_states
    #: changed source (a second publisher, a replay), and the start would jump.
    start_jump_margin: float = 0.005
    goal_time_tolerance: float = 0.5
    max_velocity: tuple[float, ...] = ()
    max_acceleration: tuple[float, ...] = ()
    stop_behavior: str = 'decelerate'
    idle_output: str = 'hold'
    interpolation: str = 'auto'
    blend_time: float = 0.1
    seam: str = 'blend'
    max_jerk: tuple[float, ...] = ()
    max_blend_time: float = 0.4
    blend_join: str = 'correction'
    #: Supervision (see :meth:`ExecutorCore.supervise`): s without an interlock heartbeat
    #: after which goals abort HEARTBEAT_LOST and new ones are refused; 0 = not supervised.
    heartbeat_timeout: float = 0.25
    #: Consecutive missed control deadlines that abort the goal DEADLINE_MISSED; 0 = off.
    max_late_ticks: int = 50
    #: s: one gap of at least this between two control ticks (the process was stopped or
    #: starved) aborts the goal STALLED, which the gate answers by stopping the rollout;
    #: 0 = off.
    stall_timeout: float = 1.0
    #: Per-joint position limits checked on every setpoint (both empty: the URDF's, given with
    #: :meth:`ExecutorCore.set_urdf_limits`; see :func:`resolve_position_limits`).
    position_lower: tuple[float, ...] = ()
    position_upper: tuple[float, ...] = ()
    #: Refuse goals (NO_ROBOT_MODEL) while no position limits are known.
    require_position_limits: bool = True

    def __post_init__(self) -> None:
        joints = tuple(self.joints)
        object.__setattr__(self, 'joints', joints)
        if not joints:
            raise ConfigError("parameter 'joints': at least one joint is required")
        if len(set(joints)) != len(joints):
            raise ConfigError("parameter 'joints': duplicate joint names")
        n = len(joints)
        defaults = {'path_tolerance': 0.0, 'goal_tolerance': 0.0}
        for name in ('path_tolerance', 'goal_tolerance', 'max_velocity', 'max_acceleration'):
            values = tuple(float(v) for v in getattr(self, name))
            if not values and name in defaults:
                values = (defaults[name],) * n
            if len(values) != n:
                raise ConfigError(f"parameter '{name}': needs one value per joint ({n}), "
                                  f'got {len(values)}')
            if not all(math.isfinite(v) for v in values):
                raise ConfigError(f"parameter '{name}': values must be finite")
            if name.startswith('max_') and any(v <= 0.0 for v in values):
                raise ConfigError(f"parameter '{name}': every value must be > 0")
            if any(v < 0.0 for v in values):
                raise ConfigError(f"parameter '{name}': values must be >= 0")
            object.__setattr__(self, name, values)
        if not 1.0 <= self.control_rate <= 1000.0:
            raise ConfigError("parameter 'control_rate': must be in [1, 1000] Hz")
        if not self.state_timeout > 0.0:
            raise ConfigError("parameter 'state_timeout': must be > 0")
        if self.command_timeout < 0.0:
            raise ConfigError("parameter 'command_timeout': must be >= 0 (0 = off)")
        if not (math.isfinite(self.start_jump_margin) and self.start_jump_margin >= 0.0):
            raise ConfigError("parameter 'start_jump_margin': must be >= 0")
        if self.goal_time_tolerance < 0.0:
            raise ConfigError("parameter 'goal_time_tolerance': must be >= 0")
        if self.stop_behavior not in STOP_BEHAVIORS:
            raise ConfigError(f"parameter 'stop_behavior': must be one of {STOP_BEHAVIORS}")
        if self.idle_output not in IDLE_OUTPUTS:
            raise ConfigError(f"parameter 'idle_output': must be one of {IDLE_OUTPUTS}")
        if self.interpolation not in INTERPOLATIONS:
            raise ConfigError(f"parameter 'interpolation': must be one of {INTERPOLATIONS}")
        if not (math.isfinite(self.heartbeat_timeout) and self.heartbeat_timeout >= 0.0):
            raise ConfigError("parameter 'heartbeat_timeout': must be >= 0 (0 = off)")
        lo, hi = tuple(map(float, self.position_lower)), tuple(map(float, self.position_upper))
        object.__setattr__(self, 'position_lower', lo)
        object.__setattr__(self, 'position_upper', hi)
        if lo or hi:
            for name, vals in (('position_lower', lo), ('position_upper', hi)):
                if len(vals) != n:
                    raise ConfigError(f"parameter '{name}': needs one value per joint ({n}), "
                                      f'got {len(vals)}')
                if not all(math.isfinite(v) for v in vals):
                    raise ConfigError(f"parameter '{name}': values must be finite")
            bad = [j for j, a, b in zip(joints, lo, hi, strict=True) if not a < b]
            if bad:
                raise ConfigError(f"parameters 'position_lower'/'position_upper': lower must "
                                  f'be below upper for {", ".join(bad)}')
        if not (math.isfinite(self.stall_timeout) and self.stall_timeout >= 0.0):
            raise ConfigError("parameter 'stall_timeout': must be >= 0 (0 = off)")
        if int(self.max_late_ticks) != self.max_late_ticks or self.max_late_ticks < 0:
            raise ConfigError("parameter 'max_late_ticks': must be an integer >= 0 (0 = off)")
        self._validate_seam(n)

    def _validate_seam(self, n: int) -> None:
        if self.seam not in SEAMS:
            raise ConfigError(f"parameter 'seam': must be one of {SEAMS}")
        if self.blend_join not in BLEND_JOINS:
            raise ConfigError(f"parameter 'blend_join': must be one of {BLEND_JOINS}")
        jerk = tuple(float(v) for v in self.max_jerk)
        object.__setattr__(self, 'max_jerk', jerk)
        if self.seam == 'blend' or jerk:
            if len(jerk) != n:
                raise ConfigError(f"parameter 'max_jerk': needs one value per joint ({n}) "
                                  f"for seam 'blend', got {len(jerk)}")
            if not all(math.isfinite(v) and v > 0.0 for v in jerk):
                raise ConfigError("parameter 'max_jerk': every value must be finite and > 0")
        if self.seam == 'blend':
            if not self.blend_time > 0.0:
                raise ConfigError("parameter 'blend_time': must be > 0 for seam 'blend' (the "
                                  'shortest join)')
            if not self.max_blend_time >= self.blend_time:
                raise ConfigError("parameter 'max_blend_time': must be >= blend_time")

    @property
    def period(self) -> float:
        """Control period in seconds."""
        return 1.0 / self.control_rate

    @classmethod
    def from_params(cls, p: Mapping[str, Any]) -> ExecutorConfig:
        """From trajectory_server's parameter values: every field is the parameter of the
        same name (lists become tuples).

        Raises:
            ConfigError: a bad value, naming the parameter.
        """
        return cls(**{f.name: tuple(p[f.name]) if isinstance(p[f.name], list) else p[f.name]
                      for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class ValidGoal:
    """A validated goal, columns in the configured joint order, times on the steady clock.

    Attributes:
        sequence: the goal's sequence.
        source: who sent it.
        times: shape (N,), steady-clock time of every point of the goal as received.
        positions: shape (N, J); velocities, accelerations: shape (N, J) or None.
        received: steady-clock time the goal was validated.
    """

    sequence: int
    source: str
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None
    accelerations: np.ndarray | None
    received: float


@dataclass(frozen=True)
class MeasuredState:
    """Measured joint positions in the configured order, with their steady-clock receipt time."""

    positions: np.ndarray
    velocities: np.ndarray | None
    received: float


def validate_goal(traj: JointTrajectoryData, sequence: int, source: str, *,
                  config: ExecutorConfig, last_sequence: int | None, ros_now: float,
                  mono_now: float, measured: MeasuredState | None) -> ValidGoal:
    """Check a goal and convert it to steady-clock times in the configured joint order.

    ``traj.stamp`` is time zero of the points on the ROS clock (0 = on receipt, i.e.
    ``ros_now``); it maps to the steady clock as ``mono_now - (ros_now - stamp)``.

    Checks, in order: the structure shared with the gate
    (:func:`~egoroll_ros.core.validation.check_structure`: joint names ``INVALID_JOINTS``, no
    points ``EMPTY_TRAJECTORY``, shapes ``SIZE_MISMATCH``, finite values ``NON_FINITE``,
    strictly increasing times ``TIME_NOT_INCREASING``), a finite stamp no more than
    ``max_future_stamp`` ahead of ``ros_now`` (``FUTURE_STAMP``), sequence newer than
    ``last_sequence`` (``OLD_SEQUENCE``), joint state present (``NO_STATE``) and fresh
    (``STALE_STATE``), and at least one point in the future (``TRAJECTORY_IN_PAST``). Empty
    trajectories and ragged sizes are caught when the message is converted as well.

    Raises:
        TrajectoryError: with the code of the first failed check and a message naming it.
    """
    structure = check_structure(traj, config.joints)
    error = structure.error()
    if error is not None:
        raise error
    if not math.isfinite(traj.stamp):
        raise TrajectoryError('NON_FINITE', 'header.stamp is not finite')
    ahead = traj.stamp - ros_now
    if config.max_future_stamp > 0.0 and traj.stamp != 0.0 and ahead > config.max_future_stamp:
        raise TrajectoryError('FUTURE_STAMP', f'header.stamp is {ahead:.3f} s ahead of the ROS '
                              f'clock (max_future_stamp {config.max_future_stamp:g} s): a clock '
                              'that jumped back, or a goal from before the jump')
    names = list(traj.joint_names)
    times = structure.times
    if last_sequence is not None and sequence <= last_sequence:
        raise TrajectoryError('OLD_SEQUENCE', f'sequence {sequence} is not newer than the last '
                              f'accepted sequence {last_sequence}')
    if measured is None:
        raise TrajectoryError('NO_STATE', 'no joint_states with every configured joint '
                              'received yet')
    age = mono_now - measured.received
    if age > config.state_timeout:
        raise TrajectoryError('STALE_STATE', f'joint_states is {age:.3f} s old (state_timeout '
                              f'{config.state_timeout:.3f} s)')
    stamp = ros_now if traj.stamp == 0.0 else traj.stamp
    abs_times = mono_now - (ros_now - stamp) + times
    if abs_times[-1] <= mono_now:
        raise TrajectoryError('TRAJECTORY_IN_PAST', f'every point is in the past (the last one '
                              f'{mono_now - abs_times[-1]:.3f} s ago)')
    order = [names.index(j) for j in config.joints]

    def cols(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.asarray(a, dtype=float)[:, order].copy()

    return ValidGoal(sequence=int(sequence), source=source, times=abs_times,
                     positions=cols(traj.positions), velocities=cols(traj.velocities),
                     accelerations=cols(traj.accelerations), received=mono_now)


def source_error(source: str, allowed: set[str] | frozenset[str]) -> TrajectoryError | None:
    """``SOURCE_REFUSED`` unless ``source`` is one of ``allowed`` (empty: any source).

    A goal's ``source`` is what its sender wrote: this catches a wrong or forgotten client
    (a test script, a second gate), not a deliberate attacker; only SROS2 access control can
    keep other nodes off the action (docs/executor.md).
    """
    if not allowed or source in allowed:
        return None
    return TrajectoryError('SOURCE_REFUSED', f"goal source '{source}' is not an allowed source "
                           f'({", ".join(sorted(allowed))}); parameter allowed_sources')


def resolve_position_limits(config: ExecutorConfig,
                            urdf: Mapping[str, tuple[float, float]] | None,
                            source: str = 'the robot model'
                            ) -> tuple[np.ndarray, np.ndarray] | None:
    """The position limits the executor checks, per configured joint.

    The rule (the gate's, without its margin): the URDF's limits of every configured joint
    (``-inf``/``inf`` for a continuous joint); ``position_lower``/``position_upper``, where
    configured, replace them and must lie within them (they may only tighten). Without a URDF
    the configured ones alone; with neither, None (unchecked).

    Args:
        config: the executor configuration.
        urdf: ``{joint: (lower, upper)}`` of the robot model's movable joints, or None.
        source: where the URDF came from, for messages.

    Raises:
        ConfigError: a configured joint is not a movable joint of the URDF, or a configured
            limit lies outside the URDF's (the message names the joint and both ranges).
    """
    lo, hi = config.position_lower, config.position_upper
    if urdf is None:
        return (np.array(lo), np.array(hi)) if lo else None
    lower, upper = np.empty(len(config.joints)), np.empty(len(config.joints))
    for i, name in enumerate(config.joints):
        if name not in urdf:
            raise ConfigError(f"parameter 'joints': '{name}' is not a movable joint of "
                              f'{source}')
        ulo, uhi = urdf[name]
        if lo and (lo[i] < ulo or hi[i] > uhi):
            raise ConfigError(f"parameters 'position_lower'/'position_upper': '{name}' "
                              f'[{lo[i]:g}, {hi[i]:g}] is outside the URDF limits [{ulo:g}, '
                              f'{uhi:g}] of {source} (they may only tighten them)')
        lower[i], upper[i] = (lo[i], hi[i]) if lo else (ulo, uhi)
    return lower, upper


@dataclass(frozen=True)
class Outcome:
    """How a goal ended. ``key`` is the caller's handle for the goal."""

    key: Any
    code: str
    message: str
    points_executed: int
    sequence: int


@dataclass(frozen=True)
class Setpoint:
    """One commanded setpoint (configured joint order) at steady-clock time ``time``, with the
    acceleration of the followed motion there (None: at rest, zero)."""

    time: float
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray | None = None


@dataclass(frozen=True)
class Feedback:
    """Progress of the active goal at one tick."""

    key: Any
    sequence: int
    desired: np.ndarray
    actual: np.ndarray | None
    current_point: int


@dataclass
class TickResult:
    """What one control tick produced.

    Attributes:
        setpoint: the setpoint to publish, or None (silent).
        outcomes: goals that ended at this tick (or since the last tick).
        feedback: progress of the active goal, or None.
        motion_changed: the followed motion changed (acceptance, preemption, stop): a
            trajectory-forwarding interface must send :attr:`ExecutorCore.motion` again.
    """

    setpoint: Setpoint | None
    outcomes: list[Outcome] = field(default_factory=list)
    feedback: Feedback | None = None
    motion_changed: bool = False


#: How many heartbeats beyond the newest one received a goal may claim were sent before it
#: (:meth:`ExecutorCore.submit`): heartbeats run at the gate's watchdog period (20 ms), so
#: this covers a heartbeat stream up to ~100 ms behind the goals, and bounds what a goal that
#: claims a far-future counter buys (it is halted by the heartbeats after that).
HEARTBEAT_LEAD = 5


@dataclass
class _Active:
    key: Any
    goal: ValidGoal
    #: Heartbeat counter sent before the goal (what the gate says, bounded): a heartbeat
    #: saying "no motion" with a higher counter was sent after the goal and halts it.
    heartbeat: int = 0

    def points_reached(self, t: float) -> int:
        return int(np.searchsorted(self.goal.times, t, side='right'))


@dataclass(frozen=True)
class JoinRequest:
    """A seam-``blend`` join to compute off the control tick (:meth:`ExecutorCore.join_request`).

    The running motion is deterministic, so its state at the takeover tick is known in
    advance: the join starts there. Everything :meth:`compute` needs is in here (immutable
    arrays), so it runs without the core's lock while the control loop keeps ticking.

    Attributes:
        key, sequence: the pending goal it joins.
        takeover: the control tick (steady clock) at which the joined motion takes over.
        generation: the core's motion generation it continues (any stop or new motion since
            makes it unusable).
        position, velocity, acceleration: the running motion's state at ``takeover``.
    """

    key: Any
    sequence: int
    takeover: float
    generation: int
    position: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    goal: ValidGoal
    limits: MotionLimits
    min_blend: float
    max_blend: float
    step: float
    joints: tuple[str, ...]
    correction: bool = True

    def compute(self) -> PreparedJoin:
        """Run :func:`~egoroll_ros.core.blend.join_chunk` (pure; milliseconds to a tenth of
        a second on a loaded machine). A refusal is returned, not raised."""
        g = self.goal
        try:
            motion = join_chunk(self.takeover, self.position, self.velocity, self.acceleration,
                                g.times, g.positions, g.velocities, g.accelerations,
                                self.limits, self.min_blend, self.max_blend, self.step,
                                self.joints, correction=self.correction)
        except TrajectoryError as exc:
            return PreparedJoin(self, None, exc)
        return PreparedJoin(self, motion, None)


@dataclass(frozen=True)
class PreparedJoin:
    """The result of :meth:`JoinRequest.compute`: the joined motion, or why it was refused."""

    request: JoinRequest
    motion: BlendedMotion | None
    error: TrajectoryError | None


class ExecutorCore:
    """The executor state machine (one active goal; a newer goal preempts at the next tick).

    Not thread-safe by itself: the caller serialises every call (and the publish of each tick's
    setpoint) with one lock.
    """

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config
        self.n = len(config.joints)
        self._vmax = np.array(config.max_velocity)
        self._amax = np.array(config.max_acceleration)
        self._path_tol = np.array(config.path_tolerance)
        self._goal_tol = np.array(config.goal_tolerance)
        self.state = IDLE
        self.motion: PiecewiseTrajectory | DecelerationStop | BlendedMotion | RuckigStop | \
            None = None
        self._limits = MotionLimits(self._vmax, self._amax, np.array(config.max_jerk)) \
            if config.max_jerk else None
        self.refused = 0  # goals refused at the seam while the running one continued
        self._active: _Active | None = None
        self._pending: _Active | None = None
        # Off-tick joins (seam blend): the outstanding request for the pending goal, its
        # result once offered, whether the server must request one (again), the motion
        # generation (bumped by every motion change and stop) and the last tick's time.
        self._join: JoinRequest | None = None
        self._prepared: PreparedJoin | None = None
        self.join_wanted = False
        self._generation = 0
        self._tick_time = -math.inf
        self.joins = {'prepared': 0, 'stale': 0, 'in_tick': 0}
        self._last: Setpoint | None = None
        self._prev: Setpoint | None = None  # the setpoint before _last, in one unbroken stream
        self._run_continues = False         # whether this tick's setpoint extends that stream
        self._continuous = False  # whether the next setpoint must respect the step bound
        # The goal ended SUCCESSFUL and the motion it ended on still commands (its stop, then
        # its hold) with no halt since: the command stream is live, a new goal continues it.
        self._ran_out = False
        # A goal pending when the running one was canceled (seam blend): it continues the
        # command stream from the stop motion, as it would have joined the canceled goal.
        self._pending_continues = False
        self._measured: MeasuredState | None = None
        self._outcomes: list[Outcome] = []
        self._motion_changed = False
        self.last_sequence: int | None = None
        self.last_error = ''
        self.late_ticks = 0
        self.ticks = 0
        self._heartbeat: tuple[float, bool, str] | None = None   # received, allowed, state
        self._hb_counter: int | None = None   # counter of the newest heartbeat
        #: Set by a STALLED halt: goals are refused until a heartbeat says motion is not
        #: allowed (the gate has stopped the rollout), so goals queued while stalled never run.
        self.stall_hold = False
        #: The highest motion fence of any heartbeat (None: none seen): no goal with a
        #: sequence at or below it may move (:meth:`update_heartbeat`).
        self.fence: int | None = None
        self._consecutive_late = 0
        self.position_limits = resolve_position_limits(config, None)
        self.limits_source = 'position_lower/position_upper' if self.position_limits else ''
        self._limits_problem = ''   # why the robot model's limits could not be used

    def set_urdf_limits(self, urdf: Mapping[str, tuple[float, float]] | None, source: str,
                        now: float, error: str = '') -> None:
        """Take the position limits of a (new) robot model, or record why there is none.

        ``error`` (or a model that does not fit, see :func:`resolve_position_limits`) makes
        every goal end NO_ROBOT_MODEL now and refuses new ones until a model fits.
        """
        if not error:
            try:
                limits = resolve_position_limits(self.config, urdf, source)
            except ConfigError as exc:
                error = str(exc)
        if error:
            self._limits_problem = f'robot model from {source} unusable: {error}'
            self.supervise(now)
            return
        self._limits_problem = ''
        self.position_limits = limits
        self.limits_source = source + (' (tightened by position_lower/position_upper)'
                                       if self.config.position_lower else '')

    # ----- inputs -------------------------------------------------------------------------
    @property
    def measured(self) -> MeasuredState | None:
        """The last measured state (None before the first complete joint_states)."""
        return self._measured

    def update_measured(self, positions: np.ndarray, velocities: np.ndarray | None,
                        received: float) -> None:
        """Record a joint_states measurement (configured order, steady-clock receipt time)."""
        self._measured = MeasuredState(np.asarray(positions, dtype=float),
                                       None if velocities is None else
                                       np.asarray(velocities, dtype=float), float(received))

    @property
    def active_sequence(self) -> int | None:
        """Sequence of the goal being executed (or about to be), else None."""
        g = self._pending or self._active
        return None if g is None else g.goal.sequence

    def has_goal(self, key: Any) -> bool:
        """Whether ``key`` is the pending or active goal."""
        return any(g is not None and g.key == key for g in (self._pending, self._active))

    def submit(self, goal: ValidGoal, key: Any, heartbeat: int = 0) -> None:
        """Accept a validated goal: it replaces the running goal at the next tick (with an
        off-tick join, :meth:`join_request`, at its takeover tick).

        ``heartbeat``: the counter of the last interlock heartbeat the gate sent before the
        goal (the goal's ``heartbeat_counter``; 0: none claimed). A later heartbeat saying
        motion is not allowed halts the goal (:meth:`update_heartbeat`); one sent before it
        never does (a heartbeat and a goal cross on the wire). The claim is bounded to
        :data:`HEARTBEAT_LEAD` beyond the newest heartbeat received.

        A goal still pending from before ends PREEMPTED now; the running one ends PREEMPTED at
        the next tick (or when the new one is canceled first).
        """
        if self.fence is not None and goal.sequence <= self.fence:
            raise TrajectoryError('FENCED', f'sequence {goal.sequence} is at or below the '
                                  f"interlock's motion fence {self.fence} (the safety gate "
                                  'stopped motion after sending it)')
        if self.last_sequence is not None and goal.sequence <= self.last_sequence:
            raise TrajectoryError('OLD_SEQUENCE', f'sequence {goal.sequence} is not newer than '
                                  f'{self.last_sequence}')
        self.last_sequence = goal.sequence
        if self._pending is not None:
            self._end(self._pending, 'PREEMPTED', f'replaced by sequence {goal.sequence}',
                      goal.received)
        newest = 0 if self._hb_counter is None else self._hb_counter
        self._pending = _Active(key, goal, min(int(heartbeat), newest + HEARTBEAT_LEAD))
        self._pending_continues = False      # a goal after a stop starts from the measured
        self._drop_join()
        self.join_wanted = False

    def join_request(self, takeover: float) -> JoinRequest | None:
        """Ask to join the pending goal off the control tick, at the tick ``takeover``.

        With seam ``blend``, while a goal is running (or the last one ran out and its stop and
        hold still command), the state the running motion will have at ``takeover`` is
        sampled now and returned in a :class:`JoinRequest`; the caller computes it
        (:meth:`JoinRequest.compute`, outside its lock) and hands the result to
        :meth:`offer_join`. Until ``takeover`` the running goal continues; at the first tick
        at or after it the prepared motion takes over (or the refusal ends the new goal).
        When the result came too late, or the running motion changed meanwhile (a stop, a
        hold), it is never used: a late one makes :attr:`join_wanted` true (request again,
        for a later tick) and a changed motion joins in the tick from the measured state,
        as after any halt.

        Returns None (the tick joins in place, as without this call) for seam ``splice``, no
        pending goal, a ``takeover`` not after the last tick, or a goal that starts from the
        measured state (from rest or after a halt, where nothing running can be predicted).
        """
        self.join_wanted = False
        self._drop_join()
        p = self._pending
        if self.config.seam != 'blend' or p is None or not takeover > self._tick_time:
            return None
        if not self._continues_motion():
            return None
        q, v, a = self.motion.sample(takeover)
        self._join = JoinRequest(
            p.key, p.goal.sequence, float(takeover), self._generation, q, v, a, p.goal,
            self._limits, self.config.blend_time, self.config.max_blend_time,
            self.config.period / 4.0, self.config.joints,
            correction=self.config.blend_join == 'correction')
        return self._join

    def offer_join(self, prepared: PreparedJoin) -> bool:
        """Hand over a computed join. Taken only while it is still the pending goal's request,
        the motion it continues is unchanged and no tick at or after its takeover has run;
        otherwise dropped (False): a join computed for a tick that passed is never used."""
        req = prepared.request
        if req is not self._join or self._pending is None or \
                self._pending.key != req.key or req.generation != self._generation:
            return False
        if not req.takeover > self._tick_time:
            return False
        self._prepared = prepared
        return True

    def _drop_join(self) -> None:
        self._join = None
        self._prepared = None

    def _continues_motion(self) -> bool:
        """Whether a new goal now continues the commanded motion (seam blend): a goal is
        running, or the last one ran out and its stop and hold are still commanded."""
        if self.motion is None:
            return False
        if self.state == EXECUTING and self._active is not None:
            return True
        return self.state == HOLDING and self._ran_out and self.config.idle_output == 'hold'

    def cancel(self, key: Any, now: float) -> bool:
        """Cancel goal ``key``; the switch to the stop motion happens here, before returning.

        Canceling the pending goal also stops the goal it was about to replace (that one
        ends PREEMPTED). Returns False when ``key`` is neither pending nor active.
        """
        if self._pending is not None and self._pending.key == key:
            self._end(self._pending, 'CANCELED', 'canceled before it started', now)
            self._pending = None
            self._drop_join()
            self.join_wanted = False
            if self._active is not None:
                self._end(self._active, 'PREEMPTED', 'replaced by a goal that was canceled', now)
                self._active = None
                self._stop(self._stop_start(now))
            return True
        if self._active is not None and self._active.key == key:
            self._end(self._active, 'CANCELED', f'canceled; {self.config.stop_behavior}', now)
            self._active = None
            self._stop(self._stop_start(now))
            # A newer goal already pending (accepted while this one ran; a cancel-all reaches
            # it a moment later) joins from the stop motion being commanded, not from the
            # measured positions: that start jumped the command by the arm's tracking lag
            # (3 mm: hundreds of rad/s^2 at 500 Hz). Only a goal after the stop starts from
            # the measured positions.
            self._pending_continues = self._pending is not None
            return True
        return False

    def halt(self, now: float, code: str, message: str) -> None:
        """End every goal with ``code`` and stop (e.g. ``SHUTDOWN``)."""
        for g in (self._pending, self._active):
            if g is not None:
                self._end(g, code, message, now)
        self._pending = self._active = None
        self._drop_join()
        self.join_wanted = False
        if self.state in (EXECUTING, STOPPING):
            # from the last tick, as a cancel (a shutdown halts at the wall clock's now)
            self._stop(self._stop_start(now))

    def take_outcomes(self) -> list[Outcome]:
        """Goals that ended since the last call (or tick)."""
        out, self._outcomes = self._outcomes, []
        return out

    # ----- the control tick ---------------------------------------------------------------
    def tick(self, now: float) -> TickResult:
        """Advance to steady-clock time ``now`` and return the setpoint to publish."""
        self.ticks += 1
        self.supervise(now)
        if self._pending is not None:
            self._adopt(now)
        self._tick_time = now
        if self._active is not None:
            self._watchdogs(now)
        setpoint = self._sample(now)
        if setpoint is not None:
            setpoint = self._check_position_limits(now, setpoint)
        feedback = None
        if self._active is not None and setpoint is not None:
            setpoint = self._check_tracking(now, setpoint)
        if self._active is not None and setpoint is not None:
            a = self._active
            feedback = Feedback(a.key, a.goal.sequence, setpoint.positions,
                                None if self._measured is None else self._measured.positions,
                                min(a.points_reached(now), len(a.goal.times)))
        if self.state == STOPPING and self.motion is not None and now >= self.motion.end_time:
            self.state = HOLDING
        if setpoint is not None and self.state == HOLDING and \
                self.config.idle_output == 'silent':
            setpoint = None
        if setpoint is not None:
            self._prev = self._last if self._run_continues else None
            self._last = setpoint
        changed, self._motion_changed = self._motion_changed, False
        return TickResult(setpoint, self.take_outcomes(), feedback, changed)

    def note_late_tick(self, missed: int = 1) -> None:
        """Count control deadlines that were missed."""
        self.late_ticks += missed

    # ----- supervision: interlock heartbeat, deadlines (separate from sampling/splicing) --
    def update_heartbeat(self, received: float, motion_allowed: bool, state: str,
                         fence: int = 0, counter: int | None = None) -> bool:
        """An interlock heartbeat arrived at steady-clock time ``received``.

        ``motion_allowed`` false (e-stop, fault, stopped, deadman released) in a heartbeat
        sent after a goal (``counter`` above the goal's, see :meth:`submit`; a counter below
        the newest one's means a restarted gate, whose word covers every goal) halts that goal
        now with ``INTERLOCK``: the executor holds on the gate's word, independently of the
        cancel-all. ``counter`` None: not known (the goal is halted).

        ``fence`` is its motion fence (``fence_sequence``): no goal with a sequence at or below
        it may move. The highest fence seen is kept (heartbeats may arrive out of order, and a
        restarted gate starts again at 0). A running or pending goal at or below it ends
        ``FENCED`` here, and the arm holds (per stop_behavior) from this call on, not from the
        next tick; :meth:`submit` refuses such goals from now on. A goal above the fence is
        never touched: the gate forwards only sequences above every fence it sent, so a
        heartbeat crossing a newer goal on the wire cannot stop it.

        Returns:
            whether a goal ended (its outcome is in :meth:`take_outcomes`) and the stop
            motion started.
        """
        self._heartbeat = (float(received), bool(motion_allowed), str(state))
        restarted = counter is None or (self._hb_counter is not None
                                        and counter < self._hb_counter)
        if counter is not None:
            self._hb_counter = int(counter)
        ended = False
        fence = int(fence)
        if self.fence is None or fence > self.fence:
            self.fence = fence
            ended = self._apply_fence(float(received))    # FENCED: the precise reason
        if not motion_allowed:
            self.stall_hold = False
            ended = self._halt_after(float(received), None if restarted else int(counter),
                                     state) or ended
        return ended

    def _halt_after(self, now: float, counter: int | None, state: str) -> bool:
        """End the pending and the active goal sent before heartbeat ``counter`` (None:
        every goal) said motion is not allowed; stop."""
        why = f"the safety gate's heartbeat says motion is not allowed (state " \
            f"{state or 'unknown'}); " + self.config.stop_behavior
        return self._end_goals_where(
            lambda g: counter is None or counter > g.heartbeat, 'INTERLOCK', why, now)

    def _apply_fence(self, now: float) -> bool:
        """End the pending and the active goal when at or below the fence; stop. A pending
        goal above the fence (forwarded after a re-arm) adopts at the next tick from the
        measured state, as after any halt."""
        fence = self.fence
        why = f"at or below the interlock's motion fence {fence} (the safety gate stopped " \
            'motion); ' + self.config.stop_behavior
        return self._end_goals_where(lambda g: g.goal.sequence <= fence, 'FENCED', why, now)

    def _end_goals_where(self, ends: Callable[[_Active], bool], code: str, why: str,
                         now: float) -> bool:
        """End the pending and the active goal for which ``ends`` holds with ``code``; the
        arm stops when the active one ended. Returns whether any ended."""
        ended = False
        p = self._pending
        if p is not None and ends(p):
            self._end(p, code, why, now)
            self._pending = None
            self._drop_join()
            self.join_wanted = False
            ended = True
        a = self._active
        if a is not None and ends(a):
            self._end(a, code, why, now)
            self._active = None
            ended = True
            self._stop(self._stop_start(now))
        return ended

    def supervision_error(self, now: float) -> TrajectoryError | None:
        """Why a goal may not run now (no usable position limits; heartbeat missing or
        stale), else None."""
        if self._limits_problem:
            return TrajectoryError('NO_ROBOT_MODEL', self._limits_problem)
        if self.position_limits is None and self.config.require_position_limits:
            return TrajectoryError('NO_ROBOT_MODEL', 'no position limits to check setpoints '
                                   'against: no robot model yet (urdf_path, else the '
                                   'robot_description topic) and no position_lower/'
                                   'position_upper (parameter require_position_limits)')
        timeout = self.config.heartbeat_timeout
        if timeout <= 0.0:
            return None
        hb = self._heartbeat
        if hb is None:
            return TrajectoryError('HEARTBEAT_LOST', 'no interlock heartbeat received yet '
                                   '(safety/heartbeat from the safety gate)')
        age = now - hb[0]
        if age > timeout:
            return TrajectoryError('HEARTBEAT_LOST', f'interlock heartbeat {age:.3f} s old '
                                   f'(heartbeat_timeout {timeout:g} s); holding')
        # The state it carries (hb[1], hb[2]) is for diagnostics only: a heartbeat and a goal
        # travel on different DDS writers, so a heartbeat sent before the gate forwarded a goal
        # can arrive after it; acting on its state would abort good goals. What the executor
        # acts on is the heartbeat's motion fence (update_heartbeat), which names the goals
        # it stops by their sequences and so is immune to that crossing.
        return None

    def admission_error(self, now: float, sequence: int | None = None
                        ) -> TrajectoryError | None:
        """Why a NEW goal may not start now: :meth:`supervision_error`, or (heartbeat
        supervised) the gate's latest heartbeat says motion is not allowed (``INTERLOCK``:
        e-stop, deadman released, rollout stopped, fault). Any node can name the gate as a
        goal's source; only the gate's own heartbeat says whether it allows motion. The gate
        sends a heartbeat saying so before it forwards the first goal after a change.
        Only at admission: a running goal is stopped by the gate's cancel and fence, which a
        heartbeat crossing a newer goal on the wire cannot confuse. A goal at or below the
        motion fence (``sequence``) is left to :meth:`submit`, which refuses it ``FENCED``:
        the more precise reason."""
        err = self.supervision_error(now)
        if err is not None or self.config.heartbeat_timeout <= 0.0:
            return err
        if self.stall_hold:
            return TrajectoryError('STALLED', 'the control loop stalled: goals are refused '
                                   'until the safety gate reports the rollout stopped')
        if sequence is not None and self.fence is not None and sequence <= self.fence:
            return None
        hb = self._heartbeat
        if hb is not None and not hb[1]:
            return TrajectoryError('INTERLOCK', "the safety gate's latest heartbeat says motion "
                                   f'is not allowed (state {hb[2] or "unknown"})')
        return None

    def supervise(self, now: float) -> None:
        """Abort every goal and stop when supervision fails (called by :meth:`tick`)."""
        if self._pending is None and self._active is None:
            return
        err = self.supervision_error(now)
        if err is not None:
            self.halt(now, err.code, str(err))

    def note_deadline(self, now: float, missed: int) -> None:
        """One tick ran; ``missed`` deadlines were skipped before it (0: on time).

        ``max_late_ticks`` consecutive missed deadlines abort the goal (DEADLINE_MISSED) and
        hold, as a robot controller's communication-constraints error does.
        """
        if missed <= 0:
            self._consecutive_late = 0
            return
        self.note_late_tick(missed)
        self._consecutive_late += missed
        stall = self.config.stall_timeout
        gap = missed * self.config.period
        if stall and gap >= stall and (self._pending is not None or self._active is not None):
            # Not a late tick: the loop did not run for a while (SIGSTOP, starvation). What
            # the goal planned for that time never happened; the rollout must not go on.
            why = (f'the control loop did not run for {gap:.2f} s (stall_timeout {stall:g} s: '
                   'the process was stopped or starved); holding at the last setpoint sent')
            moving = self.state in (EXECUTING, STOPPING) and self._last is not None
            last = self._last.positions.copy() if moving else None
            self.halt(now, 'STALLED', why)
            if last is not None:
                # The driver held the last command meanwhile: hold exactly there (a stop
                # motion from the state before the gap would step by its braking distance).
                self._stop(now, at=last)
            self.stall_hold = self.config.heartbeat_timeout > 0.0
            self._consecutive_late = 0
            return
        limit = self.config.max_late_ticks
        if limit and self._consecutive_late >= limit and (
                self._pending is not None or self._active is not None):
            self.halt(now, 'DEADLINE_MISSED', f'{self._consecutive_late} consecutive control '
                      f'deadlines missed (max_late_ticks {limit}); holding')
            self._consecutive_late = 0

    def diagnostics(self, now: float) -> dict[str, str]:
        """Key/value status for /diagnostics."""
        age = 'never' if self._measured is None else f'{now - self._measured.received:.3f}'
        hb = self._heartbeat
        return {'heartbeat_age': 'never' if hb is None else f'{now - hb[0]:.3f}',
                'interlock_state': '' if hb is None else hb[2], 'state': self.state,
                'motion_fence': '' if self.fence is None else str(self.fence),
                'position_limits': self._limits_problem or self.limits_source or 'none',
                'active_sequence': '' if self.active_sequence is None
                else str(self.active_sequence),
                'last_sequence': '' if self.last_sequence is None else str(self.last_sequence),
                'late_ticks': str(self.late_ticks), 'ticks': str(self.ticks),
                'last_error': self.last_error, 'joint_state_age': age,
                'seam': self.config.seam, 'seam_refusals': str(self.refused),
                'seam_joins': ', '.join(f'{k} {v}' for k, v in self.joins.items())}

    # ----- internals ----------------------------------------------------------------------
    def _end(self, g: _Active, code: str, message: str, now: float) -> None:
        if code != 'SUCCESSFUL' and code not in ('PREEMPTED', 'CANCELED'):
            self.last_error = f'sequence {g.goal.sequence}: {code}: {message}'
        self._outcomes.append(Outcome(g.key, code, message,
                                      min(g.points_reached(now), len(g.goal.times)),
                                      g.goal.sequence))

    def _current_state(self, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        if self.motion is None:
            return None
        return self.motion.sample(now)

    def _set_motion(self, motion: PiecewiseTrajectory | DecelerationStop | BlendedMotion |
                    RuckigStop) -> None:
        self.motion = motion
        self._motion_changed = True
        self._ran_out = False
        self._generation += 1

    def _stop_start(self, now: float) -> float:
        """When a stop asked for between ticks (a cancel, a fence) starts: at the last tick,
        from the state the last setpoint was sampled in. Started at ``now`` instead, a tick
        running late behind the request (its deadline before ``now``) sampled the stop's start
        state at its earlier deadline: a position shifted by up to a period of motion, seen as
        15 rad/s^2 and 1400 rad/s^3 of setpoint acceleration and jerk at 500 Hz."""
        last = self._tick_time
        return last if math.isfinite(last) and last <= now else now

    def _stop(self, now: float, at: np.ndarray | None = None) -> None:
        """Switch to the stop motion now (hold at ``at`` or per stop_behavior)."""
        self._pending_continues = False
        if at is not None:
            self._set_motion(hold(now, at))
            self.state = HOLDING
            self._continuous = False
            return
        cur = self._current_state(now)
        if cur is None:
            if self._measured is None:
                self.motion = None
                self._generation += 1
                self.state = IDLE
                return
            cur = (self._measured.positions, np.zeros(self.n), np.zeros(self.n))
        if self.config.stop_behavior == 'decelerate' and np.any(cur[1] != 0.0):
            self._set_motion(self._deceleration(now, cur))
            self.state = STOPPING
        else:
            # Hold exactly at the last setpoint sent: the command stops changing at once.
            moving = self.state in (EXECUTING, STOPPING) and self._last is not None
            self._set_motion(hold(now, self._last.positions if moving else cur[0]))
            self.state = HOLDING
        self._continuous = True

    def _deceleration(self, now: float, cur: tuple[np.ndarray, np.ndarray, np.ndarray]
                      ) -> DecelerationStop | RuckigStop:
        """The stop motion from ``cur``: jerk-limited when max_jerk is configured."""
        if self._limits is not None:
            try:
                return RuckigStop(now, cur[0], cur[1], cur[2], self._limits)
            except TrajectoryError as exc:
                self.last_error = f'jerk-limited stop impossible ({exc}); braking at ' \
                    'max_acceleration'
        return DecelerationStop(now, cur[0], cur[1], self._amax)

    def _adopt(self, now: float) -> None:
        if self.config.seam == 'blend':
            self._adopt_blend(now)
            return
        new, self._pending = self._pending, None
        old, self._active = self._active, None
        if old is not None:
            self._end(old, 'PREEMPTED', f'replaced by sequence {new.goal.sequence}', now)
        g = new.goal
        if self.state == EXECUTING and self.motion is not None:
            q, v, a = self.motion.sample(now)
            continuous = True
        else:
            # After a halt (or at start): from the MEASURED positions, never a stale setpoint.
            q = self._measured_start(new, now)
            if q is None:
                return
            v = self.motion.sample(now)[1] if self.state == STOPPING and self.motion else \
                np.zeros(self.n)
            a = np.zeros(self.n)
            continuous = False
        try:
            traj, _ = splice(now, q, v, a, g.times, g.positions, g.velocities,
                             g.accelerations, self.config.interpolation,
                             lead=self.config.blend_time)
        except TrajectoryError as exc:
            self._end(new, exc.code, str(exc), now)
            self._stop(now)
            return
        ratio, j, t = max_speed_ratio(traj, self._vmax, now, self.config.period / 4.0)
        if ratio > 1.0 + STEP_SLACK:
            self._end(new, 'LIMIT_VIOLATED', f'joint {self.config.joints[j]} would move at '
                      f'{ratio:.2f} x its max_velocity {self._vmax[j]:g} rad/s '
                      f'{t - now:.3f} s after the start', now)
            self._stop(now)
            return
        ratio, j, t = max_acceleration_ratio(traj, self._amax, now, self.config.period / 4.0,
                                             self.config.period, v)
        if ratio > 1.0 + STEP_SLACK:
            self._end(new, 'LIMIT_VIOLATED', f'joint {self.config.joints[j]} would accelerate '
                      f'at {ratio:.2f} x its max_acceleration {self._amax[j]:g} rad/s^2 '
                      f'{t - now:.3f} s after the start', now)
            self._stop(now)
            return
        self._active = new
        self._set_motion(traj)
        self.state = EXECUTING
        self._continuous = continuous

    def _measured_start(self, new: _Active, now: float) -> np.ndarray | None:
        """The measured positions a new goal starts from after a halt, or None when there are
        no fresh joint_states (the goal then ends STALE_STATE / NO_STATE and the arm holds)."""
        m = self._measured
        if m is None or now - m.received > self.config.state_timeout:
            self._end(new, 'STALE_STATE' if m else 'NO_STATE',
                      'no fresh joint_states to start from', now)
            self._stop(now)
            return None
        q = m.positions.copy()
        if self._last is not None and self.state in (HOLDING, STOPPING):
            # The arm tracks the hold (or stop) setpoint: a measured start further from it
            # than the tracking tolerance is not this arm's state (issue 24.5).
            held = self.motion.sample(now)[0] if self.motion is not None else \
                self._last.positions
            gap = np.abs(q - held)
            bound = self._path_tol + self.config.start_jump_margin
            over = (self._path_tol > 0.0) & (gap > bound)
            if np.any(over):
                j = int(np.argmax(np.where(over, gap - bound, -np.inf)))
                self._end(new, 'START_JUMP', f'joint {self.config.joints[j]} measures '
                          f'{q[j]:.4f} but holds at {held[j]:.4f}: {gap[j]:.4f} apart, beyond '
                          f'path_tolerance + start_jump_margin {bound[j]:g} (joint_states from '
                          'another source?); holding', now)
                self._stop(now)
                return None
        return q

    def _adopt_blend(self, now: float) -> None:
        """Adopt the pending goal through a jerk-limited join (seam ``blend``).

        While executing, the join starts from the running motion's state; when it cannot be
        done within the limits the new goal ends ``LIMIT_VIOLATED`` and the running goal
        continues unchanged. So it does when the last goal ran out and ended SUCCESSFUL with
        nothing halted since (its deceleration or hold is still being commanded every tick):
        a chunk arriving late continues the command stream, and a refused one leaves the
        stop and hold unchanged. After a halt (cancel, abort, stop) or from idle it starts
        from the measured positions, with the stop motion's velocity and acceleration.

        A join requested off the tick (:meth:`join_request`) is waited for until its takeover
        tick and used there when it is ready and still continues the commanded motion;
        one not ready by then is never used late (the goal stays pending, the running motion
        continues and :attr:`join_wanted` asks for a new one); after a stop meanwhile the
        goal joins here from the measured state.
        """
        req, prepared = self._join, self._prepared
        if self.join_wanted:
            return          # the caller requests a new off-tick join after this tick
        if req is not None:
            if req.generation != self._generation or not self._continues_motion():
                self._drop_join()    # a stop or hold since: join here from the measured state
                self.joins['stale'] += 1
                prepared = None
            elif now < req.takeover:
                return               # the running motion continues until the takeover tick
            elif prepared is None:
                self._drop_join()    # not ready in time: never used late; ask again
                self.joins['stale'] += 1
                self.join_wanted = True
                return
        self._drop_join()
        new, self._pending = self._pending, None
        old = self._active
        g = new.goal
        running = self.state == EXECUTING and self.motion is not None and old is not None
        ran_out = (not running and self.state == HOLDING and self._ran_out and
                   self.motion is not None and self.config.idle_output == 'hold')
        # pending when the running goal was canceled: continues the stream of a decelerating
        # stop (a stop_behavior hold is itself a dead stop: such a goal starts from measured)
        ran_out = ran_out or (not running and self._pending_continues and
                              self.motion is not None and
                              self.config.stop_behavior == 'decelerate' and
                              (self.state == STOPPING or (self.state == HOLDING and
                                                          self.config.idle_output == 'hold')))
        self._pending_continues = False
        if prepared is not None:
            self.joins['prepared'] += 1
            if prepared.error is not None:
                motion, error = None, prepared.error
            else:
                motion, error = prepared.motion, None
        else:
            if running or ran_out:
                q, v, a = self.motion.sample(now)
            else:
                q = self._measured_start(new, now)
                if q is None:
                    return
                if self.state == STOPPING and self.motion is not None:
                    _, v, a = self.motion.sample(now)
                else:
                    v, a = np.zeros(self.n), np.zeros(self.n)
            self.joins['in_tick'] += 1
            try:
                motion, error = join_chunk(
                    now, q, v, a, g.times, g.positions, g.velocities, g.accelerations,
                    self._limits, self.config.blend_time, self.config.max_blend_time,
                    self.config.period / 4.0, self.config.joints,
                    correction=self.config.blend_join == 'correction'), None
            except TrajectoryError as exc:
                motion, error = None, exc
        if error is not None:
            if running:
                self.refused += 1
                self._end(new, error.code, f'refused at the seam, sequence {old.goal.sequence} '
                          f'continues: {error}', now)
                return
            if ran_out:
                self.refused += 1
                self._end(new, error.code, f'refused at the seam, the stop and hold after '
                          f'the last goal continue: {error}', now)
                return
            self._end(new, error.code, str(error), now)
            self._stop(now)
            return
        if old is not None:
            self._active = None
            self._end(old, 'PREEMPTED', f'replaced by sequence {g.sequence}', now)
        self._active = new
        self._set_motion(motion)
        self.state = EXECUTING
        self._continuous = running or ran_out

    def _watchdogs(self, now: float) -> None:
        cfg = self.config
        m = self._measured
        if m is None or now - m.received > cfg.state_timeout:
            age = 'never received' if m is None else f'{now - m.received:.3f} s old'
            self._end(self._active, 'STALE_STATE', f'joint_states {age} (state_timeout '
                      f'{cfg.state_timeout:g} s); holding', now)
            self._active = None
            self._stop(now)
            return
        # The newest goal counts, pending or not: one waiting for its off-tick join's takeover
        # tick has arrived (the policy is alive), it just has not taken over yet.
        newest = self._active.goal.received if self._pending is None else \
            max(self._active.goal.received, self._pending.goal.received)
        if cfg.command_timeout > 0.0 and now - newest > cfg.command_timeout:
            self._end(self._active, 'COMMAND_TIMEOUT', f'no new goal for '
                      f'{now - newest:.3f} s (command_timeout '
                      f'{cfg.command_timeout:g} s); holding', now)
            self._active = None
            self._stop(now)

    def _sample(self, now: float) -> Setpoint | None:
        self._run_continues = False
        if self.motion is None:
            return None
        q, v, a = self.motion.sample(now)
        sp = Setpoint(now, q, v, a)
        checked = self._continuous and self._last is not None and \
            self.state in (EXECUTING, STOPPING)
        # The setpoint before _last belongs to the same unbroken stream only while checked.
        self._run_continues = checked
        if checked:
            msg = self._rate_violation(sp)
            if msg is not None:
                if self._active is not None:
                    self._end(self._active, 'LIMIT_VIOLATED', msg, now)
                    self._active = None
                else:
                    self.last_error = msg
                self._stop(now, at=self._last.positions)
                return Setpoint(now, self._last.positions.copy(), np.zeros(self.n))
        self._continuous = True
        return sp

    def _rate_violation(self, sp: Setpoint) -> str | None:
        """Why ``sp`` would exceed max_velocity or max_acceleration, else None.

        Both are measured on the setpoints as sent, at their own times: the step from the last
        setpoint against max_velocity x dt, and the second divided difference of the last three
        setpoints of one unbroken stream against max_acceleration. The divided difference
        equals a weighted mean of the motion's acceleration over those ticks whatever the tick
        jitter, so a motion within max_acceleration passes and a velocity step does not.
        """
        last, prev = self._last, self._prev
        dt = max(sp.time - last.time, 0.0)
        bound = self._vmax * dt * (1.0 + STEP_SLACK) + 1e-12
        step = np.abs(sp.positions - last.positions)
        if np.any(step > bound):
            j = int(np.argmax(step - bound))
            return (f'setpoint step of joint {self.config.joints[j]} {step[j]:.6f} exceeds '
                    f'max_velocity x dt {bound[j]:.6f}; holding')
        if prev is None or not (prev.time < last.time < sp.time):
            return None
        h1, h2 = last.time - prev.time, sp.time - last.time
        acc = 2.0 * ((sp.positions - last.positions) / h2 -
                     (last.positions - prev.positions) / h1) / (h1 + h2)
        # Floating point only: each position is a sample at a time rounded to the clock's
        # resolution (np.spacing of the steady-clock value) and itself rounded.
        dq = 4.0 * (np.spacing(sp.time) * self._vmax +
                    np.spacing(np.maximum(np.abs(sp.positions), 1.0)))
        slack = 4.0 * dq / (min(h1, h2) * (h1 + h2))
        excess = np.abs(acc) - self._amax * (1.0 + STEP_SLACK) - slack
        if not np.any(excess > 0.0):
            return None
        j = int(np.argmax(excess / self._amax))
        return (f'setpoint acceleration of joint {self.config.joints[j]} {acc[j]:.6g} exceeds '
                f'its max_acceleration {self._amax[j]:g} (rad/s^2 or m/s^2; measured on the '
                f'last three setpoints); holding')

    def _check_position_limits(self, now: float, sp: Setpoint) -> Setpoint:
        """Every moving setpoint within the position limits, else LIMIT_VIOLATED and hold at
        the previous setpoint (never clamped to the limit)."""
        cfg = self.config
        if self.position_limits is None or self.state not in (EXECUTING, STOPPING):
            return sp
        lo, hi = self.position_limits
        over = np.maximum(lo - sp.positions, sp.positions - hi)
        if not np.any(over > 0.0):
            return sp
        j = int(np.argmax(over))
        msg = (f'setpoint of joint {cfg.joints[j]} {sp.positions[j]:.6f} is beyond its '
               f'position limit [{lo[j]:g}, {hi[j]:g}] ({self.limits_source}); holding')
        if self._active is not None:
            self._end(self._active, 'LIMIT_VIOLATED', msg, now)
            self._active = None
        else:
            self.last_error = msg
        at = self._last.positions if self._last is not None else sp.positions
        self._stop(now, at=at)
        return Setpoint(now, at.copy(), np.zeros(self.n))

    def _check_tracking(self, now: float, sp: Setpoint) -> Setpoint:
        a = self._active
        m = self._measured
        err = np.abs(m.positions - sp.positions)
        active = self._path_tol > 0.0
        if now < self.motion.end_time and np.any(active & (err > self._path_tol)):
            j = int(np.argmax(np.where(active, err - self._path_tol, -np.inf)))
            self._end(a, 'PATH_TOLERANCE_VIOLATED', f'joint {self.config.joints[j]} is '
                      f'{err[j]:.4f} from the setpoint (path_tolerance '
                      f'{self._path_tol[j]:g}); holding at the measured position', now)
            self._active = None
            self._stop(now, at=m.positions)
            return Setpoint(now, m.positions.copy(), np.zeros(self.n))
        if now >= self.motion.end_time:
            final = self.motion.sample(self.motion.end_time)[0]
            gerr = np.abs(m.positions - final)
            gactive = self._goal_tol > 0.0
            if not np.any(gactive & (gerr > self._goal_tol)):
                self._end(a, 'SUCCESSFUL', f'sequence {a.goal.sequence} from '
                          f'{a.goal.source or "?"} reached the goal', now)
                self._active = None
                self.state = HOLDING
                self._ran_out = True
            elif now > self.motion.end_time + self.config.goal_time_tolerance:
                j = int(np.argmax(np.where(gactive, gerr - self._goal_tol, -np.inf)))
                self._end(a, 'GOAL_TOLERANCE_VIOLATED', f'joint {self.config.joints[j]} is '
                          f'{gerr[j]:.4f} from the goal (goal_tolerance {self._goal_tol[j]:g}) '
                          f'{self.config.goal_time_tolerance:g} s after the end; holding', now)
                self._active = None
                self.state = HOLDING
        return sp
