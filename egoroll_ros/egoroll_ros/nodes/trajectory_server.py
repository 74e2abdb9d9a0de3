"""trajectory_server: the ExecuteTrajectory action server and its control loop.

A thin shell around :mod:`egoroll_ros.core.executor`. Invalid goals are ACCEPTED and then
aborted at once with their error code and message (rclpy's goal callback can only accept or
reject, without a reason, so a rejection could not tell the client why). A rejected goal never
affects the running one.

Threads: a dedicated control thread ticks the core on absolute ``time.monotonic()`` deadlines
and publishes each setpoint while holding the same lock the cancel callback takes, so once a
cancel has been processed (and before its result is sent) no setpoint of the old trajectory can
go out. The node spins on ONE executor thread (rclpy's multi-threaded executor delayed
joint_states by up to 0.25 s on a loaded 2-core machine: benchmarks/bench_executors.py).
Execute callbacks are coroutines: each awaits its goal's outcome, a future the control thread
completes (and then wakes the executor).

Seam ``blend`` joins a new goal off the control tick: on acceptance the server predicts the
control tick at which the new motion takes over (the next tick of the control grid after the
join's recent latency), the core samples the running (deterministic) motion there, and the
``seam_joiner`` thread computes the Ruckig join without the lock; the tick only switches to the
ready motion. A join not ready by its takeover tick is never used late: the running goal
continues and the join is requested again for a later tick, with the lead grown to the latency
just seen; after a stop meanwhile the goal joins in the tick from the measured state, as after
any halt (core/executor.py, ``ExecutorCore.join_request``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import os
import sys
import threading
import time

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_interfaces.msg import ExecutorState, InterlockHeartbeat
from egoroll_ros.core.auth import HeartbeatAuthenticator, key_id, load_key
from egoroll_ros.core.clock_offset import ClockOffset
from egoroll_ros.core.command_interface import command_order
from egoroll_ros.core.executor import (
    BLEND_JOINS,
    CODES,
    EXECUTING,
    HOLDING,
    IDLE_OUTPUTS,
    SEAMS,
    STOP_BEHAVIORS,
    STOPPING,
    ExecutorConfig,
    ExecutorCore,
    JoinRequest,
    Outcome,
    PreparedJoin,
    Setpoint,
    TickResult,
    source_error,
    validate_goal,
)
from egoroll_ros.core.joint_state_vetting import Vetting
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.trajectory import INTERPOLATIONS
from egoroll_ros.core.types import JointStateData
from egoroll_ros.errors import ConfigError, InputError, TrajectoryError
from egoroll_ros.ros.auth import verify_goal, verify_heartbeat
from egoroll_ros.ros.controller_params import controller_joints
from egoroll_ros.ros.convert import (
    ns_to_time,
    sec_to_duration,
    steady_to_ros_ns,
    trajectory_from_msg,
)
from egoroll_ros.ros.diagnostics import ERROR, OK, WARN, DiagnosticsUpdater, TaskStatus
from egoroll_ros.ros.joint_states import WRITER_IDS, VettedJointStates
from egoroll_ros.ros.params import Param, declare_params, per_joint
from egoroll_ros.ros.robot_models import RobotModelProvider
from egoroll_ros.ros.runner import run_node, wake_executor

#: GIL switch interval (s) set by ``main`` (Python's default is 5 ms).
SWITCH_INTERVAL = 0.0002

COMMAND_INTERFACES = ('joint_state', 'float64_multi_array', 'joint_trajectory')

#: The executor's defaults, from its core config: one definition (issue 24.3).
_D = {f.name: list(f.default) if isinstance(f.default, tuple) else f.default
      for f in dataclasses.fields(ExecutorConfig) if f.default is not dataclasses.MISSING}

PARAMS = [
    Param('joints', 'str[]', None, 'Controlled joints, in command order.', read_only=True),
    Param('control_rate', float, _D['control_rate'], 'Setpoint rate of the control loop (Hz).',
          min=1.0, max=1000.0, read_only=True),
    Param('command_interface', str, 'joint_state',
          'Type on `command`: joint_state (sensor_msgs/JointState stream), float64_multi_array '
          '(std_msgs/Float64MultiArray stream) or joint_trajectory (forward the spliced '
          'trajectory to a joint_trajectory_controller).', choices=COMMAND_INTERFACES,
          read_only=True),
    Param('command_joints', 'str[]', [], "Joint order of `command` (the controller's `joints` "
          'parameter: Float64MultiArray values come in this order); the same joints as '
          '`joints`, else refused; empty = the order of `joints`, or with controller_node '
          "the controller's own. With controller_node it is only a cross-check: any difference "
          "from the controller's `joints` refuses to start.", read_only=True),
    Param('controller_node', str, '', 'The ros2_control controller node driven through '
          '`command` (float64_multi_array / joint_trajectory; relative names resolve in this '
          "node's namespace): at start its own `joints` parameter is read (get_parameters) and "
          'is the command order; a controller that does not answer within controller_timeout, '
          'or whose joints are not the same set as `joints`, refuses to start. Empty: the order '
          'is not read from the controller (a warning is logged; the launch files set it from '
          'their controller argument).', read_only=True),
    Param('controller_timeout', float, 10.0, 'Seconds to wait at start for controller_node to '
          'answer.', min=0.1, max=120.0, read_only=True),
    Param('state_timeout', float, _D['state_timeout'],
          'Max age of joint_states (s, steady clock) to accept '
          'a goal or keep executing.', min=0.001, max=10.0, read_only=True),
    Param('command_timeout', float, _D['command_timeout'],
          'Max time between goals while executing (s): a '
          'dead policy or gate stops the arm after this; 0 = off (a warning is logged). '
          'Chunks arrive at 5-30 Hz; a single goal longer than this is cut short.', min=0.0,
          max=3600.0, read_only=True),
    Param('max_future_stamp', float, _D['max_future_stamp'],
          "Most seconds a goal's header.stamp may lie ahead of "
          "this node's ROS clock; further: refused FUTURE_STAMP, so a goal from before a "
          '/clock that jumped back (use_sim_time, a bag replay restarted) never runs late. '
          '0 = off (a warning is logged).', min=0.0, max=60.0, read_only=True),
    Param('heartbeat_timeout', float, _D['heartbeat_timeout'],
          "Max age (s, steady clock) of the safety gate's "
          'interlock heartbeat (safety/heartbeat): older aborts the goal (HEARTBEAT_LOST) and '
          'holds, and new goals are refused. 0 = not supervised (a warning is logged).',
          min=0.0, max=10.0, read_only=True),
    Param('allowed_sources', 'str[]', ['safety_gate'], "Goal sources accepted (a goal's "
          "`source` must equal one; names without a leading / are in this node's namespace); "
          'others end SOURCE_REFUSED. The gate sends its node name. This stops mistakes, not '
          'attackers (use SROS2: docs/executor.md). Empty: any source (a warning is logged).',
          read_only=True),
    Param('auth_key_file', str, '', "The robot half's shared key (core/auth.py), the safety "
          "gate's auth_key_file: only goals and heartbeats whose HMAC verifies under it are "
          'acted on, and replays are refused (AUTH_FAILED; a refused heartbeat is ignored). '
          "Mode 0600, owned by this user. Empty: the user's default key "
          '($XDG_RUNTIME_DIR/egoroll/auth.key, created on first use); the launch files give a '
          'fresh key per launch. What this does not cover: docs/executor.md.', read_only=True),
    Param('urdf_path', str, '', 'URDF file whose joint limits bound every setpoint (the '
          "safety gate's; package:// allowed); empty: the robot_description topic.",
          read_only=True),
    Param('position_lower', 'float[]', _D['position_lower'],
          'Per-joint lowest position any setpoint may have '
          '(rad or m). Empty with position_upper: the URDF limits; given: they replace the '
          "URDF's and must lie within them (a robot model they exceed is refused). A setpoint "
          'beyond aborts the goal LIMIT_VIOLATED and holds (never clamped).', read_only=True),
    Param('position_upper', 'float[]', _D['position_upper'],
          'Per-joint highest position any setpoint may have '
          '(rad or m); see position_lower.', read_only=True),
    Param('require_position_limits', bool, _D['require_position_limits'],
          'Refuse goals (NO_ROBOT_MODEL) while no '
          'position limits are known (no robot model yet and no position_lower/_upper). '
          'false: goals run unchecked meanwhile (a warning is logged).', read_only=True),
    Param('control_thread_priority', int, 0, 'SCHED_FIFO priority (1-99) of the control '
          "thread, as ros2_control's controller_manager thread_priority: the loop then runs "
          'ahead of every normal process on a loaded machine; 0 = normal scheduling. When the '
          'system refuses it (no CAP_SYS_NICE / rtprio limit) a warning is logged and the loop '
          'runs normally.', min=0, max=99, read_only=True),
    Param('max_late_ticks', int, _D['max_late_ticks'],
          'Consecutive missed control deadlines that abort the goal '
          '(DEADLINE_MISSED) and hold; 0 = off (a warning is logged).', min=0, max=100000,
          read_only=True),
    Param('stall_timeout', float, _D['stall_timeout'],
          'One gap of at least this (s) between two control '
          'ticks (the process was stopped or starved) aborts the goal (STALLED) and holds; the '
          'safety gate then stops the rollout, so a hung executor never resumes motion by '
          'itself. 0 = off (a warning is logged).', min=0.0, max=60.0, read_only=True),
    Param('path_tolerance', 'float[]', None,
          'Per-joint max |measured - setpoint| while executing (rad or m), one value per '
          'joint: beyond it the goal aborts PATH_TOLERANCE_VIOLATED and the arm holds; it also '
          'bounds the start after a halt (start_jump_margin). Required: the tracking error is '
          "the robot's to state; 0 leaves a joint unchecked (a warning is logged).", min=0.0,
          read_only=True),
    Param('start_jump_margin', float, _D['start_jump_margin'],
          'rad (m): after a halt, a goal starts from the '
          'measured positions only when each lies within path_tolerance + this of the hold '
          'setpoint (joints with a path tolerance; the others are listed unchecked in '
          '/diagnostics), else START_JUMP and the arm holds: a larger gap means joint_states '
          'changed source (a second publisher, a replay) and the start would jump.', min=0.0,
          max=0.1, read_only=True),
    Param('goal_tolerance', 'float[]', _D['goal_tolerance'],
          'Per-joint max |measured - final point| at the end '
          '(rad or m); 0 = unchecked; empty = all unchecked.', min=0.0, read_only=True),
    Param('goal_time_tolerance', float, _D['goal_time_tolerance'],
          'How long after the last point to wait for the '
          'goal tolerance (s).', min=0.0, max=60.0, read_only=True),
    Param('max_velocity', 'float[]', None, 'Per-joint max setpoint speed (rad/s or m/s).',
          min=1e-6, read_only=True),
    Param('max_acceleration', 'float[]', None, 'Per-joint max setpoint acceleration (rad/s^2 '
          'or m/s^2): checked on the spliced trajectory before it runs and on every setpoint '
          'sent (second divided difference; LIMIT_VIOLATED and hold, never clamped); also the '
          'deceleration of stop_behavior decelerate.', min=1e-6, read_only=True),
    Param('stop_behavior', str, _D['stop_behavior'],
          'On cancel or abort: hold the current setpoint, or '
          'decelerate at max_acceleration.', choices=STOP_BEHAVIORS, read_only=True),
    Param('idle_output', str, _D['idle_output'],
          'When not executing: keep publishing the hold setpoint, '
          'or go silent.', choices=IDLE_OUTPUTS, read_only=True),
    Param('interpolation', str, _D['interpolation'],
          'auto (quintic with accelerations, else cubic), '
          'linear, cubic or quintic.', choices=INTERPOLATIONS, read_only=True),
    Param('blend_time', float, _D['blend_time'],
          'When a goal is adopted, its points due within this many '
          'seconds are dropped like past points, so the blend from the current setpoint into '
          'the new path lasts at least this long (s); 0: only past points are dropped. seam '
          'blend: the shortest join (> 0).',
          min=0.0, max=1.0, read_only=True),
    Param('seam', str, _D['seam'], 'How a new goal replaces the running one: splice (from the '
          'current setpoint into its points, no jerk bound; one that needs more than '
          'max_acceleration is refused) or blend (a '
          'jerk-limited join in position, velocity and acceleration within max_velocity, '
          'max_acceleration and max_jerk, lasting blend_time..max_blend_time; a goal that '
          'cannot be joined so is refused and the running one continues).', choices=SEAMS,
          read_only=True),
    Param('max_jerk', 'float[]', _D['max_jerk'],
          'Per-joint max jerk of the setpoints (rad/s^3 or m/s^3); '
          "required for seam blend (also bounds the decelerating stop's jerk).", min=1e-6,
          read_only=True),
    Param('max_blend_time', float, _D['max_blend_time'],
          'seam blend: longest join into a new goal (s); a goal '
          'that cannot be joined within it is refused.', min=0.001, max=5.0, read_only=True),
    Param('blend_join', str, _D['blend_join'], 'seam blend, the join preferred at each join time: '
          "correction (the new goal's own path plus a quintic correction fading from the "
          'running state to zero, so the change of velocity is spread over the join; Ruckig '
          'where that would exceed the limits) or ruckig (always the time-optimal Ruckig join: '
          'bursts at the jerk limit, coasting in between).', choices=BLEND_JOINS,
          read_only=True),
    Param('trajectory_horizon', float, 0.3, 'command_interface joint_trajectory: the '
          'controller is sent only the next this-many seconds of the motion while executing, '
          'again every third of it, so a dead, stopped or starved executor leaves at most this '
          'much motion queued in the controller (it then holds the last point, as a '
          "joint_trajectory_controller does at a trajectory's end). Stops are sent whole.",
          min=0.05, max=2.0, read_only=True),
    Param('feedback_rate', float, 20.0, 'Action feedback rate (Hz).', min=0.1, max=1000.0,
          read_only=True),
    Param('planned_rate', float, 10.0, 'Rate of executor/planned (Hz).', min=0.1, max=1000.0,
          read_only=True),
    Param('state_rate', float, 100.0, 'Rate of executor/state (Hz; at most control_rate): '
          'the commanded position, velocity and acceleration and the running chunk (read by '
          "policy_node's real-time chunking).", min=0.1, max=1000.0,
          read_only=True),
    Param('diagnostics_rate', float, 1.0, 'Rate of /diagnostics (Hz).', min=0.01, max=100.0,
          read_only=True),
]


class _Waiter:
    def __init__(self, handle: object) -> None:
        self.handle = handle
        #: The goal's outcome (None: the server shut down before the goal had one).
        self.done: Future = Future()


class TrajectoryServer(Node):
    """The ``execute_trajectory`` action server (see the module docstring)."""

    def __init__(self, node_name: str = 'trajectory_server', **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        p = declare_params(self, PARAMS)
        self.p = p            # the values in effect (an empty list is one: rclpy leaves it unset)
        self._horizon = float(p['trajectory_horizon'])
        self._horizon_sent = float('-inf')     # steady time of the last forwarded trajectory
        joints = tuple(p['joints'])
        for name in ('max_velocity', 'max_acceleration', 'path_tolerance'):
            per_joint(p[name], joints, name)
        for name in ('goal_tolerance', 'max_jerk'):
            if p[name]:
                per_joint(p[name], joints, name)
        self.config = ExecutorConfig.from_params(p)
        self._priority = int(p['control_thread_priority'])
        self.interface = p['command_interface']
        self._controller_joints = self._read_controller_joints(p)
        self._order = command_order(joints, self._controller_joints or p['command_joints'])
        self._command_joints = [joints[i] for i in self._order]
        rate = self.config.control_rate
        self._feedback_every = max(1, round(rate / p['feedback_rate']))
        self._planned_every = max(1, round(rate / p['planned_rate']))
        self._state_every = max(1, round(rate / p['state_rate']))

        self.core = ExecutorCore(self.config)
        self._lock = threading.Lock()
        self._waiters: dict[bytes, _Waiter] = {}
        self._submitted: set[bytes] = set()  # goals handed to the core
        self._early_cancel: set[bytes] = set()  # canceled before their execute callback ran
        self._clock_offset = ClockOffset()
        # Off-tick joins (seam blend): the control grid (t0, period) once the loop runs, the
        # latest request for the joiner thread (with the time it was made) and the recent
        # request-to-offer latencies that set the takeover lead.
        self._grid: tuple[float, float] | None = None
        self._join_cv = threading.Condition()
        self._join_next: tuple[JoinRequest, float] | None = None
        self._join_asked = 0.0
        self._join_latency: collections.deque[float] = collections.deque(maxlen=16)

        cmd_type = {'joint_state': JointState, 'float64_multi_array': Float64MultiArray,
                    'joint_trajectory': JointTrajectory}[self.interface]
        self._command_pub = self.create_publisher(cmd_type, 'command', 10)
        self._commanded_pub = self.create_publisher(JointState, 'executor/commanded', 10)
        self._planned_pub = self.create_publisher(JointState, 'executor/planned', 10)
        self._state_pub = self.create_publisher(ExecutorState, 'executor/state', 10)
        self._diagnostics = DiagnosticsUpdater(self, 1.0 / p['diagnostics_rate'])
        self._diagnostics.add('executor', self._executor_status)
        self._joint_states = VettedJointStates(self, self.config.joints, self._on_joint_states,
                                               lambda _vetting: None, qos_profile_sensor_data)
        # A stream that went silent with its publisher matched is subscribed to again (a
        # SIGSTOP of this process can leave the reader behind: ros/joint_states.py).
        silent = max(1.0, 2.0 * self.config.state_timeout)
        self.create_timer(0.5, lambda: self._joint_states.revive(silent),
                          clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._gate_model_hash: str | None = None    # the latest honoured heartbeat's
        self._heartbeat_sub = self.create_subscription(
            InterlockHeartbeat, 'safety/heartbeat', self._on_heartbeat,
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        # Only the gate's goals and heartbeats (core/auth.py): verified before anything acts
        # on them, replays refused.
        key, self._auth_path = load_key(p['auth_key_file'])
        self._auth_key_id = key_id(key)
        self._auth = HeartbeatAuthenticator(key, p['heartbeat_timeout'])
        self.get_logger().info(f'acting only on goals and heartbeats signed with '
                               f'{self._auth_path} (key {self._auth_key_id})')
        ns = self.get_namespace().rstrip('/')
        self._allowed = {s if s.startswith('/') else f'{ns}/{s}'
                         for s in p['allowed_sources']}
        if not self._allowed:
            self.get_logger().warning("parameter 'allowed_sources' is empty: goals from any "
                                      'node are executed')
        self._checks_off: list[str] = []     # /diagnostics disabled_checks (issue 24.4)
        for name, what in (('command_timeout', 'a dead policy or gate does not stop the arm'),
                           ('max_future_stamp', 'a goal stamped ahead of the clock (one from '
                            'before /clock jumped back) runs when its time comes'),
                           ('heartbeat_timeout', 'the safety gate is not supervised: a dead '
                            'gate does not stop the arm'),
                           ('max_late_ticks', 'missed control deadlines only count'),
                           ('stall_timeout', 'a hung executor resumes its goal when it runs '
                            'again'),
                           ('require_position_limits', 'setpoints go unchecked against '
                            'position limits until a robot model arrives')):
            if not p[name]:
                self.get_logger().warning(f"parameter '{name}' is {p[name]} (off): {what}")
                self._checks_off.append(name)
        if not self._allowed:
            self._checks_off.append('allowed_sources')
        if self.interface != 'joint_state' and not self._controller_joints:
            self._checks_off.append('controller_joints')
        if not WRITER_IDS:
            self._checks_off.append('joint_states_second_publisher')
        for name, what in (('path_tolerance', 'tracking error while executing'),
                           ('goal_tolerance', "the position reached at a goal's end")):
            unchecked = [j for i, j in enumerate(joints) if not p[name] or not p[name][i]]
            if unchecked:
                self.get_logger().warning(f"parameter '{name}': {what} is unchecked on "
                                          f"{', '.join(unchecked)}")
                which = '' if len(unchecked) == len(joints) else f"({' '.join(unchecked)})"
                self._checks_off.append(name + which)
                if name == 'path_tolerance':      # the start-jump bound is built on it
                    self._checks_off.append('start_jump' + which)
        self._model_source = p['urdf_path'] or 'robot_description'
        self._models = RobotModelProvider(self, p['urdf_path'], self._set_model,
                                          self._model_failed, on_refused=self._model_refused)
        self._action = ActionServer(
            self, ExecuteTrajectory, 'execute_trajectory',
            execute_callback=self._execute, goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=self._on_cancel)

        self._running = True
        self._joiner = threading.Thread(target=self._join_loop, name='seam_joiner', daemon=True)
        if self.config.seam == 'blend':
            self._joiner.start()
        self._thread = threading.Thread(target=self._control_loop, name='control_loop',
                                        daemon=True)
        self._thread.start()
        self.get_logger().info(
            f'executing on {len(joints)} joints at {rate:g} Hz, command interface '
            f'{self.interface} in the order {self._command_joints}, stop '
            f'{self.config.stop_behavior}')

    def _read_controller_joints(self, p: dict) -> list[str]:
        """The controller's own ``joints`` (controller_node), cross-checked with
        command_joints; [] without a controller node. Raises ConfigError (no start)."""
        name = p['controller_node']
        if not name:
            if self.interface != 'joint_state':
                self.get_logger().warning(
                    f"parameter 'controller_node' is empty: the {self.interface} command order "
                    "is not read from the controller (command_joints, or joints, is trusted)")
            return []
        if self.interface == 'joint_state':
            raise ConfigError("parameter 'controller_node': a ros2_control controller takes "
                              'float64_multi_array or joint_trajectory, not joint_state')
        found = controller_joints(self, name, p['controller_timeout'])
        given = list(p['command_joints'])
        if given and given != found:
            raise ConfigError(f"parameter 'command_joints' {given} disagrees with controller "
                              f"{name!r}'s own joints {found} (order and set must match)")
        self.get_logger().info(f'command order from controller {name!r}: {found}')
        return found

    # ----- inputs -------------------------------------------------------------------------
    def _on_joint_states(self, js: JointStateData, _vetting: Vetting) -> None:
        """An accepted joint_states message (ros/joint_states.py); a refused one never
        reaches the core, whose state then ages (STALE_STATE after state_timeout)."""
        try:
            pos, vel = js.select(self.config.joints)
        except InputError as exc:
            self.get_logger().warning(f'joint_states ignored: {exc}', once=True)
            return
        with self._lock:
            self.core.update_measured(pos, vel, js.received)

    def _on_heartbeat(self, msg: InterlockHeartbeat) -> None:
        now = time.monotonic()
        with self._lock:
            refused = verify_heartbeat(self._auth, now, msg)
            if refused is not None:
                # Ignored: it neither feeds the heartbeat watchdog nor changes the interlock
                # state or the fence (counted and shown in /diagnostics).
                self.get_logger().warning(f'heartbeat {msg.counter} (boot {msg.boot_id:x}) '
                                          f'ignored: {refused}', throttle_duration_sec=1.0)
                return
            allowed, state = bool(msg.motion_allowed), msg.state
            self._gate_model_hash = msg.robot_model_sha256
            mismatch = self._model_mismatch(msg.robot_model_sha256)
            if mismatch is not None:
                # Never run on other joint limits than the gate checked against: the gate's
                # word becomes "not allowed" (goals refused, a running one halted INTERLOCK).
                allowed, state = False, mismatch
                self.get_logger().error(f'{mismatch}: every goal is refused',
                                        throttle_duration_sec=5.0)
            stopped = self.core.update_heartbeat(now, allowed, state,
                                                 int(msg.fence_sequence), int(msg.counter))
            if stopped and self.interface == 'joint_trajectory' and \
                    self.core.motion is not None:
                # As on a cancel: the downstream controller gets the stop motion now.
                self._command_pub.publish(self._forward_msg(
                    now, self.get_clock().now().nanoseconds))
            outcomes = self.core.take_outcomes()
        self._dispatch(outcomes)

    def _model_mismatch(self, gate_hash: str) -> str | None:
        """Why the gate's robot model (its heartbeat's hash) is not this executor's, or None
        when they agree or this executor has no model to compare (then it is not checking
        position limits either, and /diagnostics says so). Caller holds the lock."""
        own = self._models.model_hash
        if not own or gate_hash == own:
            return None
        return (f"robot_model_mismatch: the safety gate checks against robot model "
                f"{gate_hash[:12] or '(none)'}, this executor's is {own[:12]} (give both the "
                'same urdf_path or robot_description)')

    def _set_model(self, model: RobotModel) -> None:
        urdf = {name: (info.lower, info.upper) for name, info in model.joints.items()}
        with self._lock:
            self.core.set_urdf_limits(urdf, model.source, time.monotonic())
            outcomes = self.core.take_outcomes()
            problem = self.core.supervision_error(time.monotonic())
        self._dispatch(outcomes)
        if problem is not None and problem.code == 'NO_ROBOT_MODEL':
            self.get_logger().error(f'{problem}; every goal is refused')
        else:
            self.get_logger().info(f'position limits from {self.core.limits_source}')

    def _model_refused(self, why: str) -> None:
        """A different robot_description after the limits were fixed: never applied (the
        gate latches its fault if a rollout is armed)."""
        self.get_logger().error(f'robot model: {why}')

    def _model_failed(self, error: str) -> None:
        with self._lock:
            self.core.set_urdf_limits(None, self._model_source, time.monotonic(), error)
            outcomes = self.core.take_outcomes()
        self._dispatch(outcomes)
        self.get_logger().error(f'invalid robot model, every goal is refused: {error}')

    async def _execute(self, goal_handle) -> ExecuteTrajectory.Result:  # noqa: ANN001
        key = bytes(goal_handle.goal_id.uuid)
        req = goal_handle.request
        try:
            traj = trajectory_from_msg(req.trajectory)
            with self._lock:
                if key in self._early_cancel:
                    self._early_cancel.discard(key)
                    raise TrajectoryError('CANCELED', 'canceled before it started')
                goal = validate_goal(
                    traj, int(req.sequence), req.source, config=self.config,
                    last_sequence=self.core.last_sequence,
                    ros_now=self.get_clock().now().nanoseconds * 1e-9,
                    mono_now=time.monotonic(), measured=self.core.measured)
                refusal = source_error(req.source, self._allowed)
                if refusal is None:
                    why = verify_goal(self._auth, time.monotonic(), req)
                    if why is not None:
                        refusal = TrajectoryError('AUTH_FAILED', why)
                if refusal is None and self._gate_model_hash is not None:
                    mismatch = self._model_mismatch(self._gate_model_hash)
                    if mismatch is not None:
                        refusal = TrajectoryError('INTERLOCK', mismatch)
                refusal = refusal or self.core.admission_error(time.monotonic(), goal.sequence)
                if refusal is not None:
                    raise refusal
                waiter = _Waiter(goal_handle)
                self._waiters[key] = waiter
                self.core.submit(goal, key, int(req.heartbeat_counter))
                self._submitted.add(key)
                self._request_join(time.monotonic())
        except TrajectoryError as exc:
            if exc.code == 'CANCELED':
                self._finish_canceled(goal_handle)
                return ExecuteTrajectory.Result(error_code=CODES['CANCELED'],
                                                error_string=f'CANCELED: {exc}')
            self.get_logger().warning(f'goal sequence {req.sequence} from '
                                      f'{req.source or "?"} refused: {exc.code}: {exc}')
            with self._lock:
                self.core.last_error = f'sequence {req.sequence}: {exc.code}: {exc}'
            goal_handle.abort()
            return ExecuteTrajectory.Result(error_code=CODES.get(exc.code, -1),
                                            error_string=f'{exc.code}: {exc}')
        out = await waiter.done
        if out is None:
            out = Outcome(key, 'SHUTDOWN', 'the server is shutting down', 0, goal.sequence)
        result = ExecuteTrajectory.Result(error_code=CODES[out.code],
                                          error_string=f'{out.code}: {out.message}',
                                          points_executed=out.points_executed)
        try:
            if out.code == 'SUCCESSFUL':
                goal_handle.succeed()
            elif out.code == 'CANCELED':
                self._finish_canceled(goal_handle)
            else:
                goal_handle.abort()
        except Exception as exc:  # noqa: BLE001 - shutdown races; the result is still returned
            self.get_logger().debug(f'could not set the goal state: {exc}')
        return result

    def _finish_canceled(self, goal_handle) -> None:  # noqa: ANN001
        """End a goal whose cancel :meth:`_on_cancel` accepted as CANCELED.

        The goal is CANCELING by now, without waiting: rclpy's ActionServer moves it there
        right after the cancel callback returns ACCEPT, in the same step of the cancel task
        (``_execute_cancel_request``: the callback, then ``_update_state(CANCEL_GOAL)``, no
        await between; rclpy 7.1.6 and 9.1.2 alike), and this goal's coroutine resumes only on
        the node's one executor thread, so never in between. A CANCELED outcome (and an early
        cancel) comes only from a cancel that callback accepted. rclpy has no event for the
        CANCELING state, so on an executor with several threads the goal could still be
        EXECUTING here: it is then aborted (its result still says CANCELED), with an error.
        """
        try:
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                self.get_logger().error(
                    'a canceled goal is not CANCELING yet (the node spins on several executor '
                    'threads; it needs one): ended ABORTED, its result says CANCELED')
                goal_handle.abort()
        except Exception as exc:  # noqa: BLE001 - shutdown races; the result is still returned
            self.get_logger().debug(f'could not set the goal state: {exc}')

    def _on_cancel(self, goal_handle) -> CancelResponse:  # noqa: ANN001
        key = bytes(goal_handle.goal_id.uuid)
        with self._lock:
            now = time.monotonic()
            ok = self.core.cancel(key, now)
            if ok and self.interface == 'joint_trajectory' and self.core.motion is not None:
                # A downstream controller keeps running the old trajectory until told
                # otherwise: forward the stop motion before the cancel (and its result) is
                # acknowledged, not at the next tick.
                self._command_pub.publish(self._forward_msg(
                    now, self.get_clock().now().nanoseconds))
            if not ok and key not in self._submitted:
                # Its execute callback has not run yet: it will end CANCELED without moving.
                self._early_cancel.add(key)
                ok = True
            outcomes = self.core.take_outcomes()
        self._dispatch(outcomes)
        wake_executor(self)   # the goal's coroutine resumes (after rclpy sets CANCELING)
        return CancelResponse.ACCEPT if ok else CancelResponse.REJECT

    def _dispatch(self, outcomes: list[Outcome]) -> None:
        for out in outcomes:
            waiter = self._waiters.pop(out.key, None)
            self._submitted.discard(out.key)
            if out.code not in ('SUCCESSFUL', 'PREEMPTED', 'CANCELED'):
                self.get_logger().warning(f'goal sequence {out.sequence} ended {out.code}: '
                                          f'{out.message}')
            if waiter is not None and not waiter.done.done():
                waiter.done.set_result(out)
        if outcomes:
            wake_executor(self)

    # ----- off-tick joins (seam blend) ---------------------------------------------------
    def _join_lead(self) -> float:
        """How far ahead of now the takeover tick is put: 1.5x the longest of the recent
        request-to-offer latencies, at least two control periods (20 ms before any)."""
        period = self.config.period
        if not self._join_latency:
            return max(2.0 * period, 0.02)
        return max(2.0 * period, 1.5 * max(self._join_latency))

    def _request_join(self, now: float) -> None:
        """Ask the core for an off-tick join of the pending goal at a predicted control tick
        and hand it to the joiner thread (called with the lock held)."""
        if self.config.seam != 'blend' or self._grid is None:
            return
        t0, period = self._grid
        k = math.ceil((now + self._join_lead() - t0) / period)
        req = self.core.join_request(t0 + k * period)   # the control loop's own deadline
        if req is None:
            return
        with self._join_cv:
            self._join_next = (req, now)
            self._join_asked = now
            self._join_cv.notify()

    def _join_loop(self) -> None:
        """The seam_joiner thread: compute each requested join without the lock, offer it."""
        while True:
            with self._join_cv:
                while self._join_next is None and self._running:
                    self._join_cv.wait()
                if not self._running:
                    return
                (req, asked), self._join_next = self._join_next, None
            try:
                prepared = req.compute()
            except Exception as exc:  # noqa: BLE001 - fail closed: the new goal is refused
                prepared = PreparedJoin(req, None, TrajectoryError(
                    'INVALID_GOAL', f'the join failed: {type(exc).__name__}: {exc}'))
            with self._lock:   # (the latencies are read and written under the lock only)
                self.core.offer_join(prepared)
                self._join_latency.append(time.monotonic() - asked)

    # ----- the control loop ---------------------------------------------------------------
    def _realtime(self) -> None:
        """Put the calling (control) thread on SCHED_FIFO at ``control_thread_priority``."""
        if self._priority <= 0:
            return
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self._priority))
        except (OSError, AttributeError) as exc:
            self.get_logger().warning(
                f"parameter 'control_thread_priority' {self._priority}: SCHED_FIFO refused "
                f'({exc}); the control loop runs with normal scheduling and can be starved '
                'by other processes (late ticks, DEADLINE_MISSED)')
            return
        self.get_logger().info(f'control thread on SCHED_FIFO priority {self._priority}')

    def _control_loop(self) -> None:
        self._realtime()
        period = self.config.period
        t0 = time.monotonic()
        with self._lock:
            self._grid = (t0, period)
        k = 0
        while self._running:
            deadline = t0 + k * period
            delay = deadline - time.monotonic()
            if delay > 0.0:
                time.sleep(delay)
            now = time.monotonic()
            missed = int((now - deadline) / period)
            if missed >= 1:
                k += missed
                deadline = t0 + k * period
            k += 1
            try:
                self._tick(deadline, now, missed)
            except Exception as exc:  # noqa: BLE001 - the loop must survive; reported
                if not self.context.ok() or not self._running:
                    return  # shutting down
                self.get_logger().warning(
                    f'control tick failed: {type(exc).__name__}: {exc}', once=True)

    def _ros_ns_of(self, t: float) -> int:
        """ROS-clock time (integer ns) of steady-clock time ``t``, through one offset
        (core/clock_offset.py: re-read every tick, taken again only on a clock jump). In
        integer nanoseconds: stamps as float seconds of the epoch carried ~240 ns of rounding,
        30-50 rad/s^3 of jerk at 500 Hz in anything differentiating them."""
        offset = self._clock_offset.update(self._read_clocks)
        return steady_to_ros_ns(int(round(offset * 1e9)), t)

    def _read_clocks(self) -> tuple[float, float, float]:
        before = time.monotonic()
        ros = self.get_clock().now().nanoseconds * 1e-9
        return before, ros, time.monotonic()

    def _tick(self, t: float, now: float, missed: int) -> None:
        ros_now = self._ros_ns_of(t)
        with self._lock:
            self.core.note_deadline(t, missed)
            res = self.core.tick(t)
            self._publish(res, t, ros_now)
            if self.core.join_wanted:
                # The join came too late for its tick: at least this long, then ask again.
                mono = time.monotonic()
                self._join_latency.append(mono - self._join_asked)
                self._request_join(mono)
            n = self.core.ticks
            motion = self.core.motion
            state, active = self.core.state, self.core.active_sequence
        self._dispatch(res.outcomes)
        if res.setpoint is not None and n % self._state_every == 0:
            self._publish_state(res.setpoint, state, active, ros_now)
        if res.feedback is not None and n % self._feedback_every == 0:
            self._send_feedback(res, ros_now)
        if motion is not None and n % self._planned_every == 0:
            final = motion.sample(motion.end_time)[0]
            msg = JointState(name=list(self.config.joints), position=final.tolist())
            msg.header.stamp = ns_to_time(ros_now)
            self._planned_pub.publish(msg)
        self._diagnostics.update(stamp=ns_to_time(ros_now))

    def _publish(self, res: TickResult, t: float, ros_now: int) -> None:
        """Publish the tick's setpoint (called with the lock held)."""
        sp = res.setpoint
        if sp is not None:
            msg = JointState(name=list(self.config.joints), position=sp.positions.tolist(),
                             velocity=sp.velocities.tolist())
            msg.header.stamp = ns_to_time(ros_now)
            if self.interface == 'joint_state':
                self._command_pub.publish(msg)
            elif self.interface == 'float64_multi_array':
                self._command_pub.publish(
                    Float64MultiArray(data=sp.positions[self._order].tolist()))
            self._commanded_pub.publish(msg)
        if self.interface == 'joint_trajectory' and self.core.motion is not None and (
                res.motion_changed or (self.core.state == EXECUTING and
                                       t >= self._horizon_sent + self._horizon / 3.0)):
            self._command_pub.publish(self._forward_msg(t, ros_now))

    def _publish_state(self, sp: Setpoint, state: str, active: int | None,
                       ros_now: int) -> None:
        acc = np.zeros(len(sp.positions)) if sp.accelerations is None else sp.accelerations
        msg = ExecutorState(joint_names=list(self.config.joints),
                            positions=sp.positions.tolist(), velocities=sp.velocities.tolist(),
                            accelerations=np.asarray(acc, dtype=float).tolist(), state=state,
                            active_sequence=0 if active is None else int(active))
        msg.header.stamp = ns_to_time(ros_now)
        self._state_pub.publish(msg)

    def _forward_msg(self, t: float, ros_now: int) -> JointTrajectory:
        """The motion from ``t`` for a joint_trajectory_controller: while executing only up
        to ``t + trajectory_horizon`` (its last point sampled there), a stop whole."""
        motion = self.core.motion
        times, pos, vel, acc = motion.knots()
        # A stop motion is stamped zero ("start on receipt") so a late delivery cannot make it
        # a trajectory in the past that the controller would ignore; a goal keeps its timing.
        stopping = self.core.state in (HOLDING, STOPPING)
        if not stopping:
            end = t + self._horizon
            inside = times < end - 1e-6
            if times[-1] > end:
                q, v, a = motion.sample(end)
                times = np.append(times[inside], end)
                pos = np.vstack([pos[inside], q])
                vel = np.vstack([vel[inside], v])
                acc = np.vstack([acc[inside], a])
        self._horizon_sent = t
        keep = times > t
        msg = JointTrajectory(joint_names=self._command_joints)
        pos, vel, acc = pos[:, self._order], vel[:, self._order], acc[:, self._order]
        msg.header.stamp = ns_to_time(0 if stopping else ros_now)
        if not np.any(keep):
            times = np.array([t + self.config.period])
            pos, vel, acc = pos[-1:], np.zeros_like(pos[-1:]), np.zeros_like(pos[-1:])
        else:
            times, pos, vel, acc = times[keep], pos[keep], vel[keep], acc[keep]
        msg.points = [JointTrajectoryPoint(
            positions=pos[i].tolist(), velocities=vel[i].tolist(),
            accelerations=acc[i].tolist(), time_from_start=sec_to_duration(times[i] - t))
            for i in range(len(times))]
        return msg

    def _send_feedback(self, res: TickResult, ros_now: int) -> None:
        fb = res.feedback
        waiter = self._waiters.get(fb.key)
        if waiter is None:
            return
        msg = ExecuteTrajectory.Feedback(sequence=fb.sequence,
                                         joint_names=list(self.config.joints),
                                         desired=fb.desired.tolist(),
                                         current_point=int(fb.current_point))
        msg.header.stamp = ns_to_time(ros_now)
        if fb.actual is not None:
            msg.actual = fb.actual.tolist()
            msg.error = (fb.desired - fb.actual).tolist()
        # The goal may have ended meanwhile.
        with contextlib.suppress(Exception):
            waiter.handle.publish_feedback(msg)

    def _executor_status(self) -> TaskStatus:
        with self._lock:
            values = self.core.diagnostics(time.monotonic())
            a = self._auth
            values['auth_key'] = f'{self._auth_path} ({self._auth_key_id})'
            values['gate_boot_id'] = '' if a.boot is None else f'{a.boot:x}'
            values['heartbeats_refused'] = a.refused_heartbeats
            values['goals_refused_auth'] = a.refused_goals
            values['last_auth_refusal'] = a.last_refusal
            values['robot_model_sha256'] = self._models.model_hash[:16]
            gate_model = self._gate_model_hash
            values['gate_robot_model_sha256'] = '(no heartbeat yet)' if gate_model is None \
                else gate_model[:16]
            values['robot_model_check'] = (
                'off: no robot model here' if not self._models.model_hash else
                'waiting for the gate' if gate_model is None else
                'ok' if gate_model == self._models.model_hash else 'MISMATCH: goals refused')
            values.update(self._joint_states.diagnostics())
            values['disabled_checks'] = ','.join(self._checks_off)
            values['robot_descriptions_refused'] = self._models.refused
            values['last_robot_model_refusal'] = self._models.last_refusal
        error = values['last_error']
        if values['robot_model_check'].startswith('MISMATCH'):
            return TaskStatus(ERROR, "robot model differs from the safety gate's: goals "
                              'refused', values.items())
        return TaskStatus(WARN if error else OK,
                          values['state'] + (f' ({error})' if error else ''), values.items())

    def close(self) -> None:
        """Stop the control loop and end every goal with SHUTDOWN (safe to call twice)."""
        if not self._running:
            return
        self._running = False
        with self._join_cv:
            self._join_cv.notify_all()
        self._thread.join(timeout=2.0)
        if self._joiner.is_alive():
            self._joiner.join(timeout=2.0)
        with self._lock:
            now = time.monotonic()
            self.core.halt(now, 'SHUTDOWN', 'the server is shutting down')
            outcomes = self.core.take_outcomes()
            if self.interface == 'joint_trajectory' and self.core.motion is not None:
                # The controller would otherwise run out what it was sent: send it the stop.
                try:
                    self._command_pub.publish(self._forward_msg(now, 0))
                except Exception as exc:  # noqa: BLE001 - the context may be gone (SIGINT)
                    self.get_logger().warning(f'could not send the stop to the controller '
                                              f'at shutdown: {exc}')
        self._dispatch(outcomes)
        # A goal registered but not (yet) in the core has no outcome: it ends SHUTDOWN too.
        for waiter in list(self._waiters.values()):
            if not waiter.done.done():
                waiter.done.set_result(None)
        wake_executor(self)


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``trajectory_server`` console script."""
    # The control thread must get the GIL back promptly after each sleep; the default 5 ms
    # switch interval would make it wait behind busy executor threads for a whole tick.
    sys.setswitchinterval(SWITCH_INTERVAL)
    return run_node(lambda: TrajectoryServer(), args, num_threads=1)


if __name__ == '__main__':
    sys.exit(main())

