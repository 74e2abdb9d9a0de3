"""Giving the executor back from a coroutine callback, for stand-in servers in tests.

Only tests poll like this (a stand-in action server that loops until its goal is canceled);
egoroll's nodes await futures (:func:`egoroll_ros.ros.runner.wait_for`) and never poll.
"""

from __future__ import annotations


class _NextTurn:
    def __await__(self):  # noqa: ANN204
        yield


def next_turn() -> _NextTurn:
    """An awaitable that gives the executor back once: rclpy resumes the pending task on the
    executor's next wake-up (any ready entity, or ``executor.wake()``)."""
    return _NextTurn()
