"""``egoroll evaluate``: run a policy and the safety gate offline over a recorded episode.

Deterministic and without DDS or real-time pacing: the bag's messages are stepped through in
receive-time order and put into the same :class:`~egoroll_ros.core.observation.LatestInputs`
the policy node uses, with the bag receive time as the "steady" time, so staleness is judged
with the configured ``max_age.*`` on bag time. The policy is queried every
``1/query_frequency`` s of bag time from the first moment every required input exists
(:func:`query_times`); the observation is assembled by the policy node's
:class:`~egoroll_ros.core.observation.ObservationBuilder`, the chunk by
:mod:`egoroll_ros.core.inference`, and every chunk is checked by
:func:`egoroll_ros.core.gate.check` with "now" = the chunk's bag time and the latest recorded
joint_states as the measured state.

The gate's interlock runs too, over the bag's ``quest/joy`` (deadman, e-stop, the Quest
confirm button, stale joy; :mod:`egoroll_ros.bag.offline_interlock`, the same
:class:`~egoroll_ros.core.interlock.Interlock` the node runs): each chunk's verdict says
whether it would have been forwarded, and the report lists the deadman / e-stop / fault
stretches. A bag without ``quest/joy`` is evaluated without it, and says so in the report,
in every verdict and on stderr.

Cartesian policies: the chunk is decoded by the same
:class:`~egoroll_ros.core.inference.CartesianRuntime` as in the node and checked by
:func:`egoroll_ros.core.cartesian.check_cartesian` (Cartesian checks, IK, joint checks; the
gate configuration defaults to ``safety_gate_cartesian.yaml``). The report adds Cartesian
errors (position m, rotation rad per horizon step and arm, against FK of the recorded
joint_states); its joint errors use the gate's IK solution where the chunk passed IK.

This is a thin layer: stored CDR payloads are decoded with ``rclpy.serialization`` and
converted by :mod:`egoroll_ros.ros.convert`; the maths lives in the cores and in
:mod:`egoroll_ros.bag.report`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
import json
from pathlib import Path
import sys
import time
from typing import Any

import numpy as np

from egoroll_ros.bag.offline_interlock import OfflineInterlock, not_simulated
from egoroll_ros.bag.reader import BagReader, absolute
from egoroll_ros.bag.report import (
    REPORT_FORMAT,
    ChunkRecord,
    StaleStretches,
    Thresholds,
    action_error,
    cartesian_error,
    compare,
    decisions,
    digest,
    latency_stats,
    load_report,
    plot_chunks,
    plot_rejections,
)
from egoroll_ros.core.cartesian import CartesianConfig, cartesian_config_from_params
from egoroll_ros.core.gate import (
    WHOLE_CHUNK,
    GateConfig,
    Verdict,
    Violation,
    check,
    config_from_params,
)
from egoroll_ros.core.gate import prepare as prepare_limits
from egoroll_ros.core.inference import (
    setup_from_params,
)
from egoroll_ros.core.interlock import JoyMapping, interlock_config_from_params
from egoroll_ros.core.observation import (
    JOINT_STATES,
    QUEST_JOY,
    QUEST_LEFT,
    QUEST_RIGHT,
    LatestInputs,
    StaleInputError,
    put_camera,
)
from egoroll_ros.core.policy import PolicyError
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.step import rollout_step
from egoroll_ros.errors import BagError, ConfigError, InputError, TrajectoryError
from egoroll_ros.policies.loading import load_policy
from egoroll_ros.ros.images import prepare_image
from egoroll_ros.ros.paths import policy_path, resolve_path
from egoroll_ros.ros.robot_models import load_robot_model

CHUNK_TOPIC = '/policy/chunk'
VERDICT_TOPIC = '/safety/verdict'


@dataclass
class EvaluateOptions:
    """Options of ``egoroll evaluate`` (see ``egoroll evaluate --help``)."""

    bag: Path
    config: Path
    out_dir: Path
    checkpoint: Path | None = None
    gate_config: Path | None = None
    urdf: Path | None = None
    namespace: str = ''
    baseline: Path | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    plots: bool = True


def _share() -> Path:
    from ament_index_python.packages import get_package_share_directory
    return Path(get_package_share_directory('egoroll_ros'))


def _deterministic(num_threads: int) -> None:
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(0)
    torch.set_num_threads(max(1, num_threads))


class _Decoder:
    """CDR payload -> rclpy message, one class lookup per type."""

    def __init__(self) -> None:
        from rclpy.serialization import deserialize_message

        from egoroll_ros.ros.bagio import message_class
        self._deserialize = deserialize_message
        self._class = message_class
        self._types: dict[str, type] = {}

    def __call__(self, msgtype: str, raw: bytes, where: str) -> Any:
        cls = self._types.get(msgtype) or self._types.setdefault(msgtype,
                                                                self._class(msgtype))
        try:
            return self._deserialize(bytes(raw), cls)
        except Exception as exc:  # noqa: BLE001 - the C deserializer raises many types
            raise InputError(f'{where}: cannot decode the stored {msgtype} '
                             f'({type(exc).__name__}: {exc})') from None


_DTYPES = {'double': np.float64, 'float': np.float32, 'int8': np.int8, 'uint8': np.uint8,
           'int16': np.int16, 'uint16': np.uint16, 'int32': np.int32, 'uint32': np.uint32,
           'int64': np.int64, 'uint64': np.uint64, 'boolean': np.bool_, 'octet': np.uint8}


def to_rosbags(msg: Any, store: Any) -> Any:
    """An rclpy message as the equivalent ``rosbags`` message object of ``store``.

    The output bag is serialized by rosbags (standard XCDR1 alignment) so that rosbags and
    Foxglove read it; rclpy reads it too. Field by field, no knowledge of any one type.
    """
    pkg = type(msg).__module__.split('.')[0]
    cls = store.types[f'{pkg}/msg/{type(msg).__name__}']
    kwargs = {}
    for name, ftype in msg.get_fields_and_field_types().items():
        value = getattr(msg, name)
        if hasattr(value, 'get_fields_and_field_types'):
            value = to_rosbags(value, store)
        elif ftype.startswith('sequence<') or '[' in ftype:
            elem = ftype.split('<', 1)[-1].split(',')[0].rstrip('>').split('[')[0]
            if elem in _DTYPES:
                value = np.asarray(value, dtype=_DTYPES[elem])
            else:
                value = [to_rosbags(v, store) if hasattr(v, 'get_fields_and_field_types')
                         else v for v in value]
        kwargs[name] = value
    return cls(**kwargs)


def _robot_model(opts: EvaluateOptions, bag: BagReader, decode: _Decoder,
                 urdf_path: str) -> tuple[RobotModel, str]:
    if opts.urdf is not None:
        return load_robot_model(opts.urdf), str(opts.urdf)
    topic = absolute('robot_description', opts.namespace)
    info = bag.info.topics.get(topic)
    if info is not None and info.msgtype == 'std_msgs/msg/String':
        for _, mtype, _, raw in bag.messages([topic]):
            try:
                text = decode(mtype, raw, topic).data
            except InputError as exc:
                raise BagError(str(exc)) from None
            return load_robot_model(urdf_text=text, source=f'{topic} in the bag'), \
                f'{topic} in the bag'
    if urdf_path:
        return load_robot_model(urdf_path), urdf_path
    raise ConfigError('no robot model for the gate: pass --urdf, record robot_description in '
                      "the bag, or set 'urdf_path' in the gate configuration")


@dataclass
class _Prepared:
    """Everything :func:`evaluate` loaded and checked before stepping through the bag."""

    opts: EvaluateOptions
    p: dict[str, Any]               # policy_node parameters
    gp: dict[str, Any]              # safety_gate parameters
    setup: Any                      # core.inference.PolicySetup
    loaded: Any                     # policies.loading.LoadedPolicy
    gate: GateConfig
    cartesian: CartesianConfig
    model: RobotModel
    model_source: str
    gate_path: Path
    policy_path: str
    warnings: list[str]
    baseline: dict[str, Any] | None
    out_bag: Path


def evaluate(opts: EvaluateOptions, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the evaluation and write the output bag, ``report.json`` and the plots.

    Returns:
        The report (also written to ``<out_dir>/report.json``); with a baseline, its
        ``comparison`` holds the regressions.

    Raises:
        BagError, ConfigError, CheckpointError, RobotModelError: bad inputs, each naming what
        was wrong.
    """
    BagReader(opts.bag).close()     # a bad bag is named before anything else
    with BagReader(opts.bag) as bag:
        decode = _Decoder()
        prep = _prepare(opts, bag, decode, log)
        try:
            run = _Episode(prep, bag, decode, log)
            run.step_through()
            report = _report(prep, bag, run)
        finally:
            prep.loaded.policy.close()
    (opts.out_dir / 'report.json').write_text(json.dumps(report, indent=2) + '\n')
    return report


