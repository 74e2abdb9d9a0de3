"""Shared fixtures: see egoroll_ros.testing.pytest_plugin (installed with the package)."""

pytest_plugins = ['egoroll_ros.testing.pytest_plugin']
