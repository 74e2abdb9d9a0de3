"""The suite's rerun policy (egoroll_ros.testing.pytest_plugin), run through pytest itself.

Nothing is rerun on failure unless marked ``infra_rerun(reason)``; that mark is refused on
race/safety tests, anywhere in a module holding one, and without a reason; ``flaky`` is refused.
"""

from __future__ import annotations

import pytest

pytest_plugins = ['pytester']

PLUGIN = ('-p', 'egoroll_ros.testing.pytest_plugin', '-p', 'no:cacheprovider')

# A test that fails on its first run and passes on its second (a counter file beside it).
FAILS_ONCE = """
import pathlib, pytest
def _fails_once(tag):
    marker = pathlib.Path(__file__).with_name('ran_' + tag)
    if not marker.exists():
        marker.write_text('x')
        raise AssertionError('first run fails')
"""


def test_a_failing_unmarked_integration_test_is_not_rerun(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_functional=FAILS_ONCE + """
@pytest.mark.integration
def test_it():
    _fails_once('a')
""")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)


def test_a_failing_safety_test_is_not_rerun(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stop=FAILS_ONCE + """
pytestmark = [pytest.mark.integration, pytest.mark.safety]
def test_it():
    _fails_once('b')
""")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)


def test_an_infra_rerun_test_is_rerun_and_its_reason_is_kept(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_discovery=FAILS_ONCE + """
@pytest.mark.integration
@pytest.mark.infra_rerun('DDS discovery on a loaded box')
def test_it():
    _fails_once('c')
""")
    result = pytester.runpytest(*PLUGIN)
    outcomes = result.parseoutcomes()
    assert (outcomes.get('passed'), outcomes.get('rerun')) == (1, 1), outcomes


@pytest.mark.parametrize('body, why', [
    ("""
@pytest.mark.safety
@pytest.mark.infra_rerun('DDS discovery')
def test_it():
    pass
""", 'race/safety test'),
    ("""
@pytest.mark.race
def test_race():
    pass

@pytest.mark.infra_rerun('DDS discovery')
def test_neighbour():
    pass
""", 'module that checks motion'),
    ("""
pytestmark = pytest.mark.safety

@pytest.mark.infra_rerun('DDS discovery')
def test_it():
    pass
""", 'race/safety test'),
    ("""
@pytest.mark.flaky(reruns=2)
def test_it():
    pass
""", 'marked flaky'),
    ("""
@pytest.mark.infra_rerun('  ')
def test_it():
    pass
""", 'named infrastructure reason'),
])
def test_a_rerun_where_motion_is_concerned_or_without_a_reason_stops_the_run(
        pytester: pytest.Pytester, body: str, why: str) -> None:
    pytester.makepyfile(test_refused='import pytest\n' + body)
    result = pytester.runpytest(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert why in result.stderr.str()
