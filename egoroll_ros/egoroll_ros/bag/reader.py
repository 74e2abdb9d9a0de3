"""Open and validate a recorded rosbag2 (sqlite3 or mcap) with ``rosbags``.

Every way a bag can be unusable becomes one :class:`~egoroll_ros.errors.BagError` whose
message names the bag and what is wrong with it: a missing path, a directory without
``metadata.yaml``, an unknown storage format, a truncated or corrupt file (found when opening
or while reading), an empty bag, a topic the caller needs but the bag lacks (the message lists
what the bag has), and a topic whose message type differs from the one needed.

No rclpy import: payloads are handed out as the stored CDR bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosbags.rosbag2 import Reader

from egoroll_ros.errors import BagError

#: Storage formats this reader accepts (the value of ``storage_identifier``).
STORAGES = ('mcap', 'sqlite3')
_SUFFIX = {'.mcap': 'mcap', '.db3': 'sqlite3'}


@dataclass(frozen=True)
class TopicInfo:
    """One topic of a bag: absolute name, message type, message count, whether it was
    offered transient local (latched, e.g. robot_description)."""

    name: str
    msgtype: str
    count: int
    transient_local: bool = False


@dataclass(frozen=True)
class BagInfo:
    """What a bag holds.

    Attributes:
        path: the bag (directory, or a single ``.mcap`` / ``.db3`` file).
        storage: ``'mcap'`` or ``'sqlite3'``.
        topics: absolute topic name -> :class:`TopicInfo`.
        start_ns, end_ns: receive time of the first and last message (ns).
        message_count: messages in the bag.
    """

    path: Path
    storage: str
    topics: dict[str, TopicInfo]
    start_ns: int
    end_ns: int
    message_count: int

    @property
    def duration(self) -> float:
        """Seconds from the first to the last message."""
        return (self.end_ns - self.start_ns) * 1e-9

    def describe_topics(self) -> str:
        """E.g. ``/joint_states (sensor_msgs/msg/JointState, 500)``, one per topic, sorted."""
        return ', '.join(f'{t.name} ({t.msgtype}, {t.count})'
                         for t in sorted(self.topics.values(), key=lambda t: t.name)) or 'none'


def absolute(topic: str, namespace: str = '') -> str:
    """``topic`` as an absolute name; a relative one is placed under ``namespace``."""
    if topic.startswith('/'):
        return topic
    ns = '/' + namespace.strip('/') if namespace.strip('/') else ''
    return f'{ns}/{topic}'


def _storage_of(path: Path) -> str:
    if path.is_file():
        storage = _SUFFIX.get(path.suffix)
        if storage is None:
            raise BagError(f'{path}: unknown storage format {path.suffix!r} (a rosbag2 '
                           f'directory, or a .mcap or .db3 file)')
        return storage
    meta = path / 'metadata.yaml'
    if not meta.is_file():
        raise BagError(f'{path}: not a rosbag2 directory (no metadata.yaml)')
    import yaml
    try:
        data = yaml.safe_load(meta.read_text())
        storage = data['rosbag2_bagfile_information']['storage_identifier']
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise BagError(f'{meta}: corrupt metadata ({type(exc).__name__}: {exc})') from None
    if storage not in STORAGES:
        raise BagError(f'{path}: unknown storage format {storage!r} (supported: '
                       f"{', '.join(STORAGES)})")
    return str(storage)


def _transient_local(ext: Any) -> bool:
    qos = getattr(ext, 'offered_qos_profiles', None)
    if not qos:
        return False
    if isinstance(qos, str):  # older rosbags: the YAML text of metadata.yaml
        return 'durability: 1' in qos or 'transient_local' in qos.lower()
    return any('TRANSIENT_LOCAL' in str(getattr(q, 'durability', '')).upper() for q in qos)


class BagReader:
    """An open, validated bag. Use as a context manager.

    Args:
        path: the bag directory (or one ``.mcap`` / ``.db3`` file).

    Raises:
        BagError: missing, unknown storage, truncated, corrupt or empty bag.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise BagError(f'bag not found: {self.path}')
        storage = _storage_of(self.path)
        try:
            self._reader = Reader(self.path)
            self._reader.open()
            conns = list(self._reader.connections)
            start, end, count = (int(self._reader.start_time), int(self._reader.end_time),
                                 int(self._reader.message_count))
        except Exception as exc:  # noqa: BLE001 - rosbags and sqlite/mcap raise many types
            raise BagError(f'{self.path}: cannot open the bag, truncated or corrupt '
                           f'({type(exc).__name__}: {exc})') from None
        topics: dict[str, TopicInfo] = {}
        self._conns: dict[str, list[Any]] = {}
        for c in conns:
            old = topics.get(c.topic)
            if old is not None and old.msgtype != c.msgtype:
                raise BagError(f'{self.path}: topic {c.topic} is recorded with two types '
                               f'({old.msgtype} and {c.msgtype})')
            topics[c.topic] = TopicInfo(
                c.topic, c.msgtype, (old.count if old else 0) + int(c.msgcount),
                (old.transient_local if old else False) or _transient_local(c.ext))
            self._conns.setdefault(c.topic, []).append(c)
        if count == 0 or not topics:
            self.close()
            raise BagError(f'{self.path}: the bag is empty (no messages; topics: '
                           f"{', '.join(sorted(topics)) or 'none'})")
        # rosbags reports end_time one ns past the last message
        self.info = BagInfo(self.path, storage, topics, start, max(start, end - 1), count)

    def __enter__(self) -> BagReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the files (safe to call twice)."""
        reader = getattr(self, '_reader', None)
        if reader is not None:
            with contextlib.suppress(Exception):  # closing a corrupt bag may fail too
                reader.close()
            self._reader = None

    def custom_data(self) -> dict[str, str]:
        """The bag's custom metadata (``custom_data`` of metadata.yaml; empty when none)."""
        meta = getattr(self._reader, 'metadata', None)
        return dict(getattr(meta, 'custom', None) or {})

    def require(self, needs: Mapping[str, Iterable[str]]) -> None:
        """Check that the bag has each topic with one of the allowed message types.

        Args:
            needs: absolute topic name -> accepted message types
                (e.g. ``{'/joint_states': ['sensor_msgs/msg/JointState']}``).

        Raises:
            BagError: listing every missing topic and every type mismatch, and what the bag
                has.
        """
        problems = []
        for topic, types in needs.items():
            types = tuple(types)
            have = self.info.topics.get(topic)
            if have is None:
                problems.append(f'topic {topic} ({" or ".join(types)}) is missing')
            elif have.msgtype not in types:
                problems.append(f'topic {topic} has type {have.msgtype}, expected '
                                f'{" or ".join(types)}')
            elif have.count == 0:
                problems.append(f'topic {topic} has no messages')
        if problems:
            raise BagError(f"{self.path}: {'; '.join(problems)}. The bag has: "
                           f'{self.info.describe_topics()}')

    def messages(self, topics: Iterable[str] | None = None, start_ns: int | None = None,
                 stop_ns: int | None = None) -> Iterator[tuple[str, str, int, bytes]]:
        """Yield ``(topic, msgtype, receive time ns, CDR payload)`` in receive-time order.

        Args:
            topics: absolute names to read (default: all).
            start_ns, stop_ns: receive-time window [start, stop).

        Raises:
            BagError: the bag is closed, or a truncated or corrupt part is met while reading.
        """
        if self._reader is None:
            raise BagError(f'{self.path}: the bag is closed')
        wanted = set(self.info.topics) if topics is None else set(topics)
        conns = [c for t in sorted(wanted) for c in self._conns.get(t, [])]
        if not conns:
            return
        n = 0
        try:
            for conn, t, raw in self._reader.messages(conns, start=start_ns, stop=stop_ns):
                n += 1
                yield conn.topic, conn.msgtype, int(t), raw
        except BagError:
            raise
        except GeneratorExit:
            raise
        except Exception as exc:  # noqa: BLE001 - rosbags and sqlite/mcap raise many types
            raise BagError(f'{self.path}: truncated or corrupt after {n} messages '
                           f'({type(exc).__name__}: {exc})') from None
