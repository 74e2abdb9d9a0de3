"""The policy half: policy_node alone (for a GPU host).

    ros2 launch egoroll_ros policy_launch.py namespace:=arm1 policy_path:=/models/my_act

Run this where the model should run; the robot computer runs robot_launch.py with the same
namespace and ROS_DOMAIN_ID. policy_node reads the camera, joint_states and Quest topics and
publishes policy/chunk for the safety gate.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import LaunchConfigurationEquals, LaunchConfigurationNotEquals
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    namespace = LaunchConfiguration('namespace')
    use_sim_time = LaunchConfiguration('use_sim_time')
    log_level = LaunchConfiguration('log_level')
    params = LaunchConfiguration('policy_node_params')
    common = dict(package='egoroll_ros', executable='policy_node', name='policy_node',
                  namespace=namespace, output='screen',
                  arguments=['--ros-args', '--log-level', log_level])
    return LaunchDescription([
        DeclareLaunchArgument('namespace', default_value='',
                              description='Namespace of every node and topic (one per robot).'),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='Use the /clock topic (simulation or bag replay).'),
        DeclareLaunchArgument('log_level', default_value='info',
                              description='Logging level: debug, info, warn, error or fatal.'),
        DeclareLaunchArgument(
            'policy_node_params',
            default_value=PathJoinSubstitution(
                [FindPackageShare('egoroll_ros'), 'config', 'policy_node.yaml']),
            description='Parameter file of policy_node (joints, inputs, backend, rates).'),
        DeclareLaunchArgument(
            'policy_path', default_value='',
            description='Policy checkpoint directory (sets the policy.path parameter); empty: '
                        'keep the value of the parameter file.'),
        # Two alternatives, so an empty policy_path never overrides the parameter file's value.
        Node(**common, parameters=[params, {'use_sim_time': use_sim_time}],
             condition=LaunchConfigurationEquals('policy_path', '')),
        Node(**common, parameters=[params, {'use_sim_time': use_sim_time,
                                            'policy.path': LaunchConfiguration('policy_path')}],
             condition=LaunchConfigurationNotEquals('policy_path', '')),
    ])
