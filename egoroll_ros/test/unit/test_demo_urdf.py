"""The installed demo robot descriptions: loadable, the documented joints, sane limits."""

import importlib.util
import math
from pathlib import Path
import sys
import xml.etree.ElementTree as ET

from ament_index_python.packages import get_package_share_directory
import numpy as np
import pinocchio as pin
import pytest

REPO = Path(__file__).resolve().parents[3]
ARM_JOINTS = ['shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
              'wrist_pitch', 'wrist_roll', 'gripper']
TYPES = dict.fromkeys(ARM_JOINTS, 'revolute') | {'wrist_roll': 'continuous',
                                                 'gripper': 'prismatic'}
ROBOTS = {
    'demo_arm.urdf': ('egoroll_demo_arm', [''], ['tool0']),
    'demo_bimanual.urdf': ('egoroll_demo_bimanual', ['left_', 'right_'],
                           ['left_tool0', 'right_tool0']),
}


def installed(name: str) -> Path:
    return Path(get_package_share_directory('egoroll_ros')) / 'urdf' / name


def load_generator():
    spec = importlib.util.spec_from_file_location('make_demo_urdf',
                                                  REPO / 'tools' / 'make_demo_urdf.py')
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault('make_demo_urdf', module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('name', sorted(ROBOTS))
def test_installed_urdf_loads_in_pinocchio_with_the_documented_joints(name):
    robot, prefixes, tools = ROBOTS[name]
    model = pin.buildModelFromXML(installed(name).read_text())
    assert model.name == robot
    expected = [p + j for p in prefixes for j in ARM_JOINTS]
    assert list(model.names)[1:] == expected
    assert model.nv == 8 * len(prefixes)
    for frame in tools + ['base_link', 'camera_link', 'camera_optical_frame']:
        assert model.existFrame(frame), frame


@pytest.mark.parametrize('name', sorted(ROBOTS))
def test_joint_types_and_limits(name):
    _, prefixes, _ = ROBOTS[name]
    root = ET.fromstring(installed(name).read_text())
    movable = {j.get('name'): j for j in root.findall('joint') if j.get('type') != 'fixed'}
    assert sorted(movable) == sorted(p + j for p in prefixes for j in ARM_JOINTS)
    for prefix in prefixes:
        for short, jtype in TYPES.items():
            joint = movable[prefix + short]
            assert joint.get('type') == jtype, joint.get('name')
            limit = joint.find('limit')
            assert limit is not None, joint.get('name')
            velocity, effort = float(limit.get('velocity')), float(limit.get('effort'))
            assert 0 < velocity < 10 and 0 < effort < 100, joint.get('name')
            if jtype == 'continuous':
                assert limit.get('lower') is None and limit.get('upper') is None
            else:
                lower, upper = float(limit.get('lower')), float(limit.get('upper'))
                assert math.isfinite(lower) and math.isfinite(upper) and lower < upper
        gripper = movable[prefix + 'gripper'].find('limit')
        assert (float(gripper.get('lower')), float(gripper.get('upper'))) == (0.0, 0.04)


@pytest.mark.parametrize('name', sorted(ROBOTS))
def test_every_link_with_geometry_has_an_inertial_and_no_meshes(name):
    text = installed(name).read_text()
    assert '<mesh' not in text
    root = ET.fromstring(text)
    for link in root.findall('link'):
        if link.find('visual') is not None or link.find('collision') is not None:
            inertial = link.find('inertial')
            assert inertial is not None, link.get('name')
            assert float(inertial.find('mass').get('value')) > 0


def test_demo_arm_reach_and_camera_looks_at_the_workspace():
    model = pin.buildModelFromXML(installed('demo_arm.urdf').read_text())
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    tool = data.oMf[model.getFrameId('tool0')].translation
    assert 0.7 < np.linalg.norm(tool) < 0.95  # straight up at zero: the full reach
    cam = data.oMf[model.getFrameId('camera_optical_frame')]
    to_workspace = np.array([0.35, 0.0, 0.25]) - cam.translation
    # The optical axis (z) points at the workspace, image y (down) points down in the world.
    assert cam.rotation[:, 2] @ to_workspace / np.linalg.norm(to_workspace) > 0.99
    assert cam.rotation[:, 1][2] < 0


def test_bimanual_arms_are_half_a_metre_apart():
    model = pin.buildModelFromXML(installed('demo_bimanual.urdf').read_text())
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    left = data.oMf[model.getFrameId('left_tool0')].translation
    right = data.oMf[model.getFrameId('right_tool0')].translation
    assert np.allclose(left - right, [0.0, 0.5, 0.0])


@pytest.mark.parametrize('name', sorted(ROBOTS))
def test_generator_output_equals_committed_and_installed_files(name):
    text = load_generator().OUTPUTS[name]()
    assert (REPO / 'egoroll_ros' / 'urdf' / name).read_text() == text
    assert installed(name).read_text() == text


def test_bimanual_example_config_names_the_bimanual_urdf_joints():
    import yaml

    config = yaml.safe_load((installed('demo_arm.urdf').parents[1] / 'config'
                             / 'bimanual_example.yaml').read_text())
    model = pin.buildModelFromXML(installed('demo_bimanual.urdf').read_text())
    joints = list(model.names)[1:]
    assert set(config) == {'/**/trajectory_server', '/**/safety_gate', '/**/policy_node',
                           '/**/sim_robot'}
    for section, body in config.items():
        params = body['ros__parameters']
        assert params['joints'] == joints, section
        for key, value in params.items():
            if key.startswith(('max_', 'path_', 'goal_tol', 'acceleration')) and \
                    isinstance(value, list):
                assert len(value) == 16, (section, key)
    for frame in config['/**/safety_gate']['ros__parameters']['ee_frames']:
        assert model.existFrame(frame)
