"""The policy half: policy_node alone (for a GPU host).

    ros2 launch egoroll_ros policy_launch.py namespace:=arm1 policy_path:=/models/my_act

Run this where the model should run; the robot computer runs robot_launch.py with the same
namespace and ROS_DOMAIN_ID. policy_node reads the camera, joint_states and Quest topics and
publishes policy/chunk for the safety gate. Which nodes run with which parameters is
egoroll_ros.core.launch_graph (graph 'policy'); `ros2 launch ... --show-args` lists the arguments.
"""

from egoroll_ros.ros.launch_actions import generate


def generate_launch_description():  # noqa: ANN201 - launch's entry point
    return generate('policy')
