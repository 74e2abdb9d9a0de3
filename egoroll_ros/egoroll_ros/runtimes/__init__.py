"""Managed Python runtimes: pinned virtual environments for frameworks that cannot share the
node's interpreter (LeRobot needs Python 3.12 and its own torch).

Each runtime is a lock file shipped in this package (``<name>.lock``: every package pinned,
written by ``tools/lock_runtime.py``) and a Python version. :func:`ensure_runtime` builds the
venv once under ``$EGOROLL_RUNTIMES_DIR`` (default ``${XDG_CACHE_HOME:-~/.cache}/egoroll/
runtimes``) in ``<name>-<first 16 hex of the lock's sha256>``, under a file lock, and writes a
stamp last, so a second call (or a concurrent one) returns at once and a half-built venv is
never used. ``egoroll runtime <name>`` is the command-line form. Nothing here imports rclpy.

On a robot the same lock installs into any Python of that version::

    python3.12 -m venv VENV && VENV/bin/pip install --no-deps -r lerobot.lock

and the node is pointed at ``VENV/bin/python`` with ``policy.python_executable``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import fcntl
import glob
import hashlib
import json
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys
import time

from egoroll_ros.errors import EgorollError

_HERE = Path(__file__).resolve().parent


class RuntimeSetupError(EgorollError):
    """A managed runtime is missing or cannot be built; the message says what to do."""


@dataclass(frozen=True)
class RuntimeSpec:
    """A managed runtime: its lock file, Python version and the disk it needs.

    Attributes:
        name: runtime name (``egoroll runtime <name>``).
        lock: the lock file (pip requirements, every package pinned).
        python: required ``(major, minor)``.
        need_gb: free disk needed to build it (GB).
        probe: Python statement that must run in the built venv (an import check).
        check_exempt: ``(distribution, requirement)`` pairs that ``pip check`` may report as
            broken (a wheel that declares a narrower numpy than the one it is run and tested
            beside); any other report fails the build. Empty: ``pip check`` must pass as is.
    """

    name: str
    lock: Path
    python: tuple[int, int]
    need_gb: float
    probe: str
    check_exempt: tuple[tuple[str, str], ...] = ()

    @property
    def lock_hash(self) -> str:
        """sha256 hex of the lock file's bytes."""
        return hashlib.sha256(self.lock.read_bytes()).hexdigest()

    @property
    def directory(self) -> Path:
        """Where the venv lives (``<runtimes dir>/<name>-<lock hash[:16]>``)."""
        return runtimes_dir() / f'{self.name}-{self.lock_hash[:16]}'

    @property
    def python_executable(self) -> Path:
        """The venv's interpreter (it may not exist yet: see :meth:`ready`)."""
        return self.directory / 'bin' / 'python'

    @property
    def stamp(self) -> Path:
        """Written last by a successful build."""
        return self.directory / '.egoroll-runtime.json'

    def ready(self) -> bool:
        """Whether the venv is complete (stamp present, matching this lock, interpreter there)."""
        try:
            data = json.loads(self.stamp.read_text())
        except (OSError, ValueError):
            return False
        return data.get('lock_sha256') == self.lock_hash and self.python_executable.exists()


RUNTIMES = {
    'lerobot': RuntimeSpec('lerobot', _HERE / 'lerobot.lock', (3, 12), 8.0,
                           'import lerobot, torch, lerobot.processor, lerobot.policies.factory, '
                           'lerobot.datasets.lerobot_dataset'),
}


#: Policy backends that run in a managed runtime (by default, through the ``isolated`` worker).
BACKEND_RUNTIMES = {'lerobot': 'lerobot'}


def backend_runtime(backend: str) -> str | None:
    """The managed runtime a policy backend runs in (None: the node's own interpreter)."""
    return BACKEND_RUNTIMES.get(backend)


def runtimes_dir() -> Path:
    """``$EGOROLL_RUNTIMES_DIR``, else ``${XDG_CACHE_HOME:-~/.cache}/egoroll/runtimes``."""
    env = os.environ.get('EGOROLL_RUNTIMES_DIR')
    if env:
        return Path(env)
    base = os.environ.get('XDG_CACHE_HOME') or str(Path.home() / '.cache')
    return Path(base) / 'egoroll' / 'runtimes'


def runtime_spec(name: str) -> RuntimeSpec:
    """The :class:`RuntimeSpec` called ``name``.

    Raises:
        RuntimeSetupError: no such runtime.
    """
    if name not in RUNTIMES:
        raise RuntimeSetupError(f"unknown runtime '{name}' (known: {', '.join(RUNTIMES)})")
    return RUNTIMES[name]


def runtime_python(name: str) -> Path:
    """The interpreter of the built runtime ``name``, without building it.

    Raises:
        RuntimeSetupError: unknown, or not built yet (the message names the command).
    """
    spec = runtime_spec(name)
    if not spec.ready():
        raise RuntimeSetupError(
            f"the managed '{name}' runtime is not installed ({spec.directory}); run "
            f"'egoroll runtime {name}' (or set policy.python_executable to a Python "
            f"{spec.python[0]}.{spec.python[1]} venv built from {spec.lock})")
    return spec.python_executable


def _version_of(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, '-c', 'import sys; print(*sys.version_info[:2])'],
                             capture_output=True, text=True, timeout=30, check=False,
                             env=clean_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        major, minor = (int(x) for x in out.stdout.split())
    except ValueError:
        return None
    return major, minor


