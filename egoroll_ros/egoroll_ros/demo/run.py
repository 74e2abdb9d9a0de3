"""`egoroll demo`: bring up the demo graph, run preflight and a rollout, report.

The nodes run as subprocesses of their installed console scripts with the installed demo
configuration (``share/egoroll_ros/config/*.yaml``), exactly as ``sim_launch.py`` starts them;
this command only adds what a person at the robot would do: hold the Quest deadman, run
preflight, start, watch, stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import json
import os
from pathlib import Path
import sys
import time
from typing import Any, TextIO

from egoroll_interfaces.msg import RolloutStatus
from egoroll_ros.core.launch_graph import NodeSpec, describe
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.demo.report import write_report
from egoroll_ros.demo.supervisor import DemoSupervisor
from egoroll_ros.errors import ConfigError
from egoroll_ros.ros.graph import RosGraph, wait_until
from egoroll_ros.ros.processes import ProcessLauncher
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME

#: Topics ``--record`` writes (every topic of the demo graph; robot_description latched).
RECORD_TOPICS = [
    ('joint_states', 'sensor_msgs/msg/JointState'),
    ('camera/scene/image_raw', 'sensor_msgs/msg/Image'),
    ('quest/joy', 'sensor_msgs/msg/Joy'),
    ('sim/target', 'geometry_msgs/msg/PointStamped'),
    ('policy/chunk', 'egoroll_interfaces/msg/ActionChunk'),
    ('policy/status', 'egoroll_interfaces/msg/RolloutStatus'),
    ('safety/verdict', 'egoroll_interfaces/msg/GateVerdict'),
    ('command', 'sensor_msgs/msg/JointState'),
    ('executor/commanded', 'sensor_msgs/msg/JointState'),
    ('executor/planned', 'sensor_msgs/msg/JointState'),
    ('safety/markers', 'visualization_msgs/msg/MarkerArray'),
    ('/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray'),
    ('robot_description', 'std_msgs/msg/String', 'latched'),
]


@dataclass
class DemoOptions:
    """Options of ``egoroll demo`` (see ``egoroll demo --help``)."""

    duration: float = 30.0
    report_dir: Path | None = None
    record: Path | None = None
    checkpoint: Path | None = None
    seed: int = 0
    quiet: bool = False
    cartesian: bool = False
    #: Extra parameters per node name (benchmarks/bench_seams.py runs each seam and
    #: aggregation mode this way), applied after the installed configuration.
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)


def share_dir() -> Path:
    """The installed share directory of egoroll_ros."""
    from ament_index_python.packages import get_package_share_directory
    return Path(get_package_share_directory('egoroll_ros'))


def demo_checkpoint(checkpoint: Path | None) -> tuple[Path, str]:
    """The checkpoint directory and the fingerprint its manifest vouches for.

    Raises:
        ConfigError: no manifest, or a manifest without a fingerprint.
    """
    path = checkpoint or share_dir() / 'policies' / 'demo'
    manifest = path / 'manifest.json'
    try:
        fingerprint = json.loads(manifest.read_text())['fingerprint']
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f'demo policy: cannot read the fingerprint from {manifest} ({exc}); '
                          'train one with `egoroll train-demo --out DIR`') from None
    return path, str(fingerprint)


#: The scripted Cartesian demo: a policy backend that traces a small circle with tool0
#: (docs/cartesian.md), its configs, and the gate's Cartesian stage (checks, IK, joint checks).
CARTESIAN_POLICY_CONFIG = 'policy_node_cartesian.yaml'
CARTESIAN_GATE_CONFIG = 'safety_gate_cartesian.yaml'


def demo_graph(checkpoint: Path | None, fingerprint: str,
               overrides: dict[str, dict[str, Any]] | None = None) -> list[NodeSpec]:
    """The demo's nodes: the ``sim`` graph of :mod:`egoroll_ros.core.launch_graph` (what
    ``ros2 launch egoroll_ros sim_launch.py`` starts) with the demo's arguments, the arm starting
    at the task's home pose; ``checkpoint`` None: the scripted Cartesian variant (no camera)."""
    cfg = share_dir() / 'config'
    args = {'sim_camera': 'false',
            'safety_gate_params': str(cfg / CARTESIAN_GATE_CONFIG),
            'policy_node_params': str(cfg / CARTESIAN_POLICY_CONFIG)} if checkpoint is None \
        else {'policy_path': str(checkpoint), 'policy_fingerprint': fingerprint}
    return describe('sim', args, share_dir(),
                    overrides=_merged({'sim_robot': {'initial_positions': list(HOME)}},
                                      overrides or {}))


