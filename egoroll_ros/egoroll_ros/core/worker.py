"""The inference thread of a rollout (policy_node): one dedicated thread, never a callback.

Steps come at absolute deadlines every ``period`` (steady clock); an overrun skips the missed
slots and keeps the phase. A request (the preflight's inference) is served before the next
step, as soon as it is made. The first step of a new rollout comes at once, after the
rollout's own reset. Pure (threading only): the node gives the callbacks.
"""

from __future__ import annotations

from collections.abc import Callable
import math
import threading
import time
from typing import Any, Protocol

from egoroll_ros.core.rollout import RolloutStateMachine


class Settable(Protocol):
    """What a request is answered through (an rclpy Future, a concurrent Future, ...)."""

    def set_result(self, result: Any) -> None:  # noqa: D102
        ...


def next_deadline(deadline: float, now: float, period: float) -> float:
    """The deadline after ``deadline`` once it is due at ``now``: one ``period`` later, or,
    after an overrun, the first slot of the same phase that is not in the past."""
    deadline += period
    if deadline < now:  # overrun: skip missed slots, keep the phase
        deadline += math.ceil((now - deadline) / period) * period
    return deadline


class RolloutWorker:
    """Runs ``step(generation)`` for the rollout of ``sm`` while it is current.

    Args:
        sm: the rollout state machine (its generation names the rollout being run).
        period: seconds between steps (> 0).
        step: one step of rollout ``generation`` (called only while it is current).
        begin: called once, at the start of rollout ``generation`` (after :meth:`begin`),
            before its first step; False: it failed (the callback has faulted the rollout).
        serve: answers a :meth:`request` (its return value is the request's result).
        clock: the steady clock (s).
        name: the thread's name.
    """

    def __init__(self, sm: RolloutStateMachine, period: float, *,
                 step: Callable[[int], None], begin: Callable[[int], bool],
                 serve: Callable[[], Any], clock: Callable[[], float] = time.monotonic,
                 name: str = 'policy-inference') -> None:
        if not (math.isfinite(period) and period > 0.0):
            raise ValueError(f'period must be finite and > 0, got {period}')
        self._sm, self.period, self._clock = sm, float(period), clock
        self._step, self._begin, self._serve = step, begin, serve
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._request: Settable | None = None
        self._begin_generation = -1
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def is_alive(self) -> bool:
        """Whether the thread runs."""
        return self._thread.is_alive()

    def begin(self, generation: int) -> None:
        """Rollout ``generation`` has started: reset and step it at once."""
        self._begin_generation = generation
        self._wake.set()

    def request(self, answer: Settable) -> None:
        """Serve a request on the thread before the next step; its result goes to
        ``answer.set_result`` (from the worker thread)."""
        with self._lock:
            self._request = answer
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and wait for it (at most ``timeout`` s; not from the thread)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=timeout)

    def _run(self) -> None:
        period, sm = self.period, self._sm
        deadline = self._clock()
        while not self._stop.is_set():
            if self._wake.wait(max(0.0, deadline - self._clock())):
                self._wake.clear()
            if self._stop.is_set():
                break
            with self._lock:
                req, self._request = self._request, None
            if req is not None:
                req.set_result(self._serve())   # wakes whoever awaits it
                continue
            now = self._clock()
            gen = sm.generation
            if gen == self._begin_generation and sm.is_current(gen):
                self._begin_generation = -1
                deadline = now  # first step of a new rollout right away
                if not self._begin(gen):
                    continue
            if now < deadline:
                continue
            deadline = next_deadline(deadline, now, period)
            if sm.is_current(gen):
                self._step(gen)
