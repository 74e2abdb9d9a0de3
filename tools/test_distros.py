#!/usr/bin/env python3
"""Build and test the robot half in distro-like environments (part of ``make test``).

Each environment is a lock file in ``tools/distros/`` (every package pinned, one ``ros-jazzy-*``
prefix) and a Python version; its venv is the managed-runtime cache of
:mod:`egoroll_ros.runtimes` (``${XDG_CACHE_HOME:-~/.cache}/egoroll/runtimes/<name>-<lock hash>``),
built once per lock file. Torch is not in them. For each environment this rewrites the wheels'
stale CMake include paths, colcon-builds both packages into ``build/distro-<name>/`` (apart from
the main ``build/`` and ``install/``; skipped when nothing changed) and runs the tests listed in
``egoroll_ros/test/robot_half.txt`` with that environment's pytest.

    python3 tools/test_distros.py [NAME ...] [-- PYTEST ARGS]

Exits non-zero on a missing Python (one line naming it), a failed build or a failed test.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
import re
import subprocess
import sys
import time

ROOT = Path(__file__).resolve().parent.parent
# The managed-runtime cache (pure Python, no ROS) from the source tree: this runs with a plain
# python3, outside the main environment, whose LD_LIBRARY_PATH would load the wrong ROS libraries.
sys.path.insert(0, str(ROOT / 'egoroll_ros'))
from egoroll_ros.runtimes import RuntimeSetupError, RuntimeSpec, ensure_runtime  # noqa: E402

PACKAGES = ('egoroll_interfaces', 'egoroll_ros')
TEST_LIST = ROOT / 'egoroll_ros' / 'test' / 'robot_half.txt'
PROBE = 'import rclpy, numpy, pinocchio, cv2, yaml, rosbags, ruckig, colcon_core'
#: name -> (lock file, Python version, pip-check exemptions). Jazzy-like: Python 3.12 and
#: numpy 1.26.4 (Ubuntu 24.04's). Humble-like: Python 3.10 and numpy 1.21.5 (Ubuntu 22.04's).
#: No pin wheel on PyPI declares a numpy that old (pin 2.6/2.7 need cmeel-boost 1.83, which
#: declares numpy~=1.26; pin >= 3.3 needs numpy >= 2.2), so the Humble lock takes pin 2.7.0 and
#: its cmeel/eigenpy/hpp-fcl wheels as requirements-robot-nodeps.txt pins them (installed
#: --no-deps, as every lock is); they run beside numpy 1.21.5 (the robot-half tests below are
#: the proof). pip check is relaxed for exactly that one declared requirement.
DISTROS = {
    'jazzy': (ROOT / 'tools' / 'distros' / 'jazzy.lock', (3, 12), ()),
    'humble': (ROOT / 'tools' / 'distros' / 'humble.lock', (3, 10),
               (('cmeel-boost', 'numpy'),)),
}
ROBOT_REQUIREMENTS = ROOT / 'requirements-robot.txt'
#: Installed after ROBOT_REQUIREMENTS with --no-deps (Pinocchio on Python < 3.12).
ROBOT_NODEPS = ROOT / 'requirements-robot-nodeps.txt'
STALE_PY = re.compile(r'/opt/python/cp3\d+-cp3\d+/include/python3\.\d+')
STALE_NP = re.compile(r'/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/'
                      r'(?:_core|core)/include')


class DistroError(RuntimeError):
    """A distro environment could not be built or its tests failed."""


def log(msg: str) -> None:
    print(f'[distros] {msg}', flush=True)


def test_files() -> list[str]:
    """The robot-half test files (and ``--deselect NODEID`` for each ``deselect`` line); a
    listed file that is missing is an error."""
    lines = [ln.strip() for ln in TEST_LIST.read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith('#')]
    files = [ln for ln in lines if not ln.startswith('deselect ')]
    deselect = [ln.split(None, 1)[1] for ln in lines if ln.startswith('deselect ')]
    for node in deselect:
        log(f'deselected by name: {node} (see {TEST_LIST.name})')
    missing = [f for f in files if not (ROOT / f).is_file()]
    if missing:
        raise DistroError(f'{TEST_LIST.relative_to(ROOT)} lists missing test files: '
                          f'{", ".join(missing)}')
    return files + [arg for node in deselect for arg in ('--deselect', node)]


def fix_cmake_paths(venv: Path, py: Path) -> None:
    """Point the wheels' CMake exports at this venv's Python and numpy headers."""
    out = subprocess.run(
        [str(py), '-c', 'import sysconfig, numpy; print(sysconfig.get_paths()["include"]); '
         'print(numpy.get_include())'], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise DistroError(f'cannot query {py}: {out.stderr.strip()}')
    py_inc, np_inc = out.stdout.split()
    for f in (venv / 'share').rglob('*.cmake'):
        text = f.read_text(errors='surrogateescape')
        new = STALE_PY.sub(py_inc, STALE_NP.sub(np_inc, text))
        if new != text:
            f.write_text(new, errors='surrogateescape')


def digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(ROOT)).encode() + b'\0' + p.read_bytes() + b'\0')
    return h.hexdigest()


def source_files() -> list[Path]:
    return [p for pkg in PACKAGES for p in (ROOT / pkg).rglob('*')
            if p.is_file() and p.relative_to(ROOT / pkg).parts[0] != 'test'
            and '__pycache__' not in p.parts and not p.name.endswith('.pyc')]


def env_for(venv: Path, install: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV', 'AMENT_PREFIX_PATH',
                        'CMAKE_PREFIX_PATH', 'COLCON_PREFIX_PATH', 'LD_LIBRARY_PATH')}
    path = [str(venv / 'bin')]
    ament = [str(venv)]
    pypath = []
    if install is not None:
        path.insert(0, str(install / 'egoroll_ros' / 'lib' / 'egoroll_ros'))
        ament = [str(install / p) for p in PACKAGES] + ament
        ver = subprocess.run([str(venv / 'bin' / 'python'), '-c',
                              'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'],
                             capture_output=True, text=True, check=True).stdout.strip()
        pypath = [str(install / p / 'lib' / f'python{ver}' / 'site-packages') for p in PACKAGES]
        env['PYTHONPATH'] = os.pathsep.join(pypath)
        # What install/setup.bash adds: the interface package's generated libraries.
        env['LD_LIBRARY_PATH'] = os.pathsep.join(str(install / p / 'lib') for p in PACKAGES)
    env['PATH'] = os.pathsep.join(path + [os.environ.get('PATH', '')])
    env['VIRTUAL_ENV'] = str(venv)
    env['AMENT_PREFIX_PATH'] = os.pathsep.join(ament)
    env['CMAKE_PREFIX_PATH'] = os.pathsep.join(ament)
    return env


def build(name: str, venv: Path) -> Path:
    base = ROOT / 'build' / f'distro-{name}'
    install = base / 'install'
    stamp = base / '.egoroll-build.sha256'
    want = digest(source_files()) + str(venv)
    if stamp.is_file() and stamp.read_text().strip() == want:
        log(f'{name}: colcon build up to date')
        return install
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(venv / 'bin' / 'colcon'), '--log-base', str(base / 'log'), 'build',
         '--base-paths', *PACKAGES, '--build-base', str(base / 'build'),
         '--install-base', str(install), '--event-handlers', 'console_cohesion-', 'status-',
         '--cmake-args', f'-DPython3_EXECUTABLE={venv / "bin" / "python"}',
         '-DBUILD_TESTING=OFF'], cwd=ROOT, env=env_for(venv, None), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, check=False)
    if proc.returncode != 0:
        tail = '\n'.join(proc.stdout.splitlines()[-30:])
        raise DistroError(f'{name}: colcon build failed (exit {proc.returncode}):\n{tail}')
    stamp.write_text(want + '\n')
    log(f'{name}: colcon build done in {time.monotonic() - t0:.0f} s')
    return install


def _pins(path: Path, python: tuple[int, int] | None = None) -> dict[str, str]:
    """``name -> version`` of a file's ``name==version`` lines (canonical names); with
    ``python``, only the lines whose ``python_version`` marker (if any) admits it."""
    pins = {}
    for raw in path.read_text().splitlines():
        line = raw.split('#', 1)[0].strip()
        if not line:
            continue
        req, _, marker = line.partition(';')
        m = re.fullmatch(r'\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)\s*', req)
        if m is None:
            raise DistroError(f'{path.name}: not a name==version pin: {raw.strip()}')
        mk = re.fullmatch(r'\s*python_version\s*(<|>=)\s*"(\d+)\.(\d+)"\s*', marker)
        if marker.strip() and mk is None:
            raise DistroError(f'{path.name}: unsupported marker in: {raw.strip()}')
        if python is not None and mk is not None:
            bound = (int(mk[2]), int(mk[3]))
            if (python < bound) != (mk[1] == '<'):
                continue
        pins[re.sub(r'[-_.]+', '-', m[1]).lower()] = m[2]
    return pins


def check_robot_requirements(name: str, py: Path) -> None:
    """requirements-robot.txt (and, --no-deps, requirements-robot-nodeps.txt) are already
    satisfied by the distro's numpy/yaml/opencv: pip, with no index to install from, must find
    nothing to install. The no-deps pins that apply to this Python are the lock's own."""
    lock, python, _exempt = DISTROS[name]
    locked = _pins(lock)
    wrong = [f'{n}=={v} (lock: {locked.get(n, "absent")})'
             for n, v in _pins(ROBOT_NODEPS, python).items() if locked.get(n) != v]
    if wrong:
        raise DistroError(f'{name}: {ROBOT_NODEPS.name} disagrees with {lock.name}: '
                          f'{", ".join(wrong)}')
    for req, extra in ((ROBOT_REQUIREMENTS, []), (ROBOT_NODEPS, ['--no-deps'])):
        proc = subprocess.run(
            [str(py), '-m', 'pip', 'install', '--dry-run', '--no-index',
             '--disable-pip-version-check', *extra, '-r', str(req)], capture_output=True,
            text=True, check=False, env=env_for(py.parent.parent, None))
        if proc.returncode != 0 or 'Would install' in proc.stdout:
            lines = (proc.stdout + proc.stderr).strip().splitlines() or ['(no output)']
            raise DistroError(f'{name}: {req.name} would re-install packages the '
                              f'distro brings: {lines[-1]}')
    log(f'{name}: {ROBOT_REQUIREMENTS.name} and {ROBOT_NODEPS.name} satisfied by the '
        'environment (nothing to install)')