def _prepare(opts: EvaluateOptions, bag: BagReader, decode: _Decoder,
             log: Callable[[str], None]) -> _Prepared:
    """Read both configurations, the robot model and the policy (bad input: typed errors)."""
    from egoroll_ros.ros.gate_params import PARAMS as GATE_PARAMS
    from egoroll_ros.ros.params import params_from_yaml
    from egoroll_ros.ros.policy_params import PARAMS as POLICY_PARAMS

    baseline = load_report(opts.baseline) if opts.baseline is not None else None
    overrides: dict[str, Any] = {}
    if opts.checkpoint is not None:
        overrides['policy.path'] = str(opts.checkpoint)
    p = params_from_yaml(opts.config, 'policy_node', POLICY_PARAMS, overrides)
    if not p['policy.num_threads']:
        p['policy.num_threads'] = 1        # one thread: identical results run to run
    setup = setup_from_params(p, resolve_path)
    default_gate = 'safety_gate_cartesian.yaml' if setup.cartesian else 'safety_gate.yaml'
    gate_path = opts.gate_config or _share() / 'config' / default_gate
    gp = params_from_yaml(gate_path, 'safety_gate', GATE_PARAMS)
    gate, cart = config_from_params(gp), cartesian_config_from_params(gp)
    out_bag = opts.out_dir / 'evaluation'
    if out_bag.exists():
        raise BagError(f'{out_bag} already exists; choose a new --out directory')
    model, model_source = _robot_model(opts, bag, decode, gp['urdf_path'])
    prepare_limits(model, gate)     # ConfigError: the gate config does not fit the model
    if setup.cartesian is not None and not setup.cartesian.urdf_path:
        # As the node takes robot_description when urdf_path is empty: the gate's model
        # (--urdf, the bag's robot_description or the gate's urdf_path) serves the policy.
        setup = replace(setup, cartesian=replace(setup.cartesian, urdf_text=model.urdf))
        log(f'policy URDF: {model_source} (no urdf_path in the policy configuration)')
    _deterministic(p['policy.num_threads'])
    path = policy_path(p['policy.path'])
    warnings: list[str] = []
    loaded = load_policy(p, setup, path, sys.executable, warnings.append,
                         prepare=prepare_image)   # the node's decoding, as live
    return _Prepared(opts, p, gp, setup, loaded, gate, cart, model, model_source, gate_path,
                     path, warnings, baseline, out_bag)


