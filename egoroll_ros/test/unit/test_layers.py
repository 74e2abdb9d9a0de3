"""The import graph points down: core <- policies <- ros <- nodes, bag, demo (sim on core).

Reads every module's imports with ``ast`` (top-level and function-level ones alike) from the
installed package, so a new module is covered without naming it here.
"""

from __future__ import annotations

import ast
from pathlib import Path
import re

import pytest

import egoroll_ros

#: Layer of each sub-package (or top-level module) of egoroll_ros: a module may import only
#: from its own layer or lower ones. ``sim`` stands apart, on the cores.
LAYERS = {'__init__': 0, 'errors': 0, 'core': 1, 'runtimes': 1, 'policies': 2, 'sim': 2, 'ros': 3,
          'nodes': 4, 'bag': 4, 'demo': 4, 'testing': 4, 'cli': 5}
#: Layers that must run without ROS: no rclpy, no message packages, no ament index.
ROS_FREE = ('core', 'runtimes', 'policies')
_ROS_MODULES = {'rclpy', 'rosidl_runtime_py', 'rosidl_parser', 'ament_index_python',
                'cv_bridge', 'launch', 'launch_ros', 'rosbag2_py', 'rosbags', 'message_filters',
                'tf2_ros', 'egoroll_interfaces', 'builtin_interfaces', 'rcl_interfaces',
                'unique_identifier_msgs', 'rosgraph_msgs'}
_MESSAGE_PACKAGE = re.compile(r'^[a-z0-9_]+_(msgs|srvs|interfaces)$')


def is_ros_module(name: str) -> bool:
    """Whether top-level module ``name`` belongs to ROS (rclpy, a message package, ament)."""
    top = name.split('.')[0]
    return top in _ROS_MODULES or bool(_MESSAGE_PACKAGE.match(top))


def module_imports(root: Path, package: str = 'egoroll_ros') -> dict[str, set[str]]:
    """Every module under ``root`` -> the absolute module names it imports (anywhere in it)."""
    out: dict[str, set[str]] = {}
    for path in sorted(root.rglob('*.py')):
        parts = path.relative_to(root).with_suffix('').parts
        name = '.'.join((package, *parts)).removesuffix('.__init__')
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package, level - 1 up
                    pkg = name.split('.') if path.name == '__init__.py' else \
                        name.split('.')[:-1]
                    base = pkg[:len(pkg) - node.level + 1]
                    mod = '.'.join([*base, node.module] if node.module else base)
                else:
                    mod = node.module or ''
                found.add(mod)
                # ``from egoroll_ros.core import policy`` imports the module core.policy
                found.update(f'{mod}.{a.name}' for a in node.names
                             if (root / Path(*f'{mod}.{a.name}'.split('.')[1:])).with_suffix(
                                 '.py').exists())
        out[name] = found
    return out


def layer_of(module: str) -> str:
    """``egoroll_ros.core.gate`` -> ``core``; ``egoroll_ros`` -> ``__init__``."""
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else '__init__'


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports that point up a layer, or from a ROS-free layer into ROS."""
    bad = []
    for mod, imports in sorted(graph.items()):
        layer = layer_of(mod)
        if layer not in LAYERS:
            bad.append(f'{mod}: package {layer!r} has no layer (add it to LAYERS)')
            continue
        for imp in sorted(imports):
            if imp == 'egoroll_ros' or imp.startswith('egoroll_ros.'):
                target = layer_of(imp)
                if LAYERS.get(target, 99) > LAYERS[layer]:
                    bad.append(f'{mod} imports {imp} (layer {target!r} is above {layer!r})')
                elif layer in ROS_FREE and target != layer and target in ('ros', 'sim'):
                    bad.append(f'{mod} imports {imp} ({layer!r} must stay ROS-free)')
            elif layer in ROS_FREE and is_ros_module(imp):
                bad.append(f'{mod} imports {imp} ({layer!r} must not import ROS)')
    return bad


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles among the modules of ``graph`` (each as a list of modules)."""
    edges = {m: sorted(i for i in imps if i in graph and i != m) for m, imps in graph.items()}
    found, state, stack = [], {}, []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in edges[m]:
            if state.get(n) == 1:
                found.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    return found


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    pk: dict[str, set[str]] = {layer_of(m): set() for m in graph}
    for m, imps in graph.items():
        pk[layer_of(m)] |= {layer_of(i) for i in imps if i.startswith('egoroll_ros')}
    return pk


@pytest.fixture(scope='module')
def graph() -> dict[str, set[str]]:
    return module_imports(Path(egoroll_ros.__file__).parent)


def test_core_imports_no_ros_and_no_layer_above(graph):
    core = {m: i for m, i in graph.items() if layer_of(m) == 'core'}
    assert 'egoroll_ros.core.policy' in core and 'egoroll_ros.core.gate' in core
    assert violations(core) == []


def test_every_import_points_down_the_layers(graph):
    assert violations(graph) == []


def test_import_graph_has_no_cycle(graph):
    assert cycles(graph) == []
    assert cycles(_package_graph(graph)) == [], 'packages import each other'


def test_the_checks_catch_an_upward_import_a_ros_import_and_a_cycle(tmp_path):
    root = tmp_path / 'egoroll_ros'
    for d in ('core', 'policies', 'nodes'):
        (root / d).mkdir(parents=True)
        (root / d / '__init__.py').write_text('')
    (root / 'core' / 'a.py').write_text('def f():\n    from egoroll_ros.policies import b\n')
    (root / 'core' / 'c.py').write_text('import rclpy\nfrom sensor_msgs.msg import Joy\n'
                                        'from ament_index_python.packages import x\n')
    (root / 'policies' / 'b.py').write_text('from egoroll_ros.core import a\n')
    (root / 'nodes' / 'n.py').write_text('import rclpy\nfrom egoroll_ros.core import c\n')
    g = module_imports(root)
    bad = violations(g)
    assert any('egoroll_ros.core.a imports egoroll_ros.policies.b' in v for v in bad)
    for mod in ('rclpy', 'sensor_msgs.msg', 'ament_index_python.packages'):
        assert any(f'egoroll_ros.core.c imports {mod} ' in v for v in bad), mod
    assert not any(v.startswith('egoroll_ros.nodes') for v in bad)
    assert ['egoroll_ros.core.a', 'egoroll_ros.policies.b', 'egoroll_ros.core.a'] in cycles(g)
