"""The replay schedule: which recorded messages are published, on which topic, and when.

Pure (no rclpy): :class:`Schedule` maps a message's receive time and loop iteration to a wall
time offset from the start of playback; :func:`topic_map` chooses and renames topics.
The publishing thread is :class:`egoroll_ros.bag.player.Player`.

Timing rules:

- the window starts ``start`` s after the bag's first message and lasts ``duration`` s
  (default: to the last message, inclusive);
- a message received at ``t`` is due ``(t - window_start) / rate`` s after playback starts;
- with ``loop``, iteration ``i`` is shifted by ``i * period / rate``, where ``period`` is the
  window's length plus the mean spacing of its messages (so the wrap keeps the usual spacing;
  with ``duration`` given, ``period`` is ``duration``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
import math

from egoroll_ros.bag.reader import BagInfo, absolute
from egoroll_ros.errors import BagError, ConfigError


@dataclass(frozen=True)
class ReplayOptions:
    """What ``egoroll replay`` plays.

    Attributes:
        rate: playback speed (2.0 = twice as fast).
        start: seconds after the bag's first message to start from.
        duration: seconds of bag time to play (None: to the end).
        loop: play the window again and again until stopped.
        topics: topics to play (absolute or relative to ``/``); None: all.
        remap: recorded topic -> published topic.
    """

    rate: float = 1.0
    start: float = 0.0
    duration: float | None = None
    loop: bool = False
    topics: tuple[str, ...] | None = None
    remap: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Validate (ConfigError naming the option)."""
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise ConfigError(f'--rate: must be a positive number, got {self.rate}')
        if not (math.isfinite(self.start) and self.start >= 0):
            raise ConfigError(f'--start: must be a number >= 0, got {self.start}')
        if self.duration is not None and not (math.isfinite(self.duration) and
                                              self.duration > 0):
            raise ConfigError(f'--duration: must be a positive number, got {self.duration}')


def parse_remaps(items: Sequence[str]) -> dict[str, str]:
    """``['/a:=/b', 'c:=d']`` -> ``{'/a': '/b', '/c': '/d'}`` (names made absolute).

    Raises:
        ConfigError: an item is not ``FROM:=TO`` or a source is repeated.
    """
    out: dict[str, str] = {}
    for item in items:
        src, sep, dst = item.partition(':=')
        if not sep or not src.strip() or not dst.strip():
            raise ConfigError(f'--remap {item!r}: expected FROM:=TO')
        src, dst = absolute(src.strip()), absolute(dst.strip())
        if src in out:
            raise ConfigError(f'--remap: {src} is remapped twice')
        out[src] = dst
    return out


#: Message types replayed by default: what sensors publish. Everything else (quest/joy, whose
#: type is sensor_msgs/Joy but which carries the deadman, e-stop and confirm buttons; policy
#: chunks; gate and executor topics; the latched robot_description) is played only when named
#: with ``--topics``: a replay must never command a robot by itself.
SENSOR_TYPES = frozenset(f'sensor_msgs/msg/{t}' for t in (
    'Image', 'CompressedImage', 'CameraInfo', 'JointState', 'Imu', 'PointCloud2', 'LaserScan',
    'Range', 'Temperature', 'MagneticField', 'FluidPressure', 'NavSatFix'))
#: Name segments of topics that steer the robot half, whatever their type.
CONTROL_SEGMENTS = frozenset({'quest', 'policy', 'safety', 'executor', 'execute_trajectory',
                              'robot_description', 'clock'})
#: Where a recorded ``joint_states`` is published unless named or remapped: the live
#: ``joint_states`` is what the gate and executor take as the measured arm.
REPLAY_PREFIX = '/replay'


def is_sensor_topic(topic: str, msgtype: str) -> bool:
    """Whether ``topic`` of ``msgtype`` is replayed by default (a sensor, not a command)."""
    segments = set(topic.strip('/').split('/'))
    return msgtype in SENSOR_TYPES and not segments & CONTROL_SEGMENTS


def skipped_topics(info: BagInfo, opts: ReplayOptions) -> list[str]:
    """The recorded topics not played by default (control topics), when ``--topics`` is not
    given; empty otherwise."""
    if opts.topics is not None:
        return []
    return sorted(t for t, ti in info.topics.items() if not is_sensor_topic(t, ti.msgtype))


