"""Benchmark of policy_node with a zero-cost policy.

Two 640x480 rgb8 cameras at 30 Hz and joint_states at 100 Hz are published from another node
(same process, one SingleThreadedExecutor as the installed node spins, real DDS loopback);
policy_node runs at 30 Hz with a policy that returns zeros instantly and takes both cameras
at 96x128 (so every inference decodes and resizes two frames). Measured:
  - camera publish -> chunk receipt latency: receipt time of each chunk minus the header stamp
    of the OLDER of the two camera frames its observation used (same host clock); this includes
    the wait for the worker's next 30 Hz tick;
  - observation assembly + preprocessing time per inference (node-side, perf_counter);
  - our image preprocessing vs a naive path (bytes -> list -> array, copy, cv2.resize).

Run: tools/in_env.sh python benchmarks/bench_policy.py [seconds]
"""

from __future__ import annotations

import os
from pathlib import Path
import sys
import tempfile
import time
from typing import Any

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


from egoroll_ros.core.policy import (  # noqa: E402 - rclpy-free
    ImageFeature,
    Policy,
    PolicyMetadata,
)


class ZeroPolicy(Policy):
    """Returns zeros of the right shape instantly (backend ``bench_policy:ZeroPolicy``)."""

    def __init__(self) -> None:
        self._meta = PolicyMetadata(
            backend='zero', fingerprint='0' * 64,
            image_features=(ImageFeature('left', 96, 128), ImageFeature('right', 96, 128)),
            state_size=8, action_size=8, chunk_length=20, step_period=0.05,
            normalization={'state': 'none', 'action': 'none'})

    @classmethod
    def load(cls, path: Any, **options: Any) -> ZeroPolicy:
        return cls()

    @property
    def metadata(self) -> PolicyMetadata:
        return self._meta

    def predict_chunk(self, observation: Any) -> np.ndarray:
        return np.zeros((20, 8))


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float('nan')


