"""Benchmark: validating a 50-point chunk for a bimanual 2x7-joint robot (+ grippers), both
end-effector frames, vectorised gate vs a straightforward per-point Python loop (Pinocchio FK per
point) doing the same checks. Run: tools/in_env.sh python benchmarks/bench_gate.py
"""

from __future__ import annotations

from pathlib import Path
import statistics
import sys
import time

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'egoroll_ros' / 'test' / 'unit'))   # the reference loop

from gate_testlib import reference_check  # noqa: E402

from egoroll_ros.core.gate import GateConfig, check  # noqa: E402
from egoroll_ros.core.robot_model import RobotModel  # noqa: E402
from egoroll_ros.core.types import Chunk, JointStateData, JointTrajectoryData  # noqa: E402


def main() -> int:
    """Print p50/p99 of both implementations and their ratio."""
    from ament_index_python.packages import get_package_share_directory

    urdf = Path(get_package_share_directory('egoroll_ros')) / 'urdf' / 'demo_bimanual.urdf'
    model = RobotModel.from_file(urdf)
    joints = model.joint_names                        # 2 x (7 arm joints + gripper)
    cfg = GateConfig(joints=joints, ee_frames=('left_tool0', 'right_tool0'),
                     gripper_joints=('left_gripper', 'right_gripper'), gripper_min=(0.0, 0.0),
                     gripper_max=(0.04, 0.04), ee_workspace_min=(-1.5, -1.5, 0.0),
                     ee_workspace_max=(1.5, 1.5, 2.0))
    qm = np.array([0.1, 0.3, 0.0, 0.5, 0.0, 0.3, 0.0, 0.02] * 2)
    times = 0.02 * np.arange(1, 51)
    vel = np.array([0.1, -0.05, 0.1, 0.05, 0.2, 0.1, 0.3, 0.01] * 2)
    stamp = 1000.0
    chunk = Chunk(1, 'x', stamp, JointTrajectoryData(joints, times, qm + np.outer(times, vel),
                                                     stamp=stamp))
    ms = JointStateData(joints, qm)
    now = stamp + 0.02
    verdict = check(chunk, ms, model, cfg, now=now)
    assert verdict.accepted, verdict.summary          # the benchmark measures the accept path
    assert reference_check(chunk, qm, model, cfg, now) == set()

    def timeit(fn, n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    fast = timeit(lambda: check(chunk, ms, model, cfg, now=now), 2000)
    slow = timeit(lambda: reference_check(chunk, qm, model, cfg, now), 50)
    p = lambda xs, q: float(np.percentile(xs, q)) * 1e3  # noqa: E731
    print('gate check, 50 points x 16 joints, 2 end-effector frames (ms)')
    print(f'  vectorised : p50 {p(fast, 50):.3f}  p99 {p(fast, 99):.3f}  (n={len(fast)})')
    print(f'  per-point  : p50 {p(slow, 50):.3f}  p99 {p(slow, 99):.3f}  (n={len(slow)})')
    print(f'  ratio of medians: {statistics.median(slow) / statistics.median(fast):.1f}x')
    return 0


if __name__ == '__main__':
    sys.exit(main())
