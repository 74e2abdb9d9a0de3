"""Launch files and the RViz config, checked structurally (the launch package is not installable
here): parsed with ``ast``, every executable, file and argument cross-checked against the
INSTALLED package."""

import ast
from pathlib import Path
import re

from ament_index_python.packages import get_package_share_directory
import pytest
import yaml

SETUP_PY = Path(__file__).resolve().parents[2] / 'setup.py'
SHARE = Path(get_package_share_directory('egoroll_ros'))
LAUNCH_FILES = ['rollout_launch.py', 'robot_launch.py', 'policy_launch.py', 'sim_launch.py']
COMMON_ARGS = {'namespace', 'use_sim_time', 'log_level'}
# Nodes each file starts itself or through its includes.
EXPECTED_NODES = {
    'robot_launch.py': {'safety_gate', 'trajectory_server'},
    'policy_launch.py': {'policy_node'},
    'rollout_launch.py': {'safety_gate', 'trajectory_server', 'policy_node'},
    'sim_launch.py': {'sim_robot', 'sim_camera', 'safety_gate', 'trajectory_server',
                      'policy_node'},
}


def console_scripts() -> set[str]:
    return set(re.findall(r"'(\w+) = egoroll_ros\.[\w.]+:main'", SETUP_PY.read_text()))


def call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ''


