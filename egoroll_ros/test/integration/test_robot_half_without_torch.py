"""The robot half (safety gate, executor) needs no torch: importing and running both nodes,
with their shipped parameter files, never imports it (a robot computer without torch can run
robot_launch.py)."""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys

from ament_index_python.packages import get_package_share_directory
import pytest

pytestmark = pytest.mark.integration
SHARE = Path(get_package_share_directory('egoroll_ros'))

SCRIPT = r"""
import sys
import rclpy
from rclpy.executors import SingleThreadedExecutor
from egoroll_ros.nodes.safety_gate import SafetyGate
from egoroll_ros.nodes.trajectory_server import TrajectoryServer

share = sys.argv[1]
rclpy.init(args=['--ros-args', '-r', '__ns:=/arm1',
                 '--params-file', f'{share}/config/safety_gate.yaml',
                 '--params-file', f'{share}/config/trajectory_server.yaml',
                 '-p', f'urdf_path:={share}/urdf/demo_arm.urdf'])
gate, executor_node = SafetyGate(), TrajectoryServer()
executor = SingleThreadedExecutor()
executor.add_node(gate)
executor.add_node(executor_node)
for _ in range(50):                   # run their timers, watchdogs and control loop a while
    executor.spin_once(timeout_sec=0.02)
loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))
executor_node.close() if hasattr(executor_node, 'close') else None
gate.close() if hasattr(gate, 'close') else None
print('TORCH_MODULES', loaded)
sys.exit(1 if loaded else 0)
"""


def test_gate_and_executor_never_import_torch(tmp_path):
    proc = subprocess.run([sys.executable, '-c', SCRIPT, str(SHARE)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ),
                          stdin=subprocess.DEVNULL)
    assert 'TORCH_MODULES []' in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
