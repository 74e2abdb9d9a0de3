"""policy_node: live inputs -> observation -> policy -> stamped ``policy/chunk``.

A lifecycle node (docs/policy.md, "Rollout control"): configure loads and checks the checkpoint
and creates the topics, services and the worker; activate allows preflight and start;
deactivate stops the rollout; cleanup destroys them and releases the policy. ``policy/preflight``
runs one inference and publishes it as a shadow chunk; ``policy/start`` starts the live
rollout (only after a passing preflight within ``preflight_validity`` s); ``policy/stop`` stops
it. Inference runs in one dedicated worker thread at ``query_frequency`` with absolute
deadlines, never in a callback. The logic lives in the pure cores
(:mod:`egoroll_ros.core.observation`, :mod:`egoroll_ros.core.rollout`,
:mod:`egoroll_ros.core.step`, :mod:`egoroll_ros.core.worker`, :mod:`egoroll_ros.core.rtc`,
:mod:`egoroll_ros.core.aggregation`, :mod:`egoroll_ros.core.debounce`,
:mod:`egoroll_ros.policies`) and the ROS helpers (:mod:`egoroll_ros.ros.policy_params`,
:mod:`egoroll_ros.ros.policy_status`, :mod:`egoroll_ros.ros.preflight_verdict`,
:mod:`egoroll_ros.ros.gate_stop`, :mod:`egoroll_ros.ros.takeover`); this file is the wiring.

Chunk stamp: the node's ROS-clock time at which the observation was assembled from inputs that
were all within their max age (header stamps of the inputs are not trusted for this: a driver
publishing zero or foreign stamps would otherwise shift every chunk).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import threading
import time
from typing import Any

from lifecycle_msgs.msg import Transition
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleState, TransitionCallbackReturn
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from sensor_msgs.msg import Joy
from std_msgs.msg import String
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk, InterlockHeartbeat, RolloutStatus
from egoroll_ros.core.action_space import ActionSpace
from egoroll_ros.core.aggregation import ChunkAggregator, config_from_params
from egoroll_ros.core.debounce import ButtonDebouncer
from egoroll_ros.core.inference import CartesianRuntime, setup_from_params
from egoroll_ros.core.liveness import Liveness
from egoroll_ros.core.observation import LatestInputs, ObservationBuilder, StaleInputError
from egoroll_ros.core.policy import Policy, PolicyError
from egoroll_ros.core.rollout import RolloutStateMachine, State, TransitionError
from egoroll_ros.core.rtc import DELAY_WINDOW, RunningChunk, check_rtc_config, check_rtc_policy
from egoroll_ros.core.step import Step, rollout_step
from egoroll_ros.core.types import Chunk
from egoroll_ros.core.worker import RolloutWorker
from egoroll_ros.errors import CheckpointError, ConfigError, EgorollError, InputError
from egoroll_ros.policies.loading import load_policy
from egoroll_ros.ros import entities
from egoroll_ros.ros.buttons import DebouncedButton
from egoroll_ros.ros.convert import any_chunk_to_msg
from egoroll_ros.ros.diagnostics import DiagnosticsUpdater, TaskStatus
from egoroll_ros.ros.gate_arm import GateArm
from egoroll_ros.ros.gate_stop import (
    CONFIRMED,
    NO_GATE,
    NOT_CONFIRMED,
    GateStop,
    StopReport,
    await_report,
)
from egoroll_ros.ros.images import prepare_image
from egoroll_ros.ros.lifecycle import AwaitingLifecycleNode, is_transition
from egoroll_ros.ros.markers import ChunkMarkers
from egoroll_ros.ros.params import declare_params, watch_live
from egoroll_ros.ros.paths import policy_path, resolve_path
from egoroll_ros.ros.policy_inputs import PolicyInputs, input_names
from egoroll_ros.ros.policy_params import PARAMS
from egoroll_ros.ros.policy_status import (
    final_status,
    rollout_detail,
    rollout_status,
    rollout_task,
)
from egoroll_ros.ros.preflight_verdict import PreflightVerdict
from egoroll_ros.ros.robot_models import DESCRIPTION_TOPIC, LATCHED
from egoroll_ros.ros.runner import run_node, wait_for
from egoroll_ros.ros.takeover import TakeoverHook

_RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
_DEACTIVATED = 'deactivated (lifecycle): activate to allow preflight/start'


class PolicyNode(AwaitingLifecycleNode):
    """The policy node (see the module docstring). ``**kwargs`` go to ``Node.__init__``."""

    def __init__(self, node_name: str = 'policy_node', **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._deactivate_report: StopReport | None = None
        self.p = declare_params(self, PARAMS)
        watch_live(self, PARAMS, self.p, self._apply_live)
        self.setup = setup_from_params(self.p, resolve_path)
        self.joints = list(self.setup.joints)
        self.cameras = list(self.setup.cameras)
        self.aggregator = ChunkAggregator(config_from_params(
            self.p, cartesian=self.setup.cartesian is not None))
        if self.aggregator.config.active:
            self.get_logger().info(f'chunk aggregation: {self.aggregator.config.mode}, '
                                   f'pin_latency {self.aggregator.config.pin_latency}')
        self.last_underrun = ''
        self.inputs = LatestInputs(input_names(self.cameras))
        # Configured state (on_configure .. on_cleanup): the rollout state machine, the
        # policy, the node's topics, services and timers, and the inference worker.
        self.sm: RolloutStateMachine | None = None
        self.policy: Policy | None = None
        self.builder: ObservationBuilder | None = None
        self.cartesian: CartesianRuntime | None = None
        self.space: ActionSpace | None = None
        self.active = False
        #: Why the node is unconfigured (lifecycle state 'unconfigured'; '' once configured).
        self.unconfigured_detail = 'not configured (lifecycle configure loads the policy)'
        self._last_sequence = time.time_ns() // 1000 - 1
        self._entities: entities.Entities = {}
        self._worker: RolloutWorker | None = None
        self.inferences_skipped = 0
        self.last_latency = math.nan
        self.last_skip_reason = ''
        self.timing: list[tuple[float, float]] = []  # (assembly s, total s), last 1000
        # Real-time chunking (policy.rtc): the chunks published in this rollout and the
        # executor's last executor/state, from which each inference is told what runs.
        self.rtc = RunningChunk()
        self._debounce = ButtonDebouncer(self.p['quest.debounce_time'])
        self._closing = False
        self._last_status: RolloutStatus | None = None
        self._verdict: PreflightVerdict | None = None   # the gate's word on the preflight
        self._gate: GateStop | None = None
        self._toggle_button: DebouncedButton | None = None
        # Diagnostics exist in every lifecycle state: they say why the node is unconfigured.
        self._diagnostics = DiagnosticsUpdater(self, 1.0, timer=True)
        self._diagnostics.add('rollout', self._rollout_status)
        # A Cartesian configuration without urdf_path takes the robot's URDF from
        # robot_description (latched, as robot_state_publisher and sim_robot publish it): an
        # input of configure itself, so it is taken in every lifecycle state.
        self._description: str | None = None
        self._needs_description = (self.setup.cartesian is not None
                                   and not self.setup.cartesian.urdf_path)
        if self._needs_description:
            self.create_subscription(String, DESCRIPTION_TOPIC, self._on_description,
                                     LATCHED)
        if self.p['autoconfigure']:
            if self._needs_description:
                self.unconfigured_detail = ('waiting for robot_description (Cartesian policy, '
                                            'no urdf_path) to configure')
                self.get_logger().info('configure deferred until robot_description arrives')
            else:
                self._autoconfigure()

    def _autoconfigure(self) -> None:
        if self.trigger_configure() == TransitionCallbackReturn.SUCCESS:
            self.trigger_activate()

    def _on_description(self, msg: String) -> None:
        if self._description is not None:
            if msg.data != self._description:
                self.get_logger().warning('robot_description changed: ignored (the model is '
                                          'fixed at configure; reconfigure to take it)',
                                          once=True)
            return
        self._description = msg.data
        self.get_logger().info(f'robot_description received ({len(msg.data)} bytes)')
        if self.p['autoconfigure'] and self.policy is None:
            self._autoconfigure()

    # ---------------------------------------------------------------- lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Load and validate the checkpoint, then create the topics, services, timers and the
        inference worker; refuse (stay unconfigured, nothing created) with the reason."""
        try:
            self._load_policy()
        except (CheckpointError, ConfigError) as exc:
            self.get_logger().error(f'configure refused: {exc}')
            self.unconfigured_detail = f'configure refused: {exc}'
            return TransitionCallbackReturn.FAILURE
        # Sequences continue across rollouts and reconfigurations, and above any earlier run
        # of this node (the first is the wall-clock time in microseconds).
        self.sm = RolloutStateMachine(
            self.p['preflight_validity'], time.monotonic,
            first_sequence=max(time.time_ns() // 1000, self._last_sequence + 1))
        before = entities.snapshot(self)
        try:
            self._create_entities()
        except Exception:
            self._destroy_entities(entities.created_since(self, before))
            self._release_policy()
            raise
        self._entities = entities.created_since(self, before)
        self._worker = RolloutWorker(self.sm, 1.0 / self.p['query_frequency'], step=self._step,
                                     begin=self._begin_rollout, serve=self._do_preflight)
        self._worker.start()
        self.unconfigured_detail = ''
        return TransitionCallbackReturn.SUCCESS

    def _create_entities(self) -> None:
        """What exists only while configured (inputs, outputs, services, the gate client)."""
        PolicyInputs(self, self.inputs, self.cameras, self._on_joy,
                     rtc=self.rtc if self.p['policy.rtc'] else None)
        # A lifecycle publisher: it publishes only while the node is active.
        self.chunk_pub = self.create_lifecycle_publisher(ActionChunk, 'policy/chunk', _RELIABLE)
        # Operator takeover: teleop chunks on policy/chunk, the policy in shadow meanwhile.
        # The node's watchdog on itself (core/liveness.py), beaten on the steady clock and
        # checked before every live or teleop chunk goes out.
        self._liveness = Liveness(self.p['stall_timeout'])
        self._liveness_lock = threading.Lock()
        self.create_timer(0.05, self._beat, clock=Clock(clock_type=ClockType.STEADY_TIME))
        if self.p['stall_timeout'] <= 0.0:
            self.get_logger().warning("parameter 'stall_timeout' is 0: a policy node that hung "
                                      'and resumed goes on publishing its rollout')
        self.takeover = TakeoverHook(self, self.p, self.inputs, self.sm, self._publish_chunk,
                                     self.p['frame_id'])
        self.markers = ChunkMarkers(self, self.p['markers.frames'], self.p['urdf_path'])
        self.status_pub = self.create_publisher(RolloutStatus, 'policy/status', _RELIABLE)
        # The services' coroutines (preflight awaits the worker, stop awaits the gate) hold
        # their callback group while they wait: a reentrant group of their own, so a stop is
        # served during a preflight, and the default group (every other callback) stays free.
        group = ReentrantCallbackGroup()
        self.create_service(Trigger, 'policy/preflight', self._srv_preflight,
                            callback_group=group)
        self.create_service(Trigger, 'policy/start', self._srv_start, callback_group=group)
        self.create_service(Trigger, 'policy/stop', self._srv_stop, callback_group=group)
        self._verdict = PreflightVerdict(self, self.p['gate.require_preflight_acceptance'],
                                         self.p['gate.verdict_timeout'], _RELIABLE)
        # Every stop (policy/stop, the Quest toggle, deactivate, a fault) asks the gate through
        # this one object and reports what it answered.
        self._gate = GateStop(self, self.p['gate.stop_service'], self.p['gate.stop_timeout'],
                              on_report=self._on_stop_report)
        self._arm = GateArm(self, self.p['gate.arm_service'], self.p['gate.verdict_timeout'])
        if self._arm.configured:
            self.create_subscription(InterlockHeartbeat, 'safety/heartbeat',
                                     self._on_gate_heartbeat, _RELIABLE)
        else:
            self.get_logger().warning("parameter 'gate.arm_service' is empty: a start arms no "
                                      'safety gate, and a gate that stops is not followed')
        if not self.p['gate.stop_service']:
            self.get_logger().warning("parameter 'gate.stop_service' is empty: a stop only "
                                      'stops publishing; the running chunk goes on until the '
                                      "executor's command_timeout")
        self.create_timer(1.0 / self.p['status_rate'], self._publish_status)
        # The press's edge comes at its debounce deadline (a steady timer), not with the next
        # joy sample: a stream that publishes only on change may send none.
        if self.p['quest.toggle_button'] >= 0:
            # The press means what it meant when it began: a stop if the rollout ran then.
            self._toggle_button = DebouncedButton(
                self, self._debounce, self._toggle, self.p['quest.toggle_button'],
                'quest.toggle_button', at_press=lambda: self.sm.state is State.RUNNING)

    def _destroy_entities(self, made: entities.Entities | None = None) -> None:
        """Destroy what configure created (``made``; default: what the last configure did)."""
        entities.destroy(self, self._entities if made is None else made)
        self._entities = {}
        self._gate = self._verdict = self._arm = None
        self._toggle_button = None

    def _apply_live(self, changes: dict[str, Any]) -> None:
        """``max_age.*`` set live (within their hard bounds, never while RUNNING: a rollout
        runs on the freshness limits it was started with): the next observation is judged with
        them (the loaded policy's builder); a later configure reads them from ``p``."""
        if self.sm.state is State.RUNNING:
            raise ConfigError('an input freshness limit cannot change while a rollout is '
                              'RUNNING: stop it first (policy/stop), then set it')
        p = {**self.p, **changes}
        builder = getattr(self, 'builder', None)
        if builder is not None:
            builder.set_limits(p['max_age.camera'], p['max_age.joint_states'],
                               p['max_age.quest'], p['max_clock_offset'] or None)
        if 'max_clock_offset' in changes and not changes['max_clock_offset']:
            self.get_logger().warning("'max_clock_offset' set to 0: the clock offset of the "
                                      'inputs is measured, not checked')
        self.get_logger().info('set live: ' + ', '.join(f'{k}={v!r}'
                                                        for k, v in sorted(changes.items())))

    def _load_policy(self) -> None:
        p = self.p
        path = policy_path(p['policy.path'])
        setup = self.setup
        check_rtc_config(p['policy.rtc'], self.aggregator.config.active,
                         setup.cartesian is not None)
        if self._needs_description and self._description is not None:
            setup = dataclasses.replace(setup, cartesian=dataclasses.replace(
                setup.cartesian, urdf_text=self._description))
        loaded = load_policy(p, setup, path, sys.executable, self.get_logger().warning,
                             prepare=prepare_image)
        try:
            check_rtc_policy(p['policy.rtc'], loaded.policy.metadata)
        except ConfigError:
            loaded.policy.close()
            raise
        if p['policy.rtc']:
            self.get_logger().info('real-time chunking: each inference passes the running '
                                   "chunk's unexecuted points and the inference delay")
        self.builder, self.cartesian = loaded.builder, loaded.cartesian
        self.space = loaded.space
        for line in loaded.summary():
            self.get_logger().info(line)
        old, self.policy = self.policy, loaded.policy
        if old is not None:
            old.close()

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Accept preflight/start requests (and enable the chunk publisher)."""
        self.active = True
        return super().on_activate(state)

    def before_transition(self, transition: Transition) -> tuple[str, Any] | None:
        """Through the change_state service, a deactivate of an active node stops the rollout
        first (publishing stops at once, preflight and start are refused) and awaits the gate's
        report, so the transition completes only once the hold is confirmed or it is known
        that it is not (the gate refused, is unreachable, or did not answer within
        gate.stop_timeout).

        Either way the transition then SUCCEEDS, with an unconfirmed hold reported as an ERROR
        in the log, policy/status and /diagnostics: deactivating must stop publishing in any
        case, and a FAILURE would leave the node ACTIVE, where the Quest toggle or
        policy/start could begin a new rollout beside a gate that did not confirm the last stop.
        Every other transition is rclpy's own."""
        if not self.active or not is_transition(
                transition, Transition.TRANSITION_DEACTIVATE, 'deactivate'):
            return None
        self.active = False
        _, stop = self._stop_rollout('lifecycle deactivate', _DEACTIVATED)
        return ('a deactivate is waiting for the safety gate to confirm the hold',
                self._await_deactivate_report(stop))

    async def _await_deactivate_report(self, stop: Future | None) -> None:
        self._deactivate_report = await self._report_of(stop)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop any rollout (the gate cancels and holds) and refuse requests.

        Through the change_state service the rollout was stopped already and the gate's report
        awaited (:meth:`before_transition`); in-process (``trigger_deactivate``) the transition
        cannot wait: the stop is asked for and its report follows in the log and
        policy/status."""
        self.active = False
        _, stop = self._stop_rollout('lifecycle deactivate', _DEACTIVATED)
        if stop is not None and not stop.done():
            self.get_logger().warning('deactivated in-process: the transition does not wait for '
                                      "the safety gate's hold (its report follows)")
        report, self._deactivate_report = self._deactivate_report, None
        if report is not None and report.state == NOT_CONFIRMED:
            self.get_logger().error(f'deactivated (publishing stopped, preflight and start '
                                    f'refused), but {report.text()}')
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop the worker, destroy the topics and services, and release the policy."""
        self._unconfigure('cleaned up (lifecycle): configure to load the policy again')
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop everything."""
        self.close()
        return TransitionCallbackReturn.SUCCESS

    def _unconfigure(self, why: str) -> None:
        sm = self.sm
        if sm is not None:
            # cleanup or shutdown: the gate is asked, its answer not awaited (at shutdown the
            # executor may not spin any more)
            _, stop = self._stop_rollout(why, why)
            if stop is not None and not stop.done():
                self.get_logger().warning(f'{why}: the safety gate was asked to hold; its answer '
                                          "is not awaited (the executor's heartbeat and command "
                                          'timeouts stop the arm if it does not)')
            self._last_sequence = sm.last_sequence
        self.active = False
        # the last word on policy/status; a SIGTERM may shut the context down between the check
        # and the publish (rclpy then raises RCLError: 'publisher's context is invalid')
        if sm is not None and self.context.ok():
            with contextlib.suppress(RuntimeError):
                self.status_pub.publish(final_status(self._closing, why, sm.chunks_published,
                                                     self.inferences_skipped))
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop(timeout=10.0)
        self._destroy_entities()
        self._release_policy()
        self.sm = None
        self._last_status = None
        self.unconfigured_detail = why

    def _release_policy(self) -> None:
        policy, self.policy = self.policy, None
        self.builder = self.cartesian = self.space = None
        if policy is not None:
            policy.close()

    def close(self) -> None:
        """Stop the worker and release the policy (safe to call twice)."""
        if self._closing:
            return
        self._closing = True
        self._unconfigure('shutting down')

    # ---------------------------------------------------------------- inputs
    def _on_joy(self, msg: Joy, now: float) -> None:
        """A quest/joy sample (stored already): the takeover and toggle buttons."""
        self.takeover.on_joy(tuple(msg.buttons), now)
        if self._toggle_button is not None:   # quest.toggle_button >= 0
            self._toggle_button.sample(msg.buttons, now)

    def _toggle(self, began_running: bool) -> None:
        """A debounced press of the Quest toggle: stop a running rollout, else start. A press
        that began while the rollout ran is a stop even if the rollout ended meanwhile (the
        gate, on the same press, or anything else): never a start."""
        if self.sm.state is State.RUNNING or began_running:
            old, _ = self._stop_rollout('Quest toggle', 'stopped by the Quest button',
                                        always=True)
            ended = '' if old is State.RUNNING else \
                f' (the rollout had already ended during the debounce: {old.name})'
            self.get_logger().info(f'Quest button: publishing stopped{ended}; the safety '
                                   'gate is asked to hold (its report follows)')
        else:
            # The start arms the gate first (a service round trip): not on this callback.
            self.executor.create_task(self._toggle_start)

    async def _toggle_start(self) -> None:
        ok, why = await self._start()
        self.get_logger().info(f'Quest button start: {why}') if ok else \
            self.get_logger().warning(f'Quest button start refused: {why}')

    def _on_gate_heartbeat(self, msg: InterlockHeartbeat) -> None:
        """The gate's heartbeat: one sent after this rollout's arm that says the gate disarmed
        ends the rollout here too (no more live chunks), with the gate's reason."""
        arm, sm = self._arm, self.sm
        if arm is None or sm is None:
            return
        reason = arm.disarmed(msg)
        if reason is None or sm.state is not State.RUNNING:
            return
        self._stop_rollout('safety gate', f'the safety gate disarmed: {reason}')
        self.get_logger().warning(f'rollout stopped: the safety gate disarmed ({reason}); '
                                  'preflight and start again')

    # ---------------------------------------------------------------- services
    async def _srv_preflight(self, req: Trigger.Request,
                             res: Trigger.Response) -> Trigger.Response:
        # A coroutine: the inference runs on the worker thread and this callback awaits its
        # result, so the node's (single) executor thread keeps taking inputs, status and stop
        # requests meanwhile.
        sm = self.sm
        if not self.active or sm is None:
            res.success, res.message = False, self._inactive()
            return res
        try:
            sm.begin_preflight()
        except TransitionError as exc:
            res.success, res.message = False, str(exc)
            return res
        done: Future = Future()
        self._worker.request(done)   # the worker answers it with _do_preflight()
        limit = 3.0 * self.p['policy.request_timeout'] + 5.0
        if not await wait_for(self, done, limit):
            sm.fault(f'preflight did not finish within {limit:g} s')
            res.success, res.message = False, f'preflight timed out after {limit:g} s'
            return res
        ok, message = done.result()
        if ok and self._verdict.required:
            ok, message = await self._verdict.wait(message)
        res.success, res.message = ok, message
        return res

    def _inactive(self) -> str:
        """Why preflight/start are refused while the node is not active."""
        if self.sm is None:
            return f'not active: unconfigured ({self.unconfigured_detail})'
        return f'not active: lifecycle state inactive, activate to allow it ({self.sm.detail})'

    async def _start(self) -> tuple[bool, str]:
        """Start a rollout: the gate's word on the preflight, then the arm request naming it,
        then RUNNING. A stop or a new preflight while the arm request is out wins: the start
        is refused and the gate asked to hold."""
        if not self.active or self.sm is None:
            return False, self._inactive()
        sm = self.sm
        refusal = self._verdict.refusal()
        if refusal and sm.state is State.READY:
            return False, f'start refused: {refusal}'
        state = sm.state
        if state is State.RUNNING:
            return False, 'already running'
        if state is not State.READY:
            return False, (f'start needs a passing preflight within the last '
                           f'{sm.preflight_validity:g} s (state {state.name}: {sm.detail})')
        ready = sm.generation
        preflight = self._verdict.preflight()
        if preflight is None:
            return False, 'start refused: no preflight shadow chunk yet'
        armed, why = await self._arm.arm(*preflight)
        if not armed:
            return False, f'start refused: {why}'
        if sm.generation != ready:
            self._ask_gate('start interrupted')
            return False, 'start refused: stopped or preflighted again while arming the gate'
        try:
            gen = sm.start()
        except TransitionError as exc:
            self._ask_gate('start failed')
            return False, str(exc)
        if self._gate is not None:
            self._gate.clear()     # the last stop's report is shown until a new start
        with self._liveness_lock:
            self._liveness.reset(time.monotonic())
        self._worker.begin(gen)
        return True, f'rollout started ({why})'

    async def _srv_start(self, req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success, res.message = await self._start()
        return res

    async def _srv_stop(self, req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        # No chunk of the rollout is published once it returns; the gate then cancels what runs
        # and answers once the executor confirmed the hold. A coroutine: the single executor
        # thread keeps serving the gate's answer meanwhile.
        old, stop = self._stop_rollout('policy/stop', 'stopped by request', always=True)
        report = await self._report_of(stop) or StopReport(
            'policy/stop', NOT_CONFIRMED, 'not configured: the gate was not asked', 0.0)
        # success: the hold is confirmed (or there is no gate to ask: the message says so)
        res.success = report.state in (CONFIRMED, NO_GATE)
        res.message = f'stopped publishing (was {old.name}); {report.text()}'
        return res

    def _stop_rollout(self, trigger: str, reason: str,
                      always: bool = False) -> tuple[State, Future | None]:
        """The one stop of every trigger (policy/stop, the Quest toggle, lifecycle deactivate,
        cleanup/shutdown; a fault enters FAULT instead and asks the gate in :meth:`_fault`):
        nothing of the rollout is published once the state machine has stopped, then the gate
        is asked to hold (when the rollout was running, or ``always``).

        Returns:
            The state left, and the future of the gate's :class:`StopReport` (None when the
            gate was not asked).
        """
        old = self.sm.stop(reason)
        if old is not State.RUNNING and not always:
            return old, None
        return old, self._ask_gate(trigger)

    def _ask_gate(self, trigger: str) -> Future | None:
        """Ask the gate to hold; the report goes to the log, policy/status and /diagnostics."""
        gate = self._gate
        return None if gate is None else gate.request(trigger)

    async def _report_of(self, stop: Future | None) -> StopReport | None:
        """Await a stop's report (it ends by gate.stop_timeout at the latest)."""
        return await await_report(self, stop, self.p['gate.stop_timeout'] + 1.0)

    def _on_stop_report(self, report: StopReport) -> None:
        """A stop's report is known: publish it now (policy/status, /diagnostics)."""
        if self.sm is None or self._closing or not self.context.ok():
            return
        with contextlib.suppress(RuntimeError):   # shutting down between check and publish
            self._publish_status()
            self._diagnostics.update(force=True)

    # ---------------------------------------------------------------- worker
    def _begin_rollout(self, gen: int) -> bool:
        """A new rollout, on the worker before its first step: nothing of the last one is
        aggregated or continued; a policy that fails to reset faults it."""
        self.aggregator.reset()
        self.rtc.clear()
        try:
            self.policy.reset()
        except EgorollError as exc:
            self._fault(f'policy reset failed: {exc}', gen)
            return False
        return True

    def _fault(self, reason: str, gen: int | None) -> None:
        running = self.sm.is_current(gen) if gen is not None else self.sm.state is State.RUNNING
        if self.sm.fault(reason, gen):
            self.get_logger().error(f'FAULT: {reason}')
            if running:
                self._ask_gate('policy fault')

    def _infer(self, shadow: bool = False, rtc: bool = False) -> Step | str:
        """One rollout step on the latest inputs: the step, or a skip reason (``rtc``: with
        the real-time chunking guidance of :class:`~egoroll_ros.core.rtc.RunningChunk`).

        Raises:
            PolicyError: inference failed.
        """
        stamp = self.get_clock().now().nanoseconds * 1e-9
        guidance = self.rtc.request(
            stamp, self.policy.metadata.step_period, time.monotonic(),
            [total for _, total in self.timing[-DELAY_WINDOW:]]) if rtc else None
        try:
            step = rollout_step(self.builder, self.inputs, self.space, time.monotonic(),
                                stamp, shadow=shadow, rtc=guidance)
        except StaleInputError as exc:
            return str(exc)
        except InputError as exc:
            return f'input error: {exc}'
        self.timing.append((step.assembly, step.latency))
        if len(self.timing) > 1000:
            del self.timing[:500]
        return step

    def _step(self, gen: int) -> None:
        try:
            out = self._infer(rtc=bool(self.p['policy.rtc']))
        except (PolicyError, EgorollError) as exc:
            self._fault(str(exc), gen)
            return
        except Exception as exc:  # noqa: BLE001 - a policy bug must fault, not kill the thread
            self._fault(f'inference raised {exc!r}', gen)
            return
        if isinstance(out, str):
            self.inferences_skipped += 1
            self.last_skip_reason = out
            return
        self.last_latency = latency = out.latency
        if self.takeover.core.active:
            # The operator drives: the policy's raw prediction goes out as a shadow chunk (the
            # recording holds what it would have done); aggregation restarts at the handback.
            self.aggregator.reset()
            msg = any_chunk_to_msg(out.chunk, frame_id=self.p['frame_id'])
        else:
            msg = any_chunk_to_msg(self._aggregate(out.chunk), frame_id=self.p['frame_id'])

        def publish(seq: int) -> int:
            msg.sequence = seq
            msg.shadow = self.takeover.shadow(gen)   # under the rollout lock
            self._publish_chunk(msg)
            return seq

        seq = self.sm.publish_if_current(gen, publish)
        if seq is not None and not msg.shadow and isinstance(out.chunk, Chunk):
            self.rtc.published(seq, out.chunk.stamp, len(out.chunk.trajectory.times))
        if seq is not None:
            # RViz only, after the chunk is out (never delays or gates a chunk).
            obs = out.observation
            joints = obs.joints if obs.joints is not None else obs.state
            self.markers.publish(self.joints, joints, self.space.joint_path(out.output),
                                 f'RUNNING, chunk {seq}, {latency * 1e3:.0f} ms')

    def _beat(self) -> None:
        """The steady watchdog: a gap of stall_timeout since the last beat stops a RUNNING
        rollout (the node was stopped or starved: the executor has held meanwhile)."""
        with self._liveness_lock:
            gap = self._liveness.beat(time.monotonic())
        if gap is not None:
            self._on_stall(gap)

    def _publish_chunk(self, msg: ActionChunk) -> None:
        """Publish a rollout or teleop chunk (under the rollout lock), unless the node has
        just come back from a stall: the rollout then stops and nothing is published."""
        with self._liveness_lock:
            gap = self._liveness.check(time.monotonic())
        if gap is not None and self._on_stall(gap):
            return
        self.chunk_pub.publish(msg)

    def _on_stall(self, gap: float) -> bool:
        """Stop a RUNNING rollout after a stall of ``gap`` s; whether it was running."""
        if self.sm is None or self.sm.state is not State.RUNNING:
            return False
        reason = (f'policy_node was not scheduled for {gap:.2f} s (stall_timeout '
                  f"{self.p['stall_timeout']:g} s: stopped or starved)")
        self._stop_rollout('stall', reason)
        self.get_logger().error(f'rollout stopped: {reason}; preflight and start again')
        return True

    def _aggregate(self, chunk: Any) -> Any:
        """The chunk to publish: the aggregation stage (a no-op unless configured)."""
        chunk, underrun = self.aggregator.apply(chunk, self.get_clock().now().nanoseconds * 1e-9)
        if underrun:
            self.last_underrun = underrun
            self.get_logger().warning(underrun, once=True)
        return chunk

    def _do_preflight(self) -> tuple[bool, str]:
        gen = self.sm.generation
        try:
            out = self._infer(shadow=True)
        except Exception as exc:  # noqa: BLE001 - any policy failure fails the preflight
            reason = f'preflight inference failed: {exc}'
            self.sm.end_preflight(False, reason, fault=True)
            self.get_logger().error(reason)
            return False, reason
        if isinstance(out, str):
            self.inferences_skipped += 1
            self.last_skip_reason = out
            self.sm.end_preflight(False, f'preflight skipped: {out}')
            return False, f'preflight skipped: {out}'
        self.last_latency = latency = out.latency
        msg = any_chunk_to_msg(out.chunk, frame_id=self.p['frame_id'])
        with self.sm.lock:
            if self.sm.generation != gen or self.sm.state is not State.PREFLIGHT:
                return False, 'preflight interrupted'
            msg.sequence = self.sm.next_sequence()
            self._verdict.expect(msg.sequence, msg.policy_id)
            self.chunk_pub.publish(msg)
            self.sm.end_preflight(True, f'preflight passed ({latency * 1e3:.1f} ms); start '
                                        f"within {self.p['preflight_validity']:g} s")
        return True, f'preflight passed: shadow chunk {msg.sequence} published'

    # ---------------------------------------------------------------- status
    def _publish_status(self) -> None:
        sm = self.sm
        if sm is None or self._closing:
            return
        now = time.monotonic()
        state = sm.state
        takeover = (self.takeover.detail or 'operator takeover') \
            if self.takeover.core.active else None
        detail = rollout_detail(
            sm.detail, state, last_skip=self.last_skip_reason, underrun=self.last_underrun,
            underruns=self.aggregator.underruns, takeover=takeover, stop=self._last_stop())
        msg = rollout_status(
            self.get_clock().now().to_msg(), state, detail,
            policy_id=self.policy.metadata.fingerprint if self.policy is not None else '',
            chunks_published=sm.chunks_published, inferences_skipped=self.inferences_skipped,
            latency=self.last_latency, ages=self.inputs.ages(now))
        self.status_pub.publish(msg)
        self.takeover.publish_label()
        self._last_status = msg

    def _last_stop(self) -> StopReport | None:
        return self._gate.last if self._gate is not None else None

    def _rollout_status(self) -> TaskStatus:
        return rollout_task(
            self._last_status, unconfigured=self.unconfigured_detail if self.sm is None else None,
            values=[('aggregation', self.aggregator.config.mode),
                    ('rtc', self.rtc.last if self.p['policy.rtc'] else 'off'),
                    ('overlap_underruns', self.aggregator.underruns)],
            clock_offsets=self.inputs.clock_offsets(), stop=self._last_stop())


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``policy_node`` console script.

    One executor thread: every callback is short (inference runs on the worker thread and
    preflight waits for it as a coroutine); rclpy's multi-threaded executor delayed the
    inputs by 0.1-0.4 s on a loaded 2-core machine, which made inferences skip as stale."""
    return run_node(PolicyNode, args=args, num_threads=1)


if __name__ == '__main__':
    sys.exit(main())
