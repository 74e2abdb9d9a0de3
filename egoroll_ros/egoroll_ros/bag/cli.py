"""The ``replay``, ``evaluate``, ``record`` and ``export`` subcommands of ``egoroll``
(parsers and runners). ``egoroll_ros.cli`` adds them with the ``add_*_parser`` functions.
Errors are :class:`~egoroll_ros.errors.EgorollError`, which the ``egoroll`` entry point prints
as one line with exit status 2.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import sys
import time
from typing import Any

from egoroll_ros.errors import BagError, ConfigError, EgorollError


def add_replay_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``egoroll replay`` to the subparsers ``sub``."""
    p = sub.add_parser(
        'replay', help='publish a recorded rosbag into the live graph',
        description='Publish a rosbag2 (sqlite3 or mcap) into the ROS graph with its '
        'recorded timing, payloads as stored (no decode and re-encode). By default only sensor '
        'topics are played (cameras, IMUs, ...), and a recorded joint_states goes to '
        '/replay/joint_states; quest/joy, policy/*, safety/*, executor/*, execute_trajectory '
        'and robot_description are played only when named with --topics. A replay refuses to '
        'start (and stops, exit status 3) when a safety_gate or trajectory_server is on the '
        'domain, unless --into-live-graph. Ctrl-C (SIGINT) stops within a second with exit '
        'status 130, SIGTERM with 143.')
    p.add_argument('bag', type=Path, help='rosbag2 directory (or one .mcap / .db3 file)')
    p.add_argument('--rate', type=float, default=1.0, help='playback speed (default 1.0)')
    p.add_argument('--start', type=float, default=0.0,
                   help='seconds after the first message to start from')
    p.add_argument('--duration', type=float, default=None, help='seconds of bag time to play')
    p.add_argument('--loop', action='store_true', help='play again and again until Ctrl-C')
    p.add_argument('--topics', nargs='+', default=None, metavar='TOPIC',
                   help='play exactly these topics under their recorded names (default: the '
                   'sensor topics, joint_states under /replay)')
    p.add_argument('--remap', nargs='+', default=[], metavar='FROM:=TO',
                   help='publish a recorded topic under another name')
    p.add_argument('--into-live-graph', action='store_true',
                   help='play even when a safety_gate or trajectory_server is on the domain '
                   '(a robot graph): only for a graph you know is not driving a robot')
    p.add_argument('--discovery-time', type=float, default=3.0, metavar='S',
                   help='seconds to look for a robot graph on the domain before playing '
                   '(default 3.0: DDS discovery between processes takes up to ~2.2 s)')
    p.add_argument('--start-paused', action='store_true',
                   help='start paused; resume with the ~/resume service (std_srvs/Trigger; '
                   'also ~/pause and ~/toggle_paused)')
    p.add_argument('--clock', type=float, nargs='?', const=100.0, default=0.0, metavar='HZ',
                   help='also publish /clock (rosgraph_msgs/Clock) with the recorded time, '
                   'for nodes with use_sim_time (default 100 Hz when given)')
    p.add_argument('--wait-for-subscribers', type=float, default=0.0, metavar='S',
                   help='wait up to S seconds until every topic has a subscriber before '
                   'playing (default: start at once)')
    p.add_argument('--progress', choices=('auto', 'on', 'off'), default='auto',
                   help='progress bar on stderr (auto: when stderr is a terminal)')
    p.set_defaults(func=run_replay)
    return p


