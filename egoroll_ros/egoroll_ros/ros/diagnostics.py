"""``/diagnostics`` for a node through one small updater, shaped like diagnostic_updater.

A node registers one task per thing it reports (``add('executor', fn)``); each task returns a
:class:`TaskStatus` (level, message, key/values). :class:`DiagnosticsUpdater` publishes one
DiagnosticArray with a status per task, named ``<node>: <task>``, at most once per period:
either from its own timer (``timer=True``, for executor-driven nodes) or whenever the owner
calls :meth:`DiagnosticsUpdater.update` (a control thread), rate limited on the steady clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
import threading
import time
from typing import Any

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

#: Levels, as diagnostic_msgs/DiagnosticStatus numbers them.
OK, WARN, ERROR, STALE = 0, 1, 2, 3
_LEVELS = {OK: DiagnosticStatus.OK, WARN: DiagnosticStatus.WARN,
           ERROR: DiagnosticStatus.ERROR, STALE: DiagnosticStatus.STALE}


@dataclass(frozen=True)
class TaskStatus:
    """What one diagnostic task reports.

    Attributes:
        level: :data:`OK`, :data:`WARN`, :data:`ERROR` or :data:`STALE`.
        message: one line summary.
        values: ``(key, value)`` pairs (values are shown with ``str``).
    """

    level: int
    message: str
    values: Iterable[tuple[str, Any]] = ()


class DiagnosticsUpdater:
    """Publishes a node's diagnostic tasks on ``/diagnostics``.

    Args:
        node: the owning node (the publisher, and the timer when ``timer``).
        period: seconds between publications (the rate limit).
        hardware_id: the ``hardware_id`` of every status (default: the node's full name).
        timer: publish from a node timer every ``period``; otherwise the owner calls
            :meth:`update` (it publishes only once ``period`` has passed).
        callback_group: for the timer.
    """

    def __init__(self, node: Node, period: float, hardware_id: str | None = None,
                 timer: bool = False, callback_group: object = None) -> None:
        self._node = node
        self.period = float(period)
        self.hardware_id = node.get_fully_qualified_name() if hardware_id is None \
            else hardware_id
        self._tasks: list[tuple[str, Callable[[], TaskStatus]]] = []
        self._pub = node.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._lock = threading.Lock()
        self._last: float | None = None
        if timer:
            node.create_timer(self.period, lambda: self.update(force=True),
                              callback_group=callback_group)

    def add(self, task: str, fn: Callable[[], TaskStatus]) -> None:
        """Report ``fn()`` as the status ``<node>: <task>`` at each publication."""
        self._tasks.append((task, fn))

    def update(self, force: bool = False, stamp: Time | None = None) -> bool:
        """Publish every task's status when a period has passed since the last (or ``force``).

        Returns:
            Whether it published.
        """
        now = time.monotonic()
        with self._lock:
            if not force and self._last is not None and now - self._last < self.period:
                return False
            self._last = now
        statuses = []
        for task, fn in self._tasks:
            st = fn()
            statuses.append(DiagnosticStatus(
                level=_LEVELS[st.level], name=f'{self._node.get_name()}: {task}',
                hardware_id=self.hardware_id, message=st.message,
                values=[KeyValue(key=str(k), value=str(v)) for k, v in st.values]))
        msg = DiagnosticArray(status=statuses)
        msg.header.stamp = stamp if stamp is not None else self._node.get_clock().now().to_msg()
        self._pub.publish(msg)
        return True
