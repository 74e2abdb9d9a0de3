"""One half of a split-host rollout, run inside a network namespace (``ip netns exec``) by the
split-host test: starts its half of the graph from the shared description
(:mod:`egoroll_ros.core.launch_graph`, launch_ros's command lines) and probes it from inside
that namespace, printing one JSON object per event on stdout.

``robot`` half: sim_robot, trajectory_server, safety_gate, sim_camera; records every gate
verdict (``verdict``) and every executor setpoint (``commanded``), receipt time on the wall
clock; answers ``reset`` (safety/reset). ``policy`` half: policy_node plus a held Quest
deadman on ``quest/joy``; records every chunk (``chunk``) as received in its own namespace;
answers ``preflight``, ``start``, ``stop``. Commands come one a line
on stdin, each answered by a ``reply`` event; ``quit`` ends either half.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
import sys
import threading
import time

from ament_index_python.packages import get_package_share_directory
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.launch_graph import describe
from egoroll_ros.ros.processes import ProcessLauncher

_LOCK = threading.Lock()


def emit(**event: object) -> None:
    """One event line on stdout."""
    with _LOCK:
        sys.stdout.write(json.dumps(event) + '\n')
        sys.stdout.flush()


def _stamp(t) -> float:  # noqa: ANN001
    return t.sec + t.nanosec * 1e-9


def specs(half: str, namespace: str) -> list:
    """The nodes of ``half``: the robot half is robot_launch.py's graph on the simulated
    robot's driver nodes (sim_robot, sim_camera); the policy half is policy_launch.py's."""
    share = Path(get_package_share_directory('egoroll_ros'))
    args = {'namespace': namespace}
    if half == 'policy':
        return describe('policy', args, share)
    sim = [s for s in describe('sim', args, share) if s.name in ('sim_robot', 'sim_camera')]
    return sim[:1] + describe('robot', args, share) + sim[1:]


def main(argv: list[str] | None = None) -> int:
    """Run one half until ``quit`` on stdin."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('half', choices=('robot', 'policy'))
    ap.add_argument('--namespace', default='')
    ap.add_argument('--log-dir', required=True)
    opts = ap.parse_args(argv)
    rclpy.init()
    node = rclpy.create_node(f'split_{opts.half}_probe', namespace=opts.namespace or None)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    launcher = ProcessLauncher(node, Path(opts.log_dir))
    reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    try:
        if opts.half == 'robot':
            node.create_subscription(GateVerdict, 'safety/verdict', lambda v: emit(
                ev='verdict', t=time.time(), seq=v.sequence, stamp=_stamp(v.chunk_stamp),
                accepted=v.accepted, forwarded=v.forwarded, shadow=v.shadow,
                checks=[x.check for x in v.violations]), reliable)
            node.create_subscription(JointState, 'executor/commanded', lambda m: emit(
                ev='commanded', t=time.time(), stamp=_stamp(m.header.stamp),
                pos=list(m.position)), reliable)
        else:
            joy = node.create_publisher(Joy, 'quest/joy', 10)

            def hold_deadman() -> None:       # the operator holds the Quest grip (axis 3)
                msg = Joy(axes=[0.0, 0.0, 0.0, 1.0], buttons=[0, 0, 0, 0])
                msg.header.stamp = node.get_clock().now().to_msg()
                joy.publish(msg)

            node.create_timer(0.05, hold_deadman)
            node.create_subscription(ActionChunk, 'policy/chunk', lambda c: emit(
                ev='chunk', t=time.time(), seq=c.sequence, stamp=_stamp(c.header.stamp),
                inference=c.inference_latency, shadow=c.shadow), reliable)
        spinner.start()
        launcher.start_graph(specs(opts.half, opts.namespace))
        emit(ev='ready', half=opts.half, pids=[p.popen.pid for p in launcher.processes])
        services = {'preflight': 'policy/preflight', 'start': 'policy/start',
                    'stop': 'policy/stop'} if opts.half == 'policy' else \
            {'reset': 'safety/reset'}
        clients = {cmd: node.create_client(Trigger, srv) for cmd, srv in services.items()}
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == 'quit':
                break
            if cmd not in clients:
                emit(ev='reply', cmd=cmd, success=False, message=f'unknown command {cmd!r}')
                continue
            client = clients[cmd]
            if not client.wait_for_service(timeout_sec=30.0):
                emit(ev='reply', cmd=cmd, success=False, message='no service')
                continue
            future = client.call_async(Trigger.Request())
            deadline = time.monotonic() + 60.0
            while not future.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            res = future.result() if future.done() else None
            emit(ev='reply', cmd=cmd, t=time.time(), success=bool(res and res.success),
                 message=res.message if res else 'no reply in 60 s')
        return 0
    except AssertionError as exc:           # a node did not come up: say why, then its logs
        emit(ev='error', message=str(exc)[-4000:])
        return 1
    finally:
        launcher.stop_all()
        sys.stderr.write(launcher.logs()[-20000:])
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())