def _needs(setup: Any, builder: Any, ns: str) -> dict[str, tuple[str, str]]:
    """input name -> (absolute topic, message type) of every input the policy requires."""
    needs = {JOINT_STATES: (absolute('joint_states', ns), 'sensor_msgs/msg/JointState')}
    cams = {c.name: c for c in setup.cameras}
    for name in builder.max_ages:
        if name.startswith('camera/'):
            cam = cams[name.split('/', 1)[1]]
            needs[name] = (absolute(f'camera/{cam.name}/image_raw/compressed', ns),
                           'sensor_msgs/msg/CompressedImage') if cam.compressed else \
                (absolute(f'camera/{cam.name}/image_raw', ns), 'sensor_msgs/msg/Image')
        elif name == QUEST_JOY:
            needs[name] = (absolute('quest/joy', ns), 'sensor_msgs/msg/Joy')
        elif name in (QUEST_LEFT, QUEST_RIGHT):
            needs[name] = (absolute(name, ns), 'geometry_msgs/msg/PoseStamped')
    return needs


def _require_joints(bag: BagReader, decode: _Decoder, topic: str, joints: Any,
                    window: float = 1.0) -> None:
    """Refuse a bag whose joint_states (the messages of its first ``window`` s, which may
    come from several publishers) do not name every configured joint.

    Raises:
        BagError: naming the missing joints and the joints the bag has.
    """
    from egoroll_ros.ros.convert import joint_state_from_msg

    names: list[str] = []
    first = None
    for _, mtype, t_ns, raw in bag.messages([topic]):
        if first is None:
            first = t_ns
        if t_ns - first > window * 1e9:
            break
        try:
            js = joint_state_from_msg(decode(mtype, raw, topic), t_ns * 1e-9)
        except (InputError, TrajectoryError):
            continue        # counted as malformed later
        names += [n for n in js.names if n not in names]
    missing = [j for j in joints if j not in names]
    if missing:
        raise BagError(f"{bag.path}: {topic} lacks the configured joints "
                       f"{', '.join(missing)}; the bag's {topic} has: "
                       f"{', '.join(names) or 'no decodable message'}")


