"""safety_gate node: validates every chunk and is the only client of ``execute_trajectory``.

A thin shell around :mod:`egoroll_ros.core.gate`: it converts messages, calls ``check``,
forwards accepted chunks as ExecuteTrajectory goals and stops motion on a rejection (``hold``),
an e-stop, a released deadman, or stale joint_states. See ``docs/safety_gate.md``.
"""

from __future__ import annotations

import collections
import math
import sys
import threading
import time
from typing import Any

from action_msgs.srv import CancelGoal
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.action import ActionClient
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.cartesian import (
    cartesian_config_from_params,
    check_cartesian,
    prepare_cartesian,
)
from egoroll_ros.core.gate import (
    OPTIONAL_CHECKS,
    WHOLE_CHUNK,
    GateConfig,
    Verdict,
    Violation,
    check,
    config_from_params,
    measured_at_observation,
    prepare,
)
from egoroll_ros.core.ik import IkParams
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import Chunk
from egoroll_ros.errors import TrajectoryError
from egoroll_ros.ros.convert import (
    cartesian_chunk_from_msg,
    chunk_from_msg,
    is_cartesian,
    joint_state_from_msg,
    sec_to_time,
    trajectory_to_msg,
    verdict_to_msg,
)
from egoroll_ros.ros.markers import path_marker
from egoroll_ros.ros.params import Param, declare_params
from egoroll_ros.ros.robot_models import RobotModelProvider
from egoroll_ros.ros.runner import run_node

_D = GateConfig(joints=('_',))   # defaults of the core, shown in the parameter specs
_IK = IkParams()

