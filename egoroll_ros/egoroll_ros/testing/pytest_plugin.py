"""Pytest fixtures for egoroll's ROS graph tests.

Use from a ``conftest.py`` with ``pytest_plugins = ['egoroll_ros.testing.pytest_plugin']``.

- Each test session gets a ``ROS_DOMAIN_ID`` no other session on this machine holds (a lock
  file per id) and ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, set before any rclpy use and
  inherited by subprocesses.
- ``ros_graph``: a :class:`RosGraph` (nodes in this process, MultiThreadedExecutor).
- ``launcher``: a :class:`ProcessLauncher` whose processes are stopped at teardown; their logs
  are printed when the test failed.
"""

from __future__ import annotations

from collections.abc import Iterator
import fcntl
import os
from pathlib import Path
import tempfile

import pytest

from egoroll_ros.ros.graph import RosGraph
from egoroll_ros.ros.processes import ProcessLauncher

_DOMAIN_LOCK = None


def _claim_domain_id() -> int:
    """Hold an exclusive lock on a domain id for the life of this process."""
    global _DOMAIN_LOCK
    lock_dir = Path(tempfile.gettempdir()) / 'egoroll-test-domains'
    lock_dir.mkdir(exist_ok=True)
    start = os.getpid() % 100
    for k in range(100):
        domain = 1 + (start + k) % 100  # 1..100: valid for Fast DDS's default port mapping
        fh = open(lock_dir / f'{domain}.lock', 'w')  # noqa: SIM115 - held until exit
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            continue
        _DOMAIN_LOCK = fh
        return domain
    raise RuntimeError('no free ROS_DOMAIN_ID in 1..100 for this test session')


def pytest_configure(config: pytest.Config) -> None:
    """Isolate the session's ROS graph before anything initialises rclpy."""
    if 'EGOROLL_TEST_DOMAIN_ID' not in os.environ:
        os.environ['EGOROLL_TEST_DOMAIN_ID'] = str(_claim_domain_id())
    os.environ['ROS_DOMAIN_ID'] = os.environ['EGOROLL_TEST_DOMAIN_ID']
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    os.environ.pop('ROS_STATIC_PEERS', None)
    os.environ.setdefault('RCUTILS_COLORIZED_OUTPUT', '0')
    os.environ.setdefault('PYTHONUNBUFFERED', '1')


def pytest_report_header(config: pytest.Config) -> str:
    """Show the isolated domain in pytest's header."""
    return (f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID')} "
            f"ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE')}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ANN201
    """Remember each phase's report on the item so fixtures can tell whether the test failed."""
    rep = yield
    setattr(item, f'rep_{rep.when}', rep)
    return rep


@pytest.fixture
def ros_graph() -> Iterator[RosGraph]:
    """Nodes in this process on a MultiThreadedExecutor, torn down after the test."""
    graph = RosGraph()
    try:
        yield graph
    finally:
        graph.close()


@pytest.fixture
def launcher(request: pytest.FixtureRequest, ros_graph: RosGraph,
             tmp_path: Path) -> Iterator[ProcessLauncher]:
    """Start installed console scripts as subprocesses; stopped (and logs shown on failure)."""
    probe = ros_graph.node('egoroll_test_probe')
    launch = ProcessLauncher(probe, tmp_path / 'nodes')
    try:
        yield launch
    finally:
        launch.stop_all()
        failed = any(getattr(request.node, f'rep_{w}', None) is not None
                     and getattr(request.node, f'rep_{w}').failed for w in ('setup', 'call'))
        if failed and launch.processes:
            print('\n===== logs of the node processes of this failed test =====')
            print(launch.logs())
