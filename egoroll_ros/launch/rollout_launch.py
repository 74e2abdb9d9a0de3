"""Everything on one computer: the robot half (gate + executor), the policy, optionally RViz.

    ros2 launch egoroll_ros rollout_launch.py policy_path:=/models/my_act rviz:=true

The robot's driver (joint_states, robot_description, `command`) and cameras come from the
robot's own launch files. To split the policy onto a GPU host, use robot_launch.py here and
policy_launch.py there instead.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare('egoroll_ros')
    common = {'namespace': LaunchConfiguration('namespace'),
              'use_sim_time': LaunchConfiguration('use_sim_time'),
              'log_level': LaunchConfiguration('log_level')}
    return LaunchDescription([
        DeclareLaunchArgument('namespace', default_value='',
                              description='Namespace of every node and topic (one per robot).'),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='Use the /clock topic (simulation or bag replay).'),
        DeclareLaunchArgument('log_level', default_value='info',
                              description='Logging level: debug, info, warn, error or fatal.'),
        DeclareLaunchArgument(
            'safety_gate_params',
            default_value=PathJoinSubstitution([share, 'config', 'safety_gate.yaml']),
            description='Parameter file of safety_gate.'),
        DeclareLaunchArgument(
            'trajectory_server_params',
            default_value=PathJoinSubstitution([share, 'config', 'trajectory_server.yaml']),
            description='Parameter file of trajectory_server.'),
        DeclareLaunchArgument(
            'policy_node_params',
            default_value=PathJoinSubstitution([share, 'config', 'policy_node.yaml']),
            description='Parameter file of policy_node.'),
        DeclareLaunchArgument(
            'policy_path', default_value='',
            description='Policy checkpoint directory; empty: the parameter file decides.'),
        DeclareLaunchArgument('rviz', default_value='false',
                              description='Start rviz2 with config/egoroll.rviz.'),
        DeclareLaunchArgument(
            'rviz_config', default_value=PathJoinSubstitution([share, 'config', 'egoroll.rviz']),
            description='RViz configuration file.'),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution(
                [share, 'launch', 'robot_launch.py'])),
            launch_arguments={
                **common,
                'safety_gate_params': LaunchConfiguration('safety_gate_params'),
                'trajectory_server_params': LaunchConfiguration('trajectory_server_params'),
            }.items()),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution(
                [share, 'launch', 'policy_launch.py'])),
            launch_arguments={
                **common,
                'policy_node_params': LaunchConfiguration('policy_node_params'),
                'policy_path': LaunchConfiguration('policy_path'),
            }.items()),
        Node(package='rviz2', executable='rviz2', name='rviz2', output='screen',
             namespace=LaunchConfiguration('namespace'),
             arguments=['-d', LaunchConfiguration('rviz_config')],
             parameters=[{'use_sim_time': LaunchConfiguration('use_sim_time')}],
             condition=IfCondition(LaunchConfiguration('rviz'))),
    ])
