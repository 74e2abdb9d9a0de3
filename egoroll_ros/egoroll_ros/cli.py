"""The ``egoroll`` command: tools around the node graph (demo, replay, evaluate)."""

from __future__ import annotations

import argparse
import sys

DEMO_PLAN = """\
egoroll demo: NOT AVAILABLE YET. This release only prints the plan.

When finished, `egoroll demo` will bring up on this machine, with no robot and no ROS install:
  sim_robot          a simulated arm that tracks `command` and publishes `joint_states`
  sim_camera         images rendered from the arm's state and a task target
  policy_node        the shipped demo policy (egoroll_act, safetensors weights)
  safety_gate        checks every predicted chunk before anything moves
  trajectory_server  executes accepted chunks with preemption
then run preflight (a shadow chunk the gate reports on), start the rollout, show a live status
line, and after --duration seconds write a report (summary JSON + plot) and exit 0 when a target
was reached with no safety fault.
"""


def _cmd_demo(args: argparse.Namespace) -> int:
    print(DEMO_PLAN)
    return 0


def _not_yet(name: str):
    def run(args: argparse.Namespace) -> int:
        print(f'egoroll {name}: not implemented yet', file=sys.stderr)
        return 2
    return run


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``egoroll`` command."""
    parser = argparse.ArgumentParser(
        prog='egoroll', description='Run learned manipulation policies on robot arms, safely.')
    sub = parser.add_subparsers(dest='command', required=True)
    demo = sub.add_parser('demo', help='the whole graph on the simulated robot')
    demo.add_argument('--duration', type=float, default=30.0, help='seconds to run')
    demo.set_defaults(func=_cmd_demo)
    from egoroll_ros.bag.cli import add_evaluate_parser, add_replay_parser
    add_replay_parser(sub)
    add_evaluate_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``egoroll`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == '__main__':
    sys.exit(main())