def add_evaluate_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``egoroll evaluate`` to the subparsers ``sub``."""
    p = sub.add_parser(
        'evaluate', help='run policy and gate offline over a bag',
        description='Deterministic offline run of a policy and the safety gate over a recorded '
        'episode: observations assembled as policy_node does, the policy queried every '
        '1/query_frequency s of bag time, every chunk checked by the gate against the '
        'recorded joint_states. Writes an mcap bag (chunks and verdicts), report.json and '
        'PNG plots. Exit status 0, 1 on a regression against --baseline, 2 on bad input.')
    p.add_argument('bag', type=Path, help='rosbag2 directory (or one .mcap / .db3 file)')
    p.add_argument('--config', type=Path, required=True,
                   help='policy_node parameters YAML (joints, cameras.*, policy.*, '
                   'query_frequency, max_age.*)')
    p.add_argument('--checkpoint', type=Path, default=None,
                   help='policy checkpoint directory (overrides policy.path of --config)')
    p.add_argument('--gate-config', type=Path, default=None,
                   help='safety_gate parameters YAML (default: the installed '
                   'config/safety_gate.yaml)')
    p.add_argument('--urdf', type=Path, default=None,
                   help="robot model (default: the bag's /robot_description, else the gate "
                   "config's urdf_path)")
    p.add_argument('--out', type=Path, default=None,
                   help='output directory (default ./egoroll-eval-<bag>-<date>-<time>)')
    p.add_argument('--namespace', default='',
                   help='namespace of the recorded topics (relative names are put under it)')
    p.add_argument('--baseline', type=Path, default=None, metavar='REPORT',
                   help='an earlier report.json: exit 1 when this run is worse')
    p.add_argument('--max-acceptance-drop', type=float, default=0.02,
                   help='with --baseline: largest allowed drop of the acceptance rate '
                   '(absolute, default 0.02)')
    p.add_argument('--max-error-increase', type=float, default=0.10,
                   help='with --baseline: largest allowed relative growth of the action '
                   'error MAE (default 0.10 = 10%%)')
    p.add_argument('--no-plots', action='store_true', help='skip the PNG plots')
    p.set_defaults(func=run_evaluate)
    return p


def add_record_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``egoroll record`` to the subparsers ``sub``."""
    p = sub.add_parser(
        'record', help='record each rollout as an episode bag',
        description='Run the episode_recorder node: every rollout of policy_node (preflight '
        'to stop) becomes <out>/episode_<NNNN>, an mcap bag with the inputs, chunks, status, '
        'verdicts, commanded joints, /diagnostics, the policy fingerprint and the full '
        'configuration; the operator marks success/failure with record/mark_success, '
        'record/mark_failure (std_srvs/Trigger) or Quest buttons. Ctrl-C closes the open '
        'episode.')
    p.add_argument('--out', type=Path, required=True, help='directory of the episodes')
    p.add_argument('--config', type=Path, default=None,
                   help='policy_node parameters YAML: its cameras are recorded, and it is '
                   'stored in every episode')
    p.add_argument('--gate-config', type=Path, default=None,
                   help='safety_gate parameters YAML, stored in every episode')
    p.add_argument('--namespace', default='', help='namespace of the rollout graph')
    p.add_argument('--outcome-window', type=float, default=10.0,
                   help='seconds after a stop to wait for the success/failure mark')
    p.add_argument('--success-button', type=int, default=-1,
                   help='Quest Joy button: success. Refused at start when the gate '
                   '(--gate-config: confirm_button, estop_button) or policy_node (--config: '
                   'quest.toggle_button, takeover.button) uses it')
    p.add_argument('--failure-button', type=int, default=-1,
                   help='Quest Joy button: failure (refused likewise)')
    p.add_argument('--extra-topics', nargs='+', default=[], metavar='TOPIC:TYPE',
                   help='more topics to record (e.g. /safety/interlock:std_msgs/msg/String)')
    p.set_defaults(func=run_record)
    return p


