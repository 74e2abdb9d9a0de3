"""The joint order of a forward_command_controller's Float64MultiArray (command_joints)."""

import numpy as np
import pytest

from egoroll_ros.core.command_interface import command_order
from egoroll_ros.errors import ConfigError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

JOINTS = ['a', 'b', 'c']


def test_empty_command_joints_keep_the_executor_order():
    assert command_order(JOINTS, []).tolist() == [0, 1, 2]


def test_values_come_in_the_controller_joint_order():
    order = command_order(JOINTS, ['c', 'a', 'b'])
    setpoint = np.array([1.0, 2.0, 3.0])          # a, b, c
    assert setpoint[order].tolist() == [3.0, 1.0, 2.0]


@pytest.mark.parametrize(('command_joints', 'message'), [
    (['a', 'b'], "lacks ['c']"), (['a', 'b', 'c', 'd'], "names ['d']"),
    (['a', 'a', 'b', 'c'], "names ['a'] twice")])
def test_a_controller_joint_list_that_disagrees_is_refused(command_joints, message):
    with pytest.raises(ConfigError, match="'command_joints'") as err:
        command_order(JOINTS, command_joints)
    assert message in str(err.value)
