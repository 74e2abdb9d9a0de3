"""Everything on one computer: the robot half (gate + executor), the policy, optionally RViz.

    ros2 launch egoroll_ros rollout_launch.py policy_path:=/models/my_act rviz:=true

The robot's driver (joint_states, robot_description, the command interface) and cameras come
from the robot's own launch files. To split the policy onto a GPU host, use robot_launch.py here
and policy_launch.py there instead. Which nodes run with which parameters is
egoroll_ros.core.launch_graph (graph 'rollout'); `ros2 launch ... --show-args` lists the
arguments.
"""

from egoroll_ros.ros.launch_actions import generate


def generate_launch_description():  # noqa: ANN201 - launch's entry point
    return generate('rollout')
