"""The robot-computer half: safety_gate + trajectory_server (the executor).

    ros2 launch egoroll_ros robot_launch.py namespace:=arm1
    ros2 launch egoroll_ros robot_launch.py namespace:=arm1 \
        command_interface:=float64_multi_array controller:=forward_position_controller

Run this on the computer wired to the robot (next to its driver / ros2_control, which publishes
joint_states and robot_description and takes the command). The policy may run elsewhere
(policy_launch.py on a GPU host, same ROS_DOMAIN_ID and namespace): only policy/chunk,
safety/verdict and the inputs cross the network. Which nodes run with which parameters is
egoroll_ros.core.launch_graph (graph 'robot'); `ros2 launch ... --show-args` lists the arguments.
"""

from egoroll_ros.ros.launch_actions import generate


def generate_launch_description():  # noqa: ANN201 - launch's entry point
    return generate('robot')
