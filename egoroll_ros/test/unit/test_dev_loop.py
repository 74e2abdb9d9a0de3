"""The developer loop does what it says: `make test ARGS=...` runs that subset after rebuilding,
`make bench` runs a runner that exists and finds every benchmark."""

from __future__ import annotations

from pathlib import Path
import re
import shutil
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _make_n(*args: str) -> str:
    if shutil.which('make') is None:
        pytest.skip('make is not installed')
    return subprocess.run(['make', '-n', '-C', str(ROOT), *args], capture_output=True,
                          text=True, check=True).stdout


def test_make_test_with_args_rebuilds_then_runs_that_subset():
    out = _make_n('test', 'ARGS=-k gate')
    lines = out.splitlines()
    build = next(i for i, line in enumerate(lines) if 'tools/bootstrap.py' in line)
    run = next(i for i, line in enumerate(lines) if 'tools/run_tests.sh' in line)
    assert build < run and lines[run].rstrip().endswith('-k gate')


def test_run_tests_rebuilds_before_pytest_unless_told_not_to():
    script = (ROOT / 'tools' / 'run_tests.sh').read_text()
    body = '\n'.join(line for line in script.splitlines() if not line.startswith('#'))
    assert body.index('tools/bootstrap.py') < body.index('pytest')
    assert 'EGOROLL_SKIP_BUILD' in body


def test_every_file_the_makefile_runs_exists():
    makefile = (ROOT / 'Makefile').read_text()
    paths = set(re.findall(r'((?:tools|benchmarks)/[\w./-]+\.(?:py|sh))', makefile))
    assert {'tools/run_tests.sh', 'benchmarks/run_all.py'} <= paths
    assert [p for p in paths if not (ROOT / p).is_file()] == []


def test_make_bench_lists_every_benchmark_file():
    assert 'benchmarks/run_all.py' in _make_n('bench')
    out = subprocess.run([sys.executable, str(ROOT / 'benchmarks' / 'run_all.py'), '--list'],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == sorted(p.name for p in (ROOT / 'benchmarks').glob('bench_*.py'))
    assert len(out) >= 6
