"""Entry-point helper shared by every node's ``main``."""

from __future__ import annotations

from collections.abc import Callable
import contextlib
import faulthandler
import signal
import sys

import rclpy
from rclpy.callback_groups import CallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import (
    ExternalShutdownException,
    MultiThreadedExecutor,
    SingleThreadedExecutor,
)
from rclpy.node import Node
from rclpy.task import Future

from egoroll_ros.errors import EgorollError


def wake_executor(node: Node) -> None:
    """Wake the executor spinning ``node`` (from another thread), so coroutine callbacks
    awaiting a future that thread completed resume now. Does nothing while shutting down."""
    executor = node.executor
    if executor is not None:
        with contextlib.suppress(Exception):  # shutting down: nothing left to resume
            executor.wake()


async def wait_for(node: Node, future: Future, timeout: float,
                   callback_group: CallbackGroup | None = None) -> bool:
    """Await ``future`` in a coroutine callback of ``node`` for at most ``timeout`` seconds
    (steady clock), without polling.

    The coroutine sleeps until ``future`` completes (on any thread: a client's answer, or a
    worker thread's ``set_result``) or a one-shot steady-clock timer fires; either wakes the
    executor once. The future itself is left as it is (a late result still lands in it).
    ``callback_group`` is the timer's (default: the node's): one that the awaiting coroutine
    does not hold, or the timeout could not fire while it waits.

    Returns:
        Whether ``future`` is done.
    """
    if future.done():
        return True
    woken: Future = Future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(None)
            wake_executor(node)

    future.add_done_callback(wake)
    timer = node.create_timer(timeout, lambda: wake(), callback_group=callback_group,
                              clock=Clock(clock_type=ClockType.STEADY_TIME))
    try:
        await woken
    finally:
        node.destroy_timer(timer)
    return future.done()


class _Interrupt:
    """SIGINT handler of a node process.

    While the node is being built (``armed``), the first SIGINT raises KeyboardInterrupt, so
    Ctrl-C ends a long start-up (a checkpoint load). Once the node spins it never raises:
    rclpy's own handler (installed by ``rclpy.init`` on top of this one) shuts the context
    down and wakes the executor, and ``spin`` returns. A KeyboardInterrupt raised there would
    land at any bytecode of the main thread: inside a callback half-way through its update,
    or inside rclpy's native ``take_message``, where pybind11 turns it into ``RuntimeError:
    Unable to convert call argument`` and the node dies with a traceback. Every SIGINT after
    the first, and every one during teardown, is a no-op, so close()/destroy_node() run to
    the end (a terminal's Ctrl-C reaches the node and ros2 launch, which forwards its own
    SIGINT: the node sees two). SIGTERM still ends a hung teardown."""

    def __init__(self) -> None:
        self.armed = True
        self.fired = False

    def __call__(self, signum: int, frame: object) -> None:
        first = not self.fired
        self.fired = True
        if first and self.armed:
            raise KeyboardInterrupt


def _install_interrupt() -> _Interrupt:
    handler = _Interrupt()
    with contextlib.suppress(ValueError):     # not the main thread: leave signals alone
        signal.signal(signal.SIGINT, handler)
    return handler


def run_node(factory: Callable[[], Node], args: list[str] | None = None,
             num_threads: int | None = None) -> int:
    """Create the node from ``factory`` and spin it until shutdown.

    ``num_threads`` 1 spins on a SingleThreadedExecutor (for nodes whose callbacks are all
    short: rclpy's MultiThreadedExecutor costs several times the CPU per callback and, on a
    loaded machine, delays timers by hundreds of milliseconds; benchmarks/bench_executors.py);
    otherwise on a MultiThreadedExecutor with that many threads (None: rclpy's default).

    Uses ``rclpy.init``/``try_shutdown`` explicitly (not the context-manager form) so the same
    code runs on Humble. A configuration error raised by the factory is printed as one line and
    gives exit status 2.

    Returns:
        The process exit status.
    """
    interrupt = _install_interrupt()
    # A native crash (rclpy, the RMW, torch) prints every thread's Python stack to stderr, the
    # node's log, instead of leaving only an exit status of -11.
    faulthandler.enable()
    rclpy.init(args=args)
    node = None
    try:
        node = factory()
        executor = SingleThreadedExecutor() if num_threads == 1 else \
            MultiThreadedExecutor(num_threads=num_threads)
        executor.add_node(node)
        interrupt.armed = False
        if not interrupt.fired:
            try:
                executor.spin()
            except Exception:
                # rclpy's signal handler shuts the context down from its own thread while a
                # callback may be running: that callback's publish or client call then raises
                # (RCLError "context is invalid"). That is the shutdown, not a failure.
                if rclpy.ok() and not interrupt.fired:
                    raise
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except EgorollError as exc:
        name = node.get_name() if node is not None else 'egoroll'
        print(f'[{name}] FATAL: {type(exc).__name__}: {exc}', file=sys.stderr, flush=True)
        return 2
    finally:
        if node is not None:
            close = getattr(node, 'close', None)
            if callable(close):
                close()
            node.destroy_node()
        rclpy.try_shutdown()
        # Python restores SIGINT's default action while the interpreter finalises; a late
        # SIGINT would then kill the finished process (status -2) instead of letting it exit.
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    return 0
