"""The ROS clock as an offset from the steady clock, for stamps taken on a control tick.

Reading both clocks on every tick puts tens of microseconds of jitter on the stamps (each read
can be descheduled between the two clocks), which turns into jerk in anything that
differentiates the stamped setpoints. :class:`ClockOffset` keeps one offset instead: the first
is the quickest of a few reads, and later reads replace it only when the offset moved by more
than ``jump`` (a clock jump, sim time) in a read that was not interrupted (both clocks read
within ``max_spread``; an interrupted read's error is up to half its duration, so it is no
measurement of a jump). Pure: the reads come from the caller.
"""

from __future__ import annotations

from collections.abc import Callable

#: One paired read: steady time before, ROS time, steady time after (s).
Read = Callable[[], tuple[float, float, float]]


class ClockOffset:
    """ROS time = steady time + :attr:`offset` (see the module docstring).

    Args:
        jump: s the offset must move by to be taken again.
        max_spread: s within which a read must take both clocks to count.
        first_reads: reads the first offset is the quickest of.
    """

    def __init__(self, jump: float = 0.002, max_spread: float = 2e-4,
                 first_reads: int = 5) -> None:
        self.jump, self.max_spread, self.first_reads = jump, max_spread, first_reads
        self.offset: float | None = None

    def update(self, read: Read) -> float:
        """Read the clocks (``first_reads`` times for the first offset, once after) and return
        the offset now in use."""
        best: tuple[float, float] | None = None
        for _ in range(1 if self.offset is not None else self.first_reads):
            before, ros, after = read()
            if best is None or after - before < best[0]:
                best = (after - before, ros - 0.5 * (before + after))
        spread, offset = best
        if self.offset is None or (spread < self.max_spread and
                                   abs(offset - self.offset) > self.jump):
            self.offset = offset
        return self.offset