def _executor_limits(overrides: dict[str, dict[str, Any]]) -> tuple[list, list] | None:
    """max_acceleration and max_jerk the demo's executor runs with (for the seam figures)."""
    import yaml

    try:
        data = yaml.safe_load((share_dir() / 'config' / 'trajectory_server.yaml').read_text())
        from egoroll_ros.core.launch_graph import node_parameters
        p = dict(node_parameters(data, 'trajectory_server'))
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return None
    p.update(overrides.get('trajectory_server', {}))
    if not p.get('max_jerk'):
        return None
    return list(p['max_acceleration']), list(p['max_jerk'])


def _merged(base: dict[str, dict[str, Any]], extra: dict[str, dict[str, Any]]
            ) -> dict[str, dict[str, Any]]:
    out = {k: dict(v) for k, v in base.items()}
    for node, params in extra.items():
        out.setdefault(node, {}).update(params)
    return out


def _status_line(sup: DemoSupervisor) -> str:
    acc, rej, reached_n, shown = sup.counts()
    st = sup.status
    state = st.state_name if st is not None else '?'
    chunks = st.chunks_published if st is not None else 0
    from egoroll_ros.demo.report import tracking_error
    with sup.lock:
        err = tracking_error(sup.log) if len(sup.log.t_commanded) > 1 else {'max': float('nan')}
        dist = sup.tool_distance
    return (f'[{max(sup.now(), 0.0):5.1f}s] {state:<8} chunks {chunks:4d} | gate {acc} ok '
            f'{rej} rejected | track err max {err["max"]:.3f} | target dist {dist:.3f} m | '
            f'targets {reached_n}/{shown} reached')


class StatusPrinter:
    """The demo's live status line: redrawn in place on a terminal; elsewhere (a pipe, CI, a
    systemd journal, ``| tee``) one whole line every ``period`` seconds instead of an unbroken
    line of carriage returns."""

    def __init__(self, out: TextIO, period: float = 5.0) -> None:
        self.out = out
        self.period = period
        isatty = getattr(out, 'isatty', None)
        self.tty = bool(isatty()) if callable(isatty) else False
        self._last: float | None = None
        self._drawn = False

    def show(self, line: str, now: float | None = None) -> None:
        """Show ``line`` (now, on a terminal; at most once per period otherwise)."""
        now = time.monotonic() if now is None else now
        if self.tty:
            print('\r' + line, end='', file=self.out, flush=True)
            self._drawn = True
        elif self._last is None or now - self._last >= self.period:
            print(line, file=self.out, flush=True)
            self._last = now

    def finish(self) -> None:
        """End the redrawn line (terminal only)."""
        if self._drawn:
            print(file=self.out, flush=True)
            self._drawn = False


#: Gate verdicts on the preflight's shadow chunk that mean "not ready yet", not "unsafe": no
#: robot model yet (robot_description still arriving), no joint_states yet, the supervisor's
#: held deadman not yet received (DDS discovery), the executor's action server not yet
#: discovered, or a chunk that waited while the gate was still starting (loading the model and
#: IK takes ~0.5 s). Retried until the timeout; a persistent one fails the preflight with its
#: message.
GATE_NOT_READY = frozenset({'robot_model', 'joint_state', 'deadman', 'chunk_age',
                            'chunk_in_past', 'executor_unavailable'})


def _preflight(sup: DemoSupervisor, timeout: float = 30.0) -> tuple[bool, str]:
    """Preflight until the policy's shadow chunk is ACCEPTED by the gate: the whole pipeline
    is ready, not only the policy (policy/preflight itself succeeds only then). Not-ready
    verdicts are retried until ``timeout``; any other rejection ends it (the demo does not
    start a rollout the gate would reject)."""
    ok, msg = False, 'no attempt'
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sup.republish_target()
        with sup.lock:
            seen = len(sup.log.verdicts)
        ok, msg = sup.call('preflight')
        verdict = sup.wait_shadow_verdict(seen, 5.0 if ok else 0.5)
        if verdict is not None and not verdict.accepted:
            ok, msg = False, f'the gate rejected the shadow chunk: {verdict.summary}'
            if not {v['check'] for v in verdict.violations} <= GATE_NOT_READY:
                return False, msg
        elif ok and verdict is None:
            ok, msg = False, f'{msg}, but the demo saw no gate verdict on it within 5 s'
        elif ok:
            return True, f'{msg}; the gate accepted it'
        time.sleep(0.5)  # inputs still arriving; the message says which
    return ok, msg


