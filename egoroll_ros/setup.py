"""egoroll_ros: policy rollout nodes, safety gate, trajectory executor and tools."""

from glob import glob
import os

from setuptools import find_packages, setup

PACKAGE = 'egoroll_ros'


def data_dir(pattern: str, dest: str) -> tuple[str, list[str]]:
    return (os.path.join('share', PACKAGE, dest), sorted(glob(pattern)))


setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    package_data={PACKAGE: ['py.typed', 'runtimes/*.lock']},
    data_files=[
        ('share/ament_index/resource_index/packages', [f'resource/{PACKAGE}']),
        (os.path.join('share', PACKAGE), ['package.xml']),
        data_dir('launch/*.py', 'launch'),
        data_dir('config/*.yaml', 'config'),
        data_dir('config/defaults/*.yaml', 'config/defaults'),
        data_dir('config/*.rviz', 'config'),
        data_dir('config/*.xml', 'config'),
        data_dir('urdf/*.urdf', 'urdf'),
        data_dir('policies/demo/*', 'policies/demo'),
    ],
    install_requires=['setuptools'],
    extras_require={'test': ['pytest', 'hypothesis']},
    zip_safe=False,
    maintainer='egoroll developers',
    maintainer_email='dev@egoroll.invalid',
    description='Runs learned manipulation policies on real robot arms through ROS 2, safely.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'egoroll = egoroll_ros.cli:main',
            'trajectory_server = egoroll_ros.nodes.trajectory_server:main',
            'sim_robot = egoroll_ros.nodes.sim_robot:main',
            'safety_gate = egoroll_ros.nodes.safety_gate:main',
            'policy_node = egoroll_ros.nodes.policy_node:main',
            'sim_camera = egoroll_ros.nodes.sim_camera:main',
            'episode_recorder = egoroll_ros.nodes.episode_recorder:main',
        ],
        # Policy backends; other packages add theirs to this group.
        'egoroll_ros.policies': [
            'exported = egoroll_ros.policies.exported:ExportedPolicy',
            'egoroll_act = egoroll_ros.policies.act:ActPolicy',
            'isolated = egoroll_ros.policies.isolated:IsolatedPolicy',
            'lerobot = egoroll_ros.policies.lerobot:LeRobotPolicy',
            'scripted_cartesian = egoroll_ros.policies.scripted_cartesian:ScriptedCartesianPolicy',
            'example_adapter = egoroll_ros.policies.adapter_example:FrameworkPolicyAdapter',
        ],
    },
)
