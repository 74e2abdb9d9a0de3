"""joint_states for the safety nodes: each message with the id of the publisher that sent it,
vetted by :class:`~egoroll_ros.core.joint_state_vetting.JointStateVetter` (issue 24.5).

The publisher's id is the DDS writer GID rclpy hands a subscription callback that takes a
second argument (``MessageInfo['publisher_gid']``, rclpy since Iron). Where rclpy cannot give
it (Humble's), the second-publisher check is off, which the nodes log and list in
``/diagnostics``; the stamp checks still run.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
import time
from typing import Any

from rclpy import subscription as rclpy_subscription
from rclpy.node import Node
from sensor_msgs.msg import JointState

from egoroll_ros.core.joint_state_vetting import JointStateVetter, Vetting
from egoroll_ros.core.types import JointStateData
from egoroll_ros.errors import TrajectoryError
from egoroll_ros.ros.convert import joint_state_from_msg

#: s between two resubscriptions of a silent stream (:meth:`VettedJointStates.revive`).
REVIVE_INTERVAL = 5.0
#: Whether this rclpy tells a callback which publisher sent a message: its MessageInfo
#: carries ``publisher_gid`` (newer rclpy; the Humble and Jazzy releases give only the
#: timestamps, and there the second-publisher check is off, logged and listed).
WRITER_IDS = hasattr(rclpy_subscription.Subscription, 'CallbackType') and \
    'publisher_gid' in getattr(getattr(rclpy_subscription, 'MessageInfo', None),
                               '__annotations__', {})


def _writer(info: Any) -> Hashable | None:
    gid = info.get('publisher_gid') if isinstance(info, dict) else None
    if not gid or not gid.get('data'):
        return None
    return bytes(gid['data'])


class VettedJointStates:
    """A ``joint_states`` subscription whose messages are vetted before the node sees them.

    Args:
        node: the owning node (the subscription is created on it; its ROS clock is the one
            a stamp may follow back, see the vetter).
        joints: the controlled joints.
        on_state: called with each accepted :class:`JointStateData` (receipt on the steady
            clock) and the :class:`Vetting`.
        on_refused: called with the :class:`Vetting` of each refused message.
        qos: the subscription's QoS.
        callback_group: the subscription's.
        writer_window: s, see :class:`JointStateVetter`.
        clock_window: s, see :class:`JointStateVetter`.
    """

    def __init__(self, node: Node, joints: tuple[str, ...],
                 on_state: Callable[[JointStateData, Vetting], None],
                 on_refused: Callable[[Vetting], None], qos: Any,
                 callback_group: Any = None, writer_window: float = 2.0,
                 clock_window: float = 0.5) -> None:
        self._node = node
        self.vetter = JointStateVetter(joints, writer_window, clock_window)
        self._on_state, self._on_refused = on_state, on_refused
        self.malformed = ''
        if WRITER_IDS:
            def callback(msg: JointState, info: Any) -> None:
                self._take(msg, _writer(info))
        else:
            def callback(msg: JointState) -> None:
                self._take(msg, None)
        self._callback, self._qos, self._group = callback, qos, callback_group
        self.subscription = node.create_subscription(JointState, 'joint_states', callback, qos,
                                                     callback_group=callback_group)
        self.last_taken = time.monotonic()     # steady time a message last arrived
        self.resubscribed = 0
        self._revived = float('-inf')
        if not WRITER_IDS:
            node.get_logger().warning(
                'this rclpy does not say which publisher sent a message: a second publisher '
                'of joint_states is not detected (joint_states_second_publisher is off)')

    def _take(self, msg: JointState, writer: Hashable | None) -> None:
        self.last_taken = time.monotonic()
        try:
            js = joint_state_from_msg(msg, received=time.monotonic())
        except TrajectoryError as exc:
            self.malformed = str(exc)
            self._node.get_logger().warning(f'ignoring malformed joint_states: {exc}',
                                            throttle_duration_sec=5.0)
            return
        ros_now = self._node.get_clock().now().nanoseconds * 1e-9
        self.handle(js, writer, ros_now)

    def handle(self, js: JointStateData, writer: Hashable | None, ros_now: float) -> Vetting:
        """Vet ``js`` and pass it on (what the subscription does with each message)."""
        verdict = self.vetter.vet(js, writer, ros_now)
        if verdict.status == 'accepted':
            if verdict.clock_jump:
                self._node.get_logger().warning(
                    "joint_states stamps went back with this node's clock (a /clock jump): "
                    'following it', throttle_duration_sec=5.0)
            self._on_state(js, verdict)
        elif verdict.status == 'refused':
            self._node.get_logger().warning(f'joint_states refused: {verdict.reason}',
                                            throttle_duration_sec=1.0)
            self._on_refused(verdict)
        return verdict

    def revive(self, silent_for: float) -> bool:
        """Make a new subscription when nothing has arrived for ``silent_for`` s although a
        publisher is matched: a reader whose process was stopped (SIGSTOP) or starved can be
        left behind by the middleware's transport and never deliver again (seen once with a
        stopped trajectory_server on a loaded machine: fresh joint_states reached the gate,
        none reached the executor after SIGCONT). The state stays stale meanwhile, so the
        arm holds; nothing about vetting changes. Returns whether it resubscribed."""
        now = time.monotonic()
        if now - self.last_taken < silent_for or now - self._revived < REVIVE_INTERVAL or \
                self.subscription.get_publisher_count() == 0:
            return False
        self._revived = now
        self._node.get_logger().warning(
            f'joint_states: nothing arrived for {now - self.last_taken:.1f} s although '
            f'{self.subscription.get_publisher_count()} publisher(s) are matched: '
            'subscribing again')
        self._node.destroy_subscription(self.subscription)
        self.subscription = self._node.create_subscription(
            JointState, 'joint_states', self._callback, self._qos, callback_group=self._group)
        self.last_taken = now
        self.resubscribed += 1
        return True

    def diagnostics(self) -> list[tuple[str, Any]]:
        """Key/values for /diagnostics."""
        v = self.vetter
        return [('joint_states_refused', v.refused),
                ('last_joint_states_refusal', v.last_refusal),
                ('joint_states_publishers_conflict', v.conflict_since is not None),
                ('joint_states_clock_jumps', v.clock_jumps),
                ('joint_states_resubscribed', self.resubscribed)]
