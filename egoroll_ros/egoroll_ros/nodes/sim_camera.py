"""sim_camera: a simulated scene camera that draws the robot and the task target.

Subscribes ``joint_states`` (sensor QoS) and ``sim/target`` (geometry_msgs/PointStamped, in the
URDF's root frame); publishes ``camera/<camera_name>/image_raw`` (sensor_msgs/Image, rgb8) at
up to ``rate`` Hz and ``sim/target_marker`` (visualization_msgs/Marker) for RViz.

Each image is stamped with the header stamp of the joint state it was rendered from (not the
render time), so the policy's observation time is the time the state was measured. A frame is
published only for a joint state newer than the last one rendered and younger than
``max_state_age`` seconds (steady clock): without fresh joint states the camera goes silent, and
the policy node sees a stale camera instead of a frozen scene with a fresh stamp.
"""

from __future__ import annotations

import math
import threading
import time

from geometry_msgs.msg import PointStamped
import numpy as np
from rclpy.node import Node
import rclpy.qos
from sensor_msgs.msg import Image, JointState
from visualization_msgs.msg import Marker

from egoroll_ros.errors import ConfigError, InputError, RobotModelError, TrajectoryError
from egoroll_ros.ros.convert import joint_state_from_msg
from egoroll_ros.ros.params import Param, declare_params, watch_live
from egoroll_ros.ros.robot_models import load_robot_model
from egoroll_ros.ros.runner import run_node
from egoroll_ros.sim.demo_task import demo_urdf_path
from egoroll_ros.sim.render import Intrinsics, SceneRenderer


def _target_problem(value: list[float]) -> str | None:
    if len(value) != 3:
        return f'needs 3 values [x, y, z] in metres, got {len(value)}'
    return None


PARAMS = (
    Param('camera_name', str, 'scene', 'camera name: images go to camera/<camera_name>/image_raw',
          read_only=True, validate=lambda v: None if v and '/' not in v and ' ' not in v
          else 'must be a non-empty name without "/" or spaces'),
    Param('rate', float, 15.0, 'maximum image rate (Hz)', min=0.5, max=120.0, read_only=True),
    Param('width', int, 224, 'image width (pixels)', min=16, max=4096, read_only=True),
    Param('height', int, 224, 'image height (pixels)', min=16, max=4096, read_only=True),
    Param('fov_deg', float, 50.0, 'horizontal field of view (degrees)', min=5.0, max=170.0,
          read_only=True),
    Param('urdf_path', str, '', "robot description file; '' = the installed demo_arm.urdf",
          read_only=True),
    Param('camera_frame', str, 'camera_optical_frame',
          'optical frame (z forward, x right, y down) of the URDF the camera sits at; also the '
          "images' frame_id", read_only=True),
    Param('target', 'float[]', [0.4, 0.0, 0.25],
          'task target [x, y, z] (m) in the URDF root frame; settable at run time and by the '
          'sim/target topic', validate=_target_problem),
    Param('target_radius', float, 0.03, 'radius of the drawn target disc (m)', min=0.005,
          max=0.2, read_only=True),
    Param('noise', float, 1.0,
          'sensor noise: standard deviation (intensity levels) of Gaussian noise added to '
          'every pixel, as a real sensor has; 0: none, and the frames of an arm at rest are '
          'identical, which policy_node takes for a frozen camera', min=0.0, max=50.0,
          read_only=True),
    Param('max_state_age', float, 0.5,
          'joint states older than this (s, steady clock since receipt) are not rendered; '
          'settable at run time', min=0.01, max=10.0),
)


