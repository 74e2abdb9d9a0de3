"""Launch files and the RViz config, checked structurally (the launch package is not installable
here): each installed launch file is a thin call of egoroll_ros.ros.launch_actions.generate on
its graph of egoroll_ros.core.launch_graph (whose nodes test_launch_graph.py checks and
test/integration/test_launch_graphs.py runs), and launch_actions uses only launch API that
Humble and Jazzy both have."""

import ast
import importlib.util
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
import pytest
import yaml

from egoroll_ros.core.launch_graph import LAUNCH_FILES

SHARE = Path(get_package_share_directory('egoroll_ros'))
# The installed module (find_spec does not import it: launch is not installed here).
LAUNCH_ACTIONS = Path(importlib.util.find_spec('egoroll_ros.ros.launch_actions').origin)
#: launch / launch_ros names present in Humble and Jazzy alike (LaunchConfigurationEquals is
#: deprecated since Iron and warns on every launch: not used).
PORTABLE = {'launch': {'LaunchContext', 'LaunchDescription'},
            'launch.actions': {'DeclareLaunchArgument', 'OpaqueFunction', 'Shutdown'},
            'launch.substitutions': {'LaunchConfiguration'},
            'launch_ros.actions': {'Node', 'LifecycleNode'}}


@pytest.mark.parametrize(('graph', 'name'), sorted(LAUNCH_FILES.items()))
def test_every_launch_file_is_installed_and_generates_its_graph(graph, name):
    path = SHARE / 'launch' / name
    tree = ast.parse(path.read_text(), filename=str(path))
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                and n.name == 'generate_launch_description')
    calls = [n for n in ast.walk(func) if isinstance(n, ast.Call)]
    assert [(c.func.id, [a.value for a in c.args]) for c in calls] == [('generate', [graph])]
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert [(i.module, [a.name for a in i.names]) for i in imports] == [
        ('egoroll_ros.ros.launch_actions', ['generate'])]


def test_launch_actions_use_only_launch_api_of_humble_and_jazzy():
    tree = ast.parse(LAUNCH_ACTIONS.read_text())
    used = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module.split('.')[0] in ('launch', 'launch_ros'):
            used.setdefault(n.module, set()).update(a.name for a in n.names)
    for module, names in used.items():
        assert names <= PORTABLE.get(module, set()), (module, names)
    text = LAUNCH_ACTIONS.read_text()
    assert 'LaunchConfigurationEquals' not in text
    # Every node stops the whole launch when it exits: no orphans after a failure.
    assert 'on_exit=Shutdown(' in text


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
