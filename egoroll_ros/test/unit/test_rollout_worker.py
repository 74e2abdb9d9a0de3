"""The rollout's inference thread (core/worker.py): pacing, requests, a rollout's start."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from egoroll_ros.core.rollout import RolloutStateMachine
from egoroll_ros.core.worker import RolloutWorker, next_deadline

TIMEOUT = 10.0


def _wait(cond, what):
    end = time.monotonic() + TIMEOUT
    while not cond():
        assert time.monotonic() < end, f'timed out waiting for {what}'
        time.sleep(0.001)


def _running(sm):
    sm.begin_preflight()
    sm.end_preflight(True, 'passed')
    return sm.start()


class _Answer:
    def __init__(self):
        self.done = threading.Event()
        self.result = self.thread = None

    def set_result(self, result):
        self.result, self.thread = result, threading.current_thread()
        self.done.set()


class _Log:
    def __init__(self, begin_ok=True):
        self.events = []
        self.begin_ok = begin_ok
        self.lock = threading.Lock()

    def step(self, gen):
        with self.lock:
            self.events.append(('step', gen))

    def begin(self, gen):
        with self.lock:
            self.events.append(('begin', gen))
        return self.begin_ok

    def count(self, kind):
        with self.lock:
            return sum(1 for k, _ in self.events if k == kind)


def _worker(sm, log, period=0.01, serve=lambda: 'served'):
    w = RolloutWorker(sm, period, step=log.step, begin=log.begin, serve=serve)
    w.start()
    return w


@pytest.mark.parametrize('deadline, now, expected', [
    (1.0, 1.0, 1.1),        # due on time: one period later
    (1.0, 1.05, 1.1),       # a little late: the next slot
    (1.0, 1.25, 1.3),       # overrun by two slots: they are skipped, the phase is kept
    (1.0, 1.3, 1.3),        # exactly on a later slot
])
def test_next_deadline_keeps_the_phase_and_skips_missed_slots(deadline, now, expected):
    assert next_deadline(deadline, now, 0.1) == pytest.approx(expected)


def test_a_bad_period_is_refused():
    sm = RolloutStateMachine(10.0, time.monotonic)
    for bad in (0.0, -1.0, float('nan'), float('inf')):
        with pytest.raises(ValueError, match='period'):
            RolloutWorker(sm, bad, step=print, begin=bool, serve=dict)


def test_no_step_while_no_rollout_runs():
    sm = RolloutStateMachine(10.0, time.monotonic)
    log = _Log()
    w = _worker(sm, log)
    answer = _Answer()
    w.request(answer)                      # a full turn of the loop happened after this
    assert answer.done.wait(TIMEOUT)
    w.stop()
    assert log.events == []


def test_a_request_is_answered_on_the_worker_thread_with_what_serve_returns():
    sm = RolloutStateMachine(10.0, time.monotonic)
    log = _Log()
    w = _worker(sm, log, period=3600.0, serve=lambda: (True, 'preflight passed'))
    answer = _Answer()
    w.request(answer)
    assert answer.done.wait(TIMEOUT)       # long before the hour-long deadline
    assert answer.result == (True, 'preflight passed')
    assert answer.thread is w._thread
    w.stop()


class _Clock:
    """A steady clock the test moves (the worker's waits still end by its wake event)."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_rollout_begins_once_then_steps_its_generation_at_each_deadline_until_it_stops():
    sm = RolloutStateMachine(10.0, time.monotonic)
    log = _Log()
    clock = _Clock()
    w = RolloutWorker(sm, 1.0, step=log.step, begin=log.begin, serve=dict, clock=clock)
    w.start()
    gen = _running(sm)
    w.begin(gen)
    _wait(lambda: log.count('step') == 1, 'the first step, at once')
    for k in range(2, 5):                  # each deadline passed: one more step
        clock.now += 1.0
        w.request(_Answer())               # wakes the worker (it waits on real time)
        _wait(lambda k=k: log.count('step') == k, f'step {k}')
    sm.stop('done')
    for _ in range(5):                     # deadlines pass, the rollout is over: no step
        clock.now += 1.0
        answer = _Answer()
        w.request(answer)
        assert answer.done.wait(TIMEOUT)
    w.stop()
    assert log.events[0] == ('begin', gen) and log.count('begin') == 1
    assert log.events[1:] == [('step', gen)] * 4


def test_the_first_step_comes_at_once_even_with_a_long_period():
    sm = RolloutStateMachine(10.0, time.monotonic)
    log = _Log()
    w = _worker(sm, log, period=3600.0)
    gen = _running(sm)
    w.begin(gen)
    _wait(lambda: log.count('step') == 1, 'the first step')
    w.stop()
    assert log.events == [('begin', gen), ('step', gen)]


def test_a_failed_begin_steps_nothing():
    sm = RolloutStateMachine(10.0, time.monotonic)
    log = _Log(begin_ok=False)

    def begin(gen):
        log.begin(gen)
        sm.fault('policy reset failed', gen)     # what the node does
        return False
    w = RolloutWorker(sm, 0.01, step=log.step, begin=begin, serve=dict)
    w.start()
    w.begin(_running(sm))
    _wait(lambda: log.count('begin') == 1, 'the begin')
    answer = _Answer()
    w.request(answer)
    assert answer.done.wait(TIMEOUT)
    w.stop()
    assert log.count('step') == 0


def test_a_begin_for_a_rollout_that_already_stopped_is_dropped():
    sm = RolloutStateMachine(10.0, time.monotonic)
    log = _Log()
    gen = _running(sm)
    sm.stop('stopped before the worker ran')
    w = _worker(sm, log)
    w.begin(gen)
    answer = _Answer()
    w.request(answer)
    assert answer.done.wait(TIMEOUT)
    w.stop()
    assert log.events == []


def test_stop_ends_the_thread():
    sm = RolloutStateMachine(10.0, time.monotonic)
    w = _worker(sm, _Log(), period=3600.0)
    assert w.is_alive()
    w.stop()
    assert not w.is_alive()


def test_repeated_rollouts_each_begin_once():
    sm = RolloutStateMachine(10.0, time.monotonic)
    log = _Log()
    w = _worker(sm, log)
    gens = []
    for _ in itertools.repeat(None, 3):
        gen = _running(sm)
        gens.append(gen)
        w.begin(gen)
        _wait(lambda g=gen: ('step', g) in log.events, 'a step of the rollout')
        sm.stop('next')
    w.stop()
    assert [g for k, g in log.events if k == 'begin'] == gens
