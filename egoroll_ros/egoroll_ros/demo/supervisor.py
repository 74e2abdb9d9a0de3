"""The demo's supervisor node: plays the operator and the task, and logs what happens.

It holds the simulated Quest deadman, shows task targets to the camera (``sim/target``),
detects when the tool reaches them, and records joints, verdicts, status and diagnostics into a
:class:`~egoroll_ros.demo.report.DemoLog`. Calls to the policy services are made from the
command's main thread (never from a callback).
"""

from __future__ import annotations

from collections.abc import Sequence
import threading
import time

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PointStamped
import numpy as np
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk, GateVerdict, RolloutStatus
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.demo.report import DemoLog, TargetRecord, VerdictRecord
from egoroll_ros.ros.graph import wait_until
from egoroll_ros.sim.demo_task import TABLE_WORKSPACE, ReachExpert, reached

#: Executor result codes that end an execution abnormally (the robot stopped mid-motion). Other
#: codes are goals the executor refused, e.g. OLD_SEQUENCE when two goals sent a millisecond
#: apart reach its (concurrent) execute callbacks out of order: the newer one runs, the older
#: one is refused as the spec says; reported in the summary, not a failure of the run.
EXECUTION_ABORTS = frozenset({'PATH_TOLERANCE_VIOLATED', 'GOAL_TOLERANCE_VIOLATED',
                              'STALE_STATE', 'NO_STATE', 'COMMAND_TIMEOUT', 'LIMIT_VIOLATED',
                              'SHUTDOWN'})