def add_export_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``egoroll export`` to the subparsers ``sub``."""
    p = sub.add_parser(
        'export', help='convert recorded episodes to a LeRobot dataset',
        description='Convert episode bags written by egoroll record to one LeRobot dataset '
        "with LeRobot's own writer (in the managed LeRobot runtime: egoroll runtime lerobot). "
        'Features: observation.state and action (the configured joints: joint_states and '
        'executor/commanded), observation.images.<camera>, intervention (from '
        'policy/intervention, std_msgs/Bool; all false without it), next.done, next.success '
        "(the operator's mark). One frame per frame of the first camera; fps measured from "
        'its header stamps (an irregular rate is refused). Exit status 2, with one line saying '
        'what is wrong, on a bag that is not an egoroll episode, a missing topic, joint names '
        'that differ from the configuration, an irregular rate, or an existing --out.')
    p.add_argument('bags', type=Path, nargs='+', metavar='BAG',
                   help='episode bags (rosbag2 directories or .mcap files), one episode each')
    p.add_argument('--out', type=Path, required=True,
                   help='dataset directory to create (must not exist, or be empty)')
    p.add_argument('--config', type=Path, default=None,
                   help='policy_node parameters YAML (joints, cameras.*, max_age.*; default: '
                   'the one stored in each episode)')
    p.add_argument('--namespace', default='',
                   help='namespace of the recorded topics (relative names are put under it)')
    p.add_argument('--task', default='egoroll rollout',
                   help="the task text of every frame (LeRobot's task; default "
                   "'egoroll rollout')")
    p.add_argument('--repo-id', default='',
                   help="the dataset's repo_id (default egoroll/<out directory name>)")
    p.add_argument('--video', action='store_true',
                   help="store cameras as video with LeRobot's default codec (lossy); default: "
                   'images, lossless PNG')
    p.add_argument('--max-action-age', type=float, default=0.1, metavar='S',
                   help='oldest executor/commanded setpoint a frame may take its action from '
                   '(default 0.1 s)')
    p.add_argument('--python', default=None,
                   help="interpreter with LeRobot's dataset extra (default: the managed "
                   'LeRobot runtime)')
    p.set_defaults(func=run_export)
    return p


def run_export(args: argparse.Namespace) -> int:
    """Run ``egoroll export``; 0 when the dataset was written."""
    from egoroll_ros.bag.export import ExportOptions, main_export

    if not args.max_action_age > 0:
        from egoroll_ros.errors import ConfigError
        raise ConfigError(f'--max-action-age must be positive, got {args.max_action_age}')
    return main_export(ExportOptions(
        bags=list(args.bags), out=args.out, config=args.config, namespace=args.namespace,
        task=args.task, repo_id=args.repo_id, video=args.video,
        max_action_age=args.max_action_age, python=args.python))


def run_record(args: argparse.Namespace) -> int:
    """Run ``egoroll record`` until Ctrl-C; the node's exit status."""
    from egoroll_ros.nodes.episode_recorder import main as recorder_main
    from egoroll_ros.ros.params import params_from_yaml
    from egoroll_ros.ros.policy_params import PARAMS as POLICY_PARAMS

    ros = ['--ros-args', '-p', f'out_dir:={args.out}',
           '-p', f'outcome_window:={float(args.outcome_window)}',
           '-p', f'quest.success_button:={args.success_button}',
           '-p', f'quest.failure_button:={args.failure_button}']
    files = [str(f) for f in (args.config, args.gate_config) if f is not None]
    if files:
        ros += ['-p', f"config_files:=[{','.join(repr(f) for f in files)}]"]
    if args.config is not None:
        # the cameras are what matters here; a recorder needs no joints or policy
        pp = params_from_yaml(args.config, 'policy_node', POLICY_PARAMS,
                              {'joints': ['_recorder']})
        if pp['cameras.names']:
            ros += ['-p', f"cameras.names:=[{','.join(pp['cameras.names'])}]"]
        if pp['cameras.compressed']:
            ros += ['-p', 'cameras.compressed:=[' + ','.join(
                str(bool(c)).lower() for c in pp['cameras.compressed']) + ']']
    if args.extra_topics:
        ros += ['-p', f"extra_topics:=[{','.join(args.extra_topics)}]"]
    if args.namespace:
        ros += ['-r', f"__ns:=/{args.namespace.strip('/')}"]
    return recorder_main(ros)


def run_evaluate(args: argparse.Namespace) -> int:
    """Run ``egoroll evaluate``; 0, or 1 on a regression against the baseline."""
    from egoroll_ros.bag.evaluate import EvaluateOptions, evaluate, summary_lines
    from egoroll_ros.bag.report import Thresholds

    out = args.out or Path.cwd() / time.strftime(
        f'egoroll-eval-{Path(args.bag).name}-%Y%m%d-%H%M%S')
    opts = EvaluateOptions(
        bag=args.bag, config=args.config, out_dir=out, checkpoint=args.checkpoint,
        gate_config=args.gate_config, urdf=args.urdf, namespace=args.namespace,
        baseline=args.baseline, plots=not args.no_plots,
        thresholds=Thresholds(max_acceptance_drop=args.max_acceptance_drop,
                              max_error_increase=args.max_error_increase))
    report = evaluate(opts)
    for line in summary_lines(report):
        print(line)
    for w in report['warnings']:
        print(f'warning: {w}', file=sys.stderr)
    cmp_ = report.get('comparison')
    return 1 if cmp_ is not None and cmp_['regressions'] else 0


