"""Benchmarks of ``egoroll evaluate`` and ``egoroll replay``.

1. evaluate throughput in multiples of real time: a synthetic episode shaped like the demo's
   recordings (224x224 rgb8 camera at 30 Hz, joint_states at 100 Hz), the demo policy from
   ``share/egoroll_ros/policies/demo`` (or, when it is not installed yet, a freshly trained
   egoroll_act of the same input/output shape, said so in the output), the installed
   policy_node and safety_gate configs.
2. replay's sustainable rate: the installed ``egoroll replay`` publishing 640x480 rgb8 images
   at 30 Hz plus joint_states at 500 Hz into subscribers in this process, at increasing
   ``--rate``; a rate is sustained when every message arrives and the whole episode takes at
   most 5 % longer than scheduled.

Usage: ``tools/in_env.sh python benchmarks/bench_replay_evaluate.py [--seconds S]``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import re
import subprocess
import tempfile
import time

os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('ROS_DOMAIN_ID', str(60 + os.getpid() % 40))


def _demo_policy(tmp: Path) -> tuple[Path, str]:
    from ament_index_python.packages import get_package_share_directory
    share = Path(get_package_share_directory('egoroll_ros')) / 'policies' / 'demo'
    if (share / 'manifest.json').is_file():
        return share, 'the shipped demo policy'
    import numpy as np

    from egoroll_ros.policies.act import train_act
    from egoroll_ros.sim.demo_task import DEMO_JOINTS
    rng = np.random.default_rng(0)
    n = len(DEMO_JOINTS)
    res = train_act({'scene': rng.integers(0, 255, (16, 96, 96, 3), dtype=np.uint8)},
                    rng.normal(0.3, 0.1, (16, n)), rng.normal(0.3, 0.1, (16, 20, n)),
                    tmp / 'act', step_period=0.05, steps=5)
    return res.path, 'a stand-in egoroll_act of the demo shape (demo policy not installed)'


def bench_evaluate(seconds: float) -> None:
    from ament_index_python.packages import get_package_share_directory

    from egoroll_ros.bag.evaluate import EvaluateOptions, evaluate
    from egoroll_ros.bag.synth import write_episode
    from egoroll_ros.sim.demo_task import demo_urdf_path

    cfg_dir = Path(get_package_share_directory('egoroll_ros')) / 'config'
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ck, what = _demo_policy(tmp)
        ep = write_episode(tmp / 'bag', 'mcap', duration=seconds, joint_rate=100.0,
                           camera_rate=30.0, image_size=(224, 224))
        t0 = time.perf_counter()
        rep = evaluate(EvaluateOptions(bag=ep.path, config=cfg_dir / 'policy_node.yaml',
                                       checkpoint=ck, out_dir=tmp / 'out',
                                       urdf=demo_urdf_path(), plots=False))
        wall = time.perf_counter() - t0
        lat = rep['latency']
        print(f'evaluate: {seconds:g} s episode (224x224 camera 30 Hz, joint_states 100 Hz), '
              f"{rep['decisions']['chunks']} chunks at {rep['query_frequency']:g} Hz with "
              f'{what}: {wall:.2f} s wall incl. loading = {seconds / wall:.1f}x real time '
              f"(loop only {rep['realtime_factor']:.1f}x); inference median "
              f"{lat['median'] * 1e3:.1f} ms, p95 {lat['p95'] * 1e3:.1f} ms (1 torch thread)")


def bench_replay(seconds: float, rates: list[float]) -> None:
    from sensor_msgs.msg import Image, JointState

    from egoroll_ros.bag.synth import write_episode
    from egoroll_ros.ros.graph import RosGraph
    from egoroll_ros.ros.processes import executable_path

    with tempfile.TemporaryDirectory() as d:
        ep = write_episode(Path(d) / 'big', 'mcap', duration=seconds, joint_rate=500.0,
                           camera_rate=30.0, image_size=(480, 640))
        n_js, n_img = len(ep.js_times), len(ep.image_times)
        print(f'replay: {seconds:g} s of 640x480 rgb8 at 30 Hz ({n_img} images) + joint_states '
              f'at 500 Hz ({n_js}); subscribers in one other process')
        best = None
        for rate in rates:
            graph = RosGraph(num_threads=1)
            try:
                node = graph.node('bench_sink')
                js = graph.collect(node, JointState, 'joint_states', 1000)
                img = graph.collect(node, Image, 'camera/scene/image_raw', 100)
                t0 = time.monotonic()
                res = subprocess.run([executable_path('egoroll'), 'replay', str(ep.path),
                                      '--rate', str(rate), '--wait-for-subscribers', '20'],
                                     capture_output=True, text=True, timeout=600)
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline and (len(js.messages) < n_js or
                                                       len(img.messages) < n_img):
                    time.sleep(0.05)
                got_js, got_img = len(js.messages), len(img.messages)
                span = max(js.received[-1], img.received[-1]) - min(js.received[0],
                                                                     img.received[0]) \
                    if got_js and got_img else float('nan')
                late = re.search(r'latest publish ([0-9.]+) ms', res.stderr)
                want = seconds / rate
                ok = got_js == n_js and got_img == n_img and span <= 1.05 * want
                print(f'  --rate {rate:g}: received {got_js}/{n_js} joint_states, '
                      f'{got_img}/{n_img} images; episode took {span:.2f} s (scheduled '
                      f'{want:.2f} s); worst publish lateness '
                      f"{late.group(1) if late else '?'} ms -> {'OK' if ok else 'NOT sustained'}"
                      f' ({time.monotonic() - t0:.1f} s)')
                if ok:
                    best = rate
                else:
                    break
            finally:
                graph.close()
        print(f'replay: sustainable rate {best}x ' + json.dumps({'largest_rate_ok': best}))


def main() -> None:
    """Run both benchmarks."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seconds', type=float, default=10.0, help='episode length (s)')
    ap.add_argument('--rates', type=float, nargs='+', default=[1.0, 2.0, 4.0, 8.0])
    ap.add_argument('--skip-evaluate', action='store_true')
    ap.add_argument('--skip-replay', action='store_true')
    args = ap.parse_args()
    print(f'machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}')
    if not args.skip_evaluate:
        bench_evaluate(args.seconds)
    if not args.skip_replay:
        bench_replay(min(args.seconds, 5.0), args.rates)


if __name__ == '__main__':
    main()
