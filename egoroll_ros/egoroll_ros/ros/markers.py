"""RViz markers of the policy side: the predicted end-effector path and a status text.

`ChunkMarkers` belongs to policy_node: it learns the robot model from ``robot_description``
(transient local) or a URDF file, listens to ``safety/verdict`` for the gate's state, and
publishes ``policy/markers`` (visualization_msgs/MarkerArray) for every published chunk: one
LINE_STRIP per end-effector frame (forward kinematics of every point, measured pose first) and
a TEXT_VIEW_FACING marker with the rollout and gate state. Without a robot model only the text
is published; markers never affect what the node publishes on ``policy/chunk``.
"""

from __future__ import annotations

from collections.abc import Sequence
import threading

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
import numpy as np
from rclpy.node import Node
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from egoroll_interfaces.msg import GateVerdict
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.errors import RobotModelError
from egoroll_ros.ros.robot_models import RobotModelProvider

#: Colours: predicted path (blue), gate accepted / needs confirmation / rejected / unknown.
PATH_COLOR = (0.2, 0.5, 1.0)
VERDICT_COLORS = {'accepted': (0.1, 0.9, 0.1), 'needs confirmation': (1.0, 0.8, 0.0),
                  'rejected': (1.0, 0.1, 0.1), 'no verdict': (0.8, 0.8, 0.8)}
NAMESPACE_PATH = 'predicted_ee_path'
NAMESPACE_TEXT = 'rollout_state'


def path_marker(ns: str, marker_id: int, frame_id: str, stamp: Time, points: np.ndarray,
                color: tuple[float, float, float], width: float, text: str = '') -> Marker:
    """A LINE_STRIP through ``points`` (K, 3) in ``frame_id``: an end-effector path.

    The one path marker of egoroll: the policy's predicted path (:class:`ChunkMarkers`) and the
    gate's checked path (``safety/markers``) both use it.
    """
    m = Marker(ns=ns, id=marker_id, type=Marker.LINE_STRIP, action=Marker.ADD, text=text)
    m.header.frame_id = frame_id
    m.header.stamp = stamp
    m.pose.orientation.w = 1.0
    m.scale.x = float(width)
    m.color = ColorRGBA(r=color[0], g=color[1], b=color[2], a=1.0)
    m.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in points]
    return m


def verdict_state(msg: GateVerdict | None) -> str:
    """The gate's state as one of :data:`VERDICT_COLORS`' keys."""
    if msg is None:
        return 'no verdict'
    if msg.accepted:
        return 'accepted'
    return 'needs confirmation' if msg.needs_confirmation else 'rejected'


class ChunkMarkers:
    """Publishes ``policy/markers`` for a node (see the module docstring).

    Args:
        node: the owning node (its subscriptions and publisher are created here).
        frames: end-effector frames to draw; empty draws only the text.
        urdf_path: URDF file (or ``package://``); empty: the ``robot_description`` topic.
    """

    def __init__(self, node: Node, frames: Sequence[str], urdf_path: str = '') -> None:
        self._node = node
        self._frames = list(frames)
        self._lock = threading.Lock()
        self._model: RobotModel | None = None
        self._verdict: GateVerdict | None = None
        self._pub = node.create_publisher(MarkerArray, 'policy/markers', 10)
        node.create_subscription(GateVerdict, 'safety/verdict', self._on_verdict, 10)
        if self._frames:
            self._models = RobotModelProvider(node, urdf_path, self._set_model, self._model_off)

    def _set_model(self, model: RobotModel) -> None:
        missing = [f for f in self._frames if not model.has_frame(f)]
        if missing:
            raise RobotModelError(f"policy markers: frame(s) {', '.join(missing)} not in "
                                  f'{model.source}')
        with self._lock:
            self._model = model

    def _model_off(self, error: str) -> None:
        with self._lock:
            self._model = None
        self._node.get_logger().warning(f'policy markers off: {error}')

    def _on_verdict(self, msg: GateVerdict) -> None:
        with self._lock:
            self._verdict = msg

    def publish(self, joint_names: Sequence[str], measured: np.ndarray | None,
                positions: np.ndarray | None, rollout_text: str) -> None:
        """Draw a chunk (``positions`` (H, J) in ``joint_names`` order; None: text only) and
        the status text."""
        with self._lock:
            model, verdict = self._model, self._verdict
        stamp = self._node.get_clock().now().to_msg()
        base = model.base_frame if model is not None else 'base_link'
        array = MarkerArray()
        if model is not None and positions is not None and self._frames:
            q = positions if measured is None else np.vstack([measured[None, :], positions])
            trans, _ = model.fk(self._frames, list(joint_names), np.asarray(q, dtype=float))
            array.markers += [path_marker(NAMESPACE_PATH, i, base, stamp, trans[i], PATH_COLOR,
                                          0.006, text=frame)
                              for i, frame in enumerate(self._frames)]
        state = verdict_state(verdict)
        color = VERDICT_COLORS[state]
        text = Marker(ns=NAMESPACE_TEXT, id=0, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        text.header.frame_id = base
        text.header.stamp = stamp
        text.pose.position.z = 1.0
        text.pose.orientation.w = 1.0
        text.scale.z = 0.05
        text.color = ColorRGBA(r=color[0], g=color[1], b=color[2], a=1.0)
        gate = state if verdict is None else f'{state} (chunk {verdict.sequence})'
        text.text = f'policy: {rollout_text}\ngate: {gate}'
        array.markers.append(text)
        self._pub.publish(array)
