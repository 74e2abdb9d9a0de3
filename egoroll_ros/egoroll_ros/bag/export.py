"""``egoroll export``: recorded episodes (``egoroll record``) to a LeRobot dataset.

Each bag must be an egoroll episode (``/egoroll/episode`` with the configuration it ran with,
written by :mod:`egoroll_ros.nodes.episode_recorder`). The policy_node configuration (the one
stored in the episode, or ``--config``) names the joints and cameras. One dataset frame per
frame of the first camera; its header stamps give the fps (:func:`~egoroll_ros.core.dataset.
measure_fps`, an irregular rate is refused). For each frame:

- ``observation.images.<camera>``: that camera's frame (the other cameras: the frame nearest
  in header stamp, within half a period), RGB, stored losslessly (PNG) unless ``--video``;
- ``observation.state``: the configured joints' positions from the last ``joint_states`` at or
  before the frame's stamp, no older than the config's ``max_age.joint_states``;
- ``action``: the same joints from the last ``executor/commanded`` setpoint (what the robot
  was told to do: the policy's chunk, or the operator's during a takeover), no older than
  ``max_action_age``;
- ``intervention``: the last ``policy/intervention`` (std_msgs/Bool) received at or before the
  frame's receipt; all false when the episode has no such topic (the summary says so);
- ``next.done`` (last frame) and ``next.success`` (last frame of an episode marked success).

Frames before every input is fresh and after one stops are left out (counted in the summary);
a gap inside is refused. Every bag is checked before anything is written; the dataset is then
written by LeRobot's own ``LeRobotDataset`` in the managed LeRobot runtime
(:mod:`egoroll_ros.bag.lerobot_writer`, a child process, no pickle). A failure removes the
partly written ``--out``, which must not exist (or be empty) beforehand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import json
import os
from pathlib import Path
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

import egoroll_ros
from egoroll_ros.bag.reader import BagReader, absolute
from egoroll_ros.core.dataset import (
    ExportError,
    fresh_window,
    latest_at,
    lerobot_features,
    measure_fps,
    nearest_at,
)
from egoroll_ros.errors import BagError, ConfigError

EPISODE_TOPIC = '/egoroll/episode'
OUTCOME_TOPIC = '/egoroll/outcome'
INTERVENTION = 'policy/intervention'
INTERVENTION_TYPE = 'std_msgs/msg/Bool'
SUMMARY_FILE = 'egoroll_export.json'
IMAGE_TYPES = ('sensor_msgs/msg/Image', 'sensor_msgs/msg/CompressedImage')


@dataclass
class ExportOptions:
    """Options of ``egoroll export`` (see ``egoroll export --help``)."""

    bags: list[Path]
    out: Path
    config: Path | None = None
    namespace: str = ''
    task: str = 'egoroll rollout'
    repo_id: str = ''
    video: bool = False
    max_action_age: float = 0.1
    python: str | None = None


@dataclass
class _Plan:
    """One checked episode: what each dataset frame is made of."""

    bag: Path
    joints: tuple[str, ...]
    cameras: dict[str, str]                  # camera -> absolute topic
    shapes: dict[str, tuple[int, int]]
    fps: int
    frames: np.ndarray                       # frame stamps (s after the first frame)
    image_index: dict[str, np.ndarray]       # camera -> message index per frame
    state: np.ndarray                        # (F, J)
    action: np.ndarray                       # (F, J)
    intervention: np.ndarray                 # (F,) bool
    has_intervention: bool
    outcome: str | None
    dropped: tuple[int, int]                 # frames left out at the start, at the end
    summary: dict[str, Any] = field(default_factory=dict)


class _Decoder:
    def __init__(self) -> None:
        from rclpy.serialization import deserialize_message

        from egoroll_ros.ros.bagio import message_class
        self._de, self._cls, self._types = deserialize_message, message_class, {}

    def __call__(self, msgtype: str, raw: bytes, where: str) -> Any:
        cls = self._types.get(msgtype) or self._types.setdefault(msgtype, self._cls(msgtype))
        try:
            return self._de(bytes(raw), cls)
        except Exception as exc:  # noqa: BLE001 - the C deserializer raises many types
            raise BagError(f'{where}: cannot decode the stored {msgtype} '
                           f'({type(exc).__name__}: {exc})') from None


def _stamp(msg: Any) -> int:
    return int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)


def _episode_config(path: Path, head: dict[str, Any], given: Path | None) -> dict[str, Any]:
    from egoroll_ros.ros.params import params_from_yaml
    from egoroll_ros.ros.policy_params import PARAMS as POLICY_PARAMS

    if given is not None:
        return params_from_yaml(given, 'policy_node', POLICY_PARAMS)
    configs = head.get('configs') or {}
    errors = []
    for name, text in configs.items():
        with tempfile.NamedTemporaryFile('w', suffix='.yaml', delete=False) as f:
            f.write(str(text))
        try:
            return params_from_yaml(f.name, 'policy_node', POLICY_PARAMS)
        except ConfigError as exc:
            errors.append(f'{name}: {str(exc).replace(f.name, name)}')
        finally:
            os.unlink(f.name)
    raise ConfigError(f'{path}: the episode stores no usable policy_node configuration '
                      f"({'; '.join(errors) or 'none stored'}); pass --config")


def _columns(names: tuple[str, ...], joints: tuple[str, ...], where: str) -> list[int]:
    missing = [j for j in joints if j not in names]
    if missing:
        raise ExportError(f"{where} lacks joint{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(missing)} of the configuration (it has: "
                          f"{', '.join(names) or 'none'})")
    return [names.index(j) for j in joints]


def plan_episode(path: Path, opts: ExportOptions) -> _Plan:
    """Read and check one episode bag; what its dataset frames are made of.

    Raises:
        BagError, ConfigError, ExportError: not an egoroll episode, a missing topic, joint
            names that differ from the configuration, an irregular frame rate, a gap.
    """
    decode = _Decoder()
    ns = opts.namespace
    with BagReader(path) as bag:
        if EPISODE_TOPIC not in bag.info.topics:
            raise BagError(f'{path}: not an egoroll episode (no {EPISODE_TOPIC}; record with '
                           f"'egoroll record'). The bag has: {bag.info.describe_topics()}")
        head: dict[str, Any] = {}
        outcome = None
        for _, mtype, _, raw in bag.messages([EPISODE_TOPIC, OUTCOME_TOPIC]):
            try:
                data = json.loads(decode(mtype, raw, str(path)).data)
            except ValueError:
                raise BagError(f'{path}: {EPISODE_TOPIC} is not JSON') from None
            if 'configs' in data and not head:
                head = data
            elif 'outcome' in data:
                outcome = data['outcome']
        meta = bag.custom_data().get('egoroll.episode')
        if meta:
            try:
                outcome = json.loads(meta).get('outcome', outcome)
            except (ValueError, AttributeError):
                raise BagError(f'{path}: its egoroll.episode metadata is not a JSON '
                               'object') from None
        cfg = _episode_config(path, head, opts.config)
        joints = tuple(cfg['joints'])
        names = list(cfg['cameras.names'])
        if not names:
            raise ConfigError(f'{path}: the configuration has no cameras (cameras.names); a '
                              'LeRobot frame is one camera frame')
        comp = list(cfg['cameras.compressed']) or [False] * len(names)
        if len(comp) != len(names):
            raise ConfigError(f'{path}: cameras.compressed has {len(comp)} values for '
                              f'{len(names)} cameras')
        cameras = {n: absolute(f'camera/{n}/image_raw' + ('/compressed' if c else ''), ns)
                   for n, c in zip(names, comp, strict=True)}
        js_topic, cmd_topic = absolute('joint_states', ns), absolute('executor/commanded', ns)
        iv_topic = absolute(INTERVENTION, ns)
        needs = {js_topic: ['sensor_msgs/msg/JointState'],
                 cmd_topic: ['sensor_msgs/msg/JointState']}
        for t in cameras.values():
            needs[t] = [IMAGE_TYPES[1] if t.endswith('/compressed') else IMAGE_TYPES[0]]
        has_iv = iv_topic in bag.info.topics
        if has_iv:
            needs[iv_topic] = [INTERVENTION_TYPE]
        bag.require(needs)

        # times as integer ns while reading, seconds relative to the first frame afterwards
        # (float seconds since 1970 resolve only about 0.2 us)
        cam_stamps: dict[str, list[int]] = {n: [] for n in cameras}
        cam_recv: dict[str, list[int]] = {n: [] for n in cameras}
        shapes: dict[str, tuple[int, int]] = {}
        topic_cam = {t: n for n, t in cameras.items()}
        series = {js_topic: ([], []), cmd_topic: ([], [])}
        iv_t, iv_v = [], []
        cols: dict[str, list[int]] = {}
        for topic, mtype, t_ns, raw in bag.messages(list(needs)):
            msg = decode(mtype, raw, f'{path}: {topic}')
            if topic in topic_cam:
                cam = topic_cam[topic]
                cam_stamps[cam].append(_stamp(msg))
                cam_recv[cam].append(t_ns)
                if cam not in shapes:
                    shapes[cam] = _image(msg, f'{path}: {topic}').shape[:2]
                elif mtype == IMAGE_TYPES[0] and (msg.height, msg.width) != shapes[cam]:
                    raise ExportError(f'{path}: {topic} changes size from {shapes[cam]} to '
                                      f'{(msg.height, msg.width)}')
            elif topic == iv_topic:
                iv_t.append(t_ns)
                iv_v.append(bool(msg.data))
            else:
                name = tuple(msg.name)
                if len(msg.position) != len(name):
                    raise ExportError(f'{path}: {topic} has {len(name)} names and '
                                      f'{len(msg.position)} positions')
                if topic not in cols or cols[topic][1] != name:
                    cols[topic] = (_columns(name, joints, f'{path}: {topic}'), name)
                stamps, values = series[topic]
                stamps.append(_stamp(msg))
                values.append(np.asarray(msg.position, dtype=float)[cols[topic][0]])

    ref = names[0]
    if not cam_stamps[ref]:
        raise ExportError(f'{path}: {cameras[ref]} has no frames')
    base = int(cam_stamps[ref][0])
    recv_base = int(cam_recv[ref][0])

    def rel(ns: list[int], b: int = base) -> np.ndarray:
        return (np.asarray(ns, dtype=np.int64) - b) * 1e-9

    fps = measure_fps(rel(cam_stamps[ref]), f'{path}: {cameras[ref]}')
    frames = rel(cam_stamps[ref])
    picks: dict[str, np.ndarray] = {}
    for n in names:
        st = rel(cam_stamps[n])
        if np.any(np.diff(st) <= 0):
            raise ExportError(f'{path}: {cameras[n]} header stamps do not increase')
        picks[cameras[n]] = np.arange(len(frames)) if n == ref else \
            nearest_at(frames, st, 0.5 / fps)
    for topic, age in ((js_topic, float(cfg['max_age.joint_states'])),
                       (cmd_topic, float(opts.max_action_age))):
        st = rel(series[topic][0])
        order = np.argsort(st, kind='stable')
        series[topic] = (st[order], np.asarray(series[topic][1])[order])
        picks[topic] = latest_at(frames, series[topic][0], age)
    try:
        first, last = fresh_window(frames, picks)
    except ExportError as exc:
        raise ExportError(f'{path}: {exc}') from None
    sel = slice(first, last + 1)
    state = series[js_topic][1][picks[js_topic][sel]]
    action = series[cmd_topic][1][picks[cmd_topic][sel]]
    recv = rel(cam_recv[ref], recv_base)[sel]
    if has_iv:
        k = latest_at(recv, rel(iv_t, recv_base), np.inf)
        inter = np.asarray(iv_v, dtype=bool)[np.maximum(k, 0)] & (k >= 0)
    else:
        inter = np.zeros(last - first + 1, dtype=bool)
    return _Plan(path, joints, cameras, {n: tuple(int(x) for x in s) for n, s in shapes.items()},
                 fps, frames[sel], {n: picks[cameras[n]][sel] for n in names}, state, action,
                 inter.astype(bool), has_iv, outcome, (first, len(frames) - 1 - last))


def _image(msg: Any, where: str) -> np.ndarray:
    from egoroll_ros.ros.images import decoder
    _, decode = decoder()
    try:
        img = np.asarray(decode(msg))
    except Exception as exc:  # noqa: BLE001 - decoders raise many types
        raise ExportError(f'{where}: cannot decode the image ({type(exc).__name__}: {exc})') \
            from None
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise ExportError(f'{where}: decoded to {img.shape} {img.dtype}, not HxWx3 uint8')
    return img


class _Writer:
    """The LeRobot writer child (:mod:`egoroll_ros.bag.lerobot_writer`)."""

    def __init__(self, python: str) -> None:
        from egoroll_ros.policies.protocol import FrameReader
        from egoroll_ros.runtimes import clean_env

        env = clean_env()
        env['PYTHONPATH'] = str(Path(egoroll_ros.__file__).resolve().parent.parent)
        try:
            self.proc = subprocess.Popen([python, '-m', 'egoroll_ros.bag.lerobot_writer'],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env=env, bufsize=0)
        except OSError as exc:
            raise ExportError(f"cannot start LeRobot's writer with {python}: "
                              f'{exc.strerror}') from None
        self.reader = FrameReader(self.proc.stdout.fileno())
        self.stderr: list[str] = []
        import threading
        self._pump = threading.Thread(target=self._read_err, daemon=True)
        self._pump.start()

    def _read_err(self) -> None:
        for raw in iter(self.proc.stderr.readline, b''):
            self.stderr.append(raw.decode(errors='replace').rstrip())
            del self.stderr[:-40]

    def call(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None,
             timeout: float = 600.0, reply: bool = True) -> dict[str, Any]:
        from egoroll_ros.policies.protocol import ProtocolError, encode_frame
        try:
            self.proc.stdin.write(encode_frame(header, arrays))
            self.proc.stdin.flush()
            if not reply:      # a frame: streamed, its failure is answered at save_episode
                return {}
            reply, _ = self.reader.read(timeout)
        except (OSError, ProtocolError) as exc:
            self.close()
            last = next((ln for ln in reversed(self.stderr) if ln.strip()), '')
            raise ExportError(f"LeRobot's writer failed during {header['op']} "
                              f'({type(exc).__name__}){": " + last if last else ""}') from None
        if not reply.get('ok'):
            raise ExportError(f"LeRobot's writer refused {header['op']}: "
                              f"{reply.get('error_type')}: {reply.get('message')}")
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f'--out {out} already exists and is not empty; refusing to '
                          'overwrite (choose a new directory)')


def _same(plans: list[_Plan]) -> None:
    a = plans[0]
    for p in plans[1:]:
        for what, x, y in (('joints', a.joints, p.joints), ('cameras', a.cameras, p.cameras),
                           ('image sizes', a.shapes, p.shapes), ('fps', a.fps, p.fps)):
            if x != y:
                raise ExportError(f'{p.bag}: {what} {y} differ from {a.bag}: {x}; one dataset '
                                  'holds one robot, camera set and rate')


def _write_episode(writer: _Writer, plan: _Plan, task: str) -> None:
    decode = _Decoder()
    cams = list(plan.cameras)
    need = {c: {int(i): [] for i in plan.image_index[c]} for c in cams}
    for c in cams:
        for f, i in enumerate(plan.image_index[c]):
            need[c][int(i)].append(f)
    images: dict[int, dict[str, np.ndarray]] = {}
    nframes, done = len(plan.frames), 0
    topic_cam = {t: c for c, t in plan.cameras.items()}
    counts = dict.fromkeys(cams, -1)
    n_flags = len(plan.frames) - 1
    with BagReader(plan.bag) as bag:
        for topic, mtype, _, raw in bag.messages(list(topic_cam)):
            cam = topic_cam[topic]
            counts[cam] += 1
            frames = need[cam].get(counts[cam])
            if not frames:
                continue
            img = _image(decode(mtype, raw, f'{plan.bag}: {topic}'), f'{plan.bag}: {topic}')
            if img.shape[:2] != plan.shapes[cam]:
                raise ExportError(f'{plan.bag}: {topic} frame {counts[cam]} is {img.shape[:2]}'
                                  f', the episode is {plan.shapes[cam]}')
            for f in frames:
                images.setdefault(f, {})[cam] = img
            while done < nframes and len(images.get(done, {})) == len(cams):
                arrays = {f'observation.images.{c}': images[done][c] for c in cams}
                arrays['observation.state'] = plan.state[done].astype(np.float32)
                arrays['action'] = plan.action[done].astype(np.float32)
                last = done == n_flags
                writer.call({'op': 'frame', 'task': task, 'flags': {
                    'intervention': bool(plan.intervention[done]), 'next.done': last,
                    'next.success': last and plan.outcome == 'success'}}, arrays, reply=False)
                del images[done]
                done += 1
    if done != nframes:
        raise ExportError(f'{plan.bag}: {nframes - done} frames lack an image on the second '
                          'read (the bag changed while exporting?)')
    writer.call({'op': 'save_episode'})


def export(opts: ExportOptions, log: Any = None) -> dict[str, Any]:
    """Export ``opts.bags`` to a LeRobot dataset at ``opts.out``; the summary (also written to
    ``<out>/egoroll_export.json``).

    Raises:
        EgorollError (BagError, ConfigError, ExportError): what is wrong, in one line; nothing
            is left at ``opts.out``.
    """
    say = log or (lambda _m: None)
    if not opts.bags:
        raise ExportError('no bags given')
    out = Path(opts.out)
    _check_out(out)
    plans = [plan_episode(Path(b), opts) for b in opts.bags]
    _same(plans)
    python = opts.python
    if not python:
        from egoroll_ros.runtimes import RuntimeSetupError, runtime_python
        try:
            python = str(runtime_python('lerobot'))
        except RuntimeSetupError as exc:
            raise ExportError(str(exc)) from None
    a = plans[0]
    features = lerobot_features(a.joints, a.shapes, video=opts.video)
    repo_id = opts.repo_id or f'egoroll/{out.name}'
    created = False
    writer = _Writer(python)
    try:
        if out.exists():
            out.rmdir()   # empty (checked): LeRobot creates it
        reply = writer.call({'op': 'create', 'root': str(out.resolve()), 'repo_id': repo_id,
                             'fps': a.fps, 'features': features, 'robot_type': None,
                             'use_videos': bool(opts.video),
                             # LeRobot's own asynchronous image writer (PNG encoding off the
                             # request loop), as its recording script uses it
                             'image_writer_threads': 4}, timeout=300.0)
        created = True
        version = reply.get('lerobot')
        for i, p in enumerate(plans):
            say(f'episode {i}: {p.bag} ({len(p.frames)} frames)')
            _write_episode(writer, p, opts.task)
        final = writer.call({'op': 'finalize'})
    except BaseException:
        writer.close()
        if created or out.exists():
            shutil.rmtree(out, ignore_errors=True)
        raise
    writer.close()
    summary = {
        'dataset': str(out), 'repo_id': repo_id, 'lerobot': version, 'fps': a.fps,
        'joints': list(a.joints), 'cameras': {c: list(s) for c, s in a.shapes.items()},
        'images': 'video (LeRobot default codec, lossy)' if opts.video else
        'image (PNG, lossless)', 'task': opts.task,
        'episodes': [{
            'bag': str(p.bag), 'frames': len(p.frames), 'outcome': p.outcome,
            'intervention': ('from ' + INTERVENTION) if p.has_intervention else
            f'no {INTERVENTION} topic in the episode: all frames false',
            'intervention_frames': int(p.intervention.sum()),
            'dropped_frames': {'start': p.dropped[0], 'end': p.dropped[1]},
        } for p in plans],
        'num_episodes': final.get('num_episodes'), 'num_frames': final.get('num_frames'),
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + '\n')
    return summary


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """Human-readable lines of an export summary."""
    lines = [f"wrote {summary['dataset']}: LeRobot {summary['lerobot']}, "
             f"{summary['num_episodes']} episodes, {summary['num_frames']} frames at "
             f"{summary['fps']} fps, cameras {', '.join(summary['cameras'])} "
             f"({summary['images']})"]
    for i, ep in enumerate(summary['episodes']):
        d = ep['dropped_frames']
        lines.append(f"  episode {i}: {ep['bag']}: {ep['frames']} frames, outcome "
                     f"{ep['outcome'] or 'not marked'}, intervention {ep['intervention']} "
                     f"({ep['intervention_frames']} frames), left out {d['start']} frames "
                     f"before every input was fresh and {d['end']} after")
    return lines


def main_export(opts: ExportOptions) -> int:
    """``egoroll export``: run and print the summary; errors propagate (exit 2)."""
    summary = export(opts, log=lambda m: print(m, file=sys.stderr, flush=True))
    for line in summary_lines(summary):
        print(line)
    return 0
