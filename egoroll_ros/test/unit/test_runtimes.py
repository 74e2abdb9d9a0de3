"""Managed runtimes (egoroll_ros.runtimes): locating Python, disk check, idempotent builds."""

from __future__ import annotations

import json
from pathlib import Path
import threading

import pytest

from egoroll_ros import runtimes
from egoroll_ros.runtimes import (
    RuntimeSetupError,
    RuntimeSpec,
    ensure_runtime,
    find_base_python,
    runtime_python,
    runtime_spec,
)


def _tiny_spec(tmp_path: Path, need_gb: float = 0.0) -> RuntimeSpec:
    lock = tmp_path / 'tiny.lock'
    lock.write_text('# nothing to install: the venv and the stamp are what is tested\n')
    return RuntimeSpec('tiny', lock, (3, 12), need_gb, 'import json')


@pytest.fixture
def runtimes_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / 'runtimes'
    monkeypatch.setenv('EGOROLL_RUNTIMES_DIR', str(d))
    return d


def test_lerobot_lock_pins_every_package() -> None:
    spec = runtime_spec('lerobot')
    lines = [ln for ln in spec.lock.read_text().splitlines() if ln and not ln.startswith('#')]
    names = {ln.split('==')[0].lower() for ln in lines}
    assert {'lerobot', 'torch', 'numpy', 'safetensors'} <= names
    assert all('==' in ln for ln in lines), 'every line is an exact pin'
    assert 'lerobot==0.6.1' in lines
    assert spec.python == (3, 12)


def test_runtime_directory_is_keyed_by_the_lock_hash(runtimes_dir: Path) -> None:
    spec = runtime_spec('lerobot')
    assert spec.directory == runtimes_dir / f'lerobot-{spec.lock_hash[:16]}'


def test_default_directory_is_under_xdg_cache(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.delenv('EGOROLL_RUNTIMES_DIR', raising=False)
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
    assert runtimes.runtimes_dir() == tmp_path / 'egoroll' / 'runtimes'


def test_unknown_runtime_is_refused() -> None:
    with pytest.raises(RuntimeSetupError, match="unknown runtime 'nope'"):
        runtime_spec('nope')


def test_locating_an_unbuilt_runtime_names_the_command(runtimes_dir: Path) -> None:
    with pytest.raises(RuntimeSetupError, match="run 'egoroll runtime lerobot'"):
        runtime_python('lerobot')


def test_missing_python_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          runtimes_dir: Path) -> None:
    monkeypatch.delenv('EGOROLL_RUNTIME_PYTHON', raising=False)
    monkeypatch.setenv('PATH', str(tmp_path / 'empty-bin'))
    monkeypatch.setenv('PYENV_ROOT', str(tmp_path / 'no-pyenv'))
    with pytest.raises(RuntimeSetupError) as err:
        ensure_runtime(_tiny_spec(tmp_path))
    msg = str(err.value)
    assert 'Python 3.12 is required' in msg and '\n' not in msg
    assert not (runtimes_dir / 'tiny').exists()


def test_a_wrong_python_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    monkeypatch.setenv('EGOROLL_RUNTIME_PYTHON', sys.executable)  # the node's 3.11
    with pytest.raises(RuntimeSetupError, match='is not a Python 3.12'):
        find_base_python((3, 12))


def test_too_little_disk_is_one_clear_line(tmp_path: Path, runtimes_dir: Path) -> None:
    with pytest.raises(RuntimeSetupError) as err:
        ensure_runtime(_tiny_spec(tmp_path, need_gb=1e9))
    assert 'GB free' in str(err.value) and '\n' not in str(err.value)


def test_build_is_idempotent_and_serialised(tmp_path: Path, runtimes_dir: Path) -> None:
    spec = _tiny_spec(tmp_path)
    results: list[Path] = []
    logs: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(ensure_runtime(spec, logs.append)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 3 and len(set(results)) == 1
    assert sum('building' in m for m in logs) == 1, logs
    assert spec.ready()
    stamp = json.loads(spec.stamp.read_text())
    assert stamp['lock_sha256'] == spec.lock_hash
    before = spec.stamp.stat().st_mtime_ns
    assert ensure_runtime(spec, logs.append) == results[0]
    assert spec.stamp.stat().st_mtime_ns == before
    assert sum('building' in m for m in logs) == 1


def test_an_edited_lock_is_a_new_runtime(tmp_path: Path, runtimes_dir: Path) -> None:
    spec = _tiny_spec(tmp_path)
    first = spec.directory
    spec.lock.write_text('# another lock\n')
    assert spec.directory != first and not spec.ready()


# What pip 23-25 print for a broken requirement (the Humble-like env's one known line first).
_PIP_CHECK = (
    'cmeel-boost 1.83.0 has requirement numpy~=1.26.0; python_version >= "3.9", but you have '
    'numpy 1.21.5.\n'
    'eigenpy 3.5.1 has requirement numpy<2.3,>=1.26, but you have numpy 1.21.5.\n'
    'pin 2.7.0 requires hpp-fcl, which is not installed.\n')


def test_pip_check_exemption_covers_exactly_the_named_requirement() -> None:
    lines = _PIP_CHECK.splitlines()
    assert runtimes.unexempted_pip_check(_PIP_CHECK, (('cmeel_boost', 'NumPy'),)) == lines[1:]
    assert runtimes.unexempted_pip_check(lines[0], (('cmeel-boost', 'numpy'),)) == []
    # The same distribution's other requirement, or another distribution's numpy: not covered.
    assert runtimes.unexempted_pip_check(lines[2], (('pin', 'numpy'),)) == [lines[2]]
    assert runtimes.unexempted_pip_check(_PIP_CHECK, ()) == lines


def test_pip_check_lines_of_another_form_are_never_exempt() -> None:
    odd = 'cmeel-boost 1.83.0 is not supported on this platform'
    assert runtimes.unexempted_pip_check(odd, (('cmeel-boost', 'numpy'),)) == [odd]


def test_distro_locks_pin_the_robot_half_and_no_torch() -> None:
    root = Path(__file__).resolve().parents[3]
    for name, numpy in (('jazzy', '1.26.4'), ('humble', '1.21.5')):
        lines = [ln for ln in (root / 'tools' / 'distros' / f'{name}.lock').read_text()
                 .splitlines() if ln and not ln.startswith('#')]
        pins = dict(ln.split('==') for ln in lines)
        assert pins['numpy'] == numpy and pins['pin'] == '2.7.0'
        assert 'torch' not in pins and 'ros-jazzy-rclpy' in pins
        assert not [n for n in pins if n.startswith(('ros-kilted-', 'ros-humble-'))]
