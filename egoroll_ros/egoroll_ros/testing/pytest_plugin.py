"""Pytest fixtures for egoroll's ROS graph tests.

Use from a ``conftest.py`` with ``pytest_plugins = ['egoroll_ros.testing.pytest_plugin']``.

- Each test session gets a ``ROS_DOMAIN_ID`` no other session on this machine holds (a lock
  file per id) and ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, set before any rclpy use and
  inherited by subprocesses.
- Each ``ros_graph`` (and so each ``launcher``) test runs in a domain of its own
  (:func:`isolated_domain`): a participant an earlier test left alive in this process (rclpy
  finalises a context only when nothing references it any more) can then never answer for a
  node of the same name, e.g. a stale in-process action server for the real executor.
- ``ros_graph``: a :class:`RosGraph` (nodes in this process, one executor thread unless
  marked ``ros_threads(n)``).
- ``launcher``: a :class:`ProcessLauncher` whose processes are stopped at teardown; their logs
  are printed when the test failed.
"""

from __future__ import annotations

from collections.abc import Iterator
import gc
import os
from pathlib import Path

import pytest

from egoroll_ros.ros.graph import RosGraph
from egoroll_ros.ros.processes import ProcessLauncher
from egoroll_ros.testing.domains import claim_for_process, isolated_domain


def pytest_configure(config: pytest.Config) -> None:
    """Isolate the session's ROS graph before anything initialises rclpy."""
    if 'EGOROLL_TEST_DOMAIN_ID' not in os.environ:
        os.environ['EGOROLL_TEST_DOMAIN_ID'] = str(claim_for_process())
    os.environ['ROS_DOMAIN_ID'] = os.environ['EGOROLL_TEST_DOMAIN_ID']
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    os.environ.pop('ROS_STATIC_PEERS', None)
    os.environ.setdefault('RCUTILS_COLORIZED_OUTPUT', '0')
    os.environ.setdefault('PYTHONUNBUFFERED', '1')
    for name in NEVER_RERUN:
        config.addinivalue_line('markers', f'{name}: never rerun on failure')
    config.addinivalue_line(
        'markers', 'ros_threads(n): the ros_graph fixture spins on n executor threads (default '
        '1, a SingleThreadedExecutor; more for tests hosting callbacks that block)')


#: Reruns of a failed ``integration`` test. These run real node processes over DDS, and on the
#: 2-core development and CI machines a process of the graph is sometimes descheduled for
#: longer than a watchdog allows (seen: 0.2-0.5 s); a feature that is broken fails every run.
#: pytest's summary lists each rerun, so flakiness stays visible. Unit tests are never rerun.
INTEGRATION_RERUNS = 2

#: Markers whose tests are NEVER rerun: a race that fails one run in three must fail the suite.
NEVER_RERUN = ('race', 'safety')


def never_rerun(item: pytest.Item) -> bool:
    """Whether ``item`` is a race or safety test (marked on it, its class or its module)."""
    return any(item.get_closest_marker(m) is not None for m in NEVER_RERUN)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every ``integration`` test flaky (pytest-rerunfailures), when that plugin is there,
    except race and safety tests: those are refused a rerun even when marked flaky."""
    for item in items:
        if never_rerun(item) and item.get_closest_marker('flaky') is not None:
            raise pytest.UsageError(f'{item.nodeid}: a race/safety test must not be marked '
                                    'flaky (never rerun on failure)')
    if not config.pluginmanager.hasplugin('rerunfailures'):
        return
    for item in items:
        if never_rerun(item):
            continue
        if item.get_closest_marker('integration') and not item.get_closest_marker('flaky'):
            item.add_marker(pytest.mark.flaky(reruns=INTEGRATION_RERUNS, reruns_delay=1))


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
def ros_graph(request: pytest.FixtureRequest) -> Iterator[RosGraph]:
    """Nodes in this process, torn down after the test: on a SingleThreadedExecutor, as every
    egoroll node spins, or on ``n`` threads where a ``ros_threads(n)`` mark says so (a test
    that hosts callbacks which block, such as a stand-in action server)."""
    mark = request.node.get_closest_marker('ros_threads')
    threads = int(mark.args[0]) if mark is not None else 1
    with isolated_domain() as domain:
        graph = RosGraph(num_threads=threads, domain_id=domain)
        try:
            yield graph
        finally:
            graph.close()
            del graph
        # Nodes hold reference cycles; collect them now so the destroyed context really
        # finalises its DDS participant before the next test (whose nodes may share names).
        gc.collect()


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
