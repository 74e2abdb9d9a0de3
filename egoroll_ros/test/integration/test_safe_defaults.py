"""Issue 24.3: a node started with no parameter file runs with the documented safe values.

The table below is written here from docs/parameters.md and docs/executor.md (what a user who
writes their own parameter file, or none, gets), independently of the specs: a default that
drifts to an unsafe value fails here, and so does a core config whose defaults disagree with
its node's spec (there is one definition: the spec reads the core's).
"""

from __future__ import annotations

import dataclasses

import pytest
from rclpy.parameter import Parameter

from egoroll_ros.core.executor import ExecutorConfig
from egoroll_ros.core.gate import GateConfig
from egoroll_ros.errors import ConfigError
from egoroll_ros.nodes.safety_gate import SafetyGate
from egoroll_ros.nodes.trajectory_server import PARAMS as EXECUTOR_PARAMS
from egoroll_ros.nodes.trajectory_server import TrajectoryServer
from egoroll_ros.ros.gate_params import PARAMS as GATE_PARAMS
from egoroll_ros.ros.joint_states import WRITER_IDS

pytestmark = pytest.mark.safety   # checks supervision and limits: never rerun

J = ['j1', 'j2']

#: trajectory_server: the safe value of every safety-relevant parameter.
EXECUTOR_SAFE = {
    'state_timeout': 0.1, 'command_timeout': 0.5, 'max_future_stamp': 0.5,
    'heartbeat_timeout': 0.25, 'allowed_sources': ['safety_gate'],
    'require_position_limits': True, 'max_late_ticks': 50, 'stall_timeout': 1.0,
    'start_jump_margin': 0.005, 'stop_behavior': 'decelerate', 'idle_output': 'hold',
    'seam': 'blend', 'blend_time': 0.1, 'max_blend_time': 0.4, 'position_lower': [],
    'position_upper': [], 'urdf_path': '', 'auth_key_file': '',
}
#: ...and the ones with no default: the robot's to state (a node without them does not start).
EXECUTOR_REQUIRED = {'joints': J, 'max_velocity': [1.0, 1.0], 'max_acceleration': [5.0, 5.0],
                     'path_tolerance': [0.1, 0.1], 'max_jerk': [100.0, 100.0]}

#: safety_gate: the safe value of every safety-relevant parameter.
GATE_SAFE = {
    'max_chunk_age': 0.5, 'max_future_stamp': 0.1, 'max_joint_state_age': 0.2,
    'position_margin': 0.02, 'max_step': [0.2], 'velocity_scale': 0.5,
    'acceleration_limits': [20.0], 'jerk_limits': [5000.0], 'max_start_deviation': [0.15],
    'ee_max_rotation_step': 0.3, 'ee_max_translation_step': 0.05, 'ee_soft_translation': 0.1,
    'ee_hard_translation': 0.25, 'disabled_checks': [], 'on_reject': 'hold',
    'require_deadman': True, 'estop_button': 1, 'joy_timeout': 0.5, 'stall_timeout': 1.0,
    'confirm_timeout': 10.0, 'watchdog_period': 0.02, 'auth_key_file': '',
}


def _core_defaults(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            v = f.default
        elif f.default_factory is not dataclasses.MISSING:
            v = f.default_factory()
        else:
            continue
        out[f.name] = sorted(v) if isinstance(v, frozenset) else \
            list(v) if isinstance(v, tuple) else v
    return out


@pytest.mark.parametrize(('params', 'safe', 'core'), [
    (EXECUTOR_PARAMS, EXECUTOR_SAFE, ExecutorConfig), (GATE_PARAMS, GATE_SAFE, GateConfig)],
    ids=['trajectory_server', 'safety_gate'])
def test_each_specs_defaults_are_the_safe_values_and_the_cores(params, safe, core):
    spec = {p.name: p.default for p in params}
    assert {k: spec[k] for k in safe} == safe
    for name, value in _core_defaults(core).items():
        if name in spec and spec[name] is not None:
            assert spec[name] == value, f'{name}: spec {spec[name]!r}, core {value!r}'


def _overrides(values: dict) -> list[Parameter]:
    return [Parameter(k, value=v) for k, v in values.items()]


def test_a_trajectory_server_with_no_parameter_file_runs_with_the_safe_values(ros_graph):
    node = ros_graph.add(TrajectoryServer(context=ros_graph.context,
                                          parameter_overrides=_overrides(EXECUTOR_REQUIRED)))
    for name, value in EXECUTOR_SAFE.items():
        assert node.p[name] == value, name
    cfg = node.config
    assert (cfg.seam, cfg.stop_behavior) == ('blend', 'decelerate')
    assert cfg.heartbeat_timeout == 0.25 and cfg.command_timeout == 0.5
    assert cfg.require_position_limits and cfg.path_tolerance == (0.1, 0.1)
    off = set(dict(node._executor_status().values)['disabled_checks'].split(','))
    assert off == {'goal_tolerance'} | (set() if WRITER_IDS else
                                        {'joint_states_second_publisher'})


@pytest.mark.parametrize('missing', ['path_tolerance', 'max_jerk', 'max_velocity'])
def test_a_trajectory_server_without_a_robot_specific_limit_does_not_start(ros_graph, missing):
    values = {k: v for k, v in EXECUTOR_REQUIRED.items() if k != missing}
    with pytest.raises(ConfigError, match=f"'{missing}'"):
        TrajectoryServer(context=ros_graph.context, parameter_overrides=_overrides(values))


def test_a_safety_gate_with_no_parameter_file_runs_with_the_safe_values(ros_graph):
    gate = ros_graph.add(SafetyGate(context=ros_graph.context,
                                    parameter_overrides=_overrides({'joints': J})))
    for name, value in GATE_SAFE.items():
        assert gate.p[name] == value, name
    assert gate.interlock.config.require_quest       # the e-stop channel is watched