def topic_map(info: BagInfo, opts: ReplayOptions) -> dict[str, str]:
    """Recorded topic -> published topic, for every topic that is played.

    Without ``--topics`` only sensor topics (:func:`is_sensor_topic`) are played, and a
    recorded ``joint_states`` is published under :data:`REPLAY_PREFIX` unless ``--remap``
    names it; a topic named with ``--topics`` is played under its name (or its remap).

    Raises:
        BagError: a ``--topics`` or ``--remap`` name the bag does not have (listing what it
            has), or two topics remapped onto one name.
    """
    named = opts.topics is not None
    wanted = [t for t, ti in info.topics.items() if is_sensor_topic(t, ti.msgtype)] \
        if not named else [absolute(t) for t in opts.topics]
    missing = [t for t in wanted if t not in info.topics]
    missing += [t for t in opts.remap if t not in info.topics]
    if missing:
        raise BagError(f"{info.path}: no topic {', '.join(sorted(set(missing)))} in the bag. "
                       f'The bag has: {info.describe_topics()}')

    def target(t: str) -> str:
        if t in opts.remap:
            return opts.remap[t]
        if not named and t.rsplit('/', 1)[-1] == 'joint_states':
            return REPLAY_PREFIX + t
        return t

    out = {t: target(t) for t in sorted(wanted)}
    seen: dict[str, str] = {}
    for src, dst in out.items():
        if dst in seen and info.topics[src].msgtype != info.topics[seen[dst]].msgtype:
            raise BagError(f'--remap: {src} and {seen[dst]} would both publish {dst} with '
                           'different types')
        seen[dst] = src
    return out


class Schedule:
    """Wall-time offsets of recorded messages (see the module docstring).

    Args:
        bag_start_ns, bag_end_ns: receive times of the bag's first and last message.
        opts: the replay options.
        count: messages in the window (for the loop period); 0 if unknown.

    Raises:
        ConfigError: ``start`` lies beyond the end of the bag.
    """

    def __init__(self, bag_start_ns: int, bag_end_ns: int, opts: ReplayOptions,
                 count: int = 0) -> None:
        self.rate = opts.rate
        self.start_ns = bag_start_ns + int(round(opts.start * 1e9))
        if self.start_ns > bag_end_ns:
            raise ConfigError(f'--start {opts.start:g}: the bag lasts only '
                              f'{(bag_end_ns - bag_start_ns) * 1e-9:.3f} s')
        if opts.duration is not None:
            self.stop_ns = min(bag_end_ns, self.start_ns + int(round(opts.duration * 1e9)) - 1)
            self.period_ns = int(round(opts.duration * 1e9))
        else:
            self.stop_ns = bag_end_ns
            span = self.stop_ns - self.start_ns
            self.period_ns = span + (span // (count - 1) if count > 1 else 0)
        self.period_ns = max(self.period_ns, 1_000_000)   # at least 1 ms per loop
        self.loop = opts.loop

    @property
    def window(self) -> tuple[int, int]:
        """Receive-time window ``[start_ns, stop_ns]`` (inclusive) that is played."""
        return self.start_ns, self.stop_ns

    @property
    def length(self) -> float:
        """Wall seconds one pass over the window takes."""
        return (self.stop_ns - self.start_ns) / 1e9 / self.rate

    def offset(self, t_ns: int, iteration: int = 0) -> float:
        """Seconds after playback start at which the message received at ``t_ns`` is due."""
        return ((t_ns - self.start_ns) + iteration * self.period_ns) / 1e9 / self.rate

    def bag_time(self, offset: float, iteration: int = 0) -> int:
        """The recorded time (ns) that is being played ``offset`` wall seconds after the start
        of playback (for ``/clock``)."""
        return self.start_ns + int(round(offset * self.rate * 1e9)) - \
            iteration * self.period_ns

    def plan(self, messages: Iterable[tuple[int, str]], topics: Mapping[str, str],
             iteration: int = 0) -> list[tuple[float, str, int]]:
        """``(offset s, published topic, receive time ns)`` of one pass over ``messages``
        (``(receive time ns, recorded topic)`` in time order), inside the window and on the
        played topics."""
        return [(self.offset(t, iteration), topics[topic], t) for t, topic in messages
                if topic in topics and self.start_ns <= t <= self.stop_ns]
