"""An in-process ROS graph on its own context and executor thread (tests and the demo)."""

from __future__ import annotations

from collections.abc import Callable
import contextlib
import inspect
import threading
import time
from typing import Any, TypeVar

import rclpy
from rclpy.executors import Executor, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile

N = TypeVar('N', bound=Node)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str = 'condition',
               interval: float = 0.002) -> Any:
    """Poll ``predicate`` until it returns a truthy value, and return that value.

    Raises:
        AssertionError: naming ``what`` when ``timeout`` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f'timed out after {timeout:.1f} s waiting for {what}')
        time.sleep(interval)


def run_callback(callback: Callable[..., Any], *args: Any, timeout: float = 60.0) -> Any:
    """Call a node's (service) callback directly and return its result; a coroutine callback
    is driven to completion here, as rclpy's executor would, a turn every millisecond.

    Raises:
        AssertionError: the coroutine did not finish within ``timeout`` seconds.
    """
    result = callback(*args)
    if not inspect.iscoroutine(result):
        return result
    deadline = time.monotonic() + timeout
    while True:
        try:
            result.send(None)
        except StopIteration as done:
            return done.value
        if time.monotonic() > deadline:
            result.close()
            raise AssertionError(f'{callback.__name__} did not finish within {timeout} s')
        time.sleep(0.001)


class MessageCollector:
    """Subscribes to a topic and keeps every message (with its monotonic receipt time)."""

    def __init__(self, node: Node, msg_type: type, topic: str,
                 qos: QoSProfile | int = 100) -> None:
        self._cond = threading.Condition()
        self.messages: list[Any] = []
        self.received: list[float] = []
        self.topic = topic
        self.subscription = node.create_subscription(msg_type, topic, self._on_msg, qos)

    def _on_msg(self, msg: Any) -> None:
        now = time.monotonic()
        with self._cond:
            self.messages.append(msg)
            self.received.append(now)
            self._cond.notify_all()

    def snapshot(self) -> list[Any]:
        """A copy of the messages received so far."""
        with self._cond:
            return list(self.messages)

    def clear(self) -> None:
        """Forget every message received so far."""
        with self._cond:
            self.messages.clear()
            self.received.clear()

    def wait_for(self, predicate: Callable[[Any], bool] = lambda m: True,
                 timeout: float = 10.0, start: int = 0) -> Any:
        """Return the first message (index >= ``start``) matching ``predicate``.

        Raises:
            AssertionError: when none arrives within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            index = start
            while True:
                while index < len(self.messages):
                    if predicate(self.messages[index]):
                        return self.messages[index]
                    index += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f'timed out after {timeout:.1f} s waiting for a matching message on '
                        f'{self.topic} ({len(self.messages)} received)')
                self._cond.wait(remaining)

    def wait_count(self, count: int, timeout: float = 10.0) -> list[Any]:
        """Wait until at least ``count`` messages arrived; return them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f'timed out after {timeout:.1f} s waiting for {count} messages on '
                        f'{self.topic} ({len(self.messages)} received)')
                self._cond.wait(remaining)
            return list(self.messages)


class RosGraph:
    """Several nodes in this process, on a private context and an executor spun in a thread.

    Nodes must be created with ``context=graph.context`` (use :meth:`add` with a factory that
    forwards ``**kwargs`` to ``Node.__init__``, or :meth:`node` for a plain node).
    """

    def __init__(self, num_threads: int = 1, domain_id: int | None = None) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        # num_threads 1 (the default): a SingleThreadedExecutor, as every egoroll node spins;
        # rclpy's MultiThreadedExecutor costs several times the CPU per message and delays
        # callbacks under load (benchmarks/bench_executors.py). More threads only for graphs
        # hosting callbacks that block.
        self.executor: Executor = (
            SingleThreadedExecutor(context=self.context) if num_threads == 1
            else MultiThreadedExecutor(num_threads=num_threads, context=self.context))
        self._nodes: list[Node] = []
        self._closed = False
        self._thread = threading.Thread(target=self._spin, name='ros-graph-spin', daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        # Shutdown races can end the spin with an exception; nothing to report then.
        with contextlib.suppress(Exception):
            self.executor.spin()

    def add(self, node: N) -> N:
        """Add an existing node (created on ``self.context``) to the executor."""
        self.executor.add_node(node)
        self._nodes.append(node)
        return node

    def node(self, name: str, **kwargs: Any) -> Node:
        """Create a plain node on this graph (for publishers, subscribers and clients)."""
        return self.add(Node(name, context=self.context, **kwargs))

    def collect(self, node: Node, msg_type: type, topic: str,
                qos: QoSProfile | int = 100) -> MessageCollector:
        """Start collecting messages of ``topic`` with ``node``."""
        return MessageCollector(node, msg_type, topic, qos)

    def wait_for_subscribers(self, publisher: Any, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until ``publisher`` has matched ``count`` subscriptions (DDS discovery)."""
        wait_until(lambda: publisher.get_subscription_count() >= count, timeout,
                   f'{count} subscriber(s) on {publisher.topic_name}')

    def wait_for_publishers(self, subscription: Any, count: int = 1,
                            timeout: float = 10.0) -> None:
        """Wait until ``subscription`` has matched ``count`` publishers."""
        wait_until(lambda: subscription.get_publisher_count() >= count, timeout,
                   f'{count} publisher(s) on {subscription.topic_name}')

    def close(self) -> None:
        """Stop spinning, destroy every node and the context; safe to call twice.

        Every step runs even if an earlier one fails: a node left alive keeps its DDS
        participant in every other graph's view (same node names in the next test).
        """
        if self._closed:
            return
        self._closed = True
        errors: list[str] = []
        try:
            self.executor.shutdown(timeout_sec=5.0)
        except Exception as exc:  # noqa: BLE001 - keep tearing down
            errors.append(f'executor: {exc!r}')
        for node in reversed(self._nodes):
            try:
                close = getattr(node, 'close', None)
                if callable(close):
                    close()
                node.destroy_node()
            except Exception as exc:  # noqa: BLE001 - keep tearing down
                errors.append(f'{node.get_name()}: {exc!r}')
        self._nodes.clear()
        with contextlib.suppress(Exception):
            self.context.try_shutdown()
        self._thread.join(timeout=5.0)
        # Shutdown alone keeps the DDS participant alive, so its nodes (same names as the next
        # graph's) stay in everyone's graph cache; destroying the context removes them.
        with contextlib.suppress(Exception):
            self.context.destroy()
        if errors:
            raise RuntimeError('RosGraph teardown: ' + '; '.join(errors))
