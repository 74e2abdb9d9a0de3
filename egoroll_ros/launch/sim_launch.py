"""The demo graph on the simulated robot: sim_robot, sim_camera, the gate, the executor, the
demo policy, optionally robot_state_publisher and RViz.

    ros2 launch egoroll_ros sim_launch.py
    ros2 launch egoroll_ros sim_launch.py robot_state_publisher:=true rviz:=true

Without robot_state_publisher (the default) sim_robot publishes robot_description and the gate
reads the same URDF file (description_file). Then start a rollout: hold the Quest deadman
(quest/joy axis 3 > 0.5), `ros2 service call /policy/preflight std_srvs/srv/Trigger` and
`ros2 service call /policy/start std_srvs/srv/Trigger` (or run `egoroll demo`, which starts the
same description without a ROS install). Move the target: `ros2 topic pub --once /sim/target
geometry_msgs/msg/PointStamped "{header: {frame_id: base_link}, point: {x: 0.4, y: 0.1, z: 0.2}}"`.
Which nodes run with which parameters is egoroll_ros.core.launch_graph (graph 'sim').
"""

from egoroll_ros.ros.launch_actions import generate


def generate_launch_description():  # noqa: ANN201 - launch's entry point
    return generate('sim')