PARAMS = [
    Param('joints', 'str[]', None, 'the controlled joints, in order', read_only=True),
    Param('urdf_path', str, '', 'URDF file of the robot; empty: use the robot_description '
          'topic (transient local)', read_only=True),
    Param('ee_frames', 'str[]', [], 'end-effector frames checked by forward kinematics',
          read_only=True),
    Param('gripper_joints', 'str[]', [], 'gripper joints checked against gripper_min/max',
          read_only=True),
    Param('gripper_min', 'float[]', [], 'lowest allowed gripper position per gripper joint',
          read_only=True),
    Param('gripper_max', 'float[]', [], 'highest allowed gripper position per gripper joint',
          read_only=True),
    Param('min_point_spacing', float, _D.min_point_spacing, 's, least time between points',
          min=0.0, read_only=True),
    Param('max_point_spacing', float, _D.max_point_spacing, 's, most time between points',
          min=0.0, read_only=True),
    Param('max_points', int, _D.max_points, 'most points in a chunk', min=1, read_only=True),
    Param('max_chunk_age', float, _D.max_chunk_age, 's, oldest observation stamp accepted',
          min=0.0, read_only=True),
    Param('max_future_stamp', float, _D.max_future_stamp, 's, most a stamp may be ahead of '
          'the clock', min=0.0, read_only=True),
    Param('max_joint_state_age', float, _D.max_joint_state_age, 's (steady clock), oldest '
          'joint_states accepted; older: reject chunks and cancel the running goal',
          min=0.0, read_only=True),
    Param('position_margin', float, _D.position_margin, 'rad kept from revolute URDF limits',
          min=0.0, read_only=True),
    Param('prismatic_position_margin', float, _D.prismatic_position_margin,
          'm kept from prismatic URDF limits', min=0.0, read_only=True),
    Param('position_limit_joints', 'str[]', [], 'joints whose position limits are overridden '
          '(within the URDF limits; no margin applied)', read_only=True),
    Param('position_limit_lower', 'float[]', [], 'override lower limits, one per '
          'position_limit_joints', read_only=True),
    Param('position_limit_upper', 'float[]', [], 'override upper limits, one per '
          'position_limit_joints', read_only=True),
    Param('max_step', 'float[]', list(_D.max_step), 'rad (m) largest change between '
          'consecutive points: one value or one per joint', min=0.0, read_only=True),
    Param('velocity_scale', float, _D.velocity_scale, 'fraction of the URDF velocity limits',
          min=0.0, max=1.0, read_only=True),
    Param('acceleration_limits', 'float[]', list(_D.acceleration_limits), 'rad/s^2 (m/s^2): '
          'one value or one per joint', min=0.0, read_only=True),
    Param('jerk_limits', 'float[]', list(_D.jerk_limits), 'rad/s^3 (m/s^3), finite '
          'differences of the accelerations: one value or one per joint', min=0.0,
          read_only=True),
    Param('max_start_deviation', 'float[]', list(_D.max_start_deviation), 'rad (m) first '
          'point vs measured: one value or one per joint', min=0.0, read_only=True),
    Param('ee_max_rotation_step', float, _D.ee_max_rotation_step, 'rad between consecutive '
          'end-effector poses', min=0.0, read_only=True),
    Param('ee_max_translation_step', float, _D.ee_max_translation_step, 'm between '
          'consecutive end-effector positions', min=0.0, read_only=True),
    Param('ee_workspace_min', 'float[]', [], 'x, y, z (m, base frame) of the workspace box; '
          'empty: no box', read_only=True),
    Param('ee_workspace_max', 'float[]', [], 'x, y, z (m, base frame) of the workspace box',
          read_only=True),
    Param('ee_soft_translation', float, _D.ee_soft_translation, 'm from the measured pose '
          'beyond which a chunk needs confirmation', min=0.0, read_only=True),
    Param('ee_hard_translation', float, _D.ee_hard_translation, 'm from the measured pose '
          'beyond which a chunk is rejected', min=0.0, read_only=True),
    Param('disabled_checks', 'str[]', [], 'checks turned OFF (logged as a warning, shown in '
          'diagnostics); one of: ' + ', '.join(OPTIONAL_CHECKS), read_only=True),
    Param('cartesian_arms', 'str[]', [], 'arms that accept Cartesian chunks (end-effector '
          'poses, solved by IK here); empty: Cartesian chunks are rejected', read_only=True),
    Param('cartesian_ee_frames', 'str[]', [], 'end-effector frame of each cartesian_arms entry',
          read_only=True),
    Param('cartesian_gripper_joints', 'str[]', [], "gripper joint of each arm ('' for none), "
          'or empty for none at all', read_only=True),
    Param('ik_position_tolerance', float, _IK.position_tolerance, 'm, IK converged when the '
          'position error is at most this', min=0.0, read_only=True),
    Param('ik_rotation_tolerance', float, _IK.rotation_tolerance, 'rad, IK converged when the '
          'rotation error is at most this', min=0.0, read_only=True),
    Param('ik_max_iterations', int, _IK.max_iterations, 'IK iterations per point', min=1,
          read_only=True),
    Param('ik_damping', float, _IK.damping, 'damped least squares lambda^2', min=0.0,
          read_only=True),
    Param('ik_max_iteration_step', float, _IK.max_iteration_step, 'rad (m), largest joint '
          'change in one IK iteration', min=0.0, read_only=True),
    Param('ik_max_joint_jump', float, _IK.max_joint_jump, 'rad (m), largest joint change '
          'between consecutive IK solutions; more is a branch flip (rejected)', min=0.0,
          read_only=True),
    Param('on_reject', str, 'hold', 'hold: cancel the running goal and latch a fault until '
          'safety/reset; skip: drop the chunk and let the running goal finish',
          choices=('hold', 'skip'), read_only=True),
    Param('confirm_timeout', float, 10.0, 's a chunk waits for confirmation', min=0.0,
          read_only=True),
    Param('require_deadman', bool, True, 'motion needs the quest/joy deadman axis held',
          read_only=True),
    Param('deadman_axis', int, 3, 'quest/joy axis index of the deadman (grip)', min=0,
          read_only=True),
    Param('deadman_threshold', float, 0.5, 'deadman axis value above which it is held',
          min=-1.0, max=1.0, read_only=True),
    Param('estop_button', int, 1, 'quest/joy button index of the e-stop; -1: none', min=-1,
          read_only=True),
    Param('confirm_button', int, 0, 'quest/joy button index that confirms; -1: none', min=-1,
          read_only=True),
    Param('joy_timeout', float, 0.5, 's (steady) after which quest/joy is stale (deadman '
          'released)', min=0.0, read_only=True),
    Param('watchdog_period', float, 0.02, 's between safety watchdog checks', min=0.001,
          max=1.0, read_only=True),
    Param('diagnostics_period', float, 1.0, 's between /diagnostics messages', min=0.05,
          read_only=True),
]

