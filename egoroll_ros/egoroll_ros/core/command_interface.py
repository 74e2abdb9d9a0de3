"""The executor's command interfaces for ros2_control controllers (pure).

- ``float64_multi_array``: forward_command_controller (e.g. position_controllers/
  JointGroupPositionController) takes std_msgs/Float64MultiArray on ``<controller>/commands``,
  one value per joint **in the order of the controller's** ``joints`` **parameter**, and
  nothing in the message names the joints. ``command_joints`` mirrors that parameter; the
  executor sends its setpoints in that order.
- ``joint_trajectory``: joint_trajectory_controller takes trajectory_msgs/JointTrajectory on
  ``<controller>/joint_trajectory``; the message names its joints.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from egoroll_ros.errors import ConfigError


def command_order(joints: Sequence[str], command_joints: Sequence[str]) -> np.ndarray:
    """Indices into ``joints`` that give the values in the controller's order.

    Args:
        joints: the executor's joints (the order of its setpoints).
        command_joints: the controller's ``joints`` parameter; empty: the executor's order.

    Returns:
        ``order`` such that ``setpoint[order]`` lists the values in ``command_joints`` order.

    Raises:
        ConfigError: ``command_joints`` names a joint twice, lacks one of ``joints`` or names
            one the executor does not control (the controller and the executor disagree:
            refused, never guessed).
    """
    joints, command_joints = list(joints), list(command_joints)
    if not command_joints:
        return np.arange(len(joints))
    dup = sorted({j for j in command_joints if command_joints.count(j) > 1})
    missing = [j for j in joints if j not in command_joints]
    extra = [j for j in command_joints if j not in joints]
    if dup or missing or extra:
        problems = []
        if dup:
            problems.append(f'names {dup} twice')
        if missing:
            problems.append(f'lacks {missing}')
        if extra:
            problems.append(f'names {extra}, which are not in joints')
        raise ConfigError(f"parameter 'command_joints' (the controller's joints) disagrees with "
                          f"'joints' {joints}: it {'; '.join(problems)}")
    return np.array([joints.index(j) for j in command_joints], dtype=int)
