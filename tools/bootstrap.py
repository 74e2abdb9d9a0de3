#!/usr/bin/env python3
"""Set up egoroll on a machine without a system ROS 2 (``make setup``).

Creates ``.venv`` with the exact pinned ROS 2 Kilted wheels, torch and test tools, repairs the
wheels' stale CMake include paths, and builds egoroll_interfaces and egoroll_ros with colcon
into ``build/`` and ``install/``. Every step is skipped when its inputs did not change, so a
second run with nothing changed takes seconds. Failures print one clear line, not a traceback.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
import shutil
import subprocess
import sys
import sysconfig
import time

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get('EGOROLL_VENV', ROOT / '.venv'))
REQUIREMENT_FILES = ('requirements.txt', 'requirements-dev.txt', 'constraints.txt')
PACKAGES = ('egoroll_interfaces', 'egoroll_ros')
STALE_PY_INCLUDE = '/opt/python/cp311-cp311/include/python3.11'
STALE_NP_INCLUDE = '/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include'
NEED_FREE_GB_FRESH = 4.0
NEED_FREE_GB_UPDATE = 0.5
SUPPORTED_PYTHON = (3, 11)


class SetupError(RuntimeError):
    """A set-up step failed for a reason the user can act on."""


def log(msg: str) -> None:
    print(f'[setup] {msg}', flush=True)


def check_python() -> None:
    if sys.version_info[:2] != SUPPORTED_PYTHON:
        raise SetupError(
            f'Python {SUPPORTED_PYTHON[0]}.{SUPPORTED_PYTHON[1]} is required for the pinned ROS 2 '
            f'Kilted wheels and torch 2.13.0, but this is {sys.version.split()[0]} '
            f'({sys.executable}). Run with PYTHON=/path/to/python3.11 make setup, or on a robot '
            'with a system ROS 2 follow the README section "On a robot".')


def check_disk(fresh: bool) -> None:
    need = NEED_FREE_GB_FRESH if fresh else NEED_FREE_GB_UPDATE
    VENV.parent.mkdir(parents=True, exist_ok=True)
    free_gb = shutil.disk_usage(VENV.parent).free / 1e9
    if free_gb < need:
        raise SetupError(
            f'only {free_gb:.1f} GB free at {VENV.parent}; set-up needs at least {need:.1f} GB '
            f'({"a fresh venv is about 3.5 GB" if fresh else "for the build"}). Free some space '
            'or set EGOROLL_VENV to a disk with room.')


def digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(b'\0')
        h.update(p.read_bytes() if p.is_file() else b'<missing>')
        h.update(b'\0')
    return h.hexdigest()


def run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> None:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = '\n'.join(proc.stdout.splitlines()[-40:])
        raise SetupError(f'{what} failed (exit {proc.returncode}):\n{tail}')
    log(f'{what}: done in {time.monotonic() - t0:.1f} s')


def ensure_venv() -> Path:
    py = VENV / 'bin' / 'python'
    fresh = not py.exists()
    check_disk(fresh)
    if fresh:
        log(f'creating virtual environment {VENV}')
        run([sys.executable, '-m', 'venv', str(VENV)], 'venv')
    stamp = VENV / '.egoroll-requirements.sha256'
    want = digest([ROOT / f for f in REQUIREMENT_FILES])
    if stamp.exists() and stamp.read_text().strip() == want:
        log('python packages: up to date')
        return py
    log('installing pinned python packages (first time: about a minute)')
    run([str(py), '-m', 'pip', 'install', '--disable-pip-version-check', '-q',
         '-r', str(ROOT / 'requirements-dev.txt'), '-c', str(ROOT / 'constraints.txt')],
        'pip install')
    stamp.write_text(want + '\n')
    return py


def fix_cmake_paths(py: Path) -> None:
    """Point the wheels' CMake exports at this venv's Python and numpy headers."""
    out = subprocess.run(
        [str(py), '-c', 'import sysconfig, numpy; print(sysconfig.get_paths()["include"]); '
         'print(numpy.get_include())'], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SetupError(f'cannot query the venv python: {out.stderr.strip()}')
    py_inc, np_inc = out.stdout.split()
    changed = 0
    for f in (VENV / 'share').rglob('*.cmake'):
        text = f.read_text(errors='surrogateescape')
        if STALE_PY_INCLUDE not in text and STALE_NP_INCLUDE not in text:
            continue
        text = text.replace(STALE_NP_INCLUDE, np_inc).replace(STALE_PY_INCLUDE, py_inc)
        f.write_text(text, errors='surrogateescape')
        changed += 1
    log(f'cmake include paths: {changed} file(s) rewritten' if changed
        else 'cmake include paths: already correct')


def source_files() -> list[Path]:
    """Files that end up in the install space (tests run from the source tree)."""
    files = []
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob('*'):
            rel = p.relative_to(ROOT / pkg).parts
            if p.is_file() and rel[0] != 'test' and '__pycache__' not in rel \
                    and not p.name.endswith('.pyc'):
                files.append(p)
    return files


def build(py: Path) -> None:
    stamp = ROOT / 'install' / '.egoroll-build.sha256'
    want = digest(source_files() + [ROOT / 'constraints.txt'])
    if stamp.exists() and stamp.read_text().strip() == want \
            and (ROOT / 'install' / 'setup.bash').exists():
        log('colcon build: up to date')
        return
    env = dict(os.environ)
    venv_bin = str(VENV / 'bin')
    env['PATH'] = venv_bin + os.pathsep + env.get('PATH', '')
    env['VIRTUAL_ENV'] = str(VENV)
    for var in ('AMENT_PREFIX_PATH', 'CMAKE_PREFIX_PATH'):
        env[var] = str(VENV)
    env.pop('PYTHONPATH', None)
    run([str(VENV / 'bin' / 'colcon'), 'build', '--base-paths', *PACKAGES,
         '--build-base', 'build', '--install-base', 'install', '--event-handlers',
         'console_cohesion-', 'status-', 'summary+',
         '--cmake-args', f'-DPython3_EXECUTABLE={py}', '-DBUILD_TESTING=OFF'],
        'colcon build', env=env)
    stamp.write_text(want + '\n')


def main() -> int:
    t0 = time.monotonic()
    try:
        check_python()
        ROOT.joinpath('build').mkdir(exist_ok=True)
        # Serialise concurrent set-ups of one checkout (parallel test runs share build/).
        with open(ROOT / 'build' / '.egoroll-setup.lock', 'w') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            py = ensure_venv()
            fix_cmake_paths(py)
            build(py)
    except SetupError as exc:
        print(f'[setup] ERROR: {exc}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('[setup] interrupted', file=sys.stderr)
        return 130
    log(f'ready in {time.monotonic() - t0:.1f} s (python {sysconfig.get_python_version()})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
