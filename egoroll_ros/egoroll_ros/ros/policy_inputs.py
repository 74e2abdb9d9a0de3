"""policy_node's inputs: the camera frames, ``joint_states``, ``quest/joy`` and the Quest
controller poses, subscribed and put in its :class:`~egoroll_ros.core.observation.LatestInputs`
store with their steady receipt time and the node's ROS clock at receipt (the clock their
header stamps are compared with); with real-time chunking, ``executor/state`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
import time

from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, JointState, Joy

from egoroll_interfaces.msg import ExecutorState
from egoroll_ros.core.observation import (
    JOINT_STATES,
    QUEST_JOY,
    QUEST_LEFT,
    QUEST_RIGHT,
    CameraConfig,
    LatestInputs,
    camera_input,
    put_camera,
)
from egoroll_ros.core.rtc import RunningChunk
from egoroll_ros.errors import TrajectoryError
from egoroll_ros.ros.convert import joint_state_from_msg, joy_from_msg, pose_from_msg, time_to_sec


def input_names(cameras: Iterable[CameraConfig]) -> list[str]:
    """The names of the store's inputs, in the order policy/status reports them."""
    return [JOINT_STATES] + [camera_input(c.name) for c in cameras] + \
        [QUEST_JOY, QUEST_LEFT, QUEST_RIGHT]


class PolicyInputs:
    """Subscribes every input of ``inputs`` on ``node`` (sensor-data QoS).

    Args:
        node: the policy node.
        inputs: its input store (made with :func:`input_names`).
        cameras: the configured cameras (``camera/<name>/image_raw``, or
            ``.../image_raw/compressed`` for a compressed one).
        on_joy: also called with each quest/joy message and its steady receipt time, after
            it is stored (the node's buttons).
        rtc: real-time chunking (``policy.rtc``): ``executor/state`` goes to it; None: not
            subscribed.
    """

    def __init__(self, node: Node, inputs: LatestInputs, cameras: Iterable[CameraConfig],
                 on_joy: Callable[[Joy, float], None], rtc: RunningChunk | None = None) -> None:
        self._node, self._inputs, self._on_joy, self._rtc = node, inputs, on_joy, rtc
        for cam in cameras:
            mtype, topic = (CompressedImage, f'camera/{cam.name}/image_raw/compressed') \
                if cam.compressed else (Image, f'camera/{cam.name}/image_raw')
            node.create_subscription(mtype, topic, self._camera_cb(camera_input(cam.name)),
                                     qos_profile_sensor_data)
        node.create_subscription(JointState, 'joint_states', self._joint_states,
                                 qos_profile_sensor_data)
        node.create_subscription(Joy, 'quest/joy', self._joy, qos_profile_sensor_data)
        for name in (QUEST_LEFT, QUEST_RIGHT):
            node.create_subscription(PoseStamped, name, self._pose_cb(name),
                                     qos_profile_sensor_data)
        if rtc is not None:
            node.create_subscription(ExecutorState, 'executor/state', self._executor_state, 10)

    def _clock(self) -> float:
        """The node's ROS clock (s)."""
        return self._node.get_clock().now().nanoseconds * 1e-9

    def _camera_cb(self, name: str) -> Callable[[Image | CompressedImage], None]:
        def cb(msg: Image | CompressedImage) -> None:
            put_camera(self._inputs, name, msg, time_to_sec(msg.header.stamp),
                       time.monotonic(), self._clock())
        return cb

    def _joint_states(self, msg: JointState) -> None:
        now = time.monotonic()
        try:
            js = joint_state_from_msg(msg, now)
        except TrajectoryError as exc:
            self._node.get_logger().warning(f'joint_states ignored: {exc}', once=True)
            return
        self._inputs.put(JOINT_STATES, js, js.stamp, now, clock=self._clock())

    def _pose_cb(self, name: str) -> Callable[[PoseStamped], None]:
        def cb(msg: PoseStamped) -> None:
            self._inputs.put(name, pose_from_msg(msg), time_to_sec(msg.header.stamp),
                             time.monotonic(), clock=self._clock())
        return cb

    def _executor_state(self, msg: ExecutorState) -> None:
        self._rtc.executor(time.monotonic(), msg.active_sequence, msg.state)

    def _joy(self, msg: Joy) -> None:
        now = time.monotonic()
        self._inputs.put(QUEST_JOY, joy_from_msg(msg), time_to_sec(msg.header.stamp), now,
                         clock=self._clock())
        self._on_joy(msg, now)
