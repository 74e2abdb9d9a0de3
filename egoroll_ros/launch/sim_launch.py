"""The demo graph on the simulated robot: sim_robot, sim_camera, the gate, the executor, the
demo policy, optionally robot_state_publisher and RViz.

    ros2 launch egoroll_ros sim_launch.py rviz:=true

Then start a rollout: `ros2 service call /policy/preflight std_srvs/srv/Trigger` and
`ros2 service call /policy/start std_srvs/srv/Trigger` (or run `egoroll demo`, which does all of
this without a ROS install). Move the target: `ros2 topic pub --once /sim/target
geometry_msgs/msg/PointStamped "{header: {frame_id: base_link}, point: {x: 0.4, y: 0.1, z: 0.2}}"`.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import Command, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare('egoroll_ros')
    namespace = LaunchConfiguration('namespace')
    use_sim_time = LaunchConfiguration('use_sim_time')
    log_level = LaunchConfiguration('log_level')
    ros_args = ['--ros-args', '--log-level', log_level]
    return LaunchDescription([
        DeclareLaunchArgument('namespace', default_value='',
                              description='Namespace of every node and topic.'),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='Use the /clock topic (bag replay); the simulated '
                                          'robot itself runs on wall time.'),
        DeclareLaunchArgument('log_level', default_value='info',
                              description='Logging level: debug, info, warn, error or fatal.'),
        DeclareLaunchArgument(
            'sim_robot_params',
            default_value=PathJoinSubstitution([share, 'config', 'sim_robot.yaml']),
            description='Parameter file of sim_robot (the simulated arm).'),
        DeclareLaunchArgument(
            'sim_camera_params',
            default_value=PathJoinSubstitution([share, 'config', 'sim_camera.yaml']),
            description='Parameter file of sim_camera (image size, rate, task target).'),
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
            description='Policy checkpoint directory; empty: the shipped demo policy (as set by '
                        'the parameter file).'),
        DeclareLaunchArgument(
            'description_file',
            default_value=PathJoinSubstitution([share, 'urdf', 'demo_arm.urdf']),
            description='URDF published on robot_description by robot_state_publisher.'),
        DeclareLaunchArgument('robot_state_publisher', default_value='true',
                              description='Start robot_state_publisher (robot_description and '
                                          'TF for RViz).'),
        DeclareLaunchArgument('rviz', default_value='false',
                              description='Start rviz2 with config/egoroll.rviz.'),
        Node(package='egoroll_ros', executable='sim_robot', name='sim_robot',
             namespace=namespace, output='screen', arguments=ros_args,
             parameters=[LaunchConfiguration('sim_robot_params'),
                         {'use_sim_time': use_sim_time}]),
        Node(package='egoroll_ros', executable='sim_camera', name='sim_camera',
             namespace=namespace, output='screen', arguments=ros_args,
             parameters=[LaunchConfiguration('sim_camera_params'),
                         {'use_sim_time': use_sim_time}]),
        Node(package='robot_state_publisher', executable='robot_state_publisher',
             name='robot_state_publisher', namespace=namespace, output='screen',
             parameters=[{'robot_description': ParameterValue(
                 Command(['cat ', LaunchConfiguration('description_file')]), value_type=str),
                 'use_sim_time': use_sim_time}],
             condition=IfCondition(LaunchConfiguration('robot_state_publisher'))),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution(
                [share, 'launch', 'rollout_launch.py'])),
            launch_arguments={
                'namespace': namespace,
                'use_sim_time': use_sim_time,
                'log_level': log_level,
                'safety_gate_params': LaunchConfiguration('safety_gate_params'),
                'trajectory_server_params': LaunchConfiguration('trajectory_server_params'),
                'policy_node_params': LaunchConfiguration('policy_node_params'),
                'policy_path': LaunchConfiguration('policy_path'),
                'rviz': LaunchConfiguration('rviz'),
            }.items()),
    ])
