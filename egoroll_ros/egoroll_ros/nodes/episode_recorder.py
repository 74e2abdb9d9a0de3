"""episode_recorder: records each rollout as one episode (a rosbag2, mcap by default).

Subscribes (raw CDR, written as received, from a writer thread) to the rollout's inputs
(``joint_states``, each configured camera, ``quest/*``), its outputs (``policy/chunk``,
``policy/status``, ``policy/intervention``, ``safety/verdict``, ``executor/commanded``),
``/diagnostics`` (the gate's interlock events), latched ``robot_description`` and any
``extra_topics``. Episode boundaries
follow ``policy/status`` (:class:`~egoroll_ros.core.episodes.EpisodeTracker`): a preflight opens
``<out_dir>/episode_<NNNN>``; the end of the rollout plus ``outcome_window`` s (or the
operator's mark) closes it; a preflight that does not lead to a start is discarded. The
operator marks success or failure with the
``record/mark_success`` / ``record/mark_failure`` services (std_srvs/Trigger) or the Quest
buttons ``quest.success_button`` / ``quest.failure_button``.

Each episode holds ``/egoroll/episode`` (std_msgs/String, JSON: index, the policy fingerprint,
the full text of every ``config_files`` entry) at its start, ``/egoroll/outcome`` (JSON) at each
mark, and the same summary (with the outcome) in the bag's custom metadata
``egoroll.episode``. The ``preroll`` s of messages before the opening status are included.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
import queue
import re
import shutil
import sys
import threading
import time
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.serialization import serialize_message
from rosbags.rosbag2 import StoragePlugin, Writer
from sensor_msgs.msg import Joy
from std_msgs.msg import String
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import RolloutStatus
from egoroll_ros.core.debounce import ButtonDebouncer
from egoroll_ros.core.episodes import (
    FAILURE,
    SUCCESS,
    Episode,
    EpisodeTracker,
    outcome_button_conflicts,
)
from egoroll_ros.errors import ConfigError
from egoroll_ros.ros.bagio import latched_qos_profiles, message_class, typestore
from egoroll_ros.ros.params import Param, declare_params, yaml_values
from egoroll_ros.ros.runner import run_node

EPISODE_TOPIC = '/egoroll/episode'
OUTCOME_TOPIC = '/egoroll/outcome'
_TYPE = re.compile(r'^[A-Za-z_][\w]*/msg/[A-Za-z_]\w*$')


def _extra_ok(v: list[str]) -> str | None:
    for item in v:
        topic, sep, mtype = item.rpartition(':')
        if not sep or not topic or not _TYPE.match(mtype):
            return f'{item!r}: expected TOPIC:pkg/msg/Type'
    return None


PARAMS = [
    Param('out_dir', str, None, 'Directory the episodes are written to (episode_<NNNN>).',
          read_only=True,
          validate=lambda v: None if v else 'required: the directory to record into'),
    Param('storage', str, 'mcap', 'rosbag2 storage: mcap or sqlite3.', read_only=True,
          choices=('mcap', 'sqlite3')),
    Param('cameras.names', 'str[]', [], "Cameras recorded (as policy_node's cameras.names).",
          read_only=True),
    Param('cameras.compressed', 'bool[]', [], 'Per camera: the compressed topic (empty: all '
          'raw).', read_only=True),
    Param('extra_topics', 'str[]', [], 'More topics to record, each TOPIC:pkg/msg/Type.',
          read_only=True, validate=_extra_ok),
    Param('config_files', 'str[]', [], 'Configuration files stored in full in every '
          'episode (the policy_node and safety_gate YAMLs).', read_only=True),
    Param('outcome_window', float, 10.0, 'Seconds an ended rollout waits for the '
          "operator's success/failure mark before its episode closes.", min=0.0, max=3600.0,
          read_only=True),
    Param('preroll', float, 2.0, 'Seconds of messages before the episode opened that it '
          'also holds (the status that opens it can arrive after the first chunks).',
          min=0.0, max=30.0, read_only=True),
    Param('quest.success_button', int, -1, 'Joy button marking the episode a success; -1: '
          'none.', min=-1, max=255, read_only=True),
    Param('quest.failure_button', int, -1, 'Joy button marking the episode a failure; -1: '
          'none.', min=-1, max=255, read_only=True),
    Param('quest.debounce_time', float, 0.05, 'Seconds a button must be stable.', min=0.0,
          max=2.0, read_only=True),
]


def recorded_topics(cameras: list[str], compressed: list[bool],
                    extra: list[str]) -> list[tuple[str, str, bool]]:
    """``(relative topic, msgtype, latched)`` of everything an episode holds."""
    if compressed and len(compressed) != len(cameras):
        raise ConfigError(f"parameter 'cameras.compressed': {len(compressed)} values for "
                          f'{len(cameras)} cameras')
    out = [('joint_states', 'sensor_msgs/msg/JointState', False)]
    for i, name in enumerate(cameras):
        out.append((f'camera/{name}/image_raw/compressed', 'sensor_msgs/msg/CompressedImage',
                    False) if compressed and compressed[i] else
                   (f'camera/{name}/image_raw', 'sensor_msgs/msg/Image', False))
    out += [('quest/joy', 'sensor_msgs/msg/Joy', False),
            ('quest/left_pose', 'geometry_msgs/msg/PoseStamped', False),
            ('quest/right_pose', 'geometry_msgs/msg/PoseStamped', False),
            ('policy/chunk', 'egoroll_interfaces/msg/ActionChunk', False),
            ('policy/status', 'egoroll_interfaces/msg/RolloutStatus', False),
            ('safety/verdict', 'egoroll_interfaces/msg/GateVerdict', False),
            ('executor/commanded', 'sensor_msgs/msg/JointState', False),
            ('/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray', False),
            ('robot_description', 'std_msgs/msg/String', True),
            # operator takeover label (true while the operator drives; docs/takeover.md)
            ('policy/intervention', 'std_msgs/msg/Bool', True)]
    for item in extra:
        topic, _, mtype = item.rpartition(':')
        out.append((topic, mtype, False))
    return out


def buttons_in_use(files: list[str], namespace: str = '') -> tuple[dict[str, int], list[str]]:
    """The quest/joy buttons the safety gate and policy_node use, as far as the parameter
    files say (their ``safety_gate`` / ``policy_node`` sections; a parameter the file does not
    set has its default), and what could not be checked.

    Returns:
        (``{"safety_gate estop_button (FILE)": 1, ...}``, notes on what is not checked).

    Raises:
        ConfigError: an unreadable file or a bad button value.
    """
    from egoroll_ros.ros.gate_params import PARAMS as GATE_PARAMS
    from egoroll_ros.ros.policy_params import PARAMS as POLICY_PARAMS

    used: dict[str, int] = {}
    seen = set()
    for f in files:
        gate = yaml_values(f, 'safety_gate', GATE_PARAMS, ('estop_button', 'confirm_button'),
                           namespace)
        if gate is not None:
            seen.add('safety_gate')
            used.update({f'safety_gate {k} ({f})': v for k, v in gate.items()})
        pol = yaml_values(f, 'policy_node', POLICY_PARAMS,
                          ('quest.toggle_button', 'takeover.button', 'takeover.arms'), namespace)
        if pol is not None:
            seen.add('policy_node')
            used[f'policy_node quest.toggle_button ({f})'] = pol['quest.toggle_button']
            if pol['takeover.arms']:
                used[f'policy_node takeover.button ({f})'] = pol['takeover.button']
    notes = [f'no {n} section in config_files: its Quest buttons are not checked'
             for n in ('safety_gate', 'policy_node') if n not in seen]
    return used, notes


class EpisodeRecorder(Node):
    """See the module docstring. ``**kwargs`` go to ``Node.__init__``."""

    def __init__(self, node_name: str = 'episode_recorder', **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        p = self.p = declare_params(self, PARAMS)
        self.out_dir = Path(p['out_dir'])
        self.topics = recorded_topics(p['cameras.names'], p['cameras.compressed'],
                                      p['extra_topics'])
        self.configs: dict[str, str] = {}
        for f in p['config_files']:
            try:
                self.configs[f] = Path(f).read_text()
            except OSError as exc:
                raise ConfigError(f"parameter 'config_files': cannot read {f}: {exc}") from None
        self._check_buttons()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.tracker = EpisodeTracker(p['outcome_window'])
        self.closed: list[tuple[Path, Episode]] = []
        self._policy_id = ''
        self._lock = threading.Lock()
        self._open_path: Path | None = None
        self._queue: queue.Queue = queue.Queue()
        self._store = typestore()
        self._debounce = {SUCCESS: ButtonDebouncer(p['quest.debounce_time']),
                          FAILURE: ButtonDebouncer(p['quest.debounce_time'])}
        self._thread = threading.Thread(target=self._drain, name='episode-writer', daemon=True)
        self._thread.start()
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self._latched_last: dict[str, bytes] = {}
        self._preroll: collections.deque = collections.deque()
        self._preroll_ns = int(p['preroll'] * 1e9)
        for topic, mtype, is_latched in self.topics:
            qos = latched if is_latched else (qos_profile_sensor_data if topic in (
                'joint_states', 'quest/joy', 'quest/left_pose', 'quest/right_pose') or
                topic.startswith('camera/') else reliable)
            self.create_subscription(message_class(mtype), topic,
                                     self._raw_cb(topic, is_latched), qos, raw=True)
        self.create_subscription(RolloutStatus, 'policy/status', self._on_status, reliable)
        self.create_subscription(Joy, 'quest/joy', self._on_joy, qos_profile_sensor_data)
        self.create_service(Trigger, 'record/mark_success', self._srv(SUCCESS))
        self.create_service(Trigger, 'record/mark_failure', self._srv(FAILURE))
        self.create_timer(0.1, self._poll)
        self.get_logger().info(f'recording episodes to {self.out_dir} ({len(self.topics)} '
                               'topics); a preflight opens an episode')

    def _check_buttons(self) -> None:
        """Refuse outcome buttons that the gate or policy_node (as config_files configure them)
        use for something else: a success mark must never also be an e-stop or a confirm."""
        p = self.p
        outcome = {k: p[k] for k in ('quest.success_button', 'quest.failure_button')}
        if all(b < 0 for b in outcome.values()):
            return
        used, notes = buttons_in_use(list(p['config_files']), self.get_namespace())
        bad = outcome_button_conflicts(outcome, used)
        if bad:
            raise ConfigError('; '.join(bad))
        for note in notes:
            self.get_logger().warning(f'outcome buttons: {note} (nor any other quest/joy user '
                                      'outside config_files)')

    # ---------------------------------------------------------------- inputs
    def _raw_cb(self, topic: str, latched: bool):  # noqa: ANN202
        def cb(data: bytes) -> None:
            data = bytes(data)
            if latched:
                self._latched_last[topic] = data
            t = self.get_clock().now().nanoseconds
            with self._lock:
                if self._open_path is not None:
                    self._queue.put(('msg', topic, t, data))
                elif self._preroll_ns > 0 and not latched:
                    self._preroll.append((t, topic, data))
                    while self._preroll and self._preroll[0][0] < t - self._preroll_ns:
                        self._preroll.popleft()
        return cb

    def _on_status(self, msg: RolloutStatus) -> None:
        if msg.policy_id:
            self._policy_id = msg.policy_id
        closed, opened = self.tracker.state(msg.state_name, time.monotonic())
        self._apply(closed, opened)

    def _on_joy(self, msg: Joy) -> None:
        now = time.monotonic()
        for outcome, key in ((SUCCESS, 'quest.success_button'),
                             (FAILURE, 'quest.failure_button')):
            b = self.p[key]
            if 0 <= b < len(msg.buttons) and self._debounce[outcome].update(
                    bool(msg.buttons[b]), now):
                self._mark(outcome, 'the Quest button')

    def _srv(self, outcome: str):  # noqa: ANN202
        def cb(req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
            res.success, res.message = self._mark(outcome, 'service')
            return res
        return cb

    def _poll(self) -> None:
        self._apply(self.tracker.poll(time.monotonic()), None)

    # ---------------------------------------------------------------- episodes
    def _mark(self, outcome: str, how: str) -> tuple[bool, str]:
        marked, closed = self.tracker.mark(outcome, time.monotonic())
        if marked is None:
            return False, 'no episode to mark (none is being recorded)'
        text = json.dumps({'index': marked.index, 'outcome': outcome, 'by': how})
        with self._lock:
            if self._open_path is not None:
                self._queue.put(('msg', OUTCOME_TOPIC, self.get_clock().now().nanoseconds,
                                 serialize_message(String(data=text))))
        self.get_logger().info(f'episode {marked.index} marked {outcome} ({how})')
        self._apply(closed, None)
        return True, f'episode {marked.index} marked {outcome}'

    def _apply(self, closed: Episode | None, opened: Episode | None) -> None:
        if closed is not None:
            with self._lock:
                path, self._open_path = self._open_path, None
                summary = {**closed.as_dict(), 'policy_id': self._policy_id}
                self._queue.put(('close', json.dumps(summary), not closed.ran))
            if path is not None and not closed.ran:
                self.get_logger().info(f'episode {closed.index} discarded: the preflight did '
                                       'not lead to a rollout')
            elif path is not None:
                self.closed.append((path, closed))
                self.get_logger().info(f'episode {closed.index} closed: {path} (outcome '
                                       f'{closed.outcome or "not marked"})')
        if opened is not None:
            path = self._next_path()
            head = json.dumps({'index': opened.index, 'policy_id': self._policy_id,
                               'configs': self.configs,
                               'topics': [t for t, _, _ in self.topics]})
            with self._lock:
                self._open_path = path
                self._queue.put(('open', path))
                t = self.get_clock().now().nanoseconds
                self._queue.put(('msg', EPISODE_TOPIC, t, serialize_message(String(data=head))))
                for topic, data in self._latched_last.items():
                    self._queue.put(('msg', topic, t, data))
                while self._preroll:
                    item = self._preroll.popleft()
                    if item[0] >= t - self._preroll_ns:
                        self._queue.put(('msg', item[1], item[0], item[2]))
            self.get_logger().info(f'episode {opened.index} opened: {path}')

    def _next_path(self) -> Path:
        used = [int(m.group(1)) for d in self.out_dir.glob('episode_*')
                if (m := re.match(r'episode_(\d+)$', d.name))]
        return self.out_dir / f'episode_{max(used, default=0) + 1:04d}'

    # ---------------------------------------------------------------- writer thread
    def _drain(self) -> None:
        writer = None
        path: Path | None = None
        conns: dict[str, Any] = {}
        plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[
            self.p['storage']]
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    if writer is not None:
                        writer.close()
                    return
                if item[0] == 'open':
                    writer = Writer(item[1], version=9, storage_plugin=plugin)
                    writer.open()
                    conns = {}
                    for topic, mtype, latched in self.topics:
                        extra = {'offered_qos_profiles': latched_qos_profiles()} \
                            if latched else {}
                        conns[topic] = writer.add_connection(
                            self.resolve_topic_name(topic), mtype, typestore=self._store,
                            **extra)
                    for topic in (EPISODE_TOPIC, OUTCOME_TOPIC):
                        conns[topic] = writer.add_connection(topic, 'std_msgs/msg/String',
                                                             typestore=self._store)
                elif item[0] == 'msg' and writer is not None:
                    _, topic, t, data = item
                    writer.write(conns[topic], t, data)
                elif item[0] == 'close' and writer is not None:
                    writer.set_custom_data('egoroll.episode', item[1])
                    writer.close()
                    writer = None
                    if item[2]:     # never ran: not an episode
                        shutil.rmtree(path)
                if item[0] == 'open':
                    path = item[1]
            except Exception as exc:  # noqa: BLE001 - a broken bag must not kill the thread
                self.get_logger().error(f'episode writer: {type(exc).__name__}: {exc}')

    def close(self) -> None:
        """Close the open episode (outcome not marked) and stop the writer thread."""
        ep = self.tracker.current
        if ep is not None:
            self.tracker.current = None
            self._apply(ep, None)
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=30.0)


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``episode_recorder`` console script."""
    return run_node(EpisodeRecorder, args=args, num_threads=1)


if __name__ == '__main__':
    sys.exit(main())