def refuse_foreign_graph(probe: Any, specs: list[NodeSpec], settle: float = 1.0,
                         own: int = 0) -> None:
    """Refuse to run beside another graph with the demo's node names in this ROS domain.

    Two such graphs talk to each other: the other graph's policy feeds this gate (chunks it
    refuses as old sequences or jumps from a state it never measured), this executor answers
    the other gate. ``own`` is how many instances of each name are the demo's own (0 before
    it starts them, 1 once they run); ``settle`` is how long to watch discovery first.

    Raises:
        ConfigError: naming the nodes already present and the domain id.
    """
    names = {(s.namespace or '/', s.name) for s in specs}
    deadline = time.monotonic() + settle
    while True:
        seen: dict[tuple[str, str], int] = {}
        for name, ns in probe.get_node_names_and_namespaces():
            if (ns, name) in names:
                seen[(ns, name)] = seen.get((ns, name), 0) + 1
        foreign = sorted(f"{ns.rstrip('/')}/{name}" for (ns, name), n in seen.items()
                         if n > own)
        if foreign:
            domain = os.environ.get('ROS_DOMAIN_ID', '0')
            raise ConfigError(
                f'ROS_DOMAIN_ID={domain} already has {", ".join(foreign)} (another egoroll '
                'graph?); the demo would talk to it. Stop that graph or run the demo with '
                'another ROS_DOMAIN_ID')
        if time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def run_demo(opts: DemoOptions, out: TextIO = sys.stdout) -> int:
    """Run the demo; return the exit status (0 only when the run was clean and useful)."""
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    report_dir = opts.report_dir or Path.cwd() / time.strftime('egoroll-demo-%Y%m%d-%H%M%S')
    if opts.cartesian:
        checkpoint, fingerprint = None, 'scripted_cartesian'
    else:
        checkpoint, fingerprint = demo_checkpoint(opts.checkpoint)
    model = RobotModel.from_file(share_dir() / 'urdf' / 'demo_arm.urdf')
    what = 'scripted Cartesian policy (tool0 traces a circle)' if opts.cartesian else \
        f'policy {checkpoint} ({fingerprint[:12]})'
    print(f'egoroll demo: {what}, report -> {report_dir}', file=out, flush=True)
    # Every supervisor callback is short: one thread (a multi-threaded executor here took
    # 57-84 % of one of the two cores the demo graph runs on, and its nodes stalled).
    graph = RosGraph(num_threads=1)
    launch = ProcessLauncher(graph.node('egoroll_demo_probe'), report_dir / 'logs')
    recorder = None
    code = 1
    try:
        sup = graph.add(DemoSupervisor(DEMO_JOINTS, model, seed=opts.seed,
                                       context=graph.context))
        if opts.record is not None:
            from egoroll_ros.ros.bagio import BagRecorder
            recorder = BagRecorder(graph.node('egoroll_demo_recorder'), opts.record,
                                   RECORD_TOPICS)
        specs = demo_graph(checkpoint, fingerprint, opts.overrides)
        refuse_foreign_graph(launch.probe, specs)
        print(f'starting {", ".join(s.name for s in specs)} ...', file=out, flush=True)
        launch.start_graph(specs)
        if not opts.cartesian:
            sup.new_target()
        wait_until(lambda: sup.status is not None and sup.status.state ==
                   RolloutStatus.STATE_IDLE, 60.0, 'policy_node configured (IDLE)')
        refuse_foreign_graph(launch.probe, specs, settle=0.0, own=1)
        ok, msg = _preflight(sup)
        if not ok:
            print(f'preflight failed: {msg}', file=out)
            return 1
        print(msg, file=out, flush=True)
        sup.start_clock()
        ok, msg = sup.call('start')
        if not ok:
            print(f'start refused: {msg}', file=out)
            return 1
        end = time.monotonic() + opts.duration
        status = StatusPrinter(out)
        while time.monotonic() < end:
            if not opts.quiet:
                status.show(_status_line(sup))
            if sup.log.gate_faults or sup.log.policy_faults:
                break
            time.sleep(0.25)
        status.finish()
        sup.stopping = True
        ok, msg = sup.call('stop')
        if not ok:
            print(f'stop failed: {msg}', file=out)
        duration = sup.now()
        with sup.lock:
            summary = write_report(sup.log, duration, report_dir, task=not opts.cartesian,
                                   limits=_executor_limits(opts.overrides))
        task = '' if opts.cartesian else (
            f'targets reached {summary["targets_reached"]}/{summary["targets_shown"]} '
            f'(success rate {summary["success_rate"]:.0%}), ')
        print(f'{task}chunks accepted {summary["chunks_accepted"]}, rejected '
              f'{summary["chunks_rejected"]}', file=out)
        for rej in summary['rejections']:
            print(f'  rejected chunk {rej["sequence"]} at {rej["t"]:.1f}s: {rej["summary"]}',
                  file=out)
        for failure in summary['failures']:
            print(f'FAILED: {failure}', file=out)
        print(f'report: {report_dir}/summary.json, {report_dir}/joints.png', file=out)
        code = 0 if summary['ok'] else 1
    except AssertionError as exc:
        print(f'\negoroll demo: {exc}', file=out)
        code = 1
    finally:
        if recorder is not None:
            recorder.close()
            print(f'recorded {sum(recorder.counts.values())} messages to {opts.record}',
                  file=out)
        launch.stop_all()
        graph.close()
    return code
