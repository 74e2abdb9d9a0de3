"""The one way policy_node asks the safety gate to stop the arm, and what the gate answered.

Every stop of the policy side -- ``policy/stop``, the Quest toggle, lifecycle deactivate and a
policy fault -- goes through :meth:`GateStop.request`. It calls the gate's ``safety/stop``
(which latches "rollout stopped", cancels every goal of the executor and answers only once the
executor has switched to its hold) and turns the answer, or its absence, into a
:class:`StopReport`: ``confirmed`` only on the gate's success, ``not_confirmed`` with the reason
otherwise (the gate's own refusal, unreachable, no answer within the timeout, the call failed),
``no_gate`` when none is configured. The request always ends within its timeout, so a waiting
caller (``policy/stop``, deactivate) is never left hanging, and a caller that may not wait (the
Quest toggle, a fault on the inference thread) gets the same report in the log, on
``policy/status`` and in ``/diagnostics``.

The client and the timeout's timer live in a callback group of their own: a caller awaiting the
report from another group (a lifecycle transition) never keeps the answer from being taken.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
import itertools
import threading
import time

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from std_srvs.srv import Trigger

from egoroll_ros.ros.runner import wait_for

#: The states of a :class:`StopReport`.
PENDING, CONFIRMED, NOT_CONFIRMED, NO_GATE = 'pending', 'confirmed', 'not_confirmed', 'no_gate'


@dataclasses.dataclass(frozen=True)
class StopReport:
    """What one stop request learned.

    Attributes:
        trigger: who stopped ('policy/stop', 'Quest toggle', 'lifecycle deactivate',
            'policy fault').
        state: :data:`PENDING` (asked, no answer yet), :data:`CONFIRMED` (the gate answered
            that the executor holds), :data:`NOT_CONFIRMED` (``message`` says why) or
            :data:`NO_GATE` (none configured: publishing stopped, motion not supervised).
        message: the gate's answer, or why there is none.
        requested: steady-clock time of the request (s).
        elapsed: seconds from the request to the answer (None while pending).
    """

    trigger: str
    state: str
    message: str
    requested: float
    elapsed: float | None = None

    @property
    def confirmed(self) -> bool:
        """The gate confirmed the hold."""
        return self.state == CONFIRMED

    def text(self) -> str:
        """One line for logs, ``policy/status`` and ``/diagnostics``."""
        if self.state == PENDING:
            return (f'stop ({self.trigger}): waiting for the safety gate to confirm the hold; '
                    'NOT confirmed yet')
        took = '' if self.elapsed is None else f' after {self.elapsed * 1e3:.0f} ms'
        head = {CONFIRMED: 'hold confirmed by the safety gate',
                NOT_CONFIRMED: 'hold NOT confirmed', NO_GATE: 'publishing stopped'}[self.state]
        return f'stop ({self.trigger}): {head}{took}: {self.message}'


class GateStop:
    """Calls the gate's stop service for every stop trigger; see the module docstring.

    Args:
        node: the owning node (the client, its timer and the logger); it must be spinning on
            an executor for a request to be answered.
        service: the gate's stop service (``std_srvs/Trigger``); empty: no gate.
        timeout: seconds a request waits for the answer before it reports ``not_confirmed``.
        on_report: called (on the executor thread) with every finished report, e.g. to
            publish the status and diagnostics at once.
    """

    def __init__(self, node: Node, service: str, timeout: float,
                 on_report: Callable[[StopReport], None] | None = None) -> None:
        self._node = node
        self.service = service
        self.timeout = float(timeout)
        self._on_report = on_report
        self._group = MutuallyExclusiveCallbackGroup()
        self._client = node.create_client(Trigger, service, callback_group=self._group) \
            if service else None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._last: tuple[int, StopReport] | None = None

    @property
    def last(self) -> StopReport | None:
        """The report of the newest request (None: none since :meth:`clear`)."""
        with self._lock:
            return None if self._last is None else self._last[1]

    def clear(self) -> None:
        """Forget the last report (a new rollout started)."""
        with self._lock:
            self._last = None

    def request(self, trigger: str) -> Future:
        """Ask the gate to stop, from any thread, without blocking: the request is sent at once
        (rclpy's ``call_async`` may be called from any thread), its answer is awaited on the
        executor thread.

        Returns:
            A future that completes with the :class:`StopReport` once the gate answered, or
            ``timeout`` passed, or it is known that no answer can come.
        """
        rid = next(self._ids)
        report = StopReport(trigger, PENDING, 'asked the safety gate', time.monotonic())
        with self._lock:
            self._last = (rid, report)
        client = self._client
        if client is None:
            return _done(self._finish(rid, report, NO_GATE, (
                "no safety gate configured (gate.stop_service ''): motion is NOT confirmed "
                'stopped')))
        if not client.service_is_ready():
            return _done(self._finish(rid, report, NOT_CONFIRMED, (
                f"the safety gate ({self.service}) is unreachable (the executor's heartbeat "
                'and command timeouts still stop the arm)')))
        future = client.call_async(Trigger.Request())
        executor = self._node.executor
        if executor is None:
            return _done(self._finish(rid, report, NOT_CONFIRMED, (
                'asked the safety gate, but this node is not spinning: its answer cannot be '
                'taken')))
        # The timeout's timer is made on the executor thread (the caller may be the inference
        # thread), so node entities are only ever created and destroyed there.
        return executor.create_task(self._await, rid, report, future)

    async def _await(self, rid: int, report: StopReport, future: Future) -> StopReport:
        left = max(0.0, self.timeout - (time.monotonic() - report.requested))
        if not await wait_for(self._node, future, left, callback_group=self._group):
            future.add_done_callback(lambda f: self._late(report, f))
            return self._finish(rid, report, NOT_CONFIRMED,
                                f'the safety gate did not answer within {self.timeout:g} s')
        try:
            answer = future.result()
        except Exception as exc:  # noqa: BLE001 - any failure of the call is reported as such
            return self._finish(rid, report, NOT_CONFIRMED, f'safety/stop failed: {exc!r}')
        return self._finish(rid, report, CONFIRMED if answer.success else NOT_CONFIRMED,
                            f'gate: {answer.message}')

    def _finish(self, rid: int, report: StopReport, state: str, message: str) -> StopReport:
        done = dataclasses.replace(report, state=state, message=message,
                                   elapsed=time.monotonic() - report.requested)
        with self._lock:
            if self._last is not None and self._last[0] == rid:
                self._last = (rid, done)
        # one call site per severity (rclpy refuses two severities from one line)
        log = self._node.get_logger()
        if state == CONFIRMED:
            log.info(done.text())
        elif state == NO_GATE:
            log.warning(done.text())
        else:
            log.error(done.text())
        if self._on_report is not None:
            self._on_report(done)
        return done

    def _late(self, report: StopReport, future: Future) -> None:
        """An answer after the timeout: logged (the report stays not confirmed)."""
        try:
            answer = future.result()
        except Exception as exc:  # noqa: BLE001
            answer = f'failed: {exc!r}'
        else:
            answer = f"{'success' if answer.success else 'failure'}: {answer.message}"
        self._node.get_logger().warning(
            f'stop ({report.trigger}): the safety gate answered after the timeout '
            f'({time.monotonic() - report.requested:.3f} s): {answer}')


async def await_report(node: Node, stop: Future | None, timeout: float) -> StopReport | None:
    """Await a stop's report (:meth:`GateStop.request`'s future) in a coroutine callback of
    ``node``, at most ``timeout`` s (the request ends by its own timeout before that); None when
    no stop was asked (``stop`` None)."""
    if stop is None:
        return None
    await wait_for(node, stop, timeout)
    if stop.done():
        return stop.result()
    return StopReport('?', NOT_CONFIRMED, 'the stop request did not finish', 0.0)


def _done(report: StopReport) -> Future:
    future: Future = Future()
    future.set_result(report)
    return future
