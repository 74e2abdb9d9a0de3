"""An rclpy ``ActionClient`` whose requests cannot lose their response to another thread.

rclpy's action client before the fix of ros2/rclpy#1123 (merged for Rolling/Kilted, backported
to Humble and Jazzy in late 2025; the Jazzy wheels on PyPI, rclpy 7.1.6, and any Humble or Jazzy
install older than that still have it) sends a goal, cancel or result request and only then
records its sequence number. An executor thread that takes the response in between finds no
record, logs "Ignoring unexpected goal response", and the request's future never completes: the
safety gate would never learn that the executor accepted its goal. Measured here: the tests'
preempt/cancel race hit it within a few runs in the Jazzy-like and Humble-like environments.

:class:`ActionClient` holds one lock around sending each request (and recording it) and around
taking a response, so a response is taken only once its request is recorded. With a fixed rclpy
(which has its own lock, taken inside this one) it changes nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient as _RclpyActionClient


class ActionClient(_RclpyActionClient):
    """``rclpy.action.ActionClient`` with requests and response taking serialised (same
    constructor and methods)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._request_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    def send_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        """Send a goal (see rclpy); its response future always completes."""
        with self._request_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._request_lock:
            return super()._cancel_goal_async(*args, **kwargs)

    def _get_result_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._request_lock:
            return super()._get_result_async(*args, **kwargs)

    def take_data(self) -> Any:
        """Take ready responses (the executor calls this) only between requests."""
        with self._request_lock:
            return super().take_data()
