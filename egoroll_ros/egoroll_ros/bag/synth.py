"""Small synthetic episodes written as rosbag2 (mcap or sqlite3), for tests and benchmarks.

Messages are rclpy messages serialized with ``rclpy.serialization`` (as ``ros2 bag record``
and :class:`~egoroll_ros.ros.bagio.BagRecorder` store them) and written with ``rosbags``.
Topic names are absolute, as recorders store them. Receive time equals the header stamp.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.serialization import serialize_message
from rosbags.rosbag2 import StoragePlugin, Writer

from egoroll_ros.errors import BagError
from egoroll_ros.ros.bagio import typestore
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME

_PLUGINS = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
#: Default receive time of the first message (2024-01-01, ns), so stamps look like wall time.
T0_NS = 1_704_067_200_000_000_000


def write_messages(path: str | Path, messages: Iterable[tuple[str, str, int, Any]],
                   storage: str = 'mcap', qos: dict[str, Any] | None = None) -> Path:
    """Write ``(topic, msgtype, receive time ns, rclpy message or bytes)`` to a new bag.

    Args:
        qos: topic -> ``offered_qos_profiles`` (rosbags ``Qos`` list) stored for it.

    Raises:
        BagError: unknown storage or an existing path.
    """
    path = Path(path)
    if storage not in _PLUGINS:
        raise BagError(f'unknown storage {storage!r} (mcap or sqlite3)')
    if path.exists():
        raise BagError(f'{path} already exists')
    store = typestore()
    writer = Writer(path, version=9, storage_plugin=_PLUGINS[storage])
    writer.open()
    conns: dict[str, Any] = {}
    try:
        for topic, msgtype, t_ns, msg in messages:
            if topic not in conns:
                kwargs = {}
                if qos and topic in qos:
                    kwargs['offered_qos_profiles'] = qos[topic]
                conns[topic] = writer.add_connection(topic, msgtype, typestore=store,
                                                     serialization_format='cdr', **kwargs)
            raw = msg if isinstance(msg, (bytes, bytearray, memoryview)) else \
                serialize_message(msg)
            writer.write(conns[topic], int(t_ns), bytes(raw))
    finally:
        writer.close()
    return path


@dataclass(frozen=True)
class Episode:
    """What :func:`write_episode` wrote (for hand-checked expectations).

    Attributes:
        path: the bag.
        joints: joint names of ``joint_states``.
        js_times: (N,) receive times of the joint_states messages (s).
        positions: (N, J) recorded positions.
        velocity: (J,) the constant joint velocity of the episode (rad/s, m/s).
        image_times: receive times of the frames of each camera (s; all cameras share them).
        joy_times: receive times of the quest/joy messages (s).
        start: time of the first message (s).
    """

    path: Path
    joints: tuple[str, ...]
    js_times: np.ndarray
    positions: np.ndarray
    velocity: np.ndarray
    image_times: np.ndarray
    joy_times: np.ndarray
    start: float


def _image(height: int, width: int, k: int, encoding: str) -> Any:
    from sensor_msgs.msg import Image
    ch = {'rgb8': 3, 'bgr8': 3, 'mono8': 1}[encoding]
    y, x = np.mgrid[0:height, 0:width]
    base = ((x * 7 + y * 3 + 11 * k) % 256).astype(np.uint8)
    arr = np.stack([base, base[::-1], (base // 2 + 64).astype(np.uint8)][:ch], axis=-1)
    msg = Image(height=height, width=width, encoding=encoding, step=width * ch)
    msg.data = arr.tobytes()
    return msg


def episode_messages(duration: float = 1.0, *, joints: Sequence[str] = DEMO_JOINTS,
                     start: Sequence[float] = HOME, velocity: Sequence[float] | None = None,
                     joint_rate: float = 100.0,
                     camera: str | Sequence[str] | None = 'scene',
                     camera_rate: float = 10.0, image_size: tuple[int, int] = (24, 32),
                     encoding: str = 'rgb8', joy_rate: float = 0.0,
                     robot_description: str | None = None,
                     t0_ns: int = T0_NS) -> tuple[list[tuple[str, str, int, Any]], Episode]:
    """Messages of a synthetic episode (in receive-time order) and its description.

    The joints move at constant ``velocity`` from ``start``; each camera (``camera``: one
    name or several) publishes a moving pattern at ``camera_rate``; quest/joy (when
    ``joy_rate`` > 0) holds the deadman (axis 3 = 1.0).
    """
    from sensor_msgs.msg import JointState, Joy
    from std_msgs.msg import String

    from egoroll_ros.ros.convert import sec_to_time

    joints = tuple(joints)
    q0 = np.asarray(start, dtype=float)
    vel = np.asarray(velocity if velocity is not None else
                     [0.1] * (len(joints) - 1) + [0.0], dtype=float)
    out: list[tuple[int, int, str, str, Any]] = []
    if robot_description is not None:
        out.append((t0_ns, 0, '/robot_description', 'std_msgs/msg/String',
                    String(data=robot_description)))

    def times(rate: float) -> list[int]:
        if rate <= 0:
            return []
        n = int(np.floor(duration * rate + 1e-9)) + 1
        return [t0_ns + int(round(i * 1e9 / rate)) for i in range(n)]

    js_t, js_q = [], []
    for t in times(joint_rate):
        s = (t - t0_ns) * 1e-9
        q = q0 + vel * s
        msg = JointState(name=list(joints), position=q.tolist(), velocity=vel.tolist())
        msg.header.stamp = sec_to_time(t * 1e-9)
        out.append((t, 1, '/joint_states', 'sensor_msgs/msg/JointState', msg))
        js_t.append(t * 1e-9)
        js_q.append(q)
    img_t = []
    cams = [] if not camera else [camera] if isinstance(camera, str) else list(camera)
    for c, name in enumerate(cams):
        for k, t in enumerate(times(camera_rate)):
            msg = _image(image_size[0], image_size[1], k + 1000 * c, encoding)
            msg.header.stamp = sec_to_time(t * 1e-9)
            out.append((t, 2 + c, f'/camera/{name}/image_raw', 'sensor_msgs/msg/Image', msg))
            if c == 0:
                img_t.append(t * 1e-9)
    joy_t = []
    for t in times(joy_rate):
        msg = Joy(axes=[0.0, 0.0, 0.0, 1.0, 0.0, 0.0], buttons=[0, 0, 0, 0])
        msg.header.stamp = sec_to_time(t * 1e-9)
        out.append((t, 2 + max(1, len(cams)), '/quest/joy', 'sensor_msgs/msg/Joy', msg))
        joy_t.append(t * 1e-9)
    out.sort(key=lambda m: (m[0], m[1]))
    ep = Episode(Path(), joints, np.array(js_t), np.array(js_q).reshape(len(js_t), len(joints)),
                 vel, np.array(img_t), np.array(joy_t), t0_ns * 1e-9)
    return [(topic, mtype, t, msg) for t, _, topic, mtype, msg in out], ep


def write_episode(path: str | Path, storage: str = 'mcap', **kwargs: Any) -> Episode:
    """Write a synthetic episode (see :func:`episode_messages` for the keyword arguments)."""
    messages, ep = episode_messages(**kwargs)
    qos = {'/robot_description': _latched()} if kwargs.get('robot_description') else None
    write_messages(path, messages, storage, qos=qos)
    return Episode(Path(path), ep.joints, ep.js_times, ep.positions, ep.velocity,
                   ep.image_times, ep.joy_times, ep.start)


def _latched() -> Any:
    """One reliable, transient-local offered QoS profile (as robot_state_publisher offers)."""
    from egoroll_ros.ros.bagio import latched_qos_profiles
    return latched_qos_profiles()


def recorded_episode_messages(
        duration: float = 1.5, *, joints: Sequence[str] = ('j1', 'j2', 'j3'),
        bag_joints: Sequence[str] | None = None, cameras: Sequence[str] = ('front', 'wrist'),
        image_size: tuple[int, int] = (24, 32), fps: float = 30.0,
        camera_offsets: Sequence[float] = (0.0, 0.004), joint_rate: float = 100.0,
        command_rate: float = 100.0, command_start: float = 0.2,
        intervention: Sequence[tuple[float, bool]] | None = ((0.0, False), (0.5, True),
                                                             (1.0, False)),
        outcome: str | None = 'success', drop_frames: Sequence[int] = (),
        t0_ns: int = T0_NS) -> list[tuple[str, str, int, Any]]:
    """Messages of an episode as ``episode_recorder`` writes one (``/egoroll/episode`` with a
    policy_node configuration naming ``joints`` and ``cameras``; receive time = header stamp).

    ``joint_states`` carries ``bag_joints`` (default: ``joints`` reversed plus an extra joint,
    so an exporter must pick by name); positions are ``q_j(t) = j + t`` (and the commanded
    ``-(j + t)``), so every frame's expected values are known in closed form. Each camera
    ``c`` publishes at ``fps`` with stamps offset by ``camera_offsets[c]``; pixel values
    encode camera and frame index. ``drop_frames`` leaves frames of the first camera out.
    ``intervention``: ``(time, value)`` of each policy/intervention (std_msgs/Bool) message
    (None: no such topic). ``outcome``: the ``/egoroll/outcome`` mark (None: not marked).
    """
    import json

    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import Bool, String
    import yaml

    from egoroll_ros.ros.convert import sec_to_time

    bag_joints = tuple(bag_joints) if bag_joints is not None else \
        tuple(reversed(tuple(joints))) + ('extra',)
    h, w = image_size
    config = {'/**/policy_node': {'ros__parameters': {
        'joints': list(joints), 'cameras.names': list(cameras),
        'cameras.heights': [h] * len(cameras), 'cameras.widths': [w] * len(cameras)}}}
    out: list[tuple[int, int, str, str, Any]] = []
    head = {'index': 1, 'policy_id': 'synthetic', 'configs': {
        'policy_node.yaml': yaml.safe_dump(config)}, 'topics': []}
    out.append((t0_ns, 0, '/egoroll/episode', 'std_msgs/msg/String',
                String(data=json.dumps(head))))

    def at(t: float) -> int:
        return t0_ns + int(round(t * 1e9))

    def state(topic: str, rate: float, start: float, sign: float, prio: int) -> None:
        for k in range(int(np.floor((duration - start) * rate + 1e-9)) + 1):
            t = start + k / rate
            q = [sign * (index_of(j) + t) for j in bag_joints]
            msg = JointState(name=list(bag_joints), position=q)
            msg.header.stamp = sec_to_time(at(t) * 1e-9)
            out.append((at(t), prio, topic, 'sensor_msgs/msg/JointState', msg))

    def index_of(j: str) -> float:
        return float(list(joints).index(j) + 1) if j in joints else 100.0

    state('/joint_states', joint_rate, 0.0, 1.0, 1)
    state('/executor/commanded', command_rate, command_start, -1.0, 2)
    for c, name in enumerate(cameras):
        for k in range(int(np.floor(duration * fps + 1e-9)) + 1):
            if c == 0 and k in drop_frames:
                continue
            t = k / fps + camera_offsets[c]
            img = np.empty((h, w, 3), dtype=np.uint8)
            img[..., 0] = k % 256
            img[..., 1] = c * 50
            img[..., 2] = (np.arange(w, dtype=np.uint8) * 5)[None, :]
            msg = Image(height=h, width=w, encoding='rgb8', step=w * 3, data=img.tobytes())
            msg.header.stamp = sec_to_time(at(t) * 1e-9)
            out.append((at(t), 3 + c, f'/camera/{name}/image_raw', 'sensor_msgs/msg/Image', msg))
    for t, value in intervention or ():
        out.append((at(t), 9, '/policy/intervention', 'std_msgs/msg/Bool', Bool(data=value)))
    if outcome is not None:
        out.append((at(duration), 10, '/egoroll/outcome', 'std_msgs/msg/String',
                    String(data=json.dumps({'index': 1, 'outcome': outcome, 'by': 'service'}))))
    out.sort(key=lambda m: (m[0], m[1]))
    return [(topic, mtype, t, msg) for t, _, topic, mtype, msg in out]
