"""The one graph description (egoroll_ros.core.launch_graph): which nodes each launch file
starts, with which files, overrides and remaps, and the command line launch_ros gives them."""

from __future__ import annotations

from pathlib import Path
import re

from ament_index_python.packages import get_package_share_directory
import pytest
import yaml

from egoroll_ros.core.launch_graph import (
    GRAPHS,
    NodeSpec,
    arguments,
    command_line,
    describe,
    node_parameters,
    normalize_namespace,
)
from egoroll_ros.errors import ConfigError

SHARE = Path(get_package_share_directory('egoroll_ros'))
SETUP_PY = Path(__file__).resolve().parents[2] / 'setup.py'
EXPECTED = {
    'robot': ['trajectory_server', 'safety_gate'],
    'policy': ['policy_node'],
    'rollout': ['trajectory_server', 'safety_gate', 'policy_node'],
    'sim': ['sim_robot', 'trajectory_server', 'safety_gate', 'sim_camera', 'policy_node'],
}


def console_scripts() -> set[str]:
    return set(re.findall(r"'(\w+) = egoroll_ros\.[\w.]+:main'", SETUP_PY.read_text()))


@pytest.mark.parametrize('graph', GRAPHS)
def test_each_graph_starts_its_nodes_from_installed_files(graph):
    specs = describe(graph, {}, SHARE)
    assert [s.name for s in specs] == EXPECTED[graph]
    for s in specs:
        assert s.package == 'egoroll_ros' and s.executable in console_scripts()
        assert s.params_files == (str(SHARE / 'config' / f'{s.name}.yaml'),)
        assert s.namespace == '' and s.overrides['use_sim_time'] is False


@pytest.mark.parametrize('graph', GRAPHS)
def test_every_argument_is_described_and_common_ones_are_everywhere(graph):
    args = arguments(graph)
    names = [a.name for a in args]
    assert len(names) == len(set(names))
    assert {'namespace', 'use_sim_time', 'log_level', 'bimanual', 'joint_states_topic'} <= \
        set(names)
    for a in args:
        assert len(a.description) > 20, a.name
        assert not a.choices or a.default in a.choices, a.name


def test_command_line_is_launch_ros_s():
    spec = NodeSpec('egoroll_ros', 'safety_gate', 'safety_gate', '/arm1',
                    params_files=('/p/safety_gate.yaml',),
                    overrides={'urdf_path': '/u/arm.urdf', 'use_sim_time': True,
                               'joints': ['a', 'b'], 'rate': 2.5, 'policy.path': ''},
                    remaps=(('command', 'fpc/commands'),), log_level='warn')
    assert command_line(spec, '/lib/safety_gate') == [
        '/lib/safety_gate', '--ros-args', '--log-level', 'warn', '-r', '__node:=safety_gate',
        '-r', '__ns:=/arm1', '--params-file', '/p/safety_gate.yaml',
        '-p', 'urdf_path:=/u/arm.urdf', '-p', 'use_sim_time:=true', '-p', 'joints:=[a, b]',
        '-p', 'rate:=2.5', '-p', "policy.path:=''", '-r', 'command:=fpc/commands']
    root = NodeSpec('egoroll_ros', 'policy_node', 'policy_node')
    assert '__ns:=' not in ' '.join(command_line(root, 'x'))


@pytest.mark.parametrize('graph', ['policy', 'rollout', 'sim'])
def test_policy_node_is_a_lifecycle_node_with_an_explicit_autostart_choice(graph):
    def policy(**given):
        (spec,) = [s for s in describe(graph, given, SHARE) if s.name == 'policy_node']
        return spec

    on, off = policy(), policy(autostart='false')
    assert on.lifecycle and off.lifecycle
    assert [s.name for s in describe(graph, {}, SHARE) if s.lifecycle] == ['policy_node']
    # the choice is on the command line the process gets (and the launch file passes)
    assert '-p' in command_line(on, 'x') and 'autoconfigure:=true' in command_line(on, 'x')
    assert 'autoconfigure:=false' in command_line(off, 'x')
    # configured it offers the rollout services; unconfigured only the lifecycle's
    assert 'policy/preflight' in on.ready.services
    assert off.ready.services == ('policy_node/change_state',)
    with pytest.raises(ConfigError, match='autostart'):
        describe(graph, {'autostart': 'yes'}, SHARE)


