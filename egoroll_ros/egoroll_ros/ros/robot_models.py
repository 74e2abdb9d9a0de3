"""The robot model for a node: a URDF file (plain path or ``package://``) or robot_description.

One place for where a robot model comes from, so the gate, the policy node, its markers and
``egoroll evaluate`` accept the same sources and fail with the same errors:
:func:`load_robot_model` (a file or a URDF text) and :class:`RobotModelProvider` (a node's
``urdf_path`` parameter at once, else the latched ``robot_description`` topic as it arrives).
"""

from __future__ import annotations

from collections.abc import Callable
import hashlib
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.errors import ConfigError, RobotModelError
from egoroll_ros.ros.paths import resolve_path

#: robot_state_publisher offers robot_description reliable and transient local (latched).
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
DESCRIPTION_TOPIC = 'robot_description'


def load_robot_model(urdf_path: str | Path = '', urdf_text: str | None = None,
                     source: str = DESCRIPTION_TOPIC) -> RobotModel:
    """The robot model from ``urdf_path`` (a file or ``package://pkg/...``), else the text.

    Args:
        urdf_path: URDF file; empty: use ``urdf_text``.
        urdf_text: URDF XML (the ``robot_description`` topic, a bag's copy of it).
        source: where ``urdf_text`` came from, for error messages.

    Raises:
        RobotModelError: no source, an unknown package, an unreadable file or a malformed
            URDF (the message names the file or ``source``).
    """
    if urdf_path:
        try:
            path = resolve_path(str(urdf_path))
        except ConfigError as exc:
            raise RobotModelError(str(exc)) from None
        return RobotModel.from_file(path)
    if urdf_text is None:
        raise RobotModelError(f'no robot model: no URDF file and no {source}')
    return RobotModel(urdf_text, source=source)


class RobotModelProvider:
    """Gets a node's robot model, once: from ``urdf_path`` now, else the first valid
    ``robot_description``.

    With a path the model is loaded in the constructor; otherwise a latched subscription
    loads descriptions until one is valid. From then on the model is FIXED: a different
    description (a second robot_state_publisher, a test tool, a replayed bag's latched copy)
    is refused, never applied, and reported to ``on_refused`` (issue 24.1: any publisher
    could otherwise widen the joint limits of the gate and the executor at run time).
    ``on_model(model)`` receives the loaded model and ``on_error(message)`` a failure (file,
    package or URDF problems) while there is no model yet.

    Args:
        node: the owning node (the subscription is created on it).
        urdf_path: the node's ``urdf_path`` parameter ('' for the topic).
        on_model: called with the loaded model (may raise ``RobotModelError`` or
            ``ConfigError`` to refuse it: that goes to ``on_error`` too).
        on_error: called with the reason a model could not be used.
        callback_group: for the subscription.
        on_refused: called with the reason a later, different description was refused
            (default: ``on_error`` is NOT called: the fixed model stays in use).

    Attributes:
        model_hash: SHA-256 (hex) of the fixed model's URDF text ('' before there is one).
        refused: how many different descriptions were refused since.
        last_refusal: the reason of the last one.
    """

    def __init__(self, node: Node, urdf_path: str, on_model: Callable[[RobotModel], None],
                 on_error: Callable[[str], None], callback_group: object = None,
                 on_refused: Callable[[str], None] | None = None) -> None:
        self._on_model, self._on_error = on_model, on_error
        self._on_refused = on_refused or (lambda _msg: None)
        self._text: str | None = None
        self.model_hash = ''
        self.refused = 0
        self.last_refusal = ''
        self.source = urdf_path or DESCRIPTION_TOPIC
        if urdf_path:
            self._load(urdf_path, None)
        else:
            node.create_subscription(String, DESCRIPTION_TOPIC, self._on_description, LATCHED,
                                     callback_group=callback_group)

    def _on_description(self, msg: String) -> None:
        if msg.data == self._text:
            return
        digest = hashlib.sha256(msg.data.encode()).hexdigest()
        if self.model_hash:
            if digest == self.model_hash:
                return
            self.refused += 1
            self.last_refusal = (
                f'a different robot_description (sha256 {digest[:12]}) arrived after the model '
                f'was fixed (sha256 {self.model_hash[:12]}): refused, the model is unchanged '
                '(restart the node to take another robot model)')
            self._on_refused(self.last_refusal)
            return
        self._text = msg.data
        self._load('', msg.data, digest)

    def _load(self, path: str, text: str | None, digest: str = '') -> None:
        try:
            model = load_robot_model(path, text)
            if path:
                digest = hashlib.sha256(Path(resolve_path(path)).read_bytes()).hexdigest()
            self.model_hash = digest        # (before the node sees the model)
            self._on_model(model)
        except (RobotModelError, ConfigError, OSError) as exc:
            self.model_hash = ''
            self._on_error(str(exc))
