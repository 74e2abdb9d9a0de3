"""Every live parameter of the nodes that decide motion has hard bounds (issue 24.2).

A live parameter is one ``ros2 param set`` from any node on the domain may change. For the
safety gate, policy_node and trajectory_server each such number must have a finite minimum
and maximum in its spec (the descriptor ROS enforces and :func:`check_value`), and the extreme
values are tried here: the bounds are accepted, beyond them refused. Numbers that would turn
a watchdog off (0 = off) may not be live at all. sim_robot's live ``fault.*`` parameters are
the simulator's fault injection, not safety settings, and are not covered.
"""

from __future__ import annotations

import math

import pytest

from egoroll_ros.errors import ConfigError
from egoroll_ros.nodes.trajectory_server import PARAMS as EXECUTOR
from egoroll_ros.ros.gate_params import PARAMS as GATE
from egoroll_ros.ros.params import check_value
from egoroll_ros.ros.policy_params import PARAMS as POLICY

pytestmark = pytest.mark.safety

LIVE = [pytest.param(spec, id=f'{node}.{spec.name}')
        for node, specs in (('safety_gate', GATE), ('policy_node', POLICY),
                            ('trajectory_server', EXECUTOR))
        for spec in specs if not spec.read_only]


def test_the_motion_nodes_have_live_parameters_to_check():
    names = {p.values[0].name for p in LIVE}
    assert {'joy_timeout', 'confirm_timeout', 'max_age.camera', 'max_age.joint_states',
            'max_age.quest'} <= names, names
    assert 'max_clock_offset' not in names        # 0 turns its check off: read-only


@pytest.mark.parametrize('spec', LIVE)
def test_every_live_number_is_bounded_and_its_extremes_are_tried(spec):
    assert spec.type in (float, int), f'{spec.name}: a live {spec.type} (not bounded)'
    assert spec.min is not None and spec.max is not None, f'{spec.name} has no hard bounds'
    assert math.isfinite(spec.min) and math.isfinite(spec.max)
    check_value(spec, spec.type(spec.max))                  # the bound itself is allowed
    for beyond in (spec.max * 10 + 1, 1e9, math.inf):
        with pytest.raises(ConfigError):
            check_value(spec, spec.type(beyond) if spec.type is float else int(1e9))
    with pytest.raises(ConfigError):
        check_value(spec, spec.type(spec.min - 1))
    if spec.min_exclusive:
        with pytest.raises(ConfigError):
            check_value(spec, spec.type(spec.min))
    assert spec.min > 0 or spec.min_exclusive, \
        f'{spec.name}: a live 0 would turn its check off'
