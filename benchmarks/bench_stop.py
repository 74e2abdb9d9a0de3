"""Benchmark (and stress script): how fast and how far the arm stops, through the real nodes.

Installed sim_robot, trajectory_server and safety_gate as processes over DDS; this process
publishes chunks and Quest samples like a policy and an operator. Each repetition sends a
chunk that moves wrist_roll at 0.3 rad/s, waits until ``executor/commanded`` moves, waits a
random 0-7 control periods more, then stops it by one of:

- ``stop``: ``safety/stop`` (the gate service ``policy/stop``, the Quest toggle, lifecycle
  deactivate and a policy fault call); time zero is the service's RETURN;
- ``estop``: a quest/joy sample with the e-stop button; time zero is its publish;
- ``deadman``: a quest/joy sample with the deadman released; time zero is its publish;
- ``gate_death``: SIGKILL of the safety_gate (then restarted); the executor stops on the
  missing heartbeat (``heartbeat_timeout``); time zero is the kill;
- ``policy_death``: the chunk stream stops (what the gate and executor see of a dead policy
  node: they cannot tell SIGKILL from silence); the executor stops on ``command_timeout``;
  time zero is the receipt of the last goal, estimated as its send time.

Measured on the setpoints' header stamps (when the executor produced them): latency = stamp of
the last setpoint that differs from its predecessor minus time zero (negative: the hold was
commanded before time zero, e.g. before the service returned), and the distance wrist_roll
travelled from time zero to rest. ``violations`` counts repetitions of ``stop`` where a
setpoint stamped after the service returned still moved: it must be 0, and the exit status is
1 otherwise, so ``--kinds stop --reps 1000`` is the stop-race stress test.

Run: tools/in_env.sh python benchmarks/bench_stop.py [--reps 100] [--death-reps 10]
     [--rates 100 500] [--kinds stop estop deadman gate_death policy_death]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import signal
import statistics
import sys
import tempfile
import threading
import time

import numpy as np
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.ros.convert import chunk_to_msg
from egoroll_ros.testing import ProcessLauncher, RosGraph, wait_until
from egoroll_ros.testing.arming import GateArmer
from egoroll_ros.testing.domains import isolated_domain

ARM = ['shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
       'wrist_pitch', 'wrist_roll', 'gripper']
START = [0.0, 0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.02]
ROLL = ARM.index('wrist_roll')
SPEED = 0.3
HEARTBEAT_TIMEOUT = 0.25
COMMAND_TIMEOUT = 0.5
KINDS = ('stop', 'estop', 'deadman', 'gate_death', 'policy_death')


def _stamp(m: JointState) -> float:
    return m.header.stamp.sec + m.header.stamp.nanosec * 1e-9


class Bench:
    """One graph at one control rate."""

    def __init__(self, rate: float, log_dir: Path) -> None:
        from ament_index_python.packages import get_package_share_directory

        self.share = get_package_share_directory('egoroll_ros')
        self.urdf = f'{self.share}/urdf/demo_arm.urdf'
        self.rate = rate
        self.ros = RosGraph(num_threads=1, domain_id=int(os.environ['ROS_DOMAIN_ID']))
        self.launcher = ProcessLauncher(self.ros.node('bench_probe'), log_dir)
        vmax = [2.0] * 7 + [0.1]
        self.launcher.start('sim_robot', 'sim_robot', params=dict(
            joints=ARM, initial_positions=START, max_velocity=vmax, urdf_path=self.urdf),
            wait_publishers=['joint_states'])
        self.launcher.start('trajectory_server', 'trajectory_server', params=dict(
            joints=ARM, max_velocity=vmax, max_acceleration=[20.0] * 7 + [1.0],
            urdf_path=self.urdf, state_timeout=1.0, control_rate=rate,
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            command_timeout=COMMAND_TIMEOUT, max_late_ticks=0, blend_time=0.05,
            seam='blend', max_jerk=[1000.0] * 7 + [50.0], max_blend_time=0.4,
            stop_behavior='hold', path_tolerance=[0.0] * 8),   # the stop it measures: hold
            wait_actions=['execute_trajectory'])
        self.gate = None
        self.start_gate()
        node = self.ros.node('bench_stop')
        self.node = node
        self.chunk_pub = node.create_publisher(ActionChunk, 'policy/chunk', 10)
        self.armer = GateArmer(node)
        self.joy_pub = node.create_publisher(Joy, 'quest/joy', 10)
        self.verdicts = self.ros.collect(node, GateVerdict, 'safety/verdict')
        self.states = self.ros.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
        self.commanded = self.ros.collect(node, JointState, 'executor/commanded', 1000)
        self.stop_srv = node.create_client(Trigger, 'safety/stop')
        self.reset_srv = node.create_client(Trigger, 'safety/reset')
        self.seq = int(time.time() * 1e6)
        self.joy = {'axis': 1.0, 'estop': 0}
        self._lock = threading.Lock()
        self._quit = threading.Event()
        self._thread = threading.Thread(target=self._hold_joy, daemon=True)
        self._thread.start()
        self.ros.wait_for_subscribers(self.chunk_pub)
        self.states.wait_for(timeout=10.0)
        self.offset = time.time() - time.monotonic()

    def start_gate(self) -> None:
        self.gate = self.launcher.start(
            'safety_gate', 'safety_gate', params_files=[f'{self.share}/config/safety_gate.yaml'],
            params=dict(urdf_path=self.urdf, joy_timeout=1.0, max_joint_state_age=0.5),
            wait_subscriptions=['policy/chunk', 'quest/joy'],
            wait_publishers=['safety/verdict', 'safety/heartbeat'],
            wait_services=['safety/stop', 'safety/reset'])

    def _hold_joy(self) -> None:
        while not self._quit.wait(0.02):
            self.publish_joy()

    def publish_joy(self, **change: float) -> float:
        with self._lock:
            self.joy.update(change)
            msg = Joy(axes=[0.0, 0.0, 0.0, self.joy['axis']], buttons=[0, self.joy['estop']])
            msg.header.stamp = self.node.get_clock().now().to_msg()
            t = time.monotonic()
            self.joy_pub.publish(msg)
        return t

    def call(self, client, timeout: float = 10.0) -> Trigger.Response:
        assert client.wait_for_service(timeout_sec=10.0)
        fut = client.call_async(Trigger.Request())
        wait_until(fut.done, timeout, 'service answer')
        return fut.result()

    def measured(self) -> np.ndarray:
        m = self.states.snapshot()[-1]
        return np.array([m.position[list(m.name).index(j)] for j in ARM])

    def send(self, shadow: bool = False, velocity: float = 0.0, n: int = 40) -> GateVerdict:
        self.seq += 1
        stamp = self.node.get_clock().now().nanoseconds * 1e-9
        times = 0.05 * np.arange(1, n + 1)
        pos = np.tile(self.measured(), (n, 1))
        pos[:, ROLL] += velocity * np.maximum(times - 0.1, 0.0)
        traj = JointTrajectoryData(tuple(ARM), times, pos, stamp=stamp)
        start = len(self.verdicts.snapshot())
        self.chunk_pub.publish(chunk_to_msg(Chunk(self.seq, 'ab' * 32, stamp, traj,
                                                  shadow=shadow)))
        seq = self.seq
        return self.verdicts.wait_for(lambda v: v.sequence == seq, 10.0, start=start)

    def ready(self) -> None:
        """Deadman held, e-stop released and reset, gate re-armed (a preflight and arm)."""
        self.publish_joy(axis=1.0, estop=0)
        def reset() -> bool:
            try:
                return self.call(self.reset_srv, timeout=2.0).success
            except AssertionError:     # a restarted gate: a request to the old one is lost
                return False
        wait_until(reset, 30.0, 'reset', interval=0.05)
        def armed() -> bool:     # a preflight, then safety/arm naming it (policy_node's start)
            v = self.send(shadow=True)
            return v.accepted and self.armer.arm(int(v.sequence), 'ab' * 32).success

        wait_until(armed, 10.0, 're-armed', interval=0.05)

    def setpoints(self, since: float = -1.0) -> list[tuple[float, float]]:
        """(stamp, wrist_roll) of the setpoints from the last one stamped <= ``since`` on
        (newest first internally: only the tail is converted)."""
        if since < 0.0:
            since = time.monotonic() - 5.0
        out = []
        for m in reversed(self.commanded.snapshot()):
            t = _stamp(m) - self.offset
            out.append((t, m.position[ROLL]))
            if t <= since:
                break
        return out[::-1]

    def moving_chunk(self, rng: np.random.Generator) -> None:
        direction = -1.0 if self.measured()[ROLL] > 0.0 else 1.0
        for _ in range(100):   # a restarted gate discovers the executor within seconds
            t0 = self.last_send = time.monotonic()
            v = self.send(velocity=direction * SPEED)
            if v.forwarded:
                def moving(t0: float = t0) -> bool:   # at the chunk's speed, not a blend
                    msgs = self.commanded.snapshot()
                    last = msgs[-1] if msgs else None
                    return last is not None and _stamp(last) - self.offset > t0 and \
                        abs(last.velocity[ROLL]) > 0.8 * SPEED
                try:   # a goal that arrives later than its lead is refused: send another
                    wait_until(moving, 3.0, 'the chunk moves the setpoints', interval=0.005)
                    break
                except AssertionError:
                    pass
            time.sleep(0.05)
            self.ready()
        else:
            raise AssertionError(f'no chunk moved the setpoints: {v.summary}')
        n = len(self.commanded.snapshot())
        self.commanded.wait_count(n + int(rng.integers(0, 8)), 10.0)

    def rest_after(self, t0: float, quiet: float) -> tuple[float | None, float, bool]:
        """(latency, distance, moved-after-t0) once setpoints were unchanged for ``quiet``;
        latency None when nothing changed from 0.5 s before time zero on (the arm was already
        at rest: on a loaded machine a late heartbeat can hold it before the kill)."""
        def settled():
            sp = self.setpoints(t0 - 0.5)
            last = max((sp[k][0] for k in range(1, len(sp)) if sp[k][1] != sp[k - 1][1]),
                       default=None)
            if sp[-1][0] < max(last if last is not None else t0, t0) + quiet:
                return None
            return sp, last
        sp, last = wait_until(settled, 15.0, 'setpoints at rest', interval=0.005)
        if last is None:
            return None, 0.0, False
        before = [q for t, q in sp if t <= t0]
        q0 = before[-1] if before else sp[0][1]
        moved = any(sp[k][1] != sp[k - 1][1] for k in range(1, len(sp)) if sp[k][0] > t0)
        return last - t0, abs(sp[-1][1] - q0), moved

    def rep(self, kind: str, rng: np.random.Generator) -> tuple[float, float, bool]:
        self.ready()
        self.moving_chunk(rng)
        if kind == 'stop':
            res = self.call(self.stop_srv)
            t0 = time.monotonic()
            assert res.success, res.message
        elif kind == 'estop':
            t0 = self.publish_joy(estop=1)
        elif kind == 'deadman':
            t0 = self.publish_joy(axis=0.0)
        elif kind == 'gate_death':
            t0 = time.monotonic()
            os.kill(self.gate.popen.pid, signal.SIGKILL)
            self.gate.popen.wait(timeout=10.0)
        elif kind == 'policy_death':
            # No chunk comes after the last one (the policy is "dead"): time zero is when the
            # last was sent (its goal's receipt is a DDS hop later).
            t0 = self.last_send
        out = self.rest_after(t0, quiet=0.1 if kind in ('stop', 'estop', 'deadman') else 0.3)
        if kind == 'gate_death':
            self.start_gate()
            for c in (self.stop_srv, self.reset_srv):
                self.node.destroy_client(c)
            self.stop_srv = self.node.create_client(Trigger, 'safety/stop')
            self.reset_srv = self.node.create_client(Trigger, 'safety/reset')
        return out

    def close(self) -> None:
        self._quit.set()
        self._thread.join(timeout=2.0)
        self.launcher.stop_all()
        self.ros.close()


def _stats(xs: list[float]) -> str:
    if not xs:
        return 'n/a'
    s = sorted(xs)
    p99 = s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]
    return f'p50 {statistics.median(s):8.1f}  p99 {p99:8.1f}  max {s[-1]:8.1f}'


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--reps', type=int, default=100, help='repetitions of stop/estop/deadman')
    ap.add_argument('--death-reps', type=int, default=10,
                    help='repetitions of gate_death and policy_death (restarts are slow)')
    ap.add_argument('--rates', type=float, nargs='+', default=[100.0, 500.0])
    ap.add_argument('--kinds', nargs='+', default=list(KINDS), choices=KINDS)
    ap.add_argument('--seed', type=int, default=13)
    ap.add_argument('--log-dir', type=Path, default=None,
                    help="keep the nodes' logs here (default: a temporary directory)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    violations = 0
    for rate in args.rates:
        with isolated_domain(), tempfile.TemporaryDirectory() as tmp:
            logs = Path(tmp) if args.log_dir is None else args.log_dir / f'{rate:g}hz'
            bench = Bench(rate, logs)
            try:
                for kind in args.kinds:
                    n = args.death_reps if kind.endswith('_death') else args.reps
                    lat, dist = [], []
                    at_rest = 0
                    t_start = time.monotonic()
                    for _ in range(n):
                        latency, distance, moved = bench.rep(kind, rng)
                        if latency is None:
                            at_rest += 1
                            continue
                        lat.append(latency * 1e3)
                        dist.append(distance * 1e3)
                        if kind == 'stop' and moved:
                            violations += 1
                    rows.append((rate, kind, len(lat), lat, dist, time.monotonic() - t_start))
                    print(f'{rate:5.0f} Hz {kind:13s} n={len(lat):4d}  latency ms: '
                          f'{_stats(lat)}   distance mrad: {_stats(dist)}'
                          + (f'  ({at_rest} of {n} already at rest at time zero)'
                             if at_rest else ''), flush=True)
            finally:
                bench.close()
    print('\nstop latency = time zero -> last changing setpoint (setpoint stamps); distance = '
          'wrist_roll travel after time zero (0.3 rad/s chunk)')
    print(f'heartbeat_timeout {HEARTBEAT_TIMEOUT} s, command_timeout {COMMAND_TIMEOUT} s')
    for rate, kind, n, lat, _dist, secs in rows:
        period = 1e3 / rate
        target = {'gate_death': HEARTBEAT_TIMEOUT * 1e3 + period,
                  'policy_death': COMMAND_TIMEOUT * 1e3 + period}.get(kind, period + 5.0)
        p99 = sorted(lat)[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))]
        print(f'{rate:5.0f} Hz {kind:13s} n={n:4d} p99 {p99:7.1f} ms vs target '
              f'{target:6.1f} ms ({p99 / target:4.2f}x) [{secs:5.1f} s]')
    print(f'stop violations (a setpoint stamped after safety/stop returned still moved): '
          f'{violations}')
    return 1 if violations else 0


if __name__ == '__main__':
    sys.exit(main())
