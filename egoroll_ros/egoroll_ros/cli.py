"""The ``egoroll`` command: tools around the node graph (demo, train-demo, replay, evaluate)."""

from __future__ import annotations

import argparse
from pathlib import Path
import sys

from egoroll_ros.errors import EgorollError


def _cmd_demo(args: argparse.Namespace) -> int:
    from egoroll_ros.demo.run import DemoOptions, run_demo
    return run_demo(DemoOptions(duration=args.duration, report_dir=args.report,
                                record=args.record, checkpoint=args.checkpoint, seed=args.seed,
                                quiet=args.quiet, cartesian=args.cartesian))


def _cmd_train_demo(args: argparse.Namespace) -> int:
    from egoroll_ros.demo.train import DemoTrainingConfig, train_demo_policy
    from egoroll_ros.sim.demo_task import demo_urdf_path

    given = {k: v for k, v in (('episodes', args.episodes), ('steps', args.steps),
                                ('seed', args.seed)) if v is not None}
    cfg = DemoTrainingConfig(**given)
    manifest = train_demo_policy(args.out, demo_urdf_path(), cfg,
                                 eval_episodes=args.eval_episodes)
    print(f"wrote {args.out} (fingerprint {manifest['fingerprint']})")
    return 0


def _cmd_runtime(args: argparse.Namespace) -> int:
    from egoroll_ros.runtimes import main_runtime
    return main_runtime(args.name, check_only=args.check)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``egoroll`` command."""
    parser = argparse.ArgumentParser(
        prog='egoroll', description='Run learned manipulation policies on robot arms, safely.')
    sub = parser.add_subparsers(dest='command', required=True)

    demo = sub.add_parser(
        'demo', help='the whole graph on the simulated robot with the demo policy',
        description='Bring up sim_robot, sim_camera, policy_node (demo policy), safety_gate and '
        'trajectory_server; run preflight, start the rollout, show a live status line, and '
        'write a report. Exit status 0 only when no safety fault latched, the executor never '
        'aborted and at least one target was reached.')
    demo.add_argument('--duration', type=float, default=30.0,
                      help='seconds of rollout (default 30)')
    demo.add_argument('--report', type=Path, default=None,
                      help='report directory (default ./egoroll-demo-<date>-<time>)')
    demo.add_argument('--record', type=Path, default=None, metavar='BAG',
                      help='also record every topic to this rosbag2 directory (mcap)')
    demo.add_argument('--checkpoint', type=Path, default=None,
                      help='policy checkpoint with a manifest.json (default: the shipped one)')
    demo.add_argument('--seed', type=int, default=0, help='seed of the target sequence')
    demo.add_argument('--quiet', action='store_true', help='no live status line')
    demo.add_argument('--cartesian', action='store_true',
                      help='the scripted Cartesian policy instead (end-effector poses, checked '
                      'in Cartesian space, IK, then joint space): tool0 traces a circle')
    demo.set_defaults(func=_cmd_demo)

    train = sub.add_parser('train-demo', help='record the scripted expert and train the demo '
                           'policy (egoroll_act) on CPU')
    train.add_argument('--out', type=Path, required=True, help='checkpoint directory to write')
    train.add_argument('--episodes', type=int, default=None,
                       help='expert episodes to record (default: DemoTrainingConfig)')
    train.add_argument('--steps', type=int, default=None,
                       help='training steps (default: DemoTrainingConfig)')
    train.add_argument('--seed', type=int, default=None, help='seed (default 0)')
    train.add_argument('--eval-episodes', type=int, default=10,
                       help='offline closed-loop evaluation episodes (0: none)')
    train.set_defaults(func=_cmd_train_demo)

    rt = sub.add_parser(
        'runtime', help='build (once) a managed Python runtime, e.g. lerobot; prints its python',
        description='Create the pinned virtual environment NAME (lerobot: Python 3.12, '
        'lerobot 0.6.1, torch and every transitive package from the lock file shipped in '
        'egoroll_ros/runtimes/) under ${XDG_CACHE_HOME:-~/.cache}/egoroll/runtimes, keyed by the '
        "lock's hash. Idempotent: a built runtime returns at once. Prints the interpreter path.")
    from egoroll_ros.runtimes import RUNTIMES
    rt.add_argument('name', choices=sorted(RUNTIMES), help='runtime name')
    rt.add_argument('--check', action='store_true',
                    help='only locate it: exit 2 with the reason when it is not built')
    rt.set_defaults(func=_cmd_runtime)

    from egoroll_ros.bag.cli import (
        add_evaluate_parser,
        add_export_parser,
        add_record_parser,
        add_replay_parser,
    )
    add_replay_parser(sub)
    add_evaluate_parser(sub)
    add_record_parser(sub)
    add_export_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``egoroll`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except EgorollError as exc:
        print(f'egoroll {args.command}: {type(exc).__name__}: {exc}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f'egoroll {args.command}: interrupted', file=sys.stderr)
        return 130


if __name__ == '__main__':
    sys.exit(main())
