"""safety_gate node: validates every chunk and is the only client of ``execute_trajectory``.

A thin shell around :mod:`egoroll_ros.core.gate`: it converts messages, calls ``check``,
forwards accepted chunks as ExecuteTrajectory goals and stops motion on a rejection (``hold``),
an e-stop, a released deadman, or stale joint_states. See ``docs/safety_gate.md``.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import Any

from action_msgs.msg import GoalInfo
from action_msgs.srv import CancelGoal
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Joy
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_interfaces.msg import ActionChunk, GateVerdict, InterlockHeartbeat
from egoroll_interfaces.srv import Arm
from egoroll_ros.core.auth import key_id, load_key, new_boot_id
from egoroll_ros.core.cartesian import (
    cartesian_config_from_params,
    check_cartesian,
    prepare_cartesian,
)
from egoroll_ros.core.debounce import ButtonDebouncer
from egoroll_ros.core.gate import (
    WHOLE_CHUNK,
    Verdict,
    Violation,
    check,
    config_from_params,
    prepare,
)
from egoroll_ros.core.interlock import (
    NOT_READY_CHECKS,
    Block,
    ChunkOutcome,
    Decision,
    Interlock,
    JoyMapping,
    Kind,
    interlock_config_from_params,
)
from egoroll_ros.core.joint_state_vetting import JointStateHistory, Vetting
from egoroll_ros.core.liveness import Liveness
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import Chunk, JointStateData
from egoroll_ros.errors import ConfigError, TrajectoryError
from egoroll_ros.ros.action_client import ActionClient
from egoroll_ros.ros.auth import sign_goal, sign_heartbeat
from egoroll_ros.ros.buttons import DebouncedButton
from egoroll_ros.ros.convert import (
    cartesian_chunk_from_msg,
    chunk_from_msg,
    is_cartesian,
    sec_to_time,
    trajectory_to_msg,
    verdict_to_msg,
)
from egoroll_ros.ros.diagnostics import ERROR, OK, WARN, DiagnosticsUpdater, TaskStatus
from egoroll_ros.ros.gate_params import PARAMS
from egoroll_ros.ros.joint_states import WRITER_IDS, VettedJointStates
from egoroll_ros.ros.markers import path_marker
from egoroll_ros.ros.params import declare_params, watch_live
from egoroll_ros.ros.robot_models import RobotModelProvider
from egoroll_ros.ros.runner import run_node, wait_for

#: ExecuteTrajectory result code -> its name (core/interlock.py EXECUTOR_HALTS names them).
RESULT_NAMES = {v: k for k, v in vars(ExecuteTrajectory.Result).items()
                if k.isupper() and isinstance(v, int)}

#: s of accepted joint_states kept for finding the state a chunk's observation saw.
JS_HISTORY_SECONDS = 5.0
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
        # The accepted joint_states of the last 5 s, at any rate (1 kHz broadcasters too):
        # chunks are checked against the state their observation saw.
        self._js_history = JointStateHistory(JS_HISTORY_SECONDS)
        self._hb_allowed = False     # motion_allowed of the last heartbeat sent
        self.interlock = Interlock(interlock_config_from_params(p))
        # The gate's watchdog on itself (core/liveness.py): not scheduled for stall_timeout
        # (SIGSTOP, starvation) stops a live rollout before anything else is acted on.
        self._liveness = Liveness(p['stall_timeout'])
        self._joy_map = JoyMapping.from_params(p)
        # The Quest toggle, debounced as policy_node debounces it (its edge on time, from a
        # steady timer); a press stops a live rollout here without waiting for policy_node.
        self._toggle = DebouncedButton(
            self, ButtonDebouncer(p['toggle_debounce_time']), self._on_toggle,
            p['toggle_button'], 'toggle_button') if p['toggle_button'] >= 0 else None
        watch_live(self, PARAMS, p, self._apply_live)
        self._goal_handle = None
        self._inflight: set[Any] = set()   # send_goal futures not answered yet
        self._heartbeats = 0
        # The robot half's shared key (core/auth.py): goals and heartbeats carry its HMAC;
        # a new boot id per start, so the executor tells a restarted gate from a replay.
        self._auth_key, self._auth_path = load_key(p['auth_key_file'])
        self._boot_id = new_boot_id()
        self.get_logger().info(f'signing goals and heartbeats with {self._auth_path} (key '
                               f'{key_id(self._auth_key)}), boot {self._boot_id:x}')
        self._counts: dict[str, int] = {}
        self._last_summary = ''

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._verdict_pub = self.create_publisher(GateVerdict, 'safety/verdict', reliable)
        self._marker_pub = self.create_publisher(MarkerArray, 'safety/markers', 10)
        self._heartbeat_pub = self.create_publisher(InterlockHeartbeat, 'safety/heartbeat',
                                                    reliable)
        self._client = ActionClient(self, ExecuteTrajectory, 'execute_trajectory')
        # Cancel-all (empty goal id, zero stamp: every goal of the server), so a stop also
        # covers a goal the gate has no handle for yet.
        self._cancel_all_client = self.create_client(
            CancelGoal, 'execute_trajectory/_action/cancel_goal')
        self._joint_states = VettedJointStates(self, self.config.joints, self._on_joint_state,
                                               self._joint_states_refused,
                                               qos_profile_sensor_data)
        self.create_subscription(ActionChunk, 'policy/chunk', self._on_chunk, reliable)
        self.create_subscription(Joy, 'quest/joy', self._on_joy, qos_profile_sensor_data)
        self.create_service(Trigger, 'safety/reset', self._on_reset)
        self.create_service(Arm, 'safety/arm', self._on_arm)
        self.create_service(Trigger, 'safety/confirm', self._on_confirm_srv)
        # safety/stop is a coroutine that awaits the executor's answers, and a coroutine holds
        # its callback group until it returns: in the node's default (mutually exclusive)
        # group it would block every other callback, those answers included, for as long as it
        # waits. Every other callback returns at once, so the default group serves them.
        self.create_service(Trigger, 'safety/stop', self._on_stop_srv,
                            callback_group=ReentrantCallbackGroup())
        # On the steady clock: a stalled or jumping /clock (use_sim_time) must not silence
        # the heartbeat, the joy and joint_states timeouts or the stall detection.
        self.create_timer(p['watchdog_period'], self._watchdog,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))
        # A joint_states stream that went silent with its publisher matched is subscribed to
        # again (ros/joint_states.py); the state stays stale meanwhile.
        self.create_timer(0.5, lambda: self._joint_states.revive(
            max(1.0, 2.0 * self.config.max_joint_state_age)),
            clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._diag = DiagnosticsUpdater(self, p['diagnostics_period'], timer=True)
        self._diag.add('safety gate', self._diagnostics)

        self._models = RobotModelProvider(self, p['urdf_path'], self._set_model,
                                          self._model_failed, on_refused=self._model_refused)
        # Each chunk check that is off (the interlock's own are warned about below).
        for name, why in self.config.checks_off().items():
            self.get_logger().warning(f"check '{name}' is OFF: {why}")
        if not p['require_deadman']:
            self.get_logger().warning(
                'require_deadman is false: motion does not need the Quest deadman' +
                ('; quest/joy must still arrive within joy_timeout (it carries the e-stop)'
                 if p['estop_button'] >= 0 else '; estop_button is -1: NO e-stop channel on '
                 'quest/joy is watched (the loss of the Quest stops nothing)'))
        if p['stall_timeout'] <= 0.0:
            self.get_logger().warning('stall_timeout is 0: a gate or driver that hung and '
                                      'resumed continues the rollout without a new start')
        self.get_logger().info(f'safety gate ready: {len(self.config.joints)} joints, '
                               f'frames {list(self.config.ee_frames)}, on_reject='
                               f"{p['on_reject']}")

    def _apply_live(self, changes: dict[str, Any]) -> None:
        """joy_timeout and confirm_timeout set live (within their hard bounds, and only while
        no rollout is armed): the interlock uses them from its next event (ConfigError from
        the core, or an armed rollout, refuses the change)."""
        config = interlock_config_from_params({**self.p, **changes})
        with self._lock:
            if self.interlock.stopped is None:
                raise ConfigError('a safety parameter cannot change while a rollout is armed: '
                                  'stop it first (policy/stop or safety/stop), then set it')
            self.interlock.config = config
        self.get_logger().info('set live: ' + ', '.join(f'{k}={v!r}'
                                                        for k, v in sorted(changes.items())))

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
        with self._lock:
            self._execute(self.interlock.stop(f'invalid robot model: {error}'))

    def _model_refused(self, why: str) -> None:
        """A different robot_description after the model was fixed: never applied; during an
        armed rollout the fault latches (someone is changing what the robot is allowed to
        do)."""
        self.get_logger().error(f'robot model: {why}')
        with self._lock:
            if self.interlock.stopped is None:
                self._execute(self.interlock.latch_fault(f'robot model: {why}'))

    def _on_joint_state(self, js: JointStateData, _vetting: Vetting) -> None:
        with self._lock:
            self._js = js
            self._js_history.append(js)

    def _joint_states_refused(self, vetting: Vetting) -> None:
        """A refused joint_states message (core/joint_state_vetting.py): the state the gate
        checks against stays the last accepted one and ages. Two publishers of the arm's
        joints during an armed rollout latch the fault: nobody can tell which is the robot."""
        if not vetting.second_publisher:
            return
        with self._lock:
            if self.interlock.stopped is None:
                self._execute(self.interlock.latch_fault(f'joint_states: {vetting.reason}'))

    def _stalled(self, now: float) -> None:
        """Before acting on any event (caller holds the lock): a gap in the gate's own
        scheduling of stall_timeout or longer (it was stopped or starved, and the executor
        has held on the lost heartbeat meanwhile) stops a live rollout now, before the event
        that woke it can forward anything."""
        gap = self._liveness.check(now)
        if gap is not None:
            self._execute(self.interlock.outage(
                f'the safety gate was not scheduled for {gap:.2f} s (stall_timeout '
                f"{self.p['stall_timeout']:g} s: stopped or starved)"))

    def _on_joy(self, msg: Joy) -> None:
        now = time.monotonic()
        estop, held, confirm = self._joy_map.read(msg.axes, msg.buttons)
        with self._lock:
            self._stalled(now)
            decisions, rising = self.interlock.joy(now, estop, held, confirm)
            self._execute(decisions)
        if self._toggle is not None:      # as policy_node's quest.toggle_button
            self._toggle.sample(msg.buttons, now)
        if rising:
            ok, why = self._confirm()
            self.get_logger().info(f'Quest confirm: {why}')

    def _on_toggle(self) -> None:
        """A debounced press of the Quest toggle (executor thread): stop a live rollout."""
        pressed_at = self._toggle.debouncer.changed_at
        with self._lock:
            decisions = self.interlock.toggle(pressed_at)
            self._execute(decisions)
        if decisions:
            self.get_logger().info('Quest toggle: rollout stopped at the gate (cancel-all sent, '
                                   'motion fence raised)')

    def _watchdog(self) -> None:
        now = time.monotonic()
        with self._lock:
            self._stalled(now)
            js = self._js
            self._execute(self.interlock.timer(now, None if js is None else js.received))
            self._publish_heartbeat()

    def _publish_heartbeat(self) -> None:
        """Send the interlock heartbeat now (caller holds the lock, so heartbeats leave in
        counter order and the fence they carry never falls)."""
        il = self.interlock
        self._heartbeats += 1
        self._hb_allowed = il.motion_allowed()
        hb = InterlockHeartbeat(state=il.state(), motion_allowed=self._hb_allowed,
                                counter=self._heartbeats, fence_sequence=il.fence_published(),
                                detail=self._not_allowed_detail(),
                                robot_model_sha256=self._models.model_hash)
        hb.header.stamp = self.get_clock().now().to_msg()
        sign_heartbeat(self._auth_key, hb, self._boot_id)
        self._heartbeat_pub.publish(hb)

    def _not_allowed_detail(self) -> str:
        """Why motion is not allowed, in words (caller holds the lock); '' when it is."""
        il = self.interlock
        if il.estop:
            return 'e-stop latched'
        if il.fault is not None:
            return f'fault latched: {il.fault}'
        if il.stopped is not None:
            return f'rollout stopped: {il.stopped}'
        if il.config.require_deadman and not il.deadman_held:
            return 'the Quest deadman is not held'
        if il.quest_link_lost():
            return 'no fresh quest/joy: the e-stop channel is not known to work'
        return ''

    def _execute(self, decisions: list[Decision]) -> None:
        """Carry out the interlock's decisions (caller holds the lock).

        A raised motion fence goes out in a heartbeat first, before any cancel: it stops a
        goal sent before the stop that reaches the executor after the cancel-all."""
        log = self.get_logger()
        if self.interlock.fence_changed:
            try:
                self._publish_heartbeat()
            except Exception as exc:  # noqa: BLE001 - the cancel below must still go out
                log.error(f'could not send the raised motion fence: {exc}')
        for d in decisions:
            if d.kind is Kind.CANCEL:
                self._cancel_goals(d.reason)
            elif d.kind is Kind.LATCH:
                log.error(d.reason)
            elif d.kind is Kind.EXPIRE:
                log.warning(d.reason)
            elif d.kind is Kind.FORWARD:
                if not self._hb_allowed:
                    # The executor admits a goal only while the gate's latest heartbeat allows
                    # motion: say so before the first goal after a stop, e-stop or release.
                    self._publish_heartbeat()
                self._forward(d.chunk)

    # ---- chunks ----------------------------------------------------------------------------
    @staticmethod
    def _violations(blocks: list[Block]) -> list[Violation]:
        return [Violation(b.check, '', WHOLE_CHUNK, b.value, b.limit, b.message)
                for b in blocks]

    def _validate(self, chunk: Chunk) -> Verdict:
        with self._lock:
            model, model_error = self._model, self._model_error
            js = self._js_history.measured_at(chunk.stamp)
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
            js = self._js_history.measured_at(cchunk.stamp)
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
        with self._lock:
            self._stalled(time.monotonic())
            for k, n in verdict.counts().items():
                self._counts[k] = self._counts.get(k, 0) + n
            real = [v for v in verdict.violations if v.check not in NOT_READY_CHECKS]
            out = self.interlock.chunk(
                time.monotonic(), chunk, int(msg.sequence), shadow=bool(msg.shadow),
                rejected=verdict.rejected, real_rejection=bool(real),
                needs_confirmation=verdict.needs_confirmation,
                executor_ready=self._client.server_is_ready(), policy_id=msg.policy_id)
            forwarded = self._carry_out(out, verdict)
        if verdict.rejected and not msg.shadow:
            self.get_logger().warning(f'live chunk {int(msg.sequence)} {verdict.summary} '
                                      f'(stage {verdict.stage})')
        self._publish_verdict(msg, verdict, forwarded)

    def _carry_out(self, out: ChunkOutcome, verdict: Verdict) -> bool:
        """Add the interlock's blocking reasons to ``verdict``, carry out its decisions, and
        say whether the chunk was forwarded (caller holds the lock)."""
        if out.blocks:
            verdict.violations.extend(self._violations(out.blocks))
            verdict.stage = 'node'
        self._execute(out.decisions)
        return out.forwarded

    def _forward(self, chunk: Chunk) -> None:
        """Send ``chunk`` as a goal (caller holds the lock; the interlock decided FORWARD)."""
        goal = ExecuteTrajectory.Goal(trajectory=trajectory_to_msg(chunk.trajectory),
                                      sequence=int(chunk.sequence),
                                      source=self.get_fully_qualified_name(),
                                      heartbeat_counter=self._heartbeats)
        goal.trajectory.header.stamp = sec_to_time(chunk.stamp)
        sign_goal(self._auth_key, goal, self._boot_id)
        epoch = self.interlock.epoch
        seq = int(chunk.sequence)
        future = self._client.send_goal_async(goal)
        self._inflight.add(future)
        future.add_done_callback(lambda f: self._on_goal_response(f, epoch, seq))

    def _on_goal_response(self, future: Any, epoch: int, seq: int) -> None:
        with self._lock:
            self._inflight.discard(future)
        try:
            handle = future.result()
        except Exception as exc:  # noqa: BLE001 - report, nothing else to do
            self.get_logger().error(f'goal {seq}: send failed: {exc}')
            with self._lock:
                self.interlock.goal_refused(seq)
            return
        if not handle.accepted:
            self.get_logger().warning(f'goal {seq} rejected by the executor')
            with self._lock:
                self.interlock.goal_refused(seq)
            return
        with self._lock:
            if epoch != self.interlock.epoch:
                # A stop happened after this goal was sent: it must not run.
                handle.cancel_goal_async()
                return
            if self.interlock.goal_sequence == seq:
                self._goal_handle = handle
        handle.get_result_async().add_done_callback(lambda f: self._on_result(f, seq))

    def _on_result(self, future: Any, seq: int) -> None:
        try:
            code = RESULT_NAMES.get(int(future.result().result.error_code), 'UNKNOWN')
        except Exception:  # noqa: BLE001 - no result (shutdown): the goal ended all the same
            code = ''
        with self._lock:
            self._execute(self.interlock.goal_halted(seq, code))
            if self.interlock.goal_sequence is None:
                self._goal_handle = None

    def _cancel_goals(self, why: str) -> Any:
        """Cancel every goal of the executor (caller holds the lock); returns the future of
        the cancel-all request, or None when the executor's cancel service is not there."""
        handle, self._goal_handle = self._goal_handle, None
        if handle is not None:
            handle.cancel_goal_async().add_done_callback(
                lambda f: self._on_cancel_done(f, why))
        if not self._cancel_all_client.service_is_ready():
            return None
        return self._cancel_all_client.call_async(CancelGoal.Request(goal_info=GoalInfo()))

    def _stop(self, why: str) -> None:
        """Stop the rollout (shutdown): cancel, raise the fence, disarm."""
        with self._lock:
            self._execute(self.interlock.stop(why))

    async def _on_stop_srv(self, request: Trigger.Request,
                           response: Trigger.Response) -> Trigger.Response:
        """``safety/stop``: latch "rollout stopped", cancel, and answer once the executor has
        confirmed the hold (or say that it has not).

        The cancel-all goes out at once, so the running goal holds one hop after the request.
        A goal sent but not yet answered may reach the executor after that cancel (DDS orders
        no two topics): it is canceled on its answer (the stop bumped the epoch), and once
        every such goal is answered a second cancel-all covers them, and only its answer
        confirms the hold. (Waiting for those answers before the first cancel let the running
        goal move on for a whole goal round trip: 0.3 s and more under load.)"""
        limit = self.p['stop_timeout']
        deadline = time.monotonic() + limit
        with self._lock:
            decisions = self.interlock.stop('stop requested (safety/stop)')
            decisions = [d for d in decisions if d.kind is not Kind.CANCEL]
            self._execute(decisions)   # the interlock's CANCEL bumped its epoch already
            inflight = list(self._inflight)
            # The cancel-all below also covers the goal the gate holds a handle for.
            self._goal_handle = None
        if not self._cancel_all_client.service_is_ready():
            response.success = False
            response.message = ('rollout stopped at the gate (nothing more is forwarded), but '
                                'the executor is unreachable: hold NOT confirmed')
            return response
        cancels = [self._cancel_all_client.call_async(CancelGoal.Request(goal_info=GoalInfo()))]
        # Goals sent but not yet answered: once the executor has answered them, a second
        # cancel-all covers them (before that it might not know them yet).
        for f in inflight:
            await wait_for(self, f, max(0.0, deadline - time.monotonic()))
        if any(not f.done() for f in inflight):
            response.success = False
            response.message = (f'rollout stopped at the gate, but a goal sent to the executor '
                                f'was not answered within {limit:g} s: hold NOT confirmed')
            return response
        if inflight:
            cancels.append(self._cancel_all_client.call_async(
                CancelGoal.Request(goal_info=GoalInfo())))
        for future in cancels:
            await wait_for(self, future, max(0.0, deadline - time.monotonic()))
        if not all(f.done() for f in cancels):
            response.success = False
            response.message = (f'rollout stopped at the gate, but the executor did not answer '
                                f'the cancel within {limit:g} s: hold NOT confirmed')
            return response
        # trajectory_server switches to its stop motion inside the cancel callback, before it
        # answers; a goal it does not cancel (rejected, terminated) is not running. So the
        # answer to the last cancel-all (sent after every goal of the stopped rollout was
        # answered) means the executor follows no goal of it any more.
        n = sum(len(f.result().goals_canceling) for f in cancels)
        response.success = True
        response.message = (f'stopped: the executor holds ({n} goal(s) canceled); nothing is '
                            'forwarded until a new preflight and start')
        self.get_logger().info(f'safety/stop: {response.message}')
        return response

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
            chunk, why = self.interlock.take_pending(time.monotonic())
        if chunk is None:
            return False, why
        # A confirmed chunk runs from the moment of confirmation: its points keep their
        # time_from_start, counted from now (a person takes longer than max_chunk_age, and the
        # original timing is in the past by then). Every check then runs again on it, against
        # the latest measured state; the path itself is never changed.
        chunk = chunk.restamped(self.get_clock().now().nanoseconds * 1e-9)
        verdict = self._validate(chunk)
        msg = _chunk_header(chunk)
        with self._lock:
            self._stalled(time.monotonic())
            out = self.interlock.confirmed(chunk, int(chunk.sequence),
                                           rejected=verdict.rejected,
                                           executor_ready=self._client.server_is_ready(),
                                           now=time.monotonic())
            forwarded = self._carry_out(out, verdict)
        self._publish_verdict(msg, verdict, forwarded, note='operator confirmation: ')
        if forwarded:
            return True, f'chunk {chunk.sequence} confirmed and forwarded'
        return False, f'chunk {chunk.sequence} not forwarded: {verdict.summary}'

    def _on_confirm_srv(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        response.success, response.message = self._confirm()
        return response

    def _on_arm(self, request: Arm.Request, response: Arm.Response) -> Any:
        """``safety/arm``: policy_node's start names its accepted preflight (Arm.srv)."""
        with self._lock:
            self._stalled(time.monotonic())
            ok, why = self.interlock.arm(int(request.preflight_sequence), request.policy_id)
            if ok:
                self._publish_heartbeat()    # the first heartbeat of the armed rollout
            response.success, response.message = ok, why
            response.heartbeat_counter = self._heartbeats
        log = self.get_logger()
        log.info(f'safety/arm: {why}') if ok else log.warning(f'safety/arm refused: {why}')
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        with self._lock:
            response.success, response.message = self.interlock.reset()
        if not response.success:
            return response
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

    def _diagnostics(self) -> TaskStatus:
        """The gate's status on /diagnostics (one task of the node's DiagnosticsUpdater)."""
        with self._lock:
            il = self.interlock
            if il.estop:
                level, state = ERROR, 'e-stop latched'
            elif il.fault:
                level, state = ERROR, 'fault latched: ' + il.fault
            elif self._model is None:
                level, state = ERROR, 'no robot model: ' + self._model_error
            elif self._js is None:
                level, state = ERROR, 'no joint_states'
            elif self.config.disabled_checks:
                level, state = WARN, 'ok, with checks DISABLED'
            else:
                level, state = OK, 'ok'
            values = [('state', state),
                      ('interlock', il.state()),
                      ('rollout_stopped', il.stopped or ''),
                      ('armed_by_preflight', '' if il.armed_by is None else
                       f'{il.armed_by[0]} ({il.armed_by[1][:16]})'),
                      ('disabled_checks', ','.join(self._checks_off())),
                      ('deadman_held', il.deadman_held),
                      ('require_deadman', self.p['require_deadman']),
                      ('quest_link', 'fresh' if il.quest_fresh else 'lost'),
                      ('estop_channel_watched', il.config.require_quest),
                      ('on_reject', self.p['on_reject']),
                      ('goal_active', il.goal_active),
                      ('executor_ready', self._client.server_is_ready()),
                      ('last_forwarded_sequence', il.last_forwarded),
                      ('last_verdict', self._last_summary),
                      ('stall_timeout', self.p['stall_timeout']),
                      ('stalls', self._liveness.stalls),
                      ('longest_scheduling_gap', f'{self._liveness.max_gap:.3f}'),
                      ('auth_key', f'{self._auth_path} ({key_id(self._auth_key)})'),
                      *self._joint_states.diagnostics(),
                      ('robot_model_sha256', self._models.model_hash[:16]),
                      ('robot_descriptions_refused', self._models.refused),
                      ('last_robot_model_refusal', self._models.last_refusal),
                      ('boot_id', f'{self._boot_id:x}')]
            values += list(il.stats.items())
            values += [('violations.' + k, v) for k, v in sorted(self._counts.items())]
        return TaskStatus(level, state, values)

    def _checks_off(self) -> dict[str, str]:
        """Every check of this gate that is off, and why: the chunk checks
        (:meth:`GateConfig.checks_off`) and the interlock's own supervision."""
        off = self.config.checks_off()
        p = self.p
        if not p['require_deadman']:
            off['deadman'] = 'require_deadman is false (motion does not need the deadman)'
        if not self.interlock.config.require_quest:
            off['quest_link'] = ('estop_button is -1 and no deadman: the loss of quest/joy '
                                 'stops nothing')
        if p['estop_button'] < 0:
            off['quest_estop'] = 'estop_button is -1 (no e-stop on quest/joy)'
        if p['stall_timeout'] <= 0.0:
            off['stall'] = 'stall_timeout is 0'
        if not WRITER_IDS:
            off['joint_states_second_publisher'] = 'this rclpy gives no publisher id'
        return off

    def close(self) -> None:
        """Cancel the running goal on shutdown (the executor then holds; it also holds when
        the heartbeat stops)."""
        try:
            self._stop('shutdown')
        except Exception as exc:  # noqa: BLE001 - the context may be gone already (SIGINT)
            self.get_logger().warning(f'could not cancel at shutdown: {exc}')


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
