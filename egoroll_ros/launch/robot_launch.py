"""The robot-computer half: safety_gate + trajectory_server (the executor).

    ros2 launch egoroll_ros robot_launch.py namespace:=arm1

Run this on the computer wired to the robot (next to its driver, which publishes joint_states,
robot_description and accepts `command`). The policy may run elsewhere (policy_launch.py on a
GPU host, same ROS_DOMAIN_ID): only policy/chunk, safety/verdict and the inputs cross the network.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    namespace = LaunchConfiguration('namespace')
    use_sim_time = LaunchConfiguration('use_sim_time')
    log_level = LaunchConfiguration('log_level')
    return LaunchDescription([
        DeclareLaunchArgument('namespace', default_value='',
                              description='Namespace of every node and topic (one per robot).'),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='Use the /clock topic (simulation or bag replay).'),
        DeclareLaunchArgument('log_level', default_value='info',
                              description='Logging level: debug, info, warn, error or fatal.'),
        DeclareLaunchArgument(
            'safety_gate_params',
            default_value=PathJoinSubstitution(
                [FindPackageShare('egoroll_ros'), 'config', 'safety_gate.yaml']),
            description='Parameter file of safety_gate (limits, joints, Quest safety inputs).'),
        DeclareLaunchArgument(
            'trajectory_server_params',
            default_value=PathJoinSubstitution(
                [FindPackageShare('egoroll_ros'), 'config', 'trajectory_server.yaml']),
            description='Parameter file of trajectory_server (control rate, command interface,'
                        ' tolerances).'),
        Node(package='egoroll_ros', executable='safety_gate', name='safety_gate',
             namespace=namespace, output='screen',
             parameters=[LaunchConfiguration('safety_gate_params'),
                         {'use_sim_time': use_sim_time}],
             arguments=['--ros-args', '--log-level', log_level]),
        Node(package='egoroll_ros', executable='trajectory_server', name='trajectory_server',
             namespace=namespace, output='screen',
             parameters=[LaunchConfiguration('trajectory_server_params'),
                         {'use_sim_time': use_sim_time}],
             arguments=['--ros-args', '--log-level', log_level]),
    ])
