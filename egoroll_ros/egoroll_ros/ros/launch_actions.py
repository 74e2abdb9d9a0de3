"""Turn a graph of :mod:`egoroll_ros.core.launch_graph` into ``launch`` / ``launch_ros`` actions.

Used by the installed launch files (``launch/*_launch.py``); needs the ROS 2 install's ``launch``
and ``launch_ros`` packages, so nothing else imports this module. Everything about which node
runs with which parameters lives in the pure description; this module only declares its
arguments and, at launch time, makes one ``Node`` action per described node:

- a package the description names (robot_state_publisher, rviz2) that is not installed stops
  the launch before any node starts, naming the package and the argument that turns it off;
- every node has ``on_exit=Shutdown``: when any node exits (a configuration error, a crash),
  the whole launch shuts down and stops the others, so a failed launch never leaves a half
  graph (sim_robot driving, say) running on its own;
- a lifecycle node (policy_node) is a ``LifecycleNode`` action, so ``ros2 lifecycle`` and
  launch's lifecycle events can manage it; whether it configures itself is the description's
  explicit ``autostart`` argument (its ``autoconfigure`` parameter, the same on Humble and
  Jazzy: launch_ros's own ``autostart`` exists from Jazzy on only).
"""

from __future__ import annotations

from pathlib import Path

from ament_index_python.packages import (
    PackageNotFoundError,
    get_package_prefix,
    get_package_share_directory,
)
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from egoroll_ros.core.launch_graph import PACKAGE, arguments, describe
from egoroll_ros.errors import ConfigError

#: Which launch argument turns off a node of another package.
OPTIONAL_PACKAGES = {'robot_state_publisher': 'robot_state_publisher:=false',
                     'rviz2': 'rviz:=false'}


def generate(graph: str) -> LaunchDescription:
    """The launch description of ``graph``: its declared arguments and its nodes."""
    declared = [DeclareLaunchArgument(a.name, default_value=a.default,
                                      description=a.description,
                                      **({'choices': list(a.choices)} if a.choices else {}))
                for a in arguments(graph)]
    return LaunchDescription(declared + [OpaqueFunction(function=_nodes, args=[graph])])


def _nodes(context: LaunchContext, graph: str) -> list[Node]:
    given = {a.name: LaunchConfiguration(a.name).perform(context) for a in arguments(graph)}
    share = Path(get_package_share_directory(PACKAGE))
    specs = describe(graph, given, share)
    for spec in specs:
        if spec.package == PACKAGE:
            continue
        try:
            get_package_prefix(spec.package)
        except PackageNotFoundError:
            hint = OPTIONAL_PACKAGES.get(spec.package, '')
            raise ConfigError(
                f'{graph}: package {spec.package} is not installed (install '
                f'ros-$ROS_DISTRO-{spec.package.replace("_", "-")}'
                f'{", or launch with " + hint if hint else ""}); nothing was started') from None
    return [(LifecycleNode if s.lifecycle else Node)(
        package=s.package, executable=s.executable, name=s.name, namespace=s.namespace or '',
        output='screen', parameters=[*s.params_files, dict(s.overrides)],
        remappings=list(s.remaps), arguments=list(s.arguments),
        ros_arguments=['--log-level', s.log_level], on_exit=Shutdown(reason=f'{s.fqn} exited'))
        for s in specs]
