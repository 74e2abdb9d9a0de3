"""A tiny scene renderer for the simulated camera: the arm from forward kinematics, a target.

Draws, with OpenCV on a plain background, what a fixed pinhole camera sees: a floor grid, the
robot's links as thick coloured lines between successive joint origins (from the URDF through
:class:`~egoroll_ros.core.robot_model.RobotModel`), the gripper fingers, and the task target as
a filled disc of :data:`TARGET_COLOR` (a colour nothing else uses). Primitives are drawn far to
near (painter's algorithm) so the arm hides the target when it is in front of it.

Pure: numpy + OpenCV, no rclpy. Images are RGB ``uint8`` arrays of shape (height, width, 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math

import cv2
import numpy as np

from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.errors import ConfigError

BACKGROUND = (215, 215, 210)
FLOOR_LINE = (170, 170, 165)
TARGET_COLOR = (230, 20, 20)
#: Link colours along each chain (cycled), none close to the target colour.
LINK_COLORS = ((40, 90, 200), (240, 140, 30), (240, 200, 40), (40, 170, 80),
               (30, 170, 170), (150, 80, 190), (90, 90, 90), (200, 110, 170))
FINGER_COLOR = (60, 60, 60)
FINGER_LENGTH = 0.06


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics in pixels (no distortion)."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @classmethod
    def from_fov(cls, width: int, height: int, fov_deg: float) -> Intrinsics:
        """Square pixels, principal point at the centre, horizontal field of view in degrees.

        Raises:
            ConfigError: a non-positive size or a field of view outside (0, 180).
        """
        if width < 1 or height < 1:
            raise ConfigError(f'image size {width}x{height} must be positive')
        if not 0.0 < fov_deg < 180.0:
            raise ConfigError(f'field of view {fov_deg} deg must be in (0, 180)')
        f = (width / 2.0) / math.tan(math.radians(fov_deg) / 2.0)
        return cls(width, height, f, f, (width - 1) / 2.0, (height - 1) / 2.0)


@dataclass(frozen=True)
class _Segment:
    a: np.ndarray
    b: np.ndarray
    radius: float
    color: tuple[int, int, int]


class SceneRenderer:
    """Renders the robot and a target as seen by a camera frame of the URDF.

    Args:
        model: the robot model.
        intrinsics: the camera's pinhole intrinsics.
        camera_frame: an optical frame (z forward, x right, y down) fixed in the URDF; its pose
            is the extrinsics unless ``camera_pose`` is given.
        camera_pose: optional ``(rotation (3, 3), translation (3,))`` of the optical frame in
            the model's root frame, overriding ``camera_frame``.
        target_radius: radius of the target disc (m).
        link_radius: drawn radius of the links (m).

    Raises:
        ConfigError: the camera frame is missing, or depends on a movable joint.
    """

    def __init__(self, model: RobotModel, intrinsics: Intrinsics,
                 camera_frame: str = 'camera_optical_frame',
                 camera_pose: tuple[np.ndarray, np.ndarray] | None = None,
                 target_radius: float = 0.025, link_radius: float = 0.03) -> None:
        self.model = model
        self.intrinsics = intrinsics
        self.target_radius = float(target_radius)
        self.link_radius = float(link_radius)
        self.joint_names: tuple[str, ...] = model.joint_names
        if camera_pose is None:
            if not model.has_frame(camera_frame):
                raise ConfigError(f"camera frame '{camera_frame}' is not in {model.source}")
            if model.chain(camera_frame):
                raise ConfigError(f"camera frame '{camera_frame}' moves with joints "
                                  f"{', '.join(model.chain(camera_frame))}; the scene camera "
                                  'must be fixed')
            trans, rots = model.fk([camera_frame], [], np.zeros((1, 0)))
            camera_pose = (rots[0, 0], trans[0, 0])
        rot, pos = camera_pose
        self.camera_rotation = np.asarray(rot, dtype=float)
        self.camera_position = np.asarray(pos, dtype=float)
        pin_model = model.pin_model
        # Joint origins plus the tool frames and the gripper fingers.
        self._tools = [f.name for f in pin_model.frames if f.name.endswith('tool0')]
        self._fingers = [f.name for f in pin_model.frames
                         if f.name.endswith('finger_link') and model.has_frame(f.name)]
        self._frames = list(self.joint_names) + self._tools + self._fingers
        self._plan = model.fk_plan(self._frames, self.joint_names)
        # Parent of each joint's origin: its parent joint, or the root (origin) for the first.
        self._parents: list[int] = []
        for name in self.joint_names:
            parent = pin_model.parents[pin_model.getJointId(name)]
            self._parents.append(self.joint_names.index(pin_model.names[parent])
                                 if parent > 0 else -1)
        self._tool_parent = [self.joint_names.index(pin_model.names[
            model.frame_parent_joint(t)]) for t in self._tools]
        # Colour by position along the chain, so both arms of a bimanual robot look alike.
        self._colors = [LINK_COLORS[(len(model.chain(name)) - 1) % len(LINK_COLORS)]
                        for name in self.joint_names]
        self._floor = self._floor_segments()

    def _floor_segments(self) -> list[tuple[np.ndarray, np.ndarray]]:
        lines = []
        for x in np.arange(-0.2, 1.01, 0.2):
            lines.append((np.array([x, -0.8, 0.0]), np.array([x, 0.8, 0.0])))
        for y in np.arange(-0.8, 0.81, 0.2):
            lines.append((np.array([-0.2, y, 0.0]), np.array([1.0, y, 0.0])))
        return lines

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Project root-frame points (N, 3) to pixels (N, 2) and depths (N,) along the axis."""
        p = (np.atleast_2d(points) - self.camera_position) @ self.camera_rotation
        depth = p[:, 2]
        k = self.intrinsics
        with np.errstate(divide='ignore', invalid='ignore'):
            u = k.fx * p[:, 0] / depth + k.cx
            v = k.fy * p[:, 1] / depth + k.cy
        return np.stack([u, v], axis=1), depth

    def _segments(self, positions: np.ndarray) -> list[_Segment]:
        trans, rots = self._plan.compute(positions[None, :])
        pts = trans[:, 0]
        n = len(self.joint_names)
        segs = []
        for i in range(n):
            if self._parents[i] >= 0:
                segs.append(_Segment(pts[self._parents[i]], pts[i], self.link_radius,
                                     self._colors[i]))
            else:  # a pedestal from the floor up to the first joint
                foot = np.array([pts[i][0], pts[i][1], 0.0])
                segs.append(_Segment(foot, pts[i], self.link_radius * 1.4, self._colors[i]))
        for k in range(len(self._tools)):
            segs.append(_Segment(pts[self._tool_parent[k]], pts[n + k], self.link_radius * 0.8,
                                 self._colors[self._tool_parent[k]]))
        for k in range(len(self._fingers)):
            idx = n + len(self._tools) + k
            tip = pts[idx] + rots[idx, 0] @ np.array([0.0, 0.0, FINGER_LENGTH])
            segs.append(_Segment(pts[idx], tip, 0.008, FINGER_COLOR))
        return segs

    def render(self, positions: Sequence[float],
               target: Sequence[float] | None = None) -> np.ndarray:
        """The image at joint ``positions`` (in :attr:`joint_names` order) with ``target``.

        Args:
            positions: one value per joint of the model, in :attr:`joint_names` order.
            target: the target point in the root frame, or None for no target.

        Returns:
            An RGB uint8 image, shape (height, width, 3).

        Raises:
            ValueError: wrong number of positions, or a non-finite position or target.
        """
        q = np.asarray(positions, dtype=float)
        if q.shape != (len(self.joint_names),):
            raise ValueError(f'expected {len(self.joint_names)} joint positions, got {q.shape}')
        if not np.all(np.isfinite(q)):
            raise ValueError('joint positions are not finite')
        k = self.intrinsics
        img = np.empty((k.height, k.width, 3), dtype=np.uint8)
        img[:] = BACKGROUND
        for a, b in self._floor:
            self._line(img, a, b, 1, FLOOR_LINE, scale_width=False)
        items: list[tuple[float, object]] = []
        for seg in self._segments(q):
            _, d = self.project(np.stack([seg.a, seg.b]))
            items.append((float(np.mean(d)), seg))
        if target is not None:
            t = np.asarray(target, dtype=float)
            if t.shape != (3,) or not np.all(np.isfinite(t)):
                raise ValueError(f'target must be 3 finite numbers, got {target!r}')
            _, d = self.project(t)
            items.append((float(d[0]), t))
        for _, item in sorted(items, key=lambda it: -it[0]):
            if isinstance(item, _Segment):
                self._line(img, item.a, item.b, item.radius, item.color)
            else:
                self._disc(img, item)
        return img

    def target_pixel(self, target: Sequence[float]) -> tuple[int, int] | None:
        """Pixel (u, v) of the target's centre, or None when it is behind or off the image."""
        uv, d = self.project(np.asarray(target, dtype=float))
        if d[0] <= 1e-3:
            return None
        u, v = (int(round(x)) for x in uv[0])
        if 0 <= u < self.intrinsics.width and 0 <= v < self.intrinsics.height:
            return u, v
        return None

    def _line(self, img: np.ndarray, a: np.ndarray, b: np.ndarray, radius: float,
              color: tuple[int, int, int], scale_width: bool = True) -> None:
        uv, d = self.project(np.stack([a, b]))
        if np.any(d <= 0.05) or not np.all(np.isfinite(uv)) or np.any(np.abs(uv) > 1e5):
            return
        if scale_width:
            width = max(1, int(round(2.0 * radius * self.intrinsics.fx / float(np.mean(d)))))
        else:
            width = int(radius)
        p0 = tuple(int(round(x)) for x in uv[0])
        p1 = tuple(int(round(x)) for x in uv[1])
        cv2.line(img, p0, p1, color, width, cv2.LINE_AA)

    def _disc(self, img: np.ndarray, point: np.ndarray) -> None:
        uv, d = self.project(point)
        if d[0] <= 0.05 or not np.all(np.isfinite(uv)) or np.any(np.abs(uv) > 1e5):
            return
        r = max(2, int(round(self.target_radius * self.intrinsics.fx / float(d[0]))))
        centre = tuple(int(round(x)) for x in uv[0])
        cv2.circle(img, centre, r, TARGET_COLOR, -1, cv2.LINE_8)