def const(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def kwarg(node: ast.Call, name: str):
    return next((k.value for k in node.keywords if k.arg == name), None)


class LaunchFile:
    """What a launch file declares, uses, starts, references and includes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.path = SHARE / 'launch' / name
        self.tree = ast.parse(self.path.read_text(), filename=str(self.path))
        self.calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)]
        # Dicts splatted into Node(**common): resolve simple `common = dict(...)` assignments.
        self.dict_vars = {}
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and \
                    call_name(n.value) == 'dict' and isinstance(n.targets[0], ast.Name):
                self.dict_vars[n.targets[0].id] = n.value

    def node_kwargs(self, call: ast.Call) -> dict:
        out = {}
        for k in call.keywords:
            if k.arg is None and isinstance(k.value, ast.Name) and k.value.id in self.dict_vars:
                out.update({kk.arg: kk.value for kk in self.dict_vars[k.value.id].keywords})
            elif k.arg is not None:
                out[k.arg] = k.value
        return out

    def declared(self) -> dict[str, ast.Call]:
        return {const(c.args[0]): c for c in self.calls
                if call_name(c) == 'DeclareLaunchArgument'}

    def used(self) -> set[str]:
        return {const(c.args[0]) for c in self.calls
                if call_name(c) in ('LaunchConfiguration', 'LaunchConfigurationEquals',
                                    'LaunchConfigurationNotEquals') and c.args}

    def nodes(self) -> list[dict]:
        return [self.node_kwargs(c) for c in self.calls if call_name(c) == 'Node']

    def share_paths(self) -> list[tuple[str, ...]]:
        """Constant paths below FindPackageShare('egoroll_ros') in PathJoinSubstitution."""
        out = []
        for c in self.calls:
            if call_name(c) != 'PathJoinSubstitution' or not c.args:
                continue
            parts = c.args[0].elts
            head = parts[0]
            is_share = (isinstance(head, ast.Call) and call_name(head) == 'FindPackageShare'
                        and const(head.args[0]) == 'egoroll_ros') or (
                isinstance(head, ast.Name) and head.id == 'share')
            if is_share:
                out.append(tuple(const(p) for p in parts[1:]))
        return out

    def includes(self) -> list[tuple[str, set[str]]]:
        """(included launch file, keys of the launch_arguments passed to it)."""
        out = []
        for c in self.calls:
            if call_name(c) != 'IncludeLaunchDescription':
                continue
            path = [p for p in ast.walk(c.args[0]) if isinstance(p, ast.Call)
                    and call_name(p) == 'PathJoinSubstitution'][0]
            target = const(path.args[0].elts[-1])
            args = kwarg(c, 'launch_arguments')
            keys: set[str] = set()
            for d in ast.walk(args):
                if isinstance(d, ast.Dict):
                    for k, v in zip(d.keys, d.values, strict=True):
                        if k is None:   # **common
                            keys |= {const(kk) for kk in self._dict_keys(v)}
                        else:
                            keys.add(const(k))
            out.append((target, keys))
        return out

    def _dict_keys(self, name_node) -> list:
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and \
                    isinstance(name_node, ast.Name) and n.targets[0].id == name_node.id and \
                    isinstance(n.value, ast.Dict):
                return n.value.keys
        return []

    def all_started(self) -> set[str]:
        names = {const(n['executable']) for n in self.nodes()
                 if const(n.get('package')) == 'egoroll_ros'}
        for target, _ in self.includes():
            names |= LaunchFile(target).all_started()
        return names


@pytest.fixture(params=LAUNCH_FILES)
def launch_file(request) -> LaunchFile:
    return LaunchFile(request.param)


def test_every_launch_file_is_installed_and_defines_generate_launch_description(launch_file):
    assert launch_file.path.is_file()
    funcs = {n.name for n in launch_file.tree.body if isinstance(n, ast.FunctionDef)}
    assert 'generate_launch_description' in funcs


def test_every_egoroll_executable_is_a_console_script(launch_file):
    scripts = console_scripts()
    nodes = [n for n in launch_file.nodes() if const(n.get('package')) == 'egoroll_ros']
    for node in nodes:
        assert const(node.get('executable')) in scripts, const(node.get('executable'))
    assert launch_file.all_started() == EXPECTED_NODES[launch_file.name]


def test_every_referenced_share_file_is_installed(launch_file):
    paths = launch_file.share_paths()
    assert paths
    for parts in paths:
        assert None not in parts, f'{launch_file.name}: non-constant share path {parts}'
        assert (SHARE.joinpath(*parts)).is_file(), '/'.join(parts)


def test_every_argument_has_a_description_and_every_used_one_is_declared(launch_file):
    declared = launch_file.declared()
    assert COMMON_ARGS <= set(declared)
    for name, call in declared.items():
        desc = const(kwarg(call, 'description'))
        assert desc and len(desc) > 10, f'{launch_file.name}: {name} lacks a description'
        assert kwarg(call, 'default_value') is not None, f'{name} has no default'
    assert launch_file.used() <= set(declared), launch_file.used() - set(declared)


def test_includes_pass_only_arguments_the_included_file_declares(launch_file):
    for target, keys in launch_file.includes():
        assert keys <= set(LaunchFile(target).declared()), (target, keys)


def test_params_files_per_node_default_to_their_config(launch_file):
    declared = launch_file.declared()
    for node in EXPECTED_NODES[launch_file.name]:
        arg = f'{node}_params'
        if arg not in declared:
            continue  # passed down to an include that declares it
        default = kwarg(declared[arg], 'default_value')
        parts = [const(p) for p in default.args[0].elts[1:]]
        assert parts == ['config', f'{node}.yaml']
    if launch_file.name in ('policy_launch.py', 'rollout_launch.py', 'sim_launch.py'):
        assert 'policy_path' in declared
    if launch_file.name in ('rollout_launch.py', 'sim_launch.py'):
        assert 'rviz' in declared


def test_rviz_config_shows_robot_camera_and_markers():
    config = yaml.safe_load((SHARE / 'config' / 'egoroll.rviz').read_text())
    manager = config['Visualization Manager']
    assert manager['Global Options']['Fixed Frame'] == 'base_link'
    displays = {}
    for d in manager['Displays']:
        topic = d.get('Topic', d.get('Description Topic', {})).get('Value')
        displays.setdefault(d['Class'], set()).add(topic)
    assert 'robot_description' in displays['rviz_default_plugins/RobotModel']
    assert 'camera/scene/image_raw' in displays['rviz_default_plugins/Image']
    assert {'policy/markers', 'safety/markers'} <= displays['rviz_default_plugins/MarkerArray']