def run_distro(name: str, pytest_args: list[str]) -> None:
    lock, python, exempt = DISTROS[name]
    spec = RuntimeSpec(f'distro-{name}', lock, python, 3.0, PROBE, exempt)
    for dist, req in exempt:
        log(f"{name}: pip check may report {dist}'s {req} requirement, and nothing else "
            f"(its wheel declares a newer {req} than this distro's; see DISTROS)")
    t0 = time.monotonic()
    py = ensure_runtime(spec, log=lambda m: log(f'{name}: {m}'))
    venv = py.parent.parent
    log(f'{name}: environment {venv} ready ({time.monotonic() - t0:.0f} s)')
    check_robot_requirements(name, py)
    fix_cmake_paths(venv, py)
    install = build(name, venv)
    files = test_files()
    t1 = time.monotonic()
    cmd = [str(venv / 'bin' / 'pytest'), '-p', 'no:cacheprovider', *files, *pytest_args]
    rc = subprocess.run(cmd, cwd=ROOT, env=env_for(venv, install), check=False).returncode
    log(f'{name}: robot-half tests exit {rc} in {time.monotonic() - t1:.0f} s')
    if rc != 0:
        raise DistroError(f'{name}: robot-half tests failed (exit {rc})')


def main(argv: list[str]) -> int:
    names, pytest_args = argv, []
    if '--' in argv:
        i = argv.index('--')
        names, pytest_args = argv[:i], argv[i + 1:]
    names = names or list(DISTROS)
    unknown = [n for n in names if n not in DISTROS]
    if unknown:
        print(f'[distros] ERROR: unknown distro {", ".join(unknown)} (known: '
              f'{", ".join(DISTROS)})', file=sys.stderr)
        return 2
    failed = []
    for name in names:
        try:
            run_distro(name, pytest_args)
        except (RuntimeSetupError, DistroError) as exc:
            print(f'[distros] ERROR: {exc}', file=sys.stderr, flush=True)
            failed.append(name)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