def _fast_dds_profile() -> None:
    """Point Fast DDS at the replay's writer profile (a 20 ms heartbeat, see
    ``config/replay_fastdds.xml``) unless the user chose a profile file; before rclpy.init,
    in this process only. Other RMWs ignore it."""
    import os

    if os.environ.get('FASTDDS_DEFAULT_PROFILES_FILE') or \
            os.environ.get('FASTRTPS_DEFAULT_PROFILES_FILE'):
        return
    from ament_index_python.packages import get_package_share_directory
    xml = Path(get_package_share_directory('egoroll_ros')) / 'config' / 'replay_fastdds.xml'
    if xml.is_file():
        # Fast DDS 2 (Humble, Iron, Jazzy) reads the old name; Fast DDS 3 (Kilted) the new one
        # and warns about the old one.
        old = os.environ.get('ROS_DISTRO', '') in ('humble', 'iron', 'jazzy')
        os.environ['FASTRTPS_DEFAULT_PROFILES_FILE' if old else
                   'FASTDDS_DEFAULT_PROFILES_FILE'] = str(xml)


#: Exit status of a replay refused or stopped because a robot graph is on the domain.
EXIT_LIVE_GRAPH = 3
#: Node names (last segment) and topic types that mark a graph driving a robot.
_ROBOT_NODES = ('safety_gate', 'trajectory_server')
_ROBOT_TYPES = ('egoroll_interfaces/msg/InterlockHeartbeat',
                'egoroll_interfaces/action/ExecuteTrajectory_FeedbackMessage')


def robot_graph_nodes(node: Any) -> list[str]:
    """What on ``node``'s domain marks a graph driving a robot: a safety_gate or
    trajectory_server node (any namespace), or a publisher of the gate's heartbeat or of an
    ExecuteTrajectory action (whatever its node is called)."""
    found = [f"{ns.rstrip('/')}/{name}" for name, ns in node.get_node_names_and_namespaces()
             if name in _ROBOT_NODES]
    for topic, types in node.get_topic_names_and_types():
        if any(t in _ROBOT_TYPES for t in types) and node.count_publishers(topic) > 0:
            found.append(f'a publisher of {topic}')
    return sorted(set(found))


