"""Helpers for tests of real ROS graphs: in-process graphs, node subprocesses, waiting.

No fixed sleeps: everything waits on a condition with a timeout. Pytest fixtures wrapping these
live in :mod:`egoroll_ros.testing.pytest_plugin`.
"""

from egoroll_ros.ros.graph import MessageCollector, RosGraph, run_callback, wait_until
from egoroll_ros.ros.processes import NodeProcess, ProcessLauncher, executable_path
from egoroll_ros.testing.actions import goal_result
from egoroll_ros.testing.turns import next_turn

__all__ = ['MessageCollector', 'NodeProcess', 'ProcessLauncher', 'RosGraph', 'executable_path',
           'goal_result', 'next_turn', 'run_callback',
           'wait_until']
