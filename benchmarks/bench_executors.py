"""Benchmark: rclpy's SingleThreadedExecutor vs MultiThreadedExecutor for a 100 Hz node.

The node is egoroll's ``SimRobot`` (a 100 Hz timer publishing joint_states, a subscription to
100 Hz commands), spun in a child process on one executor kind or the other. This process
publishes the commands and records every joint_states message. ``--load N`` busy-loop
processes compete for the CPUs, as the other nodes of a graph do on a small machine. The two
kinds run alternately, ``--runs`` times each, in the same invocation, so load hits both alike.

Per run: messages per second, inter-arrival gap p99 and max (header stamps, i.e. when the
node published), and the node process's CPU use; then the ratios MT/ST of the medians.

Run: tools/in_env.sh python benchmarks/bench_executors.py [--seconds 10] [--runs 2] [--load 2]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import statistics
import subprocess
import sys
import time

ROOT = Path(__file__).resolve().parents[1]
#: The demo's sim_robot configuration (100 Hz, the demo arm's 8 joints).
SIM_CONFIG = ROOT / 'egoroll_ros' / 'config' / 'sim_robot.yaml'
JOINTS = ['shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
          'wrist_pitch', 'wrist_roll', 'gripper']


def child(kind: str, seconds: float) -> None:
    """Spin SimRobot on ``kind`` ('st' or 'mt') for ``seconds``."""
    import rclpy
    from rclpy.executors import (
        ExternalShutdownException,
        MultiThreadedExecutor,
        SingleThreadedExecutor,
    )

    from egoroll_ros.nodes.sim_robot import SimRobot

    rclpy.init(args=['--ros-args', '--params-file', str(SIM_CONFIG)])
    node = SimRobot()
    ex = SingleThreadedExecutor() if kind == 'st' else MultiThreadedExecutor()
    ex.add_node(node)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            ex.spin_once(timeout_sec=0.1)
    except ExternalShutdownException:   # the parent's SIGTERM at the end of the run
        pass
    node.destroy_node()
    rclpy.try_shutdown()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def measure(kind: str, seconds: float) -> dict[str, float]:
    """One run: start the child, command it at 100 Hz, record joint_states for ``seconds``."""
    import numpy as np
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState

    from egoroll_ros.ros.graph import wait_until

    proc = subprocess.Popen([sys.executable, __file__, '--child', kind, '--seconds',
                             str(seconds + 8.0)], stdout=subprocess.DEVNULL)
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node('bench_executors', context=ctx)
    stamps: list[float] = []
    node.create_subscription(
        JointState, 'joint_states',
        lambda m: stamps.append(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9),
        qos_profile_sensor_data)
    pub = node.create_publisher(JointState, 'command', 10)
    cmd = JointState(name=JOINTS, position=[0.0] * len(JOINTS))
    node.create_timer(0.01, lambda: pub.publish(cmd))
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    try:
        def spin_until(pred) -> bool:  # noqa: ANN001
            ex.spin_once(timeout_sec=0.05)
            return pred()
        wait_until(lambda: spin_until(lambda: len(stamps) > 50), 30.0, 'joint_states')
        stamps.clear()
        cpu0, t0 = _cpu_seconds(proc.pid), time.monotonic()
        while time.monotonic() < t0 + seconds:
            ex.spin_once(timeout_sec=0.05)
        cpu1, t1 = _cpu_seconds(proc.pid), time.monotonic()
    finally:
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        proc.terminate()
        proc.wait(10)
    gaps = np.diff(np.array(stamps)) * 1e3
    return {'rate_hz': len(stamps) / (t1 - t0), 'gap_p99_ms': float(np.percentile(gaps, 99)),
            'gap_max_ms': float(gaps.max()), 'cpu_pct': 100.0 * (cpu1 - cpu0) / (t1 - t0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seconds', type=float, default=10.0)
    ap.add_argument('--runs', type=int, default=2)
    ap.add_argument('--load', type=int, default=2, help='busy-loop processes meanwhile')
    ap.add_argument('--child', choices=['st', 'mt'], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.seconds)
        return 0
    from egoroll_ros.testing.domains import use_private_domain
    use_private_domain()
    load = [subprocess.Popen([sys.executable, '-c', 'while True: pass'])
            for _ in range(args.load)]
    results: dict[str, list[dict[str, float]]] = {'st': [], 'mt': []}
    try:
        print(f'SimRobot at 100 Hz, {args.seconds:g} s per run, {args.load} busy-loop '
              f'process(es), {os.cpu_count()} CPUs')
        for run in range(args.runs):
            for kind in ('mt', 'st'):
                r = measure(kind, args.seconds)
                results[kind].append(r)
                print(f'run {run + 1} {kind}: {r["rate_hz"]:6.1f} msg/s  gap p99 '
                      f'{r["gap_p99_ms"]:6.1f} ms  max {r["gap_max_ms"]:6.1f} ms  cpu '
                      f'{r["cpu_pct"]:5.1f} %', flush=True)
    finally:
        for p in load:
            p.kill()
    for key in ('rate_hz', 'gap_p99_ms', 'gap_max_ms', 'cpu_pct'):
        st = statistics.median(r[key] for r in results['st'])
        mt = statistics.median(r[key] for r in results['mt'])
        print(f'median {key:10s}: multi-threaded {mt:7.1f}  single-threaded {st:7.1f}  '
              f'ratio MT/ST {mt / st:5.2f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
