"""A process's watchdog on itself: was it scheduled, or was it stopped or starved?

A hung process (SIGSTOP, a debugger, a machine swapping) is not a dead one: when it runs again
it carries on from where it was, with a rollout that the rest of the graph has already held.
Each node that can move the arm beats a :class:`Liveness` from a periodic steady-clock
callback and checks it before it acts on an event. A gap of at least ``timeout`` between two
beats, or between the last beat and a check, means the node was not scheduled for that long;
the node then stops its rollout, so that motion resumes only after a new preflight and start
(docs/hazards.md, S6 and C12). Shorter gaps (a loaded machine) are only counted.

Pure: every time is a steady-clock time in seconds passed in by the caller. Not thread-safe
by itself: callers on several threads hold one lock around it.
"""

from __future__ import annotations

import math

from egoroll_ros.errors import ConfigError


class Liveness:
    """Gaps in a node's own scheduling.

    Args:
        timeout: seconds; a gap this long is a stall. 0 turns the detection off (gaps are
            still measured).

    Attributes:
        max_gap: the longest gap seen (s).
        stalls: how many stalls were reported.
    """

    def __init__(self, timeout: float) -> None:
        if not (math.isfinite(timeout) and timeout >= 0.0):
            raise ConfigError(f'stall timeout must be a finite number >= 0 s, got {timeout}')
        self.timeout = float(timeout)
        self._last: float | None = None
        self.max_gap = 0.0
        self.stalls = 0

    def reset(self, now: float) -> None:
        """Count from ``now`` (a gap before it is not this rollout's: a start, a re-arm)."""
        self._last = now

    def beat(self, now: float) -> float | None:
        """The periodic callback ran at ``now``. Returns the gap when it was a stall."""
        return self._measure(now)

    def check(self, now: float) -> float | None:
        """An event is about to be acted on at ``now``: the gap since the last beat when it
        is a stall (the periodic callback has not run since the process resumed), else
        None. A stall is reported once: the check counts as a beat."""
        return self._measure(now)

    def _measure(self, now: float) -> float | None:
        last, self._last = self._last, max(now, self._last or now)
        if last is None:
            return None
        gap = now - last
        self.max_gap = max(self.max_gap, gap)
        if self.timeout > 0.0 and gap >= self.timeout:
            self.stalls += 1
            return gap
        return None
