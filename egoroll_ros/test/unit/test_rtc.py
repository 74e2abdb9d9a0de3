"""Real-time chunking guidance: which chunk runs, how much of it is left, the delay."""

from __future__ import annotations

import dataclasses

import pytest

from egoroll_ros.core.policy import PolicyMetadata
from egoroll_ros.core.rtc import (
    DELAY_WINDOW,
    EXECUTOR_STATE_MAX_AGE,
    RunningChunk,
    check_rtc_config,
    check_rtc_policy,
)
from egoroll_ros.errors import ConfigError

PERIOD = 0.05


def test_nothing_published_gives_no_guidance():
    rc = RunningChunk()
    assert rc.request(10.0, PERIOD, 0.0, [0.1]) is None
    assert rc.last == 'no chunk published yet in this rollout'


def test_own_clock_counts_the_last_chunks_points_due_by_the_stamp():
    rc = RunningChunk()
    rc.published(1, 10.0, 40)
    rc.published(2, 10.5, 40)
    r = rc.request(10.7, PERIOD, 0.0, [0.04, 0.12])
    assert (r.prefix_stamp, r.executed) == (10.5, 4)     # round(0.2 / 0.05)
    assert r.inference_delay == 3                        # ceil(0.12 / 0.05)
    assert 'chunk 2 (own clock): 36 points left' in rc.last


def test_delay_is_exact_on_a_whole_number_of_steps_and_zero_without_latencies():
    rc = RunningChunk()
    rc.published(1, 10.0, 40)
    assert rc.request(10.0, PERIOD, 0.0, [0.1]).inference_delay == 2
    assert rc.request(10.0, PERIOD, 0.0, []).inference_delay == 0


def test_delay_takes_the_longest_of_the_latest_window_only():
    rc = RunningChunk()
    rc.published(1, 10.0, 40)
    old_slow = [1.0] + [0.05] * DELAY_WINDOW
    assert rc.request(10.0, PERIOD, 0.0, old_slow).inference_delay == 1


def test_a_stamp_before_the_chunk_counts_nothing_executed():
    rc = RunningChunk()
    rc.published(1, 10.0, 40)
    assert rc.request(9.9, PERIOD, 0.0, []).executed == 0


def test_a_fully_executed_chunk_gives_no_guidance():
    rc = RunningChunk()
    rc.published(7, 10.0, 4)
    assert rc.request(10.2, PERIOD, 0.0, []) is None
    assert rc.last == 'chunk 7 (own clock) is fully executed'


def test_a_fresh_executor_state_names_the_running_chunk():
    rc = RunningChunk()
    rc.published(1, 10.0, 40)
    rc.published(2, 10.5, 40)
    rc.executor(100.0, 1, 'executing')
    r = rc.request(10.6, PERIOD, 100.1, [])
    assert (r.prefix_stamp, r.executed) == (10.0, 12)
    assert 'executor/state' in rc.last


@pytest.mark.parametrize('state, sequence', [('holding', 1), ('executing', 99)])
def test_executor_holding_or_running_another_goal_gives_no_guidance(state, sequence):
    rc = RunningChunk()
    rc.published(1, 10.0, 40)
    rc.executor(100.0, sequence, state)
    assert rc.request(10.1, PERIOD, 100.1, []) is None
    assert rc.last == f'no chunk of this rollout running (executor/state: {state}, ' \
        f'sequence {sequence})'


def test_a_stale_executor_state_falls_back_to_the_own_clock():
    rc = RunningChunk()
    rc.published(1, 10.0, 40)
    rc.executor(100.0, 5, 'holding')
    r = rc.request(10.1, PERIOD, 100.0 + EXECUTOR_STATE_MAX_AGE, [])
    assert r is not None and r.prefix_stamp == 10.0 and 'own clock' in rc.last


def test_clear_forgets_the_rollouts_chunks_and_keeps_the_latest_only():
    rc = RunningChunk(keep=2)
    for seq in range(1, 4):
        rc.published(seq, 10.0 + seq, 40)
    assert [c[0] for c in rc.chunks] == [2, 3]
    rc.clear()
    assert rc.request(20.0, PERIOD, 0.0, []) is None


def test_rtc_is_refused_beside_aggregation_or_a_cartesian_configuration():
    check_rtc_config(False, True, True)             # off: nothing to refuse
    check_rtc_config(True, False, False)
    with pytest.raises(ConfigError, match='choose one'):
        check_rtc_config(True, True, False)
    with pytest.raises(ConfigError, match='joint policies only'):
        check_rtc_config(True, False, True)


def test_rtc_is_refused_for_a_policy_with_its_own_time_from_start():
    plain = PolicyMetadata('x', 'f' * 64, (), 2, 2, 4, 0.1)
    timed = dataclasses.replace(plain, time_from_start=(0.1, 0.2, 0.3, 0.4))
    check_rtc_policy(False, timed)
    check_rtc_policy(True, plain)
    with pytest.raises(ConfigError, match='time_from_start'):
        check_rtc_policy(True, timed)