class _OutputBag:
    """The evaluation bag: ``/policy/chunk`` and ``/safety/verdict`` at the chunk's bag time,
    serialized by rosbags."""

    def __init__(self, path: Path) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        from egoroll_ros.ros.bagio import typestore

        self._store = typestore()
        self._writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._chunk = self._writer.add_connection(
            CHUNK_TOPIC, 'egoroll_interfaces/msg/ActionChunk', typestore=self._store)
        self._verdict = self._writer.add_connection(
            VERDICT_TOPIC, 'egoroll_interfaces/msg/GateVerdict', typestore=self._store)

    def write(self, t_ns: int, chunk_msg: Any, verdict_msg: Any) -> None:
        """Log one chunk and its verdict at ``t_ns``."""
        for conn, msg in ((self._chunk, chunk_msg), (self._verdict, verdict_msg)):
            self._writer.write(conn, t_ns, self._store.serialize_cdr(
                to_rosbags(msg, self._store), conn.msgtype))

    def close(self) -> None:
        """Finish the bag."""
        self._writer.close()


class _Episode:
    """One pass through the bag: inputs into the policy node's LatestInputs, a query every
    ``1/query_frequency`` s, each chunk checked by the gate and offered to the interlock."""

    def __init__(self, prep: _Prepared, bag: BagReader, decode: _Decoder,
                 log: Callable[[str], None]) -> None:
        self.prep, self.bag, self.decode = prep, bag, decode
        ns = prep.opts.namespace
        self.needs = _needs(prep.setup, prep.loaded.builder, ns)
        bag.require({topic: [mtype] for topic, mtype in self.needs.values()})
        _require_joints(bag, decode, self.needs[JOINT_STATES][0], prep.setup.joints)
        self.by_topic = {topic: name for name, (topic, _) in self.needs.items()}
        self.inputs = LatestInputs(list(self.needs))
        self.rec_t: list[float] = []
        self.rec_q: list[np.ndarray] = []
        self.skipped: dict[str, int] = {}
        self.malformed: dict[str, int] = {}
        self.inference_errors: list[str] = []
        self.records: list[ChunkRecord] = []
        self.queries = 0
        self.stretches = StaleStretches()
        self.wall = 0.0
        self.joy_topic = absolute('quest/joy', ns)
        self.interlock = self._offline_interlock(log)

    # ---- setup -----------------------------------------------------------------------------
    def _offline_interlock(self, log: Callable[[str], None]) -> OfflineInterlock | None:
        """The gate's interlock over the bag's quest/joy; None (said in a warning) without."""
        prep = self.prep
        if self.joy_topic not in self.bag.info.topics:
            note = not_simulated(self.joy_topic)
            prep.warnings.append(f'{note}: verdicts do not include deadman, e-stop or '
                                 'confirmation, and no chunk is known to have been forwarded')
            log(f'warning: {prep.warnings[-1]}')
            return None
        self.bag.require({self.joy_topic: ['sensor_msgs/msg/Joy']})

        def recheck(chunk: Any, now: float) -> bool:
            js = self.inputs.get(JOINT_STATES)
            return check(chunk, None if js is None else js.value, prep.model, prep.gate,
                         now=now, steady_now=now).rejected

        return OfflineInterlock(interlock_config_from_params(prep.gp),
                                JoyMapping.from_params(prep.gp), prep.gp['watchdog_period'],
                                self.bag.info.start_ns * 1e-9, recheck,
                                toggle_debounce=prep.gp['toggle_debounce_time'])

    # ---- the loop --------------------------------------------------------------------------
    def step_through(self) -> None:
        """Every message in receive-time order, with the queries due in between."""
        prep = self.prep
        period_ns = int(round(1e9 / prep.p['query_frequency']))
        required = set(prep.loaded.builder.max_ages)
        topics = list(self.by_topic)
        if self.interlock is not None and self.joy_topic not in self.by_topic:
            topics.append(self.joy_topic)
        prep.opts.out_dir.mkdir(parents=True, exist_ok=True)
        t_start = time.perf_counter()
        self.out = _OutputBag(prep.out_bag)
        next_q: int | None = None
        last_ns = self.bag.info.start_ns
        try:
            prep.loaded.policy.reset()
            for topic, mtype, t_ns, raw in self.bag.messages(topics):
                while next_q is not None and next_q < t_ns:
                    self._query(next_q)
                    next_q += period_ns
                if topic == self.joy_topic and self.interlock is not None:
                    self._joy(mtype, t_ns, raw)
                if topic in self.by_topic:
                    self._put(self.by_topic[topic], topic, mtype, t_ns, raw)
                last_ns = t_ns
                if next_q is None and required <= set(self.inputs.snapshot()):
                    next_q = t_ns
            while next_q is not None and next_q <= last_ns:
                self._query(next_q)
                next_q += period_ns
        finally:
            self.out.close()
        self.wall = time.perf_counter() - t_start
        if self.interlock is not None:
            self.interlock.finish(self.bag.info.end_ns * 1e-9)

    def _count(self, table: dict[str, int], key: str) -> None:
        key = key[:160]
        table[key] = table.get(key, 0) + 1

    def _put(self, name: str, topic: str, mtype: str, t_ns: int, raw: bytes) -> None:
        """As the node's callbacks do, with the bag receive time as both the steady time and
        the clock the header stamps are compared with."""
        from egoroll_ros.ros import convert

        now = t_ns * 1e-9
        try:
            msg = self.decode(mtype, raw, topic)
            if name.startswith('camera/'):
                put_camera(self.inputs, name, msg, convert.time_to_sec(msg.header.stamp), now,
                           now)
            elif name == JOINT_STATES:
                js = convert.joint_state_from_msg(msg, now)
                self.inputs.put(name, js, js.stamp, now, clock=now)
                if self.interlock is not None:
                    self.interlock.joint_state(now)
                q = js.ordered(self.prep.setup.joints)
                if q is not None:
                    self.rec_t.append(now)
                    self.rec_q.append(q)
            elif name == QUEST_JOY:
                self.inputs.put(name, convert.joy_from_msg(msg), convert.time_to_sec(
                    msg.header.stamp), now, clock=now)
            else:
                self.inputs.put(name, convert.pose_from_msg(msg),
                                convert.time_to_sec(msg.header.stamp), now, clock=now)
        except (InputError, TrajectoryError) as exc:
            self._count(self.malformed, f'{name}: {exc}')

    def _joy(self, mtype: str, t_ns: int, raw: bytes) -> None:
        try:
            msg = self.decode(mtype, raw, self.joy_topic)
        except InputError as exc:
            self._count(self.malformed, f'{self.joy_topic} (interlock): {exc}')
            return
        self.interlock.joy(t_ns * 1e-9, msg.axes, msg.buttons)

    def _query(self, t_ns: int) -> None:
        prep, space = self.prep, self.prep.loaded.space
        self.queries += 1
        now = t_ns * 1e-9
        try:
            step = rollout_step(prep.loaded.builder, self.inputs, space, now, now,
                                sequence=len(self.records) + 1)
        except StaleInputError as exc:
            self.stretches.update(exc.stale, now)
            self._count(self.skipped, 'stale input: ' + ', '.join(
                f'{s.name} {s.reason}' for s in exc.stale))
            return
        except InputError as exc:
            self.stretches.update([], now)
            self._count(self.skipped, f'input error: {exc}')
            return
        except PolicyError as exc:
            self.stretches.update([], now)
            self.inference_errors.append(
                f't={now - self.bag.info.start_ns * 1e-9:.3f}s: {exc}')
            return
        self.stretches.update([], now)
        chunk = step.chunk
        js = self.inputs.get(JOINT_STATES)
        outcome = space.check(chunk, js.value if js is not None else None, prep.model,
                              prep.gate, prep.cartesian, now, now)
        verdict = outcome.verdict
        self._publish(t_ns, chunk, verdict, outcome.joint_chunk)
        self.records.append(ChunkRecord(
            chunk.sequence, now, np.asarray(space.meta.point_times()),
            None if outcome.joint_positions is None else np.asarray(outcome.joint_positions),
            step.latency, verdict.accepted, verdict.needs_confirmation,
            tuple((v.check, v.subject, v.point_index) for v in verdict.violations),
            verdict.summary, space.ee_targets(step.output)))

    def _publish(self, t_ns: int, chunk: Any, verdict: Verdict, joint_chunk: Any) -> None:
        """Offer the chunk to the interlock and log it with the verdict the gate would
        publish (the interlock's blocks as node-stage violations)."""
        from egoroll_ros.ros import convert

        now = t_ns * 1e-9
        published, forwarded, note = verdict, False, ''
        if self.interlock is not None:
            out = self.interlock.chunk(now, joint_chunk, chunk.sequence,
                                       [v.check for v in verdict.violations],
                                       verdict.rejected, verdict.needs_confirmation)
            forwarded = out.forwarded
            if out.blocks:
                published = replace(verdict, stage='node', violations=list(
                    verdict.violations) + [Violation(b.check, '', WHOLE_CHUNK, b.value,
                                                     b.limit, b.message) for b in out.blocks])
        else:
            note = not_simulated(self.joy_topic) + ': '
        chunk_msg = convert.any_chunk_to_msg(chunk)
        self.out.write(t_ns, chunk_msg, convert.verdict_to_msg(
            published, chunk_msg, convert.sec_to_time(now), forwarded, note))

    # ---- results ---------------------------------------------------------------------------
    def recorded(self) -> tuple[np.ndarray, np.ndarray]:
        """The recorded joint trajectory: times (N,), positions (N, J)."""
        joints = self.prep.setup.joints
        return np.array(self.rec_t), np.array(self.rec_q).reshape(len(self.rec_q), len(joints))

    def interlock_report(self, origin: float) -> dict[str, Any]:
        """The report's ``interlock`` section."""
        if self.interlock is None:
            return {'simulated': False, 'reason': not_simulated(self.joy_topic)}
        return self.interlock.report(self.bag.info.end_ns * 1e-9, origin)

    def fate(self, sequence: int) -> dict[str, Any]:
        """Whether the gate would have forwarded chunk ``sequence``, and why (chunk_list)."""
        fate = None if self.interlock is None else self.interlock.fate(sequence)
        if fate is None:
            return {'forwarded': None, 'interlock': not_simulated(self.joy_topic)}
        return {'forwarded': fate.forwarded, 'blocked_by': fate.blocked_by,
                'interlock': fate.note}