class DemoSupervisor(Node):
    """Operator + task stand-in for ``egoroll demo`` (see the module docstring).

    Args:
        joints: the controlled joints, in order.
        model: the demo robot model (for the tool position).
        deadman_axis: Joy axis index of the Quest grip that the gate reads as deadman.
        seed: seeds the target sequence.
        hold_time: seconds the tool stays at a reached target before the next one.
        target_timeout: seconds after which an unreached target is replaced (a failure).
    """

    def __init__(self, joints: Sequence[str], model: RobotModel, deadman_axis: int = 3,
                 seed: int = 0, hold_time: float = 1.0, target_timeout: float = 20.0,
                 **kwargs) -> None:
        super().__init__('egoroll_demo', **kwargs)
        self.joints = list(joints)
        self.log = DemoLog(joint_names=list(joints))
        self._stamp_base_ns: int | None = None   # the first commanded stamp (integer ns)
        self.lock = threading.Lock()
        self._expert = ReachExpert(model, joint_names=self.joints)
        self._workspace = TABLE_WORKSPACE
        self._rng = np.random.default_rng(seed)
        self._hold_time = hold_time
        self._target_timeout = target_timeout
        self._deadman_axis = deadman_axis
        self.t0: float | None = None
        #: Set when the rollout is being stopped: the executor then times out the last goal
        #: (COMMAND_TIMEOUT) by design, which is not a failure of the run.
        self.stopping = False
        self.q: np.ndarray | None = None
        self.status: RolloutStatus | None = None
        self.tool_distance = float('nan')
        self._joy_pub = self.create_publisher(Joy, 'quest/joy', 10)
        self._target_pub = self.create_publisher(PointStamped, 'sim/target', 10)
        self.create_subscription(JointState, 'joint_states', self._on_joints,
                                 qos_profile_sensor_data)
        self.create_subscription(JointState, 'executor/commanded', self._on_commanded, 50)
        self.create_subscription(GateVerdict, 'safety/verdict', self._on_verdict, 50)
        self.create_subscription(ActionChunk, 'policy/chunk', self._on_chunk, 50)
        # The chunk and its verdict arrive on two topics in either order: match by sequence.
        self._inference: dict[int, float] = {}
        self._forward_latency: dict[int, float] = {}
        self.create_subscription(RolloutStatus, 'policy/status', self._on_status, 10)
        self.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 50)
        self.create_timer(0.05, self._publish_joy)
        self.create_timer(0.1, self._update_task)
        self._policy_clients = {name: self.create_client(Trigger, f'policy/{name}')
                        for name in ('preflight', 'start', 'stop')}
        self._target: np.ndarray | None = None
        self._reached_at: float | None = None

    # ----- time -----------------------------------------------------------------------------
    def now(self) -> float:
        """Seconds since the rollout started (negative before)."""
        return time.monotonic() - self.t0 if self.t0 is not None else -1.0

    def start_clock(self) -> None:
        """Mark the start of the rollout (times in the log count from here)."""
        with self.lock:
            self.t0 = time.monotonic()
            for t in self.log.targets:
                t.t_set = 0.0

    # ----- operator -------------------------------------------------------------------------
    def _publish_joy(self) -> None:
        msg = Joy()
        msg.header.stamp = self.get_clock().now().to_msg()
        axes = [0.0] * max(4, self._deadman_axis + 1)
        axes[self._deadman_axis] = 1.0
        msg.axes = axes
        msg.buttons = [0] * 4
        self._joy_pub.publish(msg)

    def call(self, name: str, timeout: float = 10.0) -> tuple[bool, str]:
        """Call ``policy/<name>`` (std_srvs/Trigger) from a non-callback thread."""
        client = self._policy_clients[name]
        if not client.wait_for_service(timeout_sec=timeout):
            return False, f'policy/{name} is not available'
        future = client.call_async(Trigger.Request())
        try:
            wait_until(future.done, timeout, f'policy/{name} response')
        except AssertionError as exc:
            return False, str(exc)
        res = future.result()
        return bool(res.success), str(res.message)

    def wait_shadow_verdict(self, start: int, timeout: float) -> VerdictRecord | None:
        """The first shadow verdict logged at index >= ``start``, or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = next((v for v in self.log.verdicts[start:] if v.shadow), None)
            if found is not None:
                return found
            time.sleep(0.01)
        return None

    # ----- task -----------------------------------------------------------------------------
    def new_target(self) -> np.ndarray:
        """Show the next target to the camera and start timing it."""
        target = self._workspace.sample(self._rng)
        msg = PointStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = 'base_link'
        msg.point.x, msg.point.y, msg.point.z = (float(v) for v in target)
        with self.lock:
            self._target = target
            self._reached_at = None
            self.log.targets.append(TargetRecord(max(self.now(), 0.0), target.tolist()))
        self._target_pub.publish(msg)
        return target

    def republish_target(self) -> None:
        """Publish the current target again (for late subscribers)."""
        with self.lock:
            target = self._target
        if target is None:
            return
        msg = PointStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = 'base_link'
        msg.point.x, msg.point.y, msg.point.z = (float(v) for v in target)
        self._target_pub.publish(msg)

    def _update_task(self) -> None:
        with self.lock:
            q, target, t = self.q, self._target, self.now()
        if q is None or target is None or self.t0 is None:
            return
        dist = float(np.linalg.norm(self._expert.tool_position(q) - target))
        with self.lock:
            self.tool_distance = dist
            record = self.log.targets[-1]
            record.min_distance = min(record.min_distance, dist)
            if record.t_reached is None and reached(self._expert.tool_position(q), target):
                record.t_reached = t
                self._reached_at = t
            held = self._reached_at is not None and t - self._reached_at >= self._hold_time
            timed_out = record.t_reached is None and t - record.t_set >= self._target_timeout
            next_target = held or timed_out
        if next_target:
            self.new_target()

    # ----- recording ------------------------------------------------------------------------
    def _ordered(self, msg: JointState) -> np.ndarray | None:
        index = {n: i for i, n in enumerate(msg.name)}
        try:
            return np.array([msg.position[index[j]] for j in self.joints], dtype=float)
        except (KeyError, IndexError):
            return None

    def _on_joints(self, msg: JointState) -> None:
        q = self._ordered(msg)
        if q is None:
            return
        with self.lock:
            self.q = q
            if self.t0 is not None:
                self.log.t_measured.append(self.now())
                self.log.measured.append(q.tolist())

    def _on_commanded(self, msg: JointState) -> None:
        q = self._ordered(msg)
        if q is None:
            return
        with self.lock:
            if self.t0 is not None:
                self.log.t_commanded.append(self.now())
                self.log.commanded.append(q.tolist())
                # Counted from the first stamp in integer ns: float seconds of the epoch
                # resolve 2^-22 s (~240 ns), tens of rad/s^3 of jerk at 500 Hz.
                ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
                if self._stamp_base_ns is None:
                    self._stamp_base_ns = ns
                self.log.stamp_commanded.append((ns - self._stamp_base_ns) * 1e-9)

    def _on_chunk(self, msg: ActionChunk) -> None:
        seq = int(msg.sequence)
        with self.lock:
            latency = self._forward_latency.pop(seq, None)
            if latency is None:
                self._inference[seq] = float(msg.inference_latency)
            else:
                self.log.obs_to_forward_excl_inference.append(
                    latency - float(msg.inference_latency))

    def _on_verdict(self, msg: GateVerdict) -> None:
        record = VerdictRecord(
            t=self.now(), sequence=int(msg.sequence), accepted=bool(msg.accepted),
            needs_confirmation=bool(msg.needs_confirmation), shadow=bool(msg.shadow),
            forwarded=bool(msg.forwarded), summary=msg.summary,
            violations=[{'check': v.check, 'subject': v.subject, 'point_index': v.point_index,
                         'value': v.value, 'limit': v.limit, 'message': v.message}
                        for v in msg.violations])
        with self.lock:
            self.log.verdicts.append(record)
            self.log.gate_check_durations.append(float(msg.check_duration))
            if msg.forwarded and self.t0 is not None:
                stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                obs = msg.chunk_stamp.sec + msg.chunk_stamp.nanosec * 1e-9
                self.log.obs_to_forward.append(stamp - obs)
                inference = self._inference.pop(int(msg.sequence), None)
                if inference is None:
                    self._forward_latency[int(msg.sequence)] = stamp - obs
                else:
                    self.log.obs_to_forward_excl_inference.append(stamp - obs - inference)

    def _on_status(self, msg: RolloutStatus) -> None:
        with self.lock:
            prev = self.status
            self.status = msg
            if msg.state == RolloutStatus.STATE_FAULT and (
                    prev is None or prev.state != RolloutStatus.STATE_FAULT):
                self.log.policy_faults.append(f'{msg.state_name}: {msg.detail}')
            if (prev is None or msg.chunks_published != prev.chunks_published) and \
                    np.isfinite(msg.last_inference_latency) and self.t0 is not None:
                self.log.inference_latencies.append(float(msg.last_inference_latency))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            with self.lock:
                if status.name.endswith('safety gate'):
                    state = values.get('state', '')
                    if ('fault latched' in state or 'e-stop' in state) and \
                            state not in self.log.gate_faults:
                        self.log.gate_faults.append(state)
                elif status.name.endswith('executor'):
                    if values.get('ticks', '').isdigit():
                        self.log.executor_ticks = int(values['ticks'])
                        self.log.executor_late_ticks = int(values.get('late_ticks', '0'))
                    err = values.get('last_error', '')
                    if not err or self.t0 is None:
                        continue
                    code = err.split(': ')[1] if err.count(': ') >= 1 else ''
                    expected = self.stopping and code == 'COMMAND_TIMEOUT'
                    # A chunk refused at the seam leaves the running one executing: a
                    # refusal, not an abort (core/executor.py, seam blend).
                    refused = 'refused at the seam' in err
                    if code in EXECUTION_ABORTS and not expected and not refused:
                        if err not in self.log.executor_errors:
                            self.log.executor_errors.append(err)
                    elif err not in self.log.executor_refusals:
                        self.log.executor_refusals.append(err)

    def counts(self) -> tuple[int, int, int, int]:
        """(accepted, rejected, targets reached, targets shown) of live chunks so far."""
        with self.lock:
            live = [v for v in self.log.verdicts if not v.shadow]
            acc = sum(v.accepted for v in live)
            return (acc, len(live) - acc, sum(t.t_reached is not None for t in self.log.targets),
                    len(self.log.targets))