@pytest.mark.parametrize(('given', 'want'), [('arm1', '/arm1'), ('/arm1/', '/arm1'),
                                             ('', ''), ('/', ''), ('a/b', '/a/b')])
def test_namespaces_are_normalised(given, want):
    assert normalize_namespace(given) == want
    assert all(s.namespace == want for s in describe('robot', {'namespace': given}, SHARE))


@pytest.mark.parametrize('bad', ['arm-1', '1arm', 'a//b', 'arm 1'])
def test_an_invalid_namespace_is_refused(bad):
    with pytest.raises(ConfigError, match='namespace'):
        describe('robot', {'namespace': bad}, SHARE)


def test_unknown_arguments_and_values_are_refused():
    with pytest.raises(ConfigError, match='unknown launch argument'):
        describe('robot', {'policy_path': '/x'}, SHARE)
    with pytest.raises(ConfigError, match='use_sim_time'):
        describe('robot', {'use_sim_time': 'yes'}, SHARE)
    with pytest.raises(ConfigError, match='no file'):
        describe('robot', {'safety_gate_params': '/nonexistent.yaml'}, SHARE)
    with pytest.raises(ConfigError, match='unknown graph'):
        describe('everything', {}, SHARE)


def test_a_users_parameter_file_layers_over_the_nodes_safe_defaults(tmp_path):
    """Issue 24.3: `<node>_params:=mine.yaml` comes after the node's generated defaults file
    (launch_ros applies files in order), so it changes only what it names; the safe values
    are never replaced by a file that leaves them out. Without one, the shipped file alone."""
    mine = tmp_path / 'mine.yaml'
    mine.write_text('/**/trajectory_server:\n  ros__parameters:\n    control_rate: 500.0\n')
    specs = {s.name: s for s in describe('robot', {'trajectory_server_params': str(mine)},
                                         SHARE)}
    assert specs['trajectory_server'].params_files == (
        str(SHARE / 'config' / 'defaults' / 'trajectory_server.yaml'), str(mine))
    assert specs['safety_gate'].params_files == (str(SHARE / 'config' / 'safety_gate.yaml'),)


def test_sim_without_robot_state_publisher_reads_the_urdf_from_file():
    specs = {s.name: s for s in describe('sim', {}, SHARE)}
    urdf = str(SHARE / 'urdf' / 'demo_arm.urdf')
    assert specs['sim_robot'].overrides['urdf_path'] == urdf     # publishes robot_description
    assert specs['safety_gate'].overrides['urdf_path'] == urdf   # reads the file itself
    assert 'robot_description' in specs['sim_robot'].ready.publishers


def test_sim_with_robot_state_publisher_leaves_robot_description_to_it():
    specs = {s.name: s for s in describe('sim', {'robot_state_publisher': 'true'}, SHARE)}
    rsp = specs['robot_state_publisher']
    assert rsp.package == 'robot_state_publisher'
    assert rsp.overrides['robot_description'] == (SHARE / 'urdf' / 'demo_arm.urdf').read_text()
    assert specs['sim_robot'].overrides['urdf_path'] == ''       # one publisher only
    assert specs['safety_gate'].overrides['urdf_path'] == str(SHARE / 'urdf' / 'demo_arm.urdf')


def test_rviz_and_camera_switches():
    names = [s.name for s in describe('sim', {'rviz': 'true', 'sim_camera': 'false'}, SHARE)]
    assert 'rviz2' in names and 'sim_camera' not in names
    rviz = describe('rollout', {'rviz': 'true'}, SHARE)[-1]
    assert rviz.arguments == ('-d', str(SHARE / 'config' / 'egoroll.rviz'))


