"""Every key of every shipped config YAML is a parameter its node really declares, in any
namespace.

Each installed node is started in the namespace /arm1 with the YAML file (keyed ``/**/<node>``)
and asked for its parameters through ``/arm1/<node>/list_parameters``; a key the node never
declared (a typo, a renamed parameter) would be silently ignored by ROS, so it fails here.
"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
import pytest
from rcl_interfaces.srv import ListParameters
import yaml

from egoroll_ros.testing import wait_until

pytestmark = pytest.mark.integration
SHARE = Path(get_package_share_directory('egoroll_ros'))
NS = '/arm1'
NODES = ('trajectory_server', 'safety_gate', 'policy_node', 'sim_robot', 'sim_camera')
# Extra parameters that let a node start outside its real graph (for the bimanual example:
# its URDF instead of waiting on robot_description).
START_OVERRIDES = {
    ('bimanual_example.yaml', 'safety_gate'): {
        'urdf_path': str(SHARE / 'urdf' / 'demo_bimanual.urdf')},
}


def flatten(params: dict, prefix: str = '') -> set[str]:
    keys = set()
    for key, value in params.items():
        if isinstance(value, dict):
            keys |= flatten(value, f'{prefix}{key}.')
        else:
            keys.add(prefix + key)
    return keys


def cases() -> list:
    out = []
    for path in sorted((SHARE / 'config').glob('*.yaml')):
        for key in yaml.safe_load(path.read_text()) or {}:
            section = key.removeprefix('/**/')
            out.append(pytest.param(path.name, section, id=f'{path.name}:{section}'))
    return out


def is_stub(node: str) -> bool:
    import importlib

    module = importlib.import_module(f'egoroll_ros.nodes.{node}')
    return 'not implemented yet' in Path(module.__file__).read_text()


@pytest.mark.parametrize(('config', 'section'), cases())
def test_every_config_key_is_a_declared_parameter(ros_graph, launcher, config, section):
    assert section in NODES, f'{config}: section {section!r} is not an egoroll node'
    if is_stub(section):
        pytest.skip(f'{section} is still a stub')
    path = SHARE / 'config' / config
    keys = flatten(yaml.safe_load(path.read_text())[f'/**/{section}']['ros__parameters'])
    launcher.start(section, section, params_files=[path], namespace=NS,
                   params=START_OVERRIDES.get((config, section)),
                   wait_services=[f'{section}/list_parameters'], timeout=60.0)
    node = ros_graph.node('config_key_probe')
    client = node.create_client(ListParameters, f'{NS}/{section}/list_parameters')
    assert client.wait_for_service(timeout_sec=10.0)
    future = client.call_async(ListParameters.Request(depth=0))
    wait_until(future.done, 10.0, 'list_parameters reply')
    declared = set(future.result().result.names)
    assert keys - declared == set(), f'{config}: {section} does not declare these keys'
