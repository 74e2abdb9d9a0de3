"""File paths the ROS layer resolves: ``package://`` URLs through the ament index."""

from __future__ import annotations

from egoroll_ros.errors import ConfigError


def resolve_path(path: str) -> str:
    """``package://<package>/<rest>`` -> the installed share directory's file; else as is.

    Raises:
        ConfigError: the package is not installed.
    """
    if not path.startswith('package://'):
        return path
    pkg, _, rest = path[len('package://'):].partition('/')
    try:
        from ament_index_python.packages import get_package_share_directory
        return f'{get_package_share_directory(pkg)}/{rest}'
    except (ImportError, LookupError) as exc:
        raise ConfigError(f"'{path}': package '{pkg}' not found ({exc})") from None


def policy_path(configured: str) -> str:
    """The checkpoint directory of parameter ``policy.path``: ``configured``, or when it is
    empty the installed demo policy (``share/egoroll_ros/policies/demo``)."""
    if configured:
        return configured
    from ament_index_python.packages import get_package_share_directory
    return get_package_share_directory('egoroll_ros') + '/policies/demo'