class SimCamera(Node):
    """Renders the robot (from ``joint_states``) and the task target into camera images."""

    def __init__(self, node_name: str = 'sim_camera', **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        p = declare_params(self, PARAMS)
        try:
            model = load_robot_model(p['urdf_path'] or demo_urdf_path())
        except RobotModelError as exc:
            raise ConfigError(f"parameter 'urdf_path': {exc}") from None
        intrinsics = Intrinsics.from_fov(p['width'], p['height'], p['fov_deg'])
        try:
            self._renderer = SceneRenderer(model, intrinsics, camera_frame=p['camera_frame'],
                                           target_radius=p['target_radius'])
        except ConfigError as exc:
            raise ConfigError(f"parameter 'camera_frame': {exc}") from None
        self._root_frame = model.base_frame
        self._frame_id = p['camera_frame']
        self._max_age = p['max_state_age']
        self._noise = p['noise']
        self._rng = np.random.default_rng()
        self._lock = threading.Lock()
        self._target = [float(v) for v in p['target']]
        self._target_radius = p['target_radius']
        self._state: tuple[list[float], object, float] | None = None  # positions, stamp, rx
        self._rendered_rx = -math.inf
        topic = f"camera/{p['camera_name']}/image_raw"
        self._image_pub = self.create_publisher(Image, topic, 10)
        self._marker_pub = self.create_publisher(Marker, 'sim/target_marker', 10)
        self.create_subscription(JointState, 'joint_states', self._on_joint_state,
                                 rclpy.qos.qos_profile_sensor_data)
        self.create_subscription(PointStamped, 'sim/target', self._on_target, 10)
        watch_live(self, PARAMS, p, self._apply_live)
        self.create_timer(1.0 / p['rate'], self._tick)
        self.get_logger().info(
            f'rendering {model.name} from {self._frame_id} ({p["width"]}x{p["height"]}) to '
            f'{self._image_pub.topic_name} at up to {p["rate"]:g} Hz; target {self._target}')

    def _on_joint_state(self, msg: JointState) -> None:
        received = time.monotonic()
        try:   # names and positions of one size, every rendered joint, finite
            selected, _ = joint_state_from_msg(msg, received).select(self._renderer.joint_names)
        except TrajectoryError as exc:
            self.get_logger().warning(f'{exc}: not rendered', once=True)
            return
        except InputError as exc:
            self.get_logger().warning(f'{exc}: not rendered', once=True)
            return
        positions = [float(v) for v in selected]
        with self._lock:
            self._state = (positions, msg.header.stamp, received)

    def _set_target(self, target: list[float]) -> None:
        with self._lock:
            self._target = [float(v) for v in target]
        self.get_logger().info(f'target set to {self._target}')

    def _on_target(self, msg: PointStamped) -> None:
        frame = msg.header.frame_id
        if frame not in ('', self._root_frame):
            self.get_logger().warning(f"sim/target in frame '{frame}' ignored: only "
                            f"'{self._root_frame}' (the URDF root) is supported", once=True)
            return
        target = [msg.point.x, msg.point.y, msg.point.z]
        if not all(math.isfinite(v) for v in target):
            self.get_logger().warning('sim/target is not finite: ignored')
            return
        self._set_target(target)

    def _apply_live(self, changes: dict) -> None:
        if 'max_state_age' in changes:
            with self._lock:
                self._max_age = changes['max_state_age']
        if 'target' in changes:
            self._set_target(changes['target'])

    def _tick(self) -> None:
        with self._lock:
            state, target = self._state, list(self._target)
        self._publish_marker(target)
        if state is None:
            return
        positions, stamp, received = state
        if received <= self._rendered_rx:
            return  # nothing new to show
        if time.monotonic() - received > self._max_age:
            self.get_logger().warning(
                'joint_states are stale: no images until fresh ones come', once=True)
            return
        self._rendered_rx = received
        pixels = self._renderer.render(positions, target)
        if self._noise > 0:
            noisy = pixels.astype(np.float32) + self._rng.normal(
                0.0, self._noise, pixels.shape).astype(np.float32)
            pixels = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
        msg = Image()
        msg.header.stamp = stamp
        msg.header.frame_id = self._frame_id
        msg.height, msg.width = int(pixels.shape[0]), int(pixels.shape[1])
        msg.encoding = 'rgb8'
        msg.is_bigendian = 0
        msg.step = msg.width * 3
        msg.data = pixels.tobytes()
        self._image_pub.publish(msg)

    def _publish_marker(self, target: list[float]) -> None:
        marker = Marker()
        marker.header.frame_id = self._root_frame
        marker.header.stamp = self.get_clock().now().to_msg()
        marker.ns = 'sim_target'
        marker.id = 0
        marker.type = Marker.SPHERE
        marker.action = Marker.ADD
        marker.pose.position.x, marker.pose.position.y, marker.pose.position.z = target
        marker.pose.orientation.w = 1.0
        d = 2.0 * self._target_radius
        marker.scale.x = marker.scale.y = marker.scale.z = d
        marker.color.r, marker.color.g, marker.color.b, marker.color.a = 0.9, 0.08, 0.08, 1.0
        self._marker_pub.publish(marker)


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``sim_camera`` console script."""
    return run_node(SimCamera, args=args, num_threads=1)


if __name__ == '__main__':
    import sys

    sys.exit(main())
