#!/usr/bin/env python3
"""Run every benchmark in this folder in turn (``make bench``), each in its own process.

Finds the benchmarks by file name (``bench_*.py`` here), so a new one is run without being
listed. Each prints its own figures; this prints which ran, how long each took and which
failed, and exits non-zero when any failed.

    tools/in_env.sh python benchmarks/run_all.py [--only NAME ...] [--list]
"""

from __future__ import annotations

import argparse
from pathlib import Path
import subprocess
import sys
import time

HERE = Path(__file__).resolve().parent


def benchmarks() -> list[Path]:
    """Every ``bench_*.py`` beside this file, sorted by name."""
    return sorted(HERE.glob('bench_*.py'))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--only', nargs='+', default=[], metavar='NAME',
                    help='run only benchmarks whose file name contains one of these')
    ap.add_argument('--list', action='store_true', help='list the benchmarks and exit')
    args = ap.parse_args(argv)
    chosen = [b for b in benchmarks() if not args.only or any(n in b.stem for n in args.only)]
    if args.list:
        print('\n'.join(b.name for b in chosen))
        return 0
    if not chosen:
        print(f'no benchmark matches {args.only} (have: '
              f"{', '.join(b.stem for b in benchmarks())})", file=sys.stderr)
        return 2
    results = []
    for bench in chosen:
        print(f'\n===== {bench.name} =====', flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(bench)], cwd=HERE.parent)
        results.append((bench.name, rc, time.perf_counter() - t0))
    print('\n===== summary =====')
    for name, rc, secs in results:
        print(f"{name:32s} {'ok' if rc == 0 else f'FAILED (exit {rc})':18s} {secs:7.1f} s")
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


if __name__ == '__main__':
    sys.exit(main())