def find_base_python(version: tuple[int, int]) -> str:
    """An interpreter of ``version`` to build a venv from: ``$EGOROLL_RUNTIME_PYTHON``, else
    ``python<M>.<m>`` on PATH, else a pyenv installation.

    Raises:
        RuntimeSetupError: none found (or ``$EGOROLL_RUNTIME_PYTHON`` is another version).
    """
    want = f'{version[0]}.{version[1]}'
    env = os.environ.get('EGOROLL_RUNTIME_PYTHON')
    if env:
        if _version_of(env) != version:
            raise RuntimeSetupError(f'EGOROLL_RUNTIME_PYTHON={env} is not a Python {want}')
        return env
    candidates = []
    if shutil.which(f'python{want}'):
        candidates.append(shutil.which(f'python{want}'))
    root = os.environ.get('PYENV_ROOT') or str(Path.home() / '.pyenv')
    candidates += sorted(glob.glob(f'{root}/versions/{want}.*/bin/python{want}'), reverse=True)
    for c in candidates:
        if c and _version_of(c) == version:
            return c
    raise RuntimeSetupError(
        f'Python {want} is required for this runtime and none was found (python{want} on '
        f'PATH, pyenv under {root}); install it or set EGOROLL_RUNTIME_PYTHON')


def clean_env() -> dict[str, str]:
    """This process's environment without what would make another interpreter import this
    one's packages (``PYTHONPATH``, ``PYTHONHOME``, ``VIRTUAL_ENV``)."""
    env = dict(os.environ)
    for key in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV', 'PYTHONSTARTUP', 'PYTHONUSERBASE'):
        env.pop(key, None)
    return env


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False, env=clean_env())
    if proc.returncode != 0:
        lines = proc.stdout.strip().splitlines() or ['(no output)']
        errors = [ln for ln in lines if ln.startswith('ERROR')]
        raise RuntimeSetupError(f'{what} failed (exit {proc.returncode}): '
                                f'{(errors or lines)[-1].strip()}')


def _canonical(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


#: ``pip check``'s report lines: ``NAME VER has requirement REQ..., but you have ...`` and
#: ``NAME VER requires REQ, which is not installed.``
_PIP_CHECK_LINE = re.compile(r'^(?P<dist>\S+) \S+ (?:has requirement|requires) '
                             r'(?P<req>[A-Za-z0-9][A-Za-z0-9._-]*)')


def unexempted_pip_check(output: str, exempt: tuple[tuple[str, str], ...]) -> list[str]:
    """The lines of ``pip check`` output that ``exempt`` (``(distribution, requirement)``
    pairs, compared by canonical name) does not cover; a line of any other form is never
    covered."""
    allowed = {(_canonical(d), _canonical(r)) for d, r in exempt}
    left = []
    for line in output.strip().splitlines():
        m = _PIP_CHECK_LINE.match(line.strip())
        if not line.strip() or (m and (_canonical(m['dist']), _canonical(m['req'])) in allowed):
            continue
        left.append(line.strip())
    return left


def _pip_check(py: str, exempt: tuple[tuple[str, str], ...]) -> None:
    proc = subprocess.run([py, '-m', 'pip', 'check', '--disable-pip-version-check'],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False, env=clean_env())
    if proc.returncode == 0:
        return
    left = unexempted_pip_check(proc.stdout, exempt)
    if left or not exempt:
        raise RuntimeSetupError(f'pip check failed (exit {proc.returncode}): '
                                f'{(left or ["(no output)"])[-1]}')


def ensure_runtime(name: str | RuntimeSpec, log: Callable[[str], None] | None = None) -> Path:
    """Build the runtime ``name`` (or the spec given) if it is not built yet; return its
    interpreter.

    Idempotent and safe to call concurrently (a file lock serialises builders; the stamp is
    written last). A failed or interrupted build is removed and redone on the next call.

    Raises:
        RuntimeSetupError: unknown runtime, no Python of the right version, too little disk,
            or the installation failed (one line saying which).
    """
    spec = name if isinstance(name, RuntimeSpec) else runtime_spec(name)
    name = spec.name
    say = log or (lambda _m: None)
    if spec.ready():
        return spec.python_executable
    base = runtimes_dir()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeSetupError(f'cannot create {base}: {exc.strerror}') from None
    with open(base / f'{spec.directory.name}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if spec.ready():
            return spec.python_executable
        free_gb = shutil.disk_usage(base).free / 1e9
        if free_gb < spec.need_gb:
            raise RuntimeSetupError(
                f"only {free_gb:.1f} GB free at {base}; the '{name}' runtime needs "
                f'{spec.need_gb:.0f} GB (set EGOROLL_RUNTIMES_DIR to a disk with room)')
        python = find_base_python(spec.python)
        target = spec.directory
        if target.exists():
            shutil.rmtree(target)
        t0 = time.monotonic()
        say(f"building the '{name}' runtime in {target} from {spec.lock.name} with {python} "
            '(first time: a few minutes)')
        try:
            _run([python, '-m', 'venv', str(target)], 'creating the venv')
            py = str(spec.python_executable)
            _run([py, '-m', 'pip', 'install', '--disable-pip-version-check', '-q',
                  '--no-deps', '-r', str(spec.lock)], f'pip install -r {spec.lock.name}')
            _pip_check(py, spec.check_exempt)
            _run([py, '-c', spec.probe], 'the import check')
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        spec.stamp.write_text(json.dumps({
            'lock_sha256': spec.lock_hash, 'python': python,
            'built': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}) + '\n')
        say(f"'{name}' runtime ready in {time.monotonic() - t0:.0f} s")
    return spec.python_executable


def main_runtime(name: str, check_only: bool = False) -> int:
    """``egoroll runtime NAME``: build (or with ``check_only`` only locate) and print the
    interpreter path. Raises :class:`RuntimeSetupError`."""
    if check_only:
        print(runtime_python(name))
        return 0
    py = ensure_runtime(name, log=lambda m: print(f'[runtime] {m}', file=sys.stderr,
                                                   flush=True))
    print(py)
    return 0
