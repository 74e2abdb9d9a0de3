"""policy_node's takeover hook: the Quest button, ``policy/takeover``, the teleop chunk timer
and the ``policy/intervention`` label, around :class:`egoroll_ros.core.takeover.Takeover`.

The node owns one :class:`TakeoverHook` and calls :meth:`TakeoverHook.on_joy` from its
quest/joy callback, :meth:`TakeoverHook.shadow` inside the publish of each policy chunk (under
the rollout lock: a policy chunk is a shadow chunk while the operator has control) and
:meth:`TakeoverHook.publish_label` from its status timer. Everything else (parameters
``takeover.*``, the service, the timer, the robot model for the measured end-effector pose)
lives here. See docs/takeover.md.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
import time
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool
from std_srvs.srv import SetBool

from egoroll_interfaces.msg import InterlockHeartbeat
from egoroll_ros.core.debounce import ButtonDebouncer
from egoroll_ros.core.observation import JOINT_STATES, QUEST_JOY, LatestInputs
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.rollout import RolloutStateMachine, State
from egoroll_ros.core.takeover import (
    Takeover,
    TakeoverError,
    measured_poses,
    takeover_config_from_params,
)
from egoroll_ros.ros.convert import cartesian_chunk_to_msg
from egoroll_ros.ros.params import Param
from egoroll_ros.ros.robot_models import RobotModelProvider

#: The label topic: true while the operator has control (published on every change and at
#: the status rate; transient local, so a late subscriber gets the current value).
INTERVENTION_TOPIC = 'policy/intervention'
TAKEOVER_SERVICE = 'policy/takeover'

PARAMS = [
    Param('takeover.arms', 'str[]', [], "Arms the operator drives during a takeover (the "
          "safety gate's cartesian_arms, every one of them); empty: takeover is off.",
          read_only=True),
    Param('takeover.ee_frames', 'str[]', [], 'End-effector frame of each takeover arm (the '
          "gate's cartesian_ee_frames).", read_only=True),
    Param('takeover.controllers', 'str[]', [], "Quest controller driving each takeover arm: "
          "'left' (quest/left_pose) or 'right' (quest/right_pose).", read_only=True),
    Param('takeover.button', int, 3, 'quest/joy button whose debounced press takes over from '
          "the policy and hands back (not the gate's confirm 0 or e-stop 1); -1: only the "
          'policy/takeover service.', min=-1, max=255, read_only=True),
    Param('takeover.clutch_axis', int, 3, 'quest/joy axis that must be held (above '
          'takeover.clutch_threshold) for the controller to move the arm; letting go and '
          'gripping again re-anchors, so the hand moved meanwhile moves nothing (3: the '
          "gate's deadman grip). -1: no clutch.", min=-1, max=255, read_only=True),
    Param('takeover.clutch_threshold', float, 0.5, 'Clutch axis value above which it is '
          'held.', min=-1.0, max=1.0, read_only=True),
    Param('takeover.rate', float, 30.0, 'Teleop chunks per second (Hz).', min=1.0, max=500.0,
          read_only=True),
    Param('takeover.lead', float, 0.15, "s from a teleop chunk's stamp to its first point "
          "(at least the executor's blend_time plus transport).", min=0.001, max=5.0,
          read_only=True),
    Param('takeover.horizon', float, 0.5, "s from a teleop chunk's stamp to its last point: "
          'the chunk holds the target from lead to horizon, so the arm rests at the last '
          'target when no chunk follows.', min=0.001, max=10.0, read_only=True),
    Param('takeover.translation_scale', float, 1.0, 'End-effector metres per controller '
          'metre.', min=0.001, max=10.0, read_only=True),
    Param('takeover.rotation', 'float[]', [], "Rotation from the Quest poses' reference frame "
          'to the robot base frame, 9 values row-major; empty: identity.', read_only=True),
    Param('takeover.follow_rotation', bool, True, 'The end effector turns as the controller '
          'turns (false: it keeps its orientation at takeover).', read_only=True),
    Param('takeover.gripper_joints', 'str[]', [], 'Gripper joint of each takeover arm that '
          "the operator commands during a takeover ('' for none; each in 'joints', and the "
          "gate's cartesian_gripper_joints entry of that arm). Empty: no gripper is commanded, "
          'each holds its measured position.', read_only=True),
    Param('takeover.gripper_axes', 'int[]', [], 'quest/joy axis commanding the gripper of '
          "each takeover arm (its controller's trigger; -1 for an arm without gripper; not "
          'takeover.clutch_axis).', min=-1, max=255, read_only=True),
    Param('takeover.gripper_open', 'float[]', [], 'Per takeover arm: the gripper position '
          '(m or rad, as in joint_states) commanded with the axis released.', read_only=True),
    Param('takeover.gripper_closed', 'float[]', [], 'Per takeover arm: the gripper position '
          'commanded with the axis fully pressed.', read_only=True),
    Param('takeover.gripper_axis_range', 'float[]', [0.0, 1.0], 'Gripper axis value released '
          'and fully pressed (e.g. [1.0, -1.0] for a joy driver whose triggers rest at 1); a '
          'value outside gives no teleop chunk.', read_only=True),
    Param('takeover.gripper_pickup', float, 0.05, 'At takeover and re-anchor the gripper holds '
          'its measured position until the axis commands within this fraction of the '
          'open-closed range of it (or moves through it).', min=0.001, max=1.0,
          read_only=True),
]

_LABEL_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)
_RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class TakeoverHook:
    """See the module docstring.

    Args:
        node: the policy node.
        p: its parameter values (``takeover.*``, ``urdf_path``, ``max_age.*``).
        inputs: its input store (controller poses, joint_states, quest/joy).
        sm: its rollout state machine (publishing goes through ``publish_if_current``).
        publish: publishes an ActionChunk message (the node's ``policy/chunk`` publisher).
        frame_id: header.frame_id of published chunks.
        callback_group: for the service, the timer and the robot_description subscription.
    """

    def __init__(self, node: Node, p: dict[str, Any], inputs: LatestInputs,
                 sm: RolloutStateMachine, publish: Callable[[Any], None], frame_id: str = '',
                 callback_group: Any = None) -> None:
        self._node, self._p, self._inputs, self._sm = node, p, inputs, sm
        self._publish, self._frame_id = publish, frame_id
        self.core = Takeover(takeover_config_from_params(p))
        self._model: RobotModel | None = None
        self._model_error = 'no robot model yet (urdf_path or robot_description)'
        self._debounce = ButtonDebouncer(p['quest.debounce_time'])
        self._needs_anchor = False
        self._was_active = False
        self._gate_state = ''       # the gate's interlock state while it allows no motion
        self.detail = ''
        self._label_pub = node.create_publisher(Bool, INTERVENTION_TOPIC, _LABEL_QOS)
        node.create_service(SetBool, TAKEOVER_SERVICE, self._srv, callback_group=callback_group)
        if not self.core.config.enabled:
            return
        RobotModelProvider(node, p['urdf_path'], self._set_model, self._model_off,
                           callback_group=callback_group)
        node.create_timer(1.0 / self.core.config.rate, self._tick,
                          callback_group=callback_group)
        # The gate's interlock: whenever it allowed no motion (deadman released, e-stop,
        # latched fault) the arm held, so the takeover re-anchors before it moves again.
        node.create_subscription(InterlockHeartbeat, 'safety/heartbeat', self._on_heartbeat,
                                 _RELIABLE, callback_group=callback_group)
        arms = ', '.join(f'{a.name} ({a.ee_frame}) <- {a.controller} controller' + (
            f', gripper {a.gripper_joint} <- axis {a.gripper_axis}' if a.has_gripper else '')
            for a in self.core.config.arms)
        node.get_logger().info(f'takeover: {arms}; button {p["takeover.button"]}, service '
                               f'{TAKEOVER_SERVICE}, teleop at {self.core.config.rate:g} Hz')

    # ---------------------------------------------------------------- robot model
    def _set_model(self, model: RobotModel) -> None:
        missing = [a.ee_frame for a in self.core.config.arms if not model.has_frame(a.ee_frame)]
        if missing:
            self._model_off(f"parameter 'takeover.ee_frames': {missing} not in {model.source}")
            return
        with self.core.lock:
            self._model = model
            self.core.base_frame = model.base_frame

    def _model_off(self, error: str) -> None:
        self._model = None
        self._model_error = error
        self._node.get_logger().error(f'takeover: no robot model: {error}')

    def _measured(self, snapshot: dict[str, Any]) -> Any:
        model, js = self._model, snapshot.get(JOINT_STATES)
        if model is None or js is None:
            return None
        return measured_poses(model, self.core.config, js.value.names, js.value.positions)

    def _follow_limits(self) -> None:
        """Take the node's live max_age.quest / max_age.joint_states (they apply live)."""
        cfg, p = self.core.config, self._p
        if (cfg.max_pose_age, cfg.max_joint_state_age) != (p['max_age.quest'],
                                                           p['max_age.joint_states']):
            with self.core.lock:
                self.core.config = dataclasses.replace(
                    cfg, max_pose_age=p['max_age.quest'],
                    max_joint_state_age=p['max_age.joint_states'])

    # ---------------------------------------------------------------- requests
    def request(self, on: bool, how: str) -> tuple[bool, str]:
        """Take over (``on``) or hand back; (success, message)."""
        now = time.monotonic()
        self._follow_limits()
        log = self._node.get_logger()
        if not on:
            with self._sm.lock:
                ended = self.core.end(f'handed back ({how})', now)
            self._label()
            if not ended:
                return False, 'the policy has control already'
            log.info(f'takeover: handed back to the policy ({how})')
            return True, 'handed back: the policy has control'
        snapshot = self._inputs.snapshot()
        try:
            measured = self._measured(snapshot)
            with self._sm.lock:
                msg = self.core.begin(self._sm.generation, self._sm.state is State.RUNNING,
                                      snapshot, measured, now)
                self._needs_anchor = False
                self.detail = ''
        except TakeoverError as exc:
            text = str(exc)
            if 'no robot model' in text:
                text += f' ({self._model_error})'
            log.warning(f'takeover ({how}) refused: {text}')
            return False, text
        self._label()
        log.info(f'takeover ({how}): {msg}')
        return True, msg

    def _srv(self, req: SetBool.Request, res: SetBool.Response) -> SetBool.Response:
        res.success, res.message = self.request(bool(req.data), TAKEOVER_SERVICE)
        return res

    def on_joy(self, buttons: tuple[int, ...], now: float) -> None:
        """A quest/joy sample (the node's callback): the takeover button toggles."""
        b = self._p['takeover.button']
        if b < 0 or not self.core.config.enabled:
            return
        if b >= len(buttons):
            self._node.get_logger().warning(f"quest/joy has {len(buttons)} buttons; "
                                            f"'takeover.button' is {b}", once=True)
            return
        if self._debounce.update(bool(buttons[b]), now):
            self.request(not self.core.active, 'the Quest button')

    def shadow(self, generation: int) -> bool:
        """Whether a policy chunk of rollout ``generation`` goes out as a shadow chunk (the
        operator has control). Call with the rollout lock held, inside the publish."""
        return self.core.generation == generation

    # ---------------------------------------------------------------- teleop
    def _on_heartbeat(self, msg: InterlockHeartbeat) -> None:
        if msg.motion_allowed:
            self._gate_state = ''
        else:
            self._gate_state = msg.state or 'motion not allowed'
            self._needs_anchor = True

    def _clutch_held(self, snapshot: dict[str, Any]) -> bool:
        axis = self._p['takeover.clutch_axis']
        if axis < 0:
            return True
        joy = snapshot.get(QUEST_JOY)
        if joy is None or axis >= len(joy.value[1]):
            return False
        return float(joy.value[1][axis]) > self._p['takeover.clutch_threshold']

    def _tick(self) -> None:
        now = time.monotonic()
        self._follow_limits()
        sm = self._sm
        with sm.lock:
            if self.core.sync(sm.generation, sm.state is State.RUNNING, now):
                self._node.get_logger().info('takeover ended: the rollout ended')
            gen = self.core.generation
        if gen is None:
            self._label()
            return
        snapshot = self._inputs.snapshot()
        if not self._clutch_held(snapshot):
            self._needs_anchor = True
            self.detail = 'operator takeover: clutch released (no motion)'
            return
        if self._gate_state:
            self.detail = (f'operator takeover: the safety gate allows no motion '
                           f'({self._gate_state}); re-anchoring when it does')
            return
        if self._needs_anchor:
            try:
                self.core.reanchor(snapshot, self._measured(snapshot), now)
            except TakeoverError as exc:
                self.detail = f'operator takeover: re-anchor failed: {exc}'
                return
            self._needs_anchor = False
        stamp = self._node.get_clock().now().nanoseconds * 1e-9
        try:
            current = self._measured(snapshot)
        except TakeoverError as exc:
            current, why = None, str(exc)
        else:
            why = 'no measured end-effector pose'
        if current is None:
            self.detail = f'operator takeover: no teleop chunk: {why}'
            return
        chunk = self.core.chunk(snapshot, now, stamp, current)
        if isinstance(chunk, str):
            self.detail = f'operator takeover: no teleop chunk: {chunk}'
            return
        msg = cartesian_chunk_to_msg(chunk, frame_id=self._frame_id)

        def publish(seq: int) -> int:
            if self.core.generation != gen:     # handed back meanwhile
                return -1
            msg.sequence = seq
            self._publish(msg)
            return seq

        if sm.publish_if_current(gen, publish) is not None:
            self.core.chunks += 1
            held = self.core.grippers_held
            self.detail = f'operator takeover ({self.core.chunks} teleop chunks)' + (
                f'; gripper of {", ".join(held)} held at its measured position until the '
                'trigger reaches it' if held else '')

    # ---------------------------------------------------------------- label
    def _label(self) -> None:
        active = self.core.active
        if active != self._was_active:
            self._was_active = active
            self.publish_label()

    def publish_label(self) -> None:
        """Publish ``policy/intervention`` (the node's status timer calls it)."""
        self._label_pub.publish(Bool(data=self.core.active))