@pytest.mark.parametrize(('interface', 'topic'), [
    ('float64_multi_array', 'fpc/commands'), ('joint_trajectory', 'fpc/joint_trajectory')])
def test_controller_remaps_command_to_the_ros2_control_controller_input(interface, topic):
    specs = {s.name: s for s in describe(
        'robot', {'command_interface': interface, 'controller': 'fpc',
                  'command_joints': 'b, a'}, SHARE)}
    ts = specs['trajectory_server']
    assert ts.remaps == (('command', topic),)
    assert ts.overrides['command_interface'] == interface
    assert ts.overrides['command_joints'] == ['b', 'a']


@pytest.mark.parametrize('interface', ['', 'joint_state'])
def test_a_controller_without_a_ros2_control_interface_is_refused(interface):
    with pytest.raises(ConfigError, match='controller:=fpc needs command_interface'):
        describe('robot', {'command_interface': interface, 'controller': 'fpc'}, SHARE)


def test_joint_states_topic_remaps_every_reader():
    for s in describe('sim', {'joint_states_topic': 'jsb/joint_states'}, SHARE):
        assert ('joint_states', 'jsb/joint_states') in s.remaps, s.name


def test_bimanual_uses_the_bimanual_files():
    for s in describe('rollout', {'bimanual': 'true'}, SHARE):
        assert s.params_files == (str(SHARE / 'config' / 'bimanual_example.yaml'),)


def test_overrides_for_a_node_not_in_the_graph_are_refused():
    with pytest.raises(ConfigError, match='sim_robot'):
        describe('robot', {}, SHARE, overrides={'sim_robot': {'rate': 1.0}})


def test_every_shipped_parameter_file_applies_in_any_namespace():
    for path in sorted((SHARE / 'config').glob('*.yaml')):
        data = yaml.safe_load(path.read_text())
        for key in data:
            assert key.startswith('/**/'), f'{path.name}: {key!r} applies only at the root'
            node = key[4:]
            for ns in ('', '/arm1', '/lab/arm2'):
                assert node_parameters(data, node, ns) == data[key]['ros__parameters']


@pytest.mark.parametrize(('key', 'fqn', 'matches'), [
    ('/**/safety_gate', '/safety_gate', True), ('/**/safety_gate', '/a/b/safety_gate', True),
    ('safety_gate', '/safety_gate', True), ('safety_gate', '/arm1/safety_gate', False),
    ('/arm1/safety_gate', '/arm1/safety_gate', True), ('/*/safety_gate', '/safety_gate', False),
    ('/*/safety_gate', '/arm1/safety_gate', True), ('/**', '/arm1/x', True),
    ('/**/safety_gate', '/arm1/policy_node', False)])
def test_parameter_file_keys_match_node_names_as_rcl_does(key, fqn, matches):
    ns, name = fqn.rsplit('/', 1)
    data = {key: {'ros__parameters': {'x': 1}}}
    assert (node_parameters(data, name, ns) is not None) is matches


@pytest.mark.safety
@pytest.mark.parametrize('graph', ['robot', 'rollout', 'sim'])
def test_each_launch_gives_the_gate_and_the_executor_one_fresh_private_key(graph):
    """Issue 23.4: every graph with the robot half writes a new key file per launch (mode
    0600) and passes the same one to the gate and the executor; auth_key_file:=PATH passes
    that file instead; the policy half never gets it."""
    import os
    import stat

    def keys(specs):
        return {s.name: s.overrides.get('auth_key_file') for s in specs}

    first, second = keys(describe(graph, {}, SHARE)), keys(describe(graph, {}, SHARE))
    assert first['safety_gate'] == first['trajectory_server']
    assert first['safety_gate'] != second['safety_gate']          # one per launch
    assert stat.S_IMODE(os.stat(first['safety_gate']).st_mode) == 0o600
    assert first.get('policy_node') is None
    given = keys(describe(graph, {'auth_key_file': '/etc/egoroll/robot.key'}, SHARE))
    assert given['safety_gate'] == given['trajectory_server'] == '/etc/egoroll/robot.key'