def run_replay(args: argparse.Namespace) -> int:
    """Run ``egoroll replay``; 0 when every message was published, 130 on SIGINT, 143 on
    SIGTERM, 3 when a robot graph is on the domain (without --into-live-graph)."""
    import signal

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    from egoroll_ros.bag.player import Player
    from egoroll_ros.bag.replay import ReplayOptions, parse_remaps, skipped_topics

    if not (args.discovery_time >= 0.0):
        raise ConfigError(f'--discovery-time: must be >= 0, got {args.discovery_time}')
    opts = ReplayOptions(rate=args.rate, start=args.start, duration=args.duration,
                         loop=args.loop, topics=tuple(args.topics) if args.topics else None,
                         remap=parse_remaps(args.remap))
    show = args.progress == 'on' or (args.progress == 'auto' and sys.stderr.isatty())
    # Signals only set a flag (and stop playback): nothing is raised into rclpy, a lock or a
    # thread join, so every mode (loop, clock, rate, paused, waiting) ends within one slice.
    got: list[int] = []
    player_ref: list[Player] = []

    def on_signal(signum: int, _frame: object) -> None:
        got.append(signum)
        if player_ref:
            player_ref[0].stop()

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    _fast_dds_profile()
    context = rclpy.Context()
    try:
        from rclpy.signals import SignalHandlerOptions
        rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    except ImportError:      # older rclpy: its handler shuts the context down on Ctrl-C
        rclpy.init(context=context)
        for sig in old:
            signal.signal(sig, on_signal)
    node = Node('egoroll_replay', context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    finished_cleanly = True
    stuck_code: list[int] = []

    def spin_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while not got and time.monotonic() < end:
            executor.spin_once(timeout_sec=min(0.05, max(0.0, end - time.monotonic())))

    def interrupted() -> int:
        code = 143 if got[0] == signal.SIGTERM else 130
        name = 'SIGTERM' if got[0] == signal.SIGTERM else 'Ctrl-C'
        published = player_ref[0].published if player_ref else 0
        print(f'\negoroll replay: stopped by {name} after {published} messages',
              file=sys.stderr, flush=True)
        return code

    try:
        player = Player(node, str(args.bag), opts, clock_rate=args.clock,
                        progress=sys.stderr if show else None)
        player_ref.append(player)
        skipped = skipped_topics(player.info, opts)
        if skipped:
            print(f"not replayed (they steer the robot half; name them with --topics): "
                  f"{', '.join(skipped)}", file=sys.stderr, flush=True)
        if not player.topics:
            raise ConfigError(f'{args.bag}: nothing to replay: the bag has only topics a '
                              'replay does not play by default; name them with --topics')
        moved = [f'{src} -> {dst}' for src, dst in player.topics.items() if src != dst]
        if moved:
            print(f"published under other names: {', '.join(moved)}", file=sys.stderr,
                  flush=True)

        def live_graph() -> list[str]:
            return [] if args.into_live_graph else robot_graph_nodes(node)

        if not args.into_live_graph:
            spin_for(args.discovery_time)
            if got:
                return interrupted()
            robots = live_graph()
            if robots:
                print(f"egoroll replay: refused: a robot graph is on this domain "
                      f"({', '.join(robots)}); a replay must not feed a robot. Use another "
                      'ROS_DOMAIN_ID, or --into-live-graph for a graph you know is not driving '
                      'a robot', file=sys.stderr, flush=True)
                return EXIT_LIVE_GRAPH

        def service(action: Any, word: str) -> Any:
            def handle(_req: Any, resp: Any) -> Any:
                action()
                resp.success, resp.message = True, f'{word}: paused={player.paused}'
                print(f'egoroll replay: {word}', file=sys.stderr, flush=True)
                return resp
            return handle

        node.create_service(Trigger, '~/pause', service(player.pause, 'paused'))
        node.create_service(Trigger, '~/resume', service(player.resume, 'resumed'))
        node.create_service(Trigger, '~/toggle_paused', service(
            lambda: player.resume() if player.paused else player.pause(), 'toggled'))
        if args.start_paused:
            player.pause()
        win = (player.schedule.stop_ns - player.schedule.start_ns) * 1e-9
        print(f'replaying {args.bag} ({player.info.storage}): {len(player.topics)} topics, '
              f'{win:.2f} s of bag time at x{opts.rate:g}'
              + (', looping' if opts.loop else '') + (', /clock' if args.clock else '')
              + (', paused (call ~/resume)' if args.start_paused else ''),
              file=sys.stderr, flush=True)
        if args.wait_for_subscribers > 0:
            deadline = time.monotonic() + args.wait_for_subscribers
            while not got and time.monotonic() < deadline:
                if not player.wait_for_subscribers(0.0):
                    break
                spin_for(0.05)
            lonely = player.wait_for_subscribers(0.0)
            if lonely and not got:
                print(f"no subscriber yet on {', '.join(lonely)}; playing anyway",
                      file=sys.stderr, flush=True)
        if got:
            return interrupted()
        player.start()
        next_look = time.monotonic() + 0.25
        while not player.join(0.0):
            spin_for(0.05)
            if got:
                player.stop()
                finished_cleanly = player.join(0.8)
                stuck_code.append(interrupted())
                return stuck_code[-1]
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + 0.25
                robots = live_graph()
                if robots:
                    player.stop()
                    finished_cleanly = player.join(0.8)
                    print(f"\negoroll replay: stopped: a robot graph appeared on this domain "
                          f"({', '.join(robots)}) after {player.published} messages",
                          file=sys.stderr, flush=True)
                    stuck_code.append(EXIT_LIVE_GRAPH)
                    return EXIT_LIVE_GRAPH
        if player.error is not None:
            if isinstance(player.error, EgorollError):
                raise player.error
            raise BagError(f'playback failed: {type(player.error).__name__}: {player.error}')
        if got:
            return interrupted()
        print(f'published {player.published} messages '
              f"({', '.join(f'{t} {n}' for t, n in player.published_by_topic.items())}); "
              f'latest publish {player.late_max * 1e3:.1f} ms after its due time',
              file=sys.stderr, flush=True)
        return 0
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if finished_cleanly:
            executor.shutdown(timeout_sec=0.5)
            node.destroy_node()
            context.try_shutdown()
        else:
            # The playback thread is stuck in a native publish: leave now (the OS closes the
            # DDS participant; tearing it down under a publishing thread could crash).
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(stuck_code[-1] if stuck_code else 130)