def _report(prep: _Prepared, bag: BagReader, run: _Episode) -> dict[str, Any]:
    """The report (and the plots) of a finished pass."""
    opts, p, space = prep.opts, prep.p, prep.loaded.space
    meta, joints, records = space.meta, prep.setup.joints, run.records
    origin = bag.info.start_ns * 1e-9
    rec_times, rec_pos = run.recorded()
    err = action_error(records, joints, rec_times, rec_pos, prep.setup.continuous_columns)
    plots = []
    if opts.plots and records:
        plot_chunks(opts.out_dir / 'chunks.png', records, joints, rec_times, rec_pos, origin)
        plot_rejections(opts.out_dir / 'rejections.png', records, origin,
                        bag.info.end_ns * 1e-9)
        plots = ['chunks.png', 'rejections.png']
    report: dict[str, Any] = {
        'format': REPORT_FORMAT,
        'bag': str(opts.bag), 'storage': bag.info.storage,
        'bag_duration': bag.info.duration,
        'inputs': {name: topic for name, (topic, _) in run.needs.items()},
        'policy': {'backend': p['policy.backend'], 'path': prep.policy_path,
                   'fingerprint': meta.fingerprint, 'chunk_length': meta.chunk_length,
                   'step_period': meta.step_period, 'num_threads': p['policy.num_threads']},
        'config': str(opts.config), 'gate_config': str(prep.gate_path),
        'robot_model': prep.model_source,
        'query_frequency': p['query_frequency'],
        'max_age': {k: p[f'max_age.{k}'] for k in ('camera', 'joint_states', 'quest')},
        'first_query': records[0].stamp - origin if records else None,
        'queries': run.queries,
        'skipped': {'count': sum(run.skipped.values()), 'reasons': run.skipped},
        'stale_stretches': run.stretches.report(bag.info.end_ns * 1e-9, origin),
        'clock_offsets': run.inputs.clock_offsets(),
        'max_clock_offset': p['max_clock_offset'],
        'malformed_inputs': run.malformed,
        'inference_errors': run.inference_errors,
        'decisions': decisions(records),
        'latency': latency_stats([r.latency for r in records]),
        'action_space': meta.action_space,
        'action_error': {**err, 'note': 'point k of a chunk stamped t0 vs the recorded '
                         'joint position at t0 + time_from_start[k] (linear interpolation of '
                         'joint_states); points after the end of the recording are skipped '
                         '(points_beyond_recording)' + space.joint_error_note},
        'interlock': run.interlock_report(origin),
        'chunk_list': [{'sequence': r.sequence, 't': r.stamp - origin, 'stamp': r.stamp,
                        'decision': r.decision, 'latency': r.latency,
                        'violations': sorted({v[0] for v in r.violations}),
                        'summary': r.summary, **run.fate(r.sequence)} for r in records],
        'digest': digest(records),
        'warnings': prep.warnings,
        'wall_time': run.wall,
        'realtime_factor': bag.info.duration / run.wall if run.wall > 0 else None,
        'outputs': {'bag': str(prep.out_bag), 'plots': plots},
    }
    ee = space.ee_reference(prep.model, joints)
    if ee is not None:
        arms, fk = ee
        cerr = cartesian_error(records, arms, rec_times, rec_pos, fk)
        report['cartesian_error'] = {**cerr, 'note': 'per horizon step k: predicted '
                                     'base-frame pose vs FK of the recorded joints at t0 + '
                                     'time_from_start[k]; position m, rotation rad '
                                     '(core.frames.cartesian_errors)'}
    if prep.baseline is not None:
        report['comparison'] = compare(report, prep.baseline, opts.thresholds)
    return report


