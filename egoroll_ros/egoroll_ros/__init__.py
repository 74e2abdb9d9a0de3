"""egoroll: run learned manipulation policies on real robot arms through ROS 2, safely.

Pure cores live in :mod:`egoroll_ros.core` (no rclpy, no message types); the rclpy nodes in
:mod:`egoroll_ros.nodes` convert messages to plain data, call the core and publish.
"""

__version__ = '0.1.0'
