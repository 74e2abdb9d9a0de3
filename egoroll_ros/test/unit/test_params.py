"""Parameter specs: declared with descriptors, validated with errors naming the parameter."""

import pytest
import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter

from egoroll_ros.errors import ConfigError
from egoroll_ros.ros.params import Param, declare_params, per_joint


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    ctx.try_shutdown()


def _node(context, **overrides):
    return Node('params_test', context=context, parameter_overrides=[
        Parameter(k, value=v) for k, v in overrides.items()])


SPECS = [
    Param('control_rate', float, 200.0, 'Hz', min=1.0, max=1000.0, read_only=True),
    Param('joints', 'str[]', None, 'joint names', read_only=True),
    Param('mode', str, 'hold', 'stop behaviour', choices=('hold', 'decelerate')),
    Param('limits', 'float[]', [], 'per-joint limits'),
]


def test_declared_parameters_carry_descriptors_and_values(context):
    node = _node(context, joints=['a', 'b'])
    values = declare_params(node, SPECS)
    assert values == {'control_rate': 200.0, 'joints': ['a', 'b'], 'mode': 'hold',
                      'limits': []}
    desc = node.describe_parameter('control_rate')
    assert desc.read_only and desc.description == 'Hz'
    assert desc.floating_point_range[0].to_value == 1000.0
    node.destroy_node()


def test_missing_required_parameter_is_named(context):
    node = _node(context)
    with pytest.raises(ConfigError, match="'joints' is required"):
        declare_params(node, SPECS)
    node.destroy_node()


@pytest.mark.parametrize('override, match', [
    ({'control_rate': 5000.0}, "'control_rate'"),
    ({'mode': 'coast'}, "'mode'.*not one of"),
])
def test_out_of_range_or_unknown_choice_is_refused(context, override, match):
    node = _node(context, joints=['a'], **override)
    with pytest.raises(ConfigError, match=match):
        declare_params(node, SPECS)
    node.destroy_node()


def test_per_joint_needs_one_value_per_joint():
    assert per_joint([1.0, 2.0], ['a', 'b'], 'x') == [1.0, 2.0]
    with pytest.raises(ConfigError, match="'max_velocity'.*2.*got 1"):
        per_joint([1.0], ['a', 'b'], 'max_velocity')
