#!/usr/bin/env python3
"""Run a command beside CPU hogs: a loaded robot computer (drivers, cameras, a browser).

    tools/under_load.py [--hogs N] [--nice K] -- CMD [ARGS...]

Starts N busy-loop processes (``nice`` K: 0 competes with the command as an equal, 19 yields
to it), runs CMD, stops the hogs, and exits with CMD's status (a signal -> 128 + signal). The
hogs are stopped however this ends (CMD fails, SIGINT, SIGTERM), and they die with this process
(PR_SET_PDEATHSIG) so none is ever left spinning.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

_HOG = ('import ctypes, os, signal\n'
        'ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n'  # PR_SET_PDEATHSIG: die with the parent
        'if os.getppid() == 1: raise SystemExit(0)\n'
        'while True: pass\n')


def start_hogs(count: int, niceness: int) -> list[subprocess.Popen]:
    """``count`` busy-loop processes at ``niceness``."""
    def lower() -> None:
        os.nice(niceness)
        # With autogroups (sched_autogroup_enabled, the default on most distributions) a
        # task's nice only ranks it inside its session's group, and the groups share the CPUs
        # as equals: a hog in the test's session would compete with each node's session at
        # full weight whatever its nice. Its own session, with the group's nice set too, makes
        # it the background work it stands for.
        try:
            with open('/proc/self/autogroup', 'w') as f:
                f.write(str(niceness))
        except OSError:
            pass   # no autogroups: the task's nice is all there is
    hogs = []
    for _ in range(count):
        hogs.append(subprocess.Popen(
            [sys.executable, '-S', '-c', _HOG], stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=lower if niceness else None))
    return hogs


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        if hog.poll() is None:
            hog.kill()
    for hog in hogs:
        hog.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hogs', type=int, default=2, help='busy processes (default 2)')
    parser.add_argument('--nice', type=int, default=0,
                        help='niceness of the hogs, 0..19 (default 0: equal competitors)')
    parser.add_argument('command', nargs=argparse.REMAINDER, help='-- CMD [ARGS...]')
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    if not command:
        parser.error('no command given (tools/under_load.py --hogs 2 -- CMD ...)')
    if args.hogs < 0 or not 0 <= args.nice <= 19:
        parser.error('--hogs must be >= 0 and --nice within 0..19')
    print(f'[under_load] {args.hogs} busy process(es) at nice {args.nice} beside: '
          f'{" ".join(command)}', flush=True)
    hogs = start_hogs(args.hogs, args.nice)
    child = None

    def forward(signum: int, _frame: object) -> None:
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        child = subprocess.Popen(command)
        code = child.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        stop_hogs(hogs)
    return 128 - code if code < 0 else code


if __name__ == '__main__':
    sys.exit(main())