# Violations that mean "the gate is not ready", not "the policy asked for something bad":
# they reject and stop, but do not latch a fault under on_reject=hold.
_NOT_READY = frozenset({'robot_model', 'joint_state'})
_COLORS = {'accepted': (0.1, 0.9, 0.1), 'confirm': (1.0, 0.85, 0.0), 'rejected': (1.0, 0.1, 0.1)}


_config_from = config_from_params


class SafetyGate(Node):
    """Validates chunks from ``policy/chunk`` and forwards accepted ones to the executor."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('safety_gate', **kwargs)
        p = declare_params(self, PARAMS)
        self.p = p
        self.config = _config_from(p)
        self.cartesian_config = cartesian_config_from_params(p)
        self._lock = threading.RLock()
        self._model: RobotModel | None = None
        self._model_error = 'no robot model received yet (robot_description)'
        self._js = None
        # Recent joint_states (about 2.5 s at 100 Hz): chunks are checked against the state
        # their observation saw (core.gate.measured_at_observation).
        self._js_history: collections.deque = collections.deque(maxlen=256)
        self._last_forwarded: int | None = None
        self._goal_handle = None
        self._goal_seq: int | None = None
        # Goals the executor accepted whose results have not come back, by sequence: with
        # seam blend the executor may refuse a new goal and keep running the previous one,
        # which then is again the goal a stop must cancel.
        self._live: dict[int, Any] = {}
        self._epoch = 0
        self._fault: str | None = None
        self._estop = False
        self._estop_down = False
        self._deadman_held = False
        self._joy_time: float | None = None
        self._prev_confirm = False
        self._pending: tuple[Chunk, float] | None = None
        self._counts: dict[str, int] = {}
        self._stats = {'chunks': 0, 'accepted': 0, 'rejected': 0, 'needs_confirmation': 0,
                       'forwarded': 0, 'stops': 0}
        self._last_summary = ''
        self._warned: set[str] = set()

        self._safety = MutuallyExclusiveCallbackGroup()
        self._chunk_group = MutuallyExclusiveCallbackGroup()
        self._state_group = MutuallyExclusiveCallbackGroup()
        self._action_group = ReentrantCallbackGroup()

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._verdict_pub = self.create_publisher(GateVerdict, 'safety/verdict', reliable)
        self._marker_pub = self.create_publisher(MarkerArray, 'safety/markers', 10)
        self._diag_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._client = ActionClient(self, ExecuteTrajectory, 'execute_trajectory',
                                    callback_group=self._action_group)
        self.create_subscription(JointState, 'joint_states', self._on_joint_state,
                                 qos_profile_sensor_data, callback_group=self._state_group)
        self.create_subscription(ActionChunk, 'policy/chunk', self._on_chunk, reliable,
                                 callback_group=self._chunk_group)
        self.create_subscription(Joy, 'quest/joy', self._on_joy, qos_profile_sensor_data,
                                 callback_group=self._safety)
        self.create_service(Trigger, 'safety/reset', self._on_reset,
                            callback_group=self._safety)
        self.create_service(Trigger, 'safety/confirm', self._on_confirm_srv,
                            callback_group=self._chunk_group)
        self.create_timer(p['watchdog_period'], self._watchdog, callback_group=self._safety)
        self.create_timer(p['diagnostics_period'], self._publish_diagnostics)

        self._models = RobotModelProvider(self, p['urdf_path'], self._set_model,
                                          self._model_failed)
        for name in sorted(self.config.disabled_checks):
            self.get_logger().warning(f"check '{name}' is DISABLED by parameter "
                                      'disabled_checks')
        if self.config.ee_frames and not self.config.workspace_configured:
            self.get_logger().warning('no ee_workspace_min/max configured: the ee_workspace '
                                      'check does nothing')
        if not p['require_deadman']:
            self.get_logger().warning('require_deadman is false: motion does not need the '
                                      'Quest deadman')
        self.get_logger().info(f'safety gate ready: {len(self.config.joints)} joints, '
                               f'frames {list(self.config.ee_frames)}, on_reject='
                               f"{p['on_reject']}")

    # ---- inputs ----------------------------------------------------------------------------
    def _set_model(self, model: RobotModel) -> None:
        prepare(model, self.config)
        if self.cartesian_config.arms:
            # Resolve the IK solvers now (validates the arms against this model, and the
            # first Cartesian chunk does not pay for it: it cost ~0.5 s, past max_chunk_age).
            prepare_cartesian(model, self.config, self.cartesian_config)
        with self._lock:
            self._model = model
            self._model_error = ''
        self.get_logger().info(f"robot model '{model.name}' loaded from {model.source} "
                               f'(base frame {model.base_frame})')

    def _model_failed(self, error: str) -> None:
        with self._lock:
            self._model = None
            self._model_error = error
        self.get_logger().error(f'invalid robot model, every chunk is rejected: {error}')
        self._stop('invalid robot model')

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            js = joint_state_from_msg(msg, received=time.monotonic())
        except TrajectoryError as exc:
            self._warn_once('js', f'ignoring malformed joint_states: {exc}')
            return
        with self._lock:
            self._js = js
            self._js_history.append(js)

    def _on_joy(self, msg: Joy) -> None:
        p = self.p
        now = time.monotonic()
        estop = p['estop_button'] >= 0 and (
            p['estop_button'] >= len(msg.buttons) or bool(msg.buttons[p['estop_button']]))
        held = p['deadman_axis'] < len(msg.axes) and \
            math.isfinite(msg.axes[p['deadman_axis']]) and \
            msg.axes[p['deadman_axis']] > p['deadman_threshold']
        confirm = 0 <= p['confirm_button'] < len(msg.buttons) and \
            bool(msg.buttons[p['confirm_button']])
        with self._lock:
            self._joy_time = now
            self._estop_down = estop
            if estop and not self._estop:
                self._estop = True
                self._stop('e-stop pressed')
                self.get_logger().error('E-STOP: running goal canceled; latched until '
                                        'safety/reset')
            was_held, self._deadman_held = self._deadman_held, held
            if p['require_deadman'] and was_held and not held:
                self._stop('deadman released')
                self.get_logger().warning('deadman released: motion stopped')
            rising = confirm and not self._prev_confirm
            self._prev_confirm = confirm
        if rising:
            ok, why = self._confirm()
            self.get_logger().info(f'Quest confirm: {why}')

    def _watchdog(self) -> None:
        now = time.monotonic()
        with self._lock:
            if self.p['require_deadman'] and self._deadman_held and (
                    self._joy_time is None or now - self._joy_time > self.p['joy_timeout']):
                self._deadman_held = False
                self._stop('quest/joy stale (deadman)')
                self.get_logger().warning('quest/joy went stale: deadman released')
            if self._goal_handle is not None or self._goal_seq is not None:
                js = self._js
                if js is None or now - js.received > self.config.max_joint_state_age:
                    self._stop('joint_states stale')
                    self.get_logger().error('joint_states stale: running goal canceled')

    # ---- chunks ----------------------------------------------------------------------------
    def _blocking(self, sequence: int) -> list[Violation]:
        """Node-level reasons not to forward (caller holds the lock)."""
        out = []
        if self._estop:
            out.append(Violation('estop', '', WHOLE_CHUNK, math.nan, math.nan,
                                 'estop: e-stop latched; call safety/reset'))
        if self._fault is not None:
            out.append(Violation('latched_fault', '', WHOLE_CHUNK, math.nan, math.nan,
                                 f'latched_fault: {self._fault}; call safety/reset'))
        if self.p['require_deadman'] and not self._deadman_held:
            out.append(Violation('deadman', '', WHOLE_CHUNK, math.nan,
                                 self.p['deadman_threshold'],
                                 'deadman: the Quest deadman is not held'))
        if self._last_forwarded is not None and sequence <= self._last_forwarded:
            out.append(Violation('old_sequence', '', WHOLE_CHUNK, float(sequence),
                                 float(self._last_forwarded),
                                 f'old_sequence: {sequence} is not newer than the last '
                                 f'forwarded {self._last_forwarded}'))
        return out

    def _validate(self, chunk: Chunk) -> Verdict:
        with self._lock:
            model, model_error = self._model, self._model_error
            js = measured_at_observation(self._js_history, chunk.stamp)
        if model is None:
            t0 = time.perf_counter()
            return Verdict([Violation('robot_model', '', WHOLE_CHUNK, math.nan, math.nan,
                                      f'robot_model: {model_error}')],
                           check_duration=time.perf_counter() - t0)
        now = self.get_clock().now().nanoseconds * 1e-9
        return check(chunk, js, model, self.config, now=now, steady_now=time.monotonic())

    def _on_cartesian_chunk(self, msg: ActionChunk) -> None:
        """Cartesian checks, IK, joint checks; the IK joint chunk is what may be forwarded."""
        try:
            cchunk = cartesian_chunk_from_msg(msg)
        except TrajectoryError as exc:
            verdict = Verdict([Violation('structure', '', WHOLE_CHUNK, math.nan, math.nan,
                                         f'structure: {exc}')], stage='cartesian')
            self._decide(msg, None, verdict)
            return
        with self._lock:
            model = self._model
            js = measured_at_observation(self._js_history, cchunk.stamp)
        now = self.get_clock().now().nanoseconds * 1e-9
        outcome = check_cartesian(cchunk, js, model, self.config, self.cartesian_config,
                                  now=now, steady_now=time.monotonic())
        self._decide(msg, outcome.joint_chunk, outcome.verdict)

    def _on_chunk(self, msg: ActionChunk) -> None:
        if is_cartesian(msg):
            self._on_cartesian_chunk(msg)
            return
        try:
            chunk = chunk_from_msg(msg)
        except TrajectoryError as exc:
            verdict = Verdict([Violation('structure', '', WHOLE_CHUNK, math.nan, math.nan,
                                         f'structure: {exc}')])
            self._decide(msg, None, verdict)
            return
        self._decide(msg, chunk, self._validate(chunk))

    def _decide(self, msg: ActionChunk, chunk: Chunk | None, verdict: Verdict) -> None:
        forwarded = False
        with self._lock:
            self._stats['chunks'] += 1
            for k, n in verdict.counts().items():
                self._counts[k] = self._counts.get(k, 0) + n
            if msg.shadow:
                pass
            elif verdict.rejected:
                self._stats['rejected'] += 1
                real = [v for v in verdict.violations if v.check not in _NOT_READY]
                if self.p['on_reject'] == 'hold' or not real:
                    self._stop('chunk rejected')
                if self.p['on_reject'] == 'hold' and real and self._fault is None:
                    self._fault = f'chunk {msg.sequence} rejected ({verdict.summary})'
                    self.get_logger().error(f'fault latched: {self._fault}')
            else:
                blocking = self._blocking(int(msg.sequence))
                verdict.violations.extend(blocking)
                if blocking:
                    verdict.stage = 'node'
                elif verdict.needs_confirmation:
                    self._stats['needs_confirmation'] += 1
                    self._pending = (chunk, time.monotonic() + self.p['confirm_timeout'])
                else:
                    self._stats['accepted'] += 1
                    forwarded = self._forward(chunk)
        self._publish_verdict(msg, verdict, forwarded)

    def _forward(self, chunk: Chunk) -> bool:
        """Send ``chunk`` as a goal (caller holds the lock)."""
        if not self._client.server_is_ready():
            self._warn_once('server', 'execute_trajectory server not available: chunk not '
                            'forwarded')
            return False
        goal = ExecuteTrajectory.Goal(trajectory=trajectory_to_msg(chunk.trajectory),
                                      sequence=int(chunk.sequence), source=chunk.policy_id)
        goal.trajectory.header.stamp = sec_to_time(chunk.stamp)
        epoch = self._epoch
        seq = int(chunk.sequence)
        self._last_forwarded = seq
        self._goal_seq = seq
        self._pending = None
        self._stats['forwarded'] += 1
        future = self._client.send_goal_async(goal)
        future.add_done_callback(lambda f: self._on_goal_response(f, epoch, seq))
        return True

    def _on_goal_response(self, future: Any, epoch: int, seq: int) -> None:
        try:
            handle = future.result()
        except Exception as exc:  # noqa: BLE001 - report, nothing else to do
            self.get_logger().error(f'goal {seq}: send failed: {exc}')
            return
        if not handle.accepted:
            self.get_logger().warning(f'goal {seq} rejected by the executor')
            return
        with self._lock:
            if epoch != self._epoch:
                # A stop happened after this goal was sent: it must not run.
                handle.cancel_goal_async()
                return
            self._live[seq] = handle
            if self._goal_seq == seq:
                self._goal_handle = handle
        handle.get_result_async().add_done_callback(lambda f: self._on_result(f, seq))

    def _on_result(self, future: Any, seq: int) -> None:
        with self._lock:
            self._live.pop(seq, None)
            if self._goal_seq == seq:
                # The newest goal still running (the previous one, when the executor refused
                # this one at the seam), else none.
                older = max(self._live, default=None)
                self._goal_seq = older
                self._goal_handle = None if older is None else self._live[older]

    def _stop(self, why: str) -> None:
        """Cancel the running goal and invalidate goals in flight (caller may hold the lock)."""
        with self._lock:
            self._epoch += 1
            self._pending = None
            handle = self._goal_handle
            active = handle is not None or self._goal_seq is not None
            others = [h for h in self._live.values() if h is not handle]
            self._goal_handle = None
            self._goal_seq = None
            if active:
                self._stats['stops'] += 1
        if handle is not None:
            future = handle.cancel_goal_async()
            future.add_done_callback(lambda f: self._on_cancel_done(f, why))
        for other in others:
            # Older goals still running or about to end: cancel them too (a refusal of the
            # newest at the seam leaves the previous one running); their answer is not news.
            other.cancel_goal_async()

    def _on_cancel_done(self, future: Any, why: str) -> None:
        try:
            resp = future.result()
        except Exception as exc:  # noqa: BLE001
            self.get_logger().error(f'cancel ({why}) failed: {exc}')
            return
        if resp.return_code not in (CancelGoal.Response.ERROR_NONE,
                                    CancelGoal.Response.ERROR_GOAL_TERMINATED):
            self.get_logger().error(f'cancel ({why}) refused: code {resp.return_code}')

    # ---- operator --------------------------------------------------------------------------
    def _confirm(self) -> tuple[bool, str]:
        with self._lock:
            pending = self._pending
            self._pending = None
        if pending is None:
            return False, 'no chunk is waiting for confirmation'
        chunk, expires = pending
        if time.monotonic() > expires:
            return False, f'the confirmation of chunk {chunk.sequence} expired'
        # A confirmed chunk runs from the moment of confirmation: its points keep their
        # time_from_start, counted from now (a person takes longer than max_chunk_age, and the
        # original timing is in the past by then). Every check then runs again on it, against
        # the latest measured state; the path itself is never changed.
        chunk = chunk.restamped(self.get_clock().now().nanoseconds * 1e-9)
        verdict = self._validate(chunk)
        msg = _chunk_header(chunk)
        forwarded = False
        with self._lock:
            if not verdict.rejected:
                blocking = self._blocking(chunk.sequence)
                verdict.violations.extend(blocking)
                if not blocking:
                    forwarded = self._forward(chunk)
        self._publish_verdict(msg, verdict, forwarded, note='operator confirmation: ')
        if forwarded:
            return True, f'chunk {chunk.sequence} confirmed and forwarded'
        return False, f'chunk {chunk.sequence} not forwarded: {verdict.summary}'

    def _on_confirm_srv(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        response.success, response.message = self._confirm()
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        with self._lock:
            if self._estop and self._estop_down:
                response.success = False
                response.message = 'e-stop still pressed'
                return response
            was = [x for x in (('e-stop' if self._estop else ''), self._fault or '') if x]
            self._estop = False
            self._fault = None
            self._last_forwarded = None
        response.success = True
        response.message = 'cleared: ' + ('; '.join(was) if was else 'nothing latched')
        self.get_logger().info(f'safety/reset: {response.message}')
        return response

    # ---- outputs ---------------------------------------------------------------------------
    def _publish_verdict(self, chunk_msg: Any, verdict: Verdict, forwarded: bool,
                         note: str = '') -> None:
        out = verdict_to_msg(verdict, chunk_msg, self.get_clock().now().to_msg(), forwarded,
                             note)
        with self._lock:
            self._last_summary = out.summary
        self._verdict_pub.publish(out)
        if verdict.ee_paths is not None:
            self._publish_markers(verdict)

    def _publish_markers(self, verdict: Verdict) -> None:
        with self._lock:
            base = self._model.base_frame if self._model is not None else ''
        key = 'accepted' if verdict.accepted else (
            'confirm' if verdict.needs_confirmation else 'rejected')
        r, g, b = _COLORS[key]
        stamp = self.get_clock().now().to_msg()
        array = MarkerArray(markers=[
            path_marker('safety_gate/' + frame, i, base, stamp, verdict.ee_paths[i], (r, g, b),
                        0.005) for i, frame in enumerate(verdict.ee_frames)])
        self._marker_pub.publish(array)

    def _publish_diagnostics(self) -> None:
        with self._lock:
            if self._estop:
                level, state = DiagnosticStatus.ERROR, 'e-stop latched'
            elif self._fault:
                level, state = DiagnosticStatus.ERROR, 'fault latched: ' + self._fault
            elif self._model is None:
                level, state = DiagnosticStatus.ERROR, 'no robot model: ' + self._model_error
            elif self._js is None:
                level, state = DiagnosticStatus.ERROR, 'no joint_states'
            elif self.config.disabled_checks:
                level, state = DiagnosticStatus.WARN, 'ok, with checks DISABLED'
            else:
                level, state = DiagnosticStatus.OK, 'ok'
            values = [('state', state),
                      ('disabled_checks', ','.join(sorted(self.config.disabled_checks))),
                      ('deadman_held', str(self._deadman_held)),
                      ('require_deadman', str(self.p['require_deadman'])),
                      ('on_reject', self.p['on_reject']),
                      ('goal_active', str(self._goal_seq is not None)),
                      ('executor_ready', str(self._client.server_is_ready())),
                      ('last_forwarded_sequence', str(self._last_forwarded)),
                      ('last_verdict', self._last_summary)]
            values += [(k, str(v)) for k, v in self._stats.items()]
            values += [('violations.' + k, str(v)) for k, v in sorted(self._counts.items())]
        status = DiagnosticStatus(level=level, name=f'{self.get_name()}: safety gate',
                                  hardware_id=self.get_fully_qualified_name(), message=state,
                                  values=[KeyValue(key=k, value=v) for k, v in values])
        arr = DiagnosticArray(status=[status])
        arr.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(arr)

    def _warn_once(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warning(text)

    def close(self) -> None:
        """Cancel the running goal on shutdown (the executor then holds)."""
        self._stop('shutdown')


def _chunk_header(chunk: Chunk) -> ActionChunk:
    msg = ActionChunk()
    msg.header.stamp = sec_to_time(chunk.stamp)
    msg.sequence = int(chunk.sequence)
    msg.policy_id = chunk.policy_id
    msg.shadow = chunk.shadow
    return msg


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``safety_gate`` console script."""
    return run_node(SafetyGate, args=args, num_threads=1)


if __name__ == '__main__':
    sys.exit(main())
