"""Read a ros2_control controller's own ``joints`` parameter (issue 24.7).

Every ros2_control controller is a node named after the controller (in the controller
manager's namespace) whose ``joints`` parameter (string array) is the order in which it takes
its command values (forward_command_controller's ``~/commands``) and names its trajectory joints
(joint_trajectory_controller). trajectory_server reads it at start through the node's standard
``get_parameters`` service instead of trusting a copy in its own parameters.
"""

from __future__ import annotations

import time

from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from egoroll_ros.errors import ConfigError


def controller_joints(owner: Node, controller: str, timeout: float) -> list[str]:
    """The ``joints`` parameter of the controller node ``controller`` (a name relative to
    ``owner``'s namespace, or absolute), asked within ``timeout`` seconds.

    Raises:
        ConfigError: no such node answers in time, or it has no string-array ``joints``
            (naming the controller and what was wrong).
    """
    probe = Node('controller_joints_probe', namespace=owner.get_namespace(),
                 context=owner.context, start_parameter_services=False)
    executor = SingleThreadedExecutor(context=owner.context)
    executor.add_node(probe)
    client = probe.create_client(GetParameters, f'{controller}/get_parameters')
    service = client.srv_name
    try:
        deadline = time.monotonic() + timeout
        while not client.wait_for_service(timeout_sec=0.1):
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"parameter 'controller_node': no controller {controller!r} answered "
                    f'{service} within {timeout:g} s (is the controller loaded, in this '
                    'namespace?)')
        future = client.call_async(GetParameters.Request(names=['joints']))
        executor.spin_until_future_complete(future, timeout_sec=max(0.1, deadline -
                                                                    time.monotonic()))
        if not future.done() or future.result() is None:
            raise ConfigError(f"parameter 'controller_node': {service} did not answer within "
                              f'{timeout:g} s')
        values = future.result().values
        if len(values) != 1 or values[0].type != ParameterType.PARAMETER_STRING_ARRAY or \
                not values[0].string_array_value:
            raise ConfigError(f"parameter 'controller_node': controller {controller!r} has no "
                              "'joints' parameter (a string array) to take the command order "
                              'from')
        return list(values[0].string_array_value)
    finally:
        executor.remove_node(probe)
        probe.destroy_client(client)
        probe.destroy_node()
        executor.shutdown(timeout_sec=0.0)
