"""Cartesian 50-point bimanual chunk on the demo bimanual robot: IK + every check.

Times :func:`egoroll_ros.core.cartesian.check_cartesian` (structure and Cartesian pose checks,
per-arm damped-least-squares IK seeded from the measured state, then the joint-space gate on
the IK result) and, for reference, the IK alone and the joint-space gate alone.
Run: ``tools/in_env.sh python benchmarks/bench_cartesian.py [repeats]``. Target: p99 <= 5 ms.
"""

from __future__ import annotations

from pathlib import Path
import sys
import time

import numpy as np

from egoroll_ros.core.cartesian import (
    CartesianArmConfig,
    CartesianArmTarget,
    CartesianChunk,
    CartesianConfig,
    check_cartesian,
    prepare_cartesian,
)
from egoroll_ros.core.frames import matrix_to_quat, quat_to_matrix
from egoroll_ros.core.gate import GateConfig, check
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import JointStateData

URDF = Path(__file__).resolve().parents[1] / 'egoroll_ros' / 'urdf' / 'demo_bimanual.urdf'
ARM = ('shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
       'wrist_pitch', 'wrist_roll')
SIDES = ('left', 'right')
JOINTS = tuple(f'{s}_{j}' for s in SIDES for j in ARM) + ('left_gripper', 'right_gripper')
N = 50


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    model = RobotModel.from_file(URDF)
    cfg = GateConfig(joints=JOINTS, ee_frames=('left_tool0', 'right_tool0'),
                     gripper_joints=('left_gripper', 'right_gripper'), gripper_min=(0.0, 0.0),
                     gripper_max=(0.04, 0.04))
    cart = CartesianConfig(tuple(CartesianArmConfig(s, f'{s}_tool0', f'{s}_gripper')
                                 for s in SIDES))
    q_arm = np.array([0.1, 0.4, 0.0, 1.0, 0.0, 0.6, 0.0])
    qm = np.concatenate([q_arm, q_arm * [-1, 1, -1, 1, -1, 1, -1], [0.02, 0.02]])
    js = JointStateData(JOINTS, qm, stamp=100.0, received=0.0)
    arms = []
    for k, s in enumerate(SIDES):
        qs = qm[7 * k:7 * k + 7] + np.linspace(0, 1, N + 1)[1:, None] * \
            np.array([0.1, -0.05, 0.08, 0.1, -0.1, 0.1, 0.15])
        trans, rots = model.fk([f'{s}_tool0'], JOINTS[7 * k:7 * k + 7], qs)
        arms.append(CartesianArmTarget(s, f'{s}_tool0', model.base_frame, trans[0],
                                       matrix_to_quat(rots[0]), np.full(N, 0.02)))
    chunk = CartesianChunk(1, 'f' * 64, 100.0, 0.02 * np.arange(1, N + 1), tuple(arms))
    prepare_cartesian(model, cfg, cart)
    out = check_cartesian(chunk, js, model, cfg, cart, 100.0)
    assert out.verdict.accepted, out.verdict.summary
    full, ik_only, joint_only = [], [], []
    prep = prepare_cartesian(model, cfg, cart)
    for _ in range(repeats):
        t0 = time.perf_counter()
        check_cartesian(chunk, js, model, cfg, cart, 100.0)
        t1 = time.perf_counter()
        for arm, tgt in zip(prep.arms, arms, strict=True):
            arm.ik.solve_path(tgt.positions, quat_to_matrix(tgt.quaternions), qm[arm.cols])
        t2 = time.perf_counter()
        check(out.joint_chunk, js, model, cfg, 100.0)
        t3 = time.perf_counter()
        full.append(t1 - t0)
        ik_only.append(t2 - t1)
        joint_only.append(t3 - t2)
    iters = sum(int(r.iterations.sum()) for r in out.ik.values())

    def fmt(xs: list[float]) -> str:
        a = np.array(xs) * 1e3
        return f'p50 {np.percentile(a, 50):.3f} ms  p99 {np.percentile(a, 99):.3f} ms'

    print(f'Cartesian {N}-point bimanual chunk (demo_bimanual, 2 x 7-joint arms), '
          f'{repeats} repeats, {iters} IK iterations per chunk')
    print(f'  IK + all checks (check_cartesian): {fmt(full)}   target p99 <= 5 ms')
    print(f'  IK alone (2 arms):                  {fmt(ik_only)}')
    print(f'  joint-space gate alone:             {fmt(joint_only)}')


if __name__ == '__main__':
    main()
