"""Rosbag2 files through ``rosbags``: a typestore that knows egoroll's interfaces, and a recorder.

The recorder subscribes with ``raw=True`` and writes the serialized CDR payloads as received
(no decode and re-encode), from a writer thread so subscription callbacks never block on disk.
"""

from __future__ import annotations

from collections.abc import Iterable
import importlib
from pathlib import Path
import queue
import threading
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from egoroll_ros.errors import BagError

INTERFACE_PACKAGES = ('egoroll_interfaces',)


def message_class(msgtype: str) -> type:
    """The rclpy message class of a type name like ``sensor_msgs/msg/JointState``.

    Raises:
        BagError: when the type is not importable here.
    """
    try:
        pkg, kind, name = msgtype.split('/')
        return getattr(importlib.import_module(f'{pkg}.{kind}'), name)
    except (ValueError, ImportError, AttributeError):
        raise BagError(f'message type {msgtype!r} is not available in this environment') \
            from None


def typestore() -> Any:
    """A rosbags typestore for ROS 2 Kilted plus every installed egoroll interface."""
    from ament_index_python.packages import get_package_share_directory

    store = get_typestore(Stores.ROS2_KILTED)
    add: dict[str, Any] = {}
    for pkg in INTERFACE_PACKAGES:
        share = Path(get_package_share_directory(pkg))
        for kind in ('msg',):
            for f in sorted((share / kind).glob('*.msg')):
                add.update(get_types_from_msg(f.read_text(), f'{pkg}/{kind}/{f.stem}'))
    store.register(add)
    return store


def latched_qos_profiles() -> list[Any]:
    """rosbags' offered-QoS record of a reliable, transient-local (latched) publisher, as
    robot_state_publisher offers ``robot_description``; replay republishes such topics latched."""
    from rosbags.interfaces import (
        Qos,
        QosDurability,
        QosHistory,
        QosLiveliness,
        QosReliability,
        QosTime,
    )
    inf = QosTime(2147483647, 4294967295)
    return [Qos(QosHistory.KEEP_LAST, 1, QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL,
                inf, inf, QosLiveliness.AUTOMATIC, inf, False)]


class BagRecorder:
    """Records topics of a live graph into a rosbag2 (mcap by default).

    Args:
        node: the node that owns the raw subscriptions.
        path: the bag directory to create (must not exist).
        topics: ``(topic, msgtype)`` pairs, e.g.
            ``('joint_states', 'sensor_msgs/msg/JointState')``, or ``(topic, msgtype,
            'latched')`` for a transient-local topic such as ``robot_description`` (subscribed
            transient local, and stored as latched so replay offers it latched again).
        storage: ``'mcap'`` or ``'sqlite3'``.
    """

    def __init__(self, node: Node, path: str | Path, topics: Iterable[tuple[str, str]],
                 storage: str = 'mcap', qos: QoSProfile | int = 50) -> None:
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f'{self.path} already exists; choose a new bag path')
        plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}.get(storage)
        if plugin is None:
            raise BagError(f'unknown storage {storage!r} (mcap or sqlite3)')
        self._node = node
        self._store = typestore()
        self._plugin = plugin
        self._topics = [(t[0], t[1], len(t) > 2 and t[2] == 'latched') for t in topics]
        self._queue: queue.Queue = queue.Queue()
        self.counts: dict[str, int] = {}
        self._subs = []
        # The sqlite3 storage may only be used from the thread that opened it, so the writer
        # thread opens the bag and adds the connections, and the constructor waits for it.
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._conns: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._drain, name='bag-writer', daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise BagError(f'cannot create bag {self.path}: {self._error}') from self._error
        latched_qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE)
        for topic, msgtype, latched in self._topics:
            self.counts[topic] = 0
            self._subs.append(node.create_subscription(
                message_class(msgtype), topic, self._callback(topic, self._conns[topic]),
                latched_qos if latched else qos, raw=True))

    def _callback(self, topic: str, conn: Any):  # noqa: ANN202
        def on_raw(data: bytes) -> None:
            stamp = self._node.get_clock().now().nanoseconds
            self._queue.put((conn, stamp, bytes(data)))
            self.counts[topic] += 1
        return on_raw

    def _drain(self) -> None:
        try:
            writer = Writer(self.path, version=9, storage_plugin=self._plugin)
            writer.open()
            for topic, msgtype, latched in self._topics:
                extra = {'offered_qos_profiles': latched_qos_profiles()} if latched else {}
                self._conns[topic] = writer.add_connection(
                    self._node.resolve_topic_name(topic), msgtype, typestore=self._store,
                    **extra)
        except Exception as exc:  # noqa: BLE001 - reported by the constructor
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                conn, stamp, data = item
                writer.write(conn, stamp, data)
        finally:
            writer.close()

    def close(self) -> None:
        """Stop recording, flush every queued message and close the bag."""
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs.clear()
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