def preprocessing_comparison(reps: int = 50) -> tuple[float, float]:
    """Seconds per 640x480 frame: ours (decode_rgb + resize_rgb) vs a naive path."""
    from sensor_msgs.msg import Image

    from egoroll_ros.core.images import resize_rgb
    from egoroll_ros.ros.images import decode_rgb

    msg = Image(height=480, width=640, encoding='rgb8', step=640 * 3)
    msg.data = np.random.default_rng(0).integers(0, 255, 480 * 640 * 3, np.uint8).tobytes()

    def ours() -> np.ndarray:
        return resize_rgb(decode_rgb(msg), 96, 128)

    def naive() -> np.ndarray:
        arr = np.array(list(msg.data), dtype=np.uint8).reshape(480, 640, 3).copy()
        return cv2.resize(arr, (128, 96))

    out = []
    for fn in (ours, naive):
        fn()
        t0 = time.perf_counter()
        for _ in range(reps if fn is ours else max(3, reps // 10)):
            fn()
        out.append((time.perf_counter() - t0) / (reps if fn is ours else max(3, reps // 10)))
    return out[0], out[1]


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    from egoroll_ros.testing.domains import use_private_domain
    use_private_domain()
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image, JointState

    from egoroll_interfaces.msg import ActionChunk
    from egoroll_ros.nodes.policy_node import PolicyNode
    from egoroll_ros.ros import images
    from egoroll_ros.ros.convert import time_to_sec
    from egoroll_ros.testing import RosGraph, run_callback, wait_until

    joints = ['shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
              'wrist_pitch', 'wrist_roll', 'gripper']
    graph = RosGraph(num_threads=1)
    try:
        params = {'joints': joints, 'policy.backend': 'bench_policy:ZeroPolicy',
                  'policy.path': tempfile.gettempdir(), 'query_frequency': 30.0,
                  'cameras.names': ['left', 'right'], 'cameras.heights': [480, 480],
                  'cameras.widths': [640, 640], 'max_age.camera': 0.2,
                  'gate.arm_service': ''}     # no safety gate in this benchmark
        node = graph.add(PolicyNode(context=graph.context, parameter_overrides=[
            Parameter(k, value=v) for k, v in params.items()]))
        # the oldest camera stamp of each observation, keyed by the observation stamp
        used: dict[float, float] = {}
        build = node.builder.build

        def traced_build(store: Any, now: float, stamp: float) -> Any:
            snap = store.snapshot()
            obs = build(store, now, stamp)
            used[round(stamp, 9)] = min(snap['camera/left'].stamp, snap['camera/right'].stamp)
            return obs

        node.builder.build = traced_build
        feeder = graph.node('bench_cameras')
        pubs = [feeder.create_publisher(Image, f'camera/{c}/image_raw',
                                        qos_profile_sensor_data) for c in ('left', 'right')]
        js = feeder.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
        rng = np.random.default_rng(0)
        frames = []
        for _ in pubs:
            f = Image(height=480, width=640, encoding='rgb8', step=640 * 3)
            f.data = rng.integers(0, 255, 480 * 640 * 3, np.uint8).tobytes()
            frames.append(f)

        def cams() -> None:
            for p, f in zip(pubs, frames, strict=True):
                f.header.stamp = feeder.get_clock().now().to_msg()
                p.publish(f)

        def joint_states() -> None:
            m = JointState(name=joints, position=[0.0] * 8)
            m.header.stamp = feeder.get_clock().now().to_msg()
            js.publish(m)

        feeder.create_timer(1 / 30, cams)
        feeder.create_timer(0.01, joint_states)
        latencies: list[float] = []
        sink = graph.node('bench_sink')

        def on_chunk(msg: ActionChunk) -> None:
            rx = sink.get_clock().now().nanoseconds * 1e-9
            cam = used.get(round(time_to_sec(msg.header.stamp), 9))
            if cam is not None and not msg.shadow:
                latencies.append(rx - cam)

        sink.create_subscription(ActionChunk, 'policy/chunk', on_chunk, 100)
        wait_until(lambda: all(a is not None and a < 0.2 for a in
                               node.inputs.ages(time.monotonic()).values()
                               if a is not None) and node.inputs.get('camera/left')
                   and node.inputs.get('camera/right'), 20, 'camera frames')
        req = __import__('std_srvs.srv', fromlist=['Trigger']).Trigger
        r = run_callback(node._srv_preflight, req.Request(), req.Response())
        assert r.success, r.message
        assert run_callback(node._srv_start, req.Request(), req.Response()).success
        node.timing.clear()
        time.sleep(seconds)  # benchmark duration, not a test wait
        node._srv_stop(req.Request(), req.Response())
        timing = list(node.timing)
        skipped = node.inferences_skipped
    finally:
        graph.close()
    assembly = [t[0] for t in timing]
    total = [t[1] for t in timing]
    ours, naive = preprocessing_comparison()
    print(f'policy_node benchmark: zero-cost policy, 2 x 640x480 rgb8 @ 30 Hz -> 2 x 96x128, '
          f'query 30 Hz, {seconds:g} s, decoder={images.decoder()[0]}, '
          f'{os.cpu_count()} CPUs (shared machine: treat as indicative)')
    print(f'  chunks: {len(latencies)}  inferences skipped: {skipped}')
    print(f'  camera publish -> chunk receipt   p50 {_pct(latencies, 50) * 1e3:7.2f} ms   '
          f'p99 {_pct(latencies, 99) * 1e3:7.2f} ms')
    print(f'  assembly + preprocessing / inf.   p50 {_pct(assembly, 50) * 1e3:7.2f} ms   '
          f'p99 {_pct(assembly, 99) * 1e3:7.2f} ms')
    print(f'  assembly + policy + post / inf.   p50 {_pct(total, 50) * 1e3:7.2f} ms   '
          f'p99 {_pct(total, 99) * 1e3:7.2f} ms')
    print(f'  one 640x480 frame -> 96x128: ours {ours * 1e3:.3f} ms vs naive '
          f'(list + copy + cv2.resize) {naive * 1e3:.3f} ms  ratio naive/ours '
          f'{naive / ours:.1f}x')
    return 0


if __name__ == '__main__':
    sys.exit(main())