def summary_lines(report: dict[str, Any]) -> list[str]:
    """Human-readable summary of a report (for the CLI)."""
    d = report['decisions']
    e = report['action_error']
    lat = report['latency']
    rate = 'n/a' if d['acceptance_rate'] is None else f"{d['acceptance_rate']:.1%}"
    mae = 'n/a' if e['mae'] is None else f"{e['mae']:.4f}"
    lines = [
        f"{report['queries']} queries, {d['chunks']} chunks ({report['skipped']['count']} "
        f"skipped, {len(report['inference_errors'])} inference errors); gate: {d['accepted']} "
        f"accepted, {d['needs_confirmation']} need confirmation, {d['rejected']} rejected "
        f'(acceptance {rate})',
        f"action error MAE {mae} over {e['points_compared']} points "
        f"({e['points_beyond_recording']} beyond the recording skipped); latency median "
        + ('n/a' if lat['median'] is None else f"{lat['median'] * 1e3:.1f} ms") +
        f"; {report['realtime_factor'] or 0:.1f}x real time",
    ]
    ce = report.get('cartesian_error')
    if ce is not None:
        pm, rm = ce['position']['mae'], ce['rotation']['mae']
        lines.append(f"Cartesian error: position MAE {'n/a' if pm is None else f'{pm:.4f} m'}, "
                     f"rotation MAE {'n/a' if rm is None else f'{rm:.4f} rad'} over "
                     f"{ce['points_compared']} points; "
                     f"{e.get('chunks_without_joint_positions', 0)} chunks without IK joints")
    il = report.get('interlock', {})
    if il.get('simulated'):
        held = sorted({s['condition'] for s in il['stretches']})
        lines.append(f"interlock (quest/joy): {il['forwarded']} of {d['chunks']} chunks would "
                     f"have been forwarded; blocked by "
                     + (', '.join(f'{k} {v}' for k, v in il['blocked_by_check'].items())
                        or 'nothing')
                     + f"; {len(il['stretches'])} stretches ({', '.join(held) or 'none'})")
        lines += [f"  {s['condition']} {s['start']:.3f}-{s['end']:.3f} s"
                  f"{' (open at the end)' if s['open'] else ''}: {s['reason']}"
                  for s in il['stretches']]
    elif il:
        lines.append(il['reason'])
    if d['rejections_by_check']:
        lines.append('rejections by check: ' + ', '.join(
            f'{k} {v}' for k, v in d['rejections_by_check'].items()))
    for reason, n in report['skipped']['reasons'].items():
        lines.append(f'skipped x{n}: {reason}')
    lines.append(f"report: {Path(report['outputs']['bag']).parent / 'report.json'}; bag: "
                 f"{report['outputs']['bag']}")
    cmp_ = report.get('comparison')
    if cmp_ is not None:
        if cmp_['regressions']:
            lines += [f'REGRESSION: {r}' for r in cmp_['regressions']]
        else:
            lines.append('no regression against the baseline')
    return lines

