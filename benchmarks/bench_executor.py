#!/usr/bin/env python3
"""Benchmark of the trajectory_server control loop (not a test; prints its figures).

1. Setpoint period error: for each rate, the executor's control thread (absolute deadlines on
   time.monotonic()) and an rclpy timer publishing the same JointState run side by side in the
   same process, executor and run; both record time.monotonic() at each publish. Reports
   |period - nominal| p50/p99/max (and as % of the period), the drift of the last publish
   from the ideal grid, missed ticks, and control-loop/timer ratios.
2. Preemption switch latency: goals sent back to back while executing; latency = time from
   the goal's acceptance into the core (ExecutorCore.submit) to the publish of the first
   setpoint of the new trajectory, in control periods (p50/p99/max).
3. Seam join off the tick (``--sections seam_join``): seam ``blend`` with the demo's limits and a
   new 20-point chunk (50 ms apart, a smooth path plus millimetre noise) every 100 ms, the
   Ruckig join computed in the control tick (as before issue 15's off-tick join) and on the
   ``seam_joiner`` thread (the installed behaviour), alternately in one run: control tick
   duration (the whole ``_tick``: core tick + publishing) p50/p99/max, join time p50/p99/max
   (wherever it ran), missed deadlines, joins used/stale, and submit -> takeover latency in
   periods; then off-tick/in-tick ratios.

Run against the installed package:
    tools/in_env.sh python benchmarks/bench_executor.py [--seconds 30] [--rates 200 500]
The machine load matters (2 shared cores): say what else was running when quoting figures.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import rclpy
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
import yaml

from egoroll_interfaces.action import ExecuteTrajectory
from egoroll_ros.nodes import trajectory_server as ts
from egoroll_ros.nodes.sim_robot import SimRobot
from egoroll_ros.ros.auth import GateSigner
from egoroll_ros.ros.convert import sec_to_duration
from egoroll_ros.testing import executable_path

J = [f'j{i}' for i in range(8)]
#: The goals' source (an empty allowed_sources list cannot be passed as a parameter override:
#: rclpy types an empty list as a byte array).
SOURCE = '/bench_client'


def _params(d: dict) -> list[Parameter]:
    return [Parameter(k, value=v) for k, v in d.items()]


def _stats(x: np.ndarray) -> tuple[float, float, float]:
    return float(np.percentile(x, 50)), float(np.percentile(x, 99)), float(np.max(x))


def start_sim_process(tmp: Path) -> subprocess.Popen:
    """The installed sim_robot in its own process (as on a robot, the driver is elsewhere)."""
    params = tmp / 'sim.yaml'
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': dict(
        joints=J, max_velocity=[5.0] * 8, rate=100.0)}}))
    return subprocess.Popen([executable_path('sim_robot'), '--ros-args', '--params-file',
                             str(params)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


class Bench:
    def __init__(self, rate: float, sim_in_process: bool, server: dict | None = None) -> None:
        self.rate = rate
        self.period = 1.0 / rate
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.exe = SingleThreadedExecutor(context=self.ctx)  # as the installed node spins
        self.server = ts.TrajectoryServer(context=self.ctx, parameter_overrides=_params({
            **dict(joints=J, control_rate=rate, max_velocity=[2.0] * 8,
                   max_acceleration=[20.0] * 8, state_timeout=1.0, feedback_rate=10.0,
                   planned_rate=5.0, heartbeat_timeout=0.0, command_timeout=0.0,
                   max_late_ticks=0,  # executor alone
                   allowed_sources=[SOURCE], require_position_limits=False,
                   seam='splice', stop_behavior='hold', blend_time=0.0,
                   path_tolerance=[0.0] * 8),
               **(server or {})}))
        self.sim = SimRobot(context=self.ctx, parameter_overrides=_params(dict(
            joints=J, max_velocity=[5.0] * 8, rate=100.0))) if sim_in_process else None
        self.node = Node('bench_client', context=self.ctx)
        self.nodes = [n for n in (self.server, self.sim, self.node) if n is not None]
        for n in self.nodes:
            self.exe.add_node(n)
        self.loop_times: list[float] = []
        self.timer_times: list[float] = []
        self.recording = False
        # Instrument: publish times of the control loop, and submit -> first-new-setpoint.
        pub = self.server._commanded_pub
        orig_publish = pub.publish
        self.submits: dict[int, float] = {}
        self.switches: list[float] = []

        def publish(msg):  # noqa: ANN001, ANN202
            orig_publish(msg)
            t = time.monotonic()
            if self.recording:
                self.loop_times.append(t)
            seq = self.server.core.active_sequence
            if seq in self.submits and self.server.core.state == 'executing':
                self.switches.append((t - self.submits.pop(seq)) / self.period)
        pub.publish = publish
        core = self.server.core
        orig_submit = core.submit

        def submit(goal, key):  # noqa: ANN001, ANN202
            orig_submit(goal, key)
            self.submits[goal.sequence] = time.monotonic()
        core.submit = submit
        # The same message from an rclpy timer at the same rate.
        self.timer_pub = self.node.create_publisher(JointState, 'bench/timer', 10)
        self.node.create_timer(self.period, self._on_timer)
        self.client = ActionClient(self.node, ExecuteTrajectory, 'execute_trajectory')
        self.signer = GateSigner()     # signs as the gate does (the user's default key)
        self.thread = threading.Thread(target=self.exe.spin, daemon=True)
        self.thread.start()
        self.seq = 0

    def _on_timer(self) -> None:
        self.timer_pub.publish(JointState(name=J, position=[0.0] * 8, velocity=[0.0] * 8))
        if self.recording:
            self.timer_times.append(time.monotonic())

    def goal(self, target: float, duration: float) -> None:
        self.seq += 1
        traj = JointTrajectory(joint_names=J, points=[JointTrajectoryPoint(
            positions=[target] * 8, time_from_start=sec_to_duration(duration))])
        fut = self.client.send_goal_async(self.signer.goal(ExecuteTrajectory.Goal(
            trajectory=traj, sequence=self.seq, source=SOURCE)))
        deadline = time.monotonic() + 10
        while not fut.done() and time.monotonic() < deadline:
            time.sleep(0.001)

    def wait_state(self) -> None:
        deadline = time.monotonic() + 20
        while self.server.core.measured is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.client.wait_for_server(timeout_sec=10)

    def close(self) -> None:
        self.exe.shutdown(timeout_sec=5)
        self.server.close()
        for n in self.nodes:
            n.destroy_node()
        self.ctx.try_shutdown()


def period_figures(times: list[float], period: float) -> dict:
    t = np.array(times)
    err = np.abs(np.diff(t) - period)
    k = np.round((t - t[0]) / period)
    drift = (t[-1] - t[0]) - k[-1] * period
    p50, p99, mx = _stats(err)
    return dict(n=len(t), p50=p50, p99=p99, max=mx, drift=drift,
                missed=int(k[-1] - (len(t) - 1)))


#: seam blend with the demo arm's limits (config/trajectory_server.yaml) on 8 joints.
BLEND = dict(seam='blend', max_acceleration=[20.0] * 8, max_jerk=[1000.0] * 8,
             blend_time=0.1, max_blend_time=0.4)


def seam_join_run(rate: float, seconds: float, in_tick: bool, sim_in_process: bool) -> dict:
    """One seam-blend run: chunks every 100 ms; tick and join durations (see the docstring)."""
    from egoroll_ros.core import executor as core_executor
    b = Bench(rate, sim_in_process, BLEND)
    server, core = b.server, b.server.core
    if in_tick:
        server._request_join = lambda now: None   # noqa: ARG005 - joins in the tick again
    ticks: list[float] = []
    joins: list[float] = []
    takeovers: list[float] = []
    submitted: dict[int, float] = {}
    orig_tick, orig_join = server._tick, core_executor.join_chunk

    def timed_tick(t, now, missed):  # noqa: ANN001, ANN202
        start = time.perf_counter()
        orig_tick(t, now, missed)
        ticks.append(time.perf_counter() - start)
        a = core._active
        if a is not None and a.goal.sequence in submitted:
            takeovers.append((time.monotonic() - submitted.pop(a.goal.sequence)) / b.period)

    def timed_join(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.perf_counter()
        try:
            return orig_join(*args, **kwargs)
        finally:
            joins.append(time.perf_counter() - start)

    orig_submit = core.submit

    def submit(goal, key):  # noqa: ANN001, ANN202
        orig_submit(goal, key)
        submitted[goal.sequence] = time.monotonic()
    core.submit = submit
    server._tick = timed_tick
    core_executor.join_chunk = timed_join
    rng = np.random.default_rng(0)
    try:
        b.wait_state()
        t_base = time.monotonic()
        end = time.monotonic() + seconds + 0.5
        recording = False
        while time.monotonic() < end:
            if not recording and time.monotonic() > t_base + 0.5:
                ticks.clear()
                joins.clear()
                takeovers.clear()
                late0, joins0 = core.late_ticks, dict(core.joins)
                recording = True
            b.seq += 1
            t_rel = np.arange(1, 21) * 0.05
            phase = (time.monotonic() - t_base) + t_rel
            q = 0.3 * np.sin(1.5 * phase)[:, None] + rng.normal(0.0, 1e-3, (20, 8))
            traj = JointTrajectory(joint_names=J, points=[JointTrajectoryPoint(
                positions=q[i].tolist(), time_from_start=sec_to_duration(float(t_rel[i])))
                for i in range(20)])
            b.client.send_goal_async(b.signer.goal(ExecuteTrajectory.Goal(
                trajectory=traj, sequence=b.seq, source=SOURCE)))
            time.sleep(0.1)
        used = {k: core.joins[k] - joins0[k] for k in core.joins}
        return dict(ticks=np.array(ticks), joins=np.array(joins), takeover=np.array(takeovers),
                    late=core.late_ticks - late0, used=used, refused=core.refused)
    finally:
        core_executor.join_chunk = orig_join
        b.close()


def seam_join_section(rates: list[float], seconds: float, sim_in_process: bool) -> None:
    ms = 1e3
    print(f'\n## seam join in the tick vs off the tick ({seconds:g} s per mode and rate, '
          f'a chunk every 100 ms)')
    hdr = (f'{"rate":>5} {"join ran":>9} {"tick p50":>9} {"p99":>7} {"max":>7} '
           f'{"join p50":>9} {"p99":>7} {"max":>7} {"missed":>7} {"takeover p50/max":>17} '
           f'{"joins prep/stale/tick":>22} {"refused":>8}')
    print(hdr + '   (ms; takeover in periods)')
    for rate in rates:
        res = {}
        for mode in ('in tick', 'off tick'):   # alternately, same run
            res[mode] = r = seam_join_run(rate, seconds, mode == 'in tick', sim_in_process)
            tk = _stats(r['ticks']) if len(r['ticks']) else (math.nan,) * 3
            jn = _stats(r['joins']) if len(r['joins']) else (math.nan,) * 3
            to = _stats(r['takeover']) if len(r['takeover']) else (math.nan,) * 3
            u = r['used']
            print(f'{rate:>5g} {mode:>9} {tk[0] * ms:>9.3f} {tk[1] * ms:>7.3f} '
                  f'{tk[2] * ms:>7.3f} {jn[0] * ms:>9.3f} {jn[1] * ms:>7.3f} {jn[2] * ms:>7.3f} '
                  f'{r["late"]:>7} {to[0]:>8.2f}/{to[2]:<8.2f} '
                  f'{u["prepared"]:>8}/{u["stale"]}/{u["in_tick"]:<8} {r["refused"]:>8}')
        a, b = (_stats(res[m]['ticks']) for m in ('off tick', 'in tick'))
        ratios = ' '.join(f'{x / y:.3f}' for x, y in zip(a, b, strict=True))
        print(f'{rate:>5g} {"ratio":>9} tick off/in p50 p99 max: {ratios}')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seconds', type=float, default=30.0)
    ap.add_argument('--rates', type=float, nargs='+', default=[200.0, 500.0])
    ap.add_argument('--preemptions', type=int, default=200)
    ap.add_argument('--sections', nargs='+', choices=('period', 'seam_join'),
                    default=['period', 'seam_join'])
    ap.add_argument('--seam-seconds', type=float, default=10.0,
                    help='seconds per mode and rate of the seam_join section')
    ap.add_argument('--sim-in-process', action='store_true',
                    help='run sim_robot in the benchmark process (default: its own process)')
    args = ap.parse_args()
    from egoroll_ros.testing.domains import use_private_domain
    use_private_domain()
    tmp = Path(tempfile.mkdtemp(prefix='bench_executor_'))
    sim = None if args.sim_in_process else start_sim_process(tmp)
    # The sim process runs in a session of its own: stop it however this process ends
    # (an exception, Ctrl-C, or `timeout`'s SIGTERM), or it goes on publishing.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return _run(args, sim)
    finally:
        if sim is not None and sim.poll() is None:
            os.killpg(sim.pid, signal.SIGINT)
            try:
                sim.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(sim.pid, signal.SIGKILL)


def _run(args: argparse.Namespace, sim: subprocess.Popen | None) -> int:
    sys.setswitchinterval(ts.SWITCH_INTERVAL)  # as trajectory_server's main() does
    where = 'in this process' if args.sim_in_process else 'in its own process'
    print(f'# bench_executor: {args.seconds:g} s per rate; server, rclpy timer and action '
          f'client in one process, sim_robot {where}; load average '
          f'{os.getloadavg()[0]:.2f} at start')
    rows = []
    for rate in args.rates if 'period' in args.sections else []:
        b = Bench(rate, args.sim_in_process)
        try:
            b.wait_state()
            b.goal(0.1, 0.3)  # after it, the loop holds and publishes every tick
            time.sleep(0.5)
            b.recording = True
            time.sleep(args.seconds)
            b.recording = False
            loop = period_figures(b.loop_times, b.period)
            timer = period_figures(b.timer_times, b.period)
            # preemption: goals every 50 ms, each preempting the running one
            b.switches.clear()
            for i in range(args.preemptions):
                b.goal(0.1 + 0.05 * (i % 2), 0.4)
                time.sleep(0.05)
            sw = np.array(b.switches)
            rows.append((rate, loop, timer, sw, b.server.core.late_ticks))
        finally:
            b.close()
        ms = 1e3
        print(f'\n## {rate:g} Hz (period {b.period * ms:.3f} ms)')
        print(f'{"":>14} {"n":>7} {"p50 ms":>8} {"p99 ms":>8} {"max ms":>8} {"p99 %":>7} '
              f'{"drift ms":>9} {"missed":>7}')
        for name, f in (('control loop', loop), ('rclpy timer', timer)):
            print(f'{name:>14} {f["n"]:>7} {f["p50"] * ms:>8.3f} {f["p99"] * ms:>8.3f} '
                  f'{f["max"] * ms:>8.3f} {100 * f["p99"] / b.period:>6.1f}% '
                  f'{f["drift"] * ms:>9.3f} {f["missed"]:>7}')
        r = [loop[k] / timer[k] if timer[k] else float('nan') for k in ('p50', 'p99', 'max')]
        print(f'{"loop/timer":>14} {"":>7} {r[0]:>8.2f} {r[1]:>8.2f} {r[2]:>8.2f}')
        if len(sw):
            p50, p99, mx = _stats(sw)
            print(f'preemption switch latency (periods, n={len(sw)}): p50 {p50:.2f} '
                  f'p99 {p99:.2f} max {mx:.2f}')
    if 'seam_join' in args.sections:
        seam_join_section(args.rates, args.seam_seconds, args.sim_in_process)
    print(f'# load average at end {os.getloadavg()[0]:.2f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
