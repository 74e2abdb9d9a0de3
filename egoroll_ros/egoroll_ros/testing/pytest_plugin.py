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
    config.addinivalue_line(
        'markers', 'infra_rerun(reason): may be rerun (twice) on failure, for the named '
        'infrastructure reason; refused on race/safety tests and in their modules')
    config.addinivalue_line(
        'markers', 'ros_threads(n): the ros_graph fixture spins on n executor threads (default '
        '1, a SingleThreadedExecutor; more for tests hosting callbacks that block)')


#: Reruns granted to a test marked ``infra_rerun(reason)``. Nothing else is ever rerun.
INFRA_RERUNS = 2

#: Markers of tests that check motion, limits, stops or supervision (``safety``) or races
#: (``race``): NEVER rerun on failure, and no test in a module holding one may be rerun
#: either, so a timing assumption in the product cannot hide behind a neighbour's rerun.
NEVER_RERUN = ('race', 'safety')


def never_rerun(item: pytest.Item) -> bool:
    """Whether ``item`` is a race or safety test (marked on it, its class or its module)."""
    return any(item.get_closest_marker(m) is not None for m in NEVER_RERUN)


def infra_reason(item: pytest.Item) -> str | None:
    """The named infrastructure reason of ``item``'s ``infra_rerun`` mark, or None."""
    mark = item.get_closest_marker('infra_rerun')
    if mark is None:
        return None
    reason = mark.args[0] if mark.args else mark.kwargs.get('reason', '')
    if not isinstance(reason, str) or not reason.strip():
        raise pytest.UsageError(f'{item.nodeid}: infra_rerun needs a named infrastructure '
                                "reason, e.g. infra_rerun('DDS discovery on a loaded box')")
    return reason.strip()


def rerun_refusal(item: pytest.Item, safety_modules: set[str]) -> str | None:
    """Why ``item`` may not carry a rerun, or None when it may (pure; tested)."""
    if item.get_closest_marker('flaky') is not None:
        return ('is marked flaky: nothing is rerun unless marked infra_rerun(reason), and '
                'never a race/safety test')
    if item.get_closest_marker('infra_rerun') is None:
        return None
    if never_rerun(item):
        return ('is a race/safety test and marked infra_rerun: race and safety tests are '
                'never rerun')
    if item.nodeid.split('::')[0] in safety_modules:
        return ('is marked infra_rerun in a module that checks motion, limits, stops or '
                'supervision (it holds race/safety tests): no test there is ever rerun')
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Nothing is rerun on failure, except a test marked ``infra_rerun(reason)`` (a named
    infrastructure cause), which gets ``INFRA_RERUNS`` reruns. The mark is refused (a usage
    error, the run stops) on a race or safety test and anywhere in a module that holds one;
    a bare ``flaky`` mark is refused everywhere."""
    safety_modules = {item.nodeid.split('::')[0] for item in items if never_rerun(item)}
    for item in items:
        refusal = rerun_refusal(item, safety_modules)
        if refusal is not None:
            raise pytest.UsageError(f'{item.nodeid} {refusal}')
    have_plugin = config.pluginmanager.hasplugin('rerunfailures')
    for item in items:
        reason = infra_reason(item)
        if reason is None:
            continue
        if not have_plugin:
            raise pytest.UsageError(f'{item.nodeid}: infra_rerun needs pytest-rerunfailures')
        item.add_marker(pytest.mark.flaky(reruns=INFRA_RERUNS, reruns_delay=1))
        item.user_properties.append(('infra_rerun', reason))


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
