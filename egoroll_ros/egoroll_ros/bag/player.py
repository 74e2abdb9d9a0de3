"""Publish a recorded bag into the live graph with its original timing (``egoroll replay``).

One thread reads the bag and publishes each stored CDR payload as it is
(``publisher.publish(bytes)``: no decode and re-encode) at an absolute deadline from the
:class:`~egoroll_ros.bag.replay.Schedule`; optionally it also publishes ``/clock``
(rosgraph_msgs/Clock) with the recorded time being played, for nodes with
``use_sim_time``. A progress bar goes to a text stream (stderr). :meth:`Player.stop` ends
playback within one wait slice (Ctrl-C in the CLI).
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, TextIO

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from egoroll_ros.bag.reader import BagReader
from egoroll_ros.bag.replay import ReplayOptions, Schedule, topic_map
from egoroll_ros.errors import BagError
from egoroll_ros.ros.bagio import message_class

_SLICE = 0.05   # longest single wait, so stop() and /clock stay responsive


class Player:
    """Plays ``bag`` with ``node``'s publishers (see the module docstring).

    Args:
        node: owns the publishers.
        bag: path of the bag (opened again in the playback thread: sqlite3 connections belong
            to the thread that opened them).
        opts: replay options.
        clock_rate: Hz of ``/clock`` messages; 0 turns ``/clock`` off.
        progress: stream for the progress bar (None: no bar).

    Raises:
        BagError, ConfigError: the bag or the options are unusable (before anything is
            published).
    """

    def __init__(self, node: Node, bag: str, opts: ReplayOptions, clock_rate: float = 0.0,
                 progress: TextIO | None = None) -> None:
        self.bag = bag
        self.opts = opts
        with BagReader(bag) as reader:
            self.info = reader.info
            self.topics = topic_map(reader.info, opts)
            start = reader.info.start_ns + int(round(opts.start * 1e9))
            probe = Schedule(reader.info.start_ns, reader.info.end_ns, opts)
            self.count = sum(1 for _ in reader.messages(self.topics, start,
                                                        probe.stop_ns + 1)) \
                if opts.loop and opts.duration is None else 0
        self.schedule = Schedule(self.info.start_ns, self.info.end_ns, opts, self.count)
        self.publishers: dict[str, Any] = {}
        for src, dst in self.topics.items():
            info = self.info.topics[src]
            if info.transient_local:
                qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            else:
                # KEEP_ALL: a sample the transport has not delivered yet is never replaced by
                # a newer one (KEEP_LAST 100 lost joint_states at 500 Hz x 2 while images
                # were in flight); a subscriber that cannot keep up slows publish instead.
                qos = QoSProfile(history=HistoryPolicy.KEEP_ALL,
                                 reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.VOLATILE)
            if dst not in self.publishers:
                self.publishers[dst] = node.create_publisher(message_class(info.msgtype), dst,
                                                             qos)
        self._clock_pub = None
        self.clock_rate = clock_rate
        if clock_rate > 0:
            try:
                from rosgraph_msgs.msg import Clock
            except ImportError:
                raise BagError('--clock needs rosgraph_msgs, which is not importable here') \
                    from None
            self._clock_cls = Clock
            self._clock_pub = node.create_publisher(Clock, '/clock', 10)
        self.progress = progress
        self.published = 0
        self.published_by_topic: dict[str, int] = {t: 0 for t in self.publishers}
        self.late_max = 0.0          # worst lateness of a publish (s)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._paused_total = 0.0     # s of wall time spent paused (shifts every deadline)
        self._wall0 = 0.0
        self._thread = threading.Thread(target=self._run, name='egoroll-replay', daemon=True)
        self._last_bar = 0.0

    # ---------------------------------------------------------------- control
    def wait_for_subscribers(self, timeout: float) -> list[str]:
        """Wait until every publisher has a matched subscription; return those without."""
        deadline = time.monotonic() + timeout
        while True:
            lonely = [t for t, p in self.publishers.items() if p.get_subscription_count() < 1]
            if not lonely or time.monotonic() >= deadline or self._stop.is_set():
                return lonely
            self._stop.wait(0.01)

    def start(self) -> None:
        """Start playback in the background."""
        self._thread.start()

    def stop(self) -> None:
        """Ask playback to end (returns at once; :meth:`join` waits)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for playback to end; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def pause(self) -> None:
        """Hold playback where it is (``/clock`` keeps repeating the paused time)."""
        self._paused.set()

    def resume(self) -> None:
        """Continue after :meth:`pause`, with the remaining spacing kept."""
        self._paused.clear()

    @property
    def paused(self) -> bool:
        """Whether playback is paused."""
        return self._paused.is_set()

    # ---------------------------------------------------------------- playback
    def _elapsed(self, now: float) -> float:
        """Playback time at ``now``: wall time since the start, less the time paused."""
        return now - self._wall0 - self._paused_total

    def _sleep_until(self, offset: float, iteration: int) -> tuple[bool, float]:
        """Sleep until playback time ``offset``, publishing /clock ticks and the progress bar
        on the way and standing still while paused; (False, _) when stopped, else (True, the
        wall-clock deadline it woke for)."""
        paused_at = None
        while True:
            now = time.monotonic()
            if self._paused.is_set():
                if paused_at is None:
                    paused_at = now
            elif paused_at is not None:
                self._paused_total += now - paused_at
                paused_at = None
            elapsed = self._elapsed(now) if paused_at is None else \
                self._elapsed(paused_at)
            if self._clock_pub is not None and now >= self._next_tick:
                self._publish_clock(elapsed, iteration)
                self._next_tick += 1.0 / self.clock_rate
                if self._next_tick < now:
                    self._next_tick = now + 1.0 / self.clock_rate
            if self.progress is not None and now - self._last_bar >= 0.25:
                self._bar(elapsed, iteration)
            deadline = self._wall0 + self._paused_total + offset
            if paused_at is None and now >= deadline:
                return not self._stop.is_set(), deadline
            wake = now + _SLICE if paused_at is not None else min(deadline, now + _SLICE)
            if self._clock_pub is not None:
                wake = min(wake, self._next_tick)
            if self._stop.wait(max(0.0, wake - now)):
                return False, deadline

    def _publish_clock(self, offset: float, iteration: int) -> None:
        t = min(self.schedule.bag_time(offset, iteration), self.schedule.stop_ns)
        msg = self._clock_cls()
        msg.clock.sec, msg.clock.nanosec = divmod(int(t), 1_000_000_000)
        self._clock_pub.publish(msg)

    def _bar(self, offset: float, iteration: int) -> None:
        self._last_bar = time.monotonic()
        total = max(self.schedule.length, 1e-9)
        pos = min(max(offset - iteration * self.schedule.period_ns / 1e9 / self.opts.rate, 0.0),
                  total)
        frac = pos / total
        width = 30
        fill = int(frac * width)
        loop = f' loop {iteration + 1}' if self.opts.loop else ''
        self.progress.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {frac:5.1%} "
                            f'{pos * self.opts.rate:7.2f}/{total * self.opts.rate:.2f} s bag time '
                            f'x{self.opts.rate:g}{loop}  {self.published} msgs ')
        self.progress.flush()

    def _flush(self, timeout: float = 5.0) -> None:
        """Wait until reliable subscribers acknowledged everything (the process may exit
        right after the last publish, which would otherwise drop the tail). Waits in slices
        of ``_SLICE``: the wait is native code, so a stop is seen within one slice."""
        from rclpy.duration import Duration
        deadline = time.monotonic() + timeout
        pending = [p for p in self.publishers.values() if hasattr(p, 'wait_for_all_acked')]
        while pending and time.monotonic() < deadline and not self._stop.is_set():
            slice_ = Duration(nanoseconds=int(_SLICE * 1e9))
            pending = [p for p in pending if not p.wait_for_all_acked(slice_)]

    def _run(self) -> None:
        try:
            with BagReader(self.bag) as reader:
                self._wall0 = time.monotonic()
                self._next_tick = self._wall0
                lo, hi = self.schedule.window
                for iteration in itertools.count():
                    for topic, _, t_ns, raw in reader.messages(self.topics, lo, hi + 1):
                        go, deadline = self._sleep_until(self.schedule.offset(t_ns, iteration),
                                                         iteration)
                        if not go:
                            return
                        dst = self.topics[topic]
                        self.publishers[dst].publish(bytes(raw))
                        self.late_max = max(self.late_max, time.monotonic() - deadline)
                        self.published += 1
                        self.published_by_topic[dst] += 1
                    if not self.opts.loop or self._stop.is_set():
                        break
                if self.progress is not None:
                    self._bar(self.schedule.length, 0)
            self._flush()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            self.error = exc
        finally:
            if self.progress is not None:
                self.progress.write('\n')
                self.progress.flush()
