"""`make setup` fails with one clear line (not a traceback) on a wrong Python or a full disk."""

import importlib.util
from pathlib import Path
import subprocess
import sys
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[3]
BOOTSTRAP = ROOT / 'tools' / 'bootstrap.py'


@pytest.fixture
def bootstrap(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location('egoroll_bootstrap', BOOTSTRAP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, 'VENV', tmp_path / 'venv')
    return module


def test_wrong_python_version_is_refused_with_a_clear_message(bootstrap, monkeypatch, capsys):
    monkeypatch.setattr(bootstrap.sys, 'version_info', (3, 9, 18, 'final', 0))
    assert bootstrap.main() == 1
    err = capsys.readouterr().err
    assert 'ERROR' in err and 'Python 3.11 is required' in err
    assert 'Traceback' not in err


def test_too_little_disk_space_is_refused_with_a_clear_message(bootstrap, monkeypatch, capsys):
    monkeypatch.setattr(bootstrap.shutil, 'disk_usage',
                        lambda path: SimpleNamespace(total=10e9, used=9.9e9, free=0.1e9))
    assert bootstrap.main() == 1
    err = capsys.readouterr().err
    assert 'only 0.1 GB free' in err and 'EGOROLL_VENV' in err
    assert not (bootstrap.VENV / 'bin').exists(), 'nothing may be created on a full disk'


def test_cmake_path_rewrite_is_idempotent(bootstrap, tmp_path):
    cmake = bootstrap.VENV / 'share' / 'pkg' / 'cmake' / 'x.cmake'
    cmake.parent.mkdir(parents=True)
    cmake.write_text(f'INCLUDE "{bootstrap.STALE_PY_INCLUDE};{bootstrap.STALE_NP_INCLUDE}"\n')
    bootstrap.fix_cmake_paths(Path(sys.executable))
    once = cmake.read_text()
    assert '/opt/python/cp311' not in once
    bootstrap.fix_cmake_paths(Path(sys.executable))
    assert cmake.read_text() == once


def test_second_setup_with_nothing_changed_skips_every_step():
    proc = subprocess.run([sys.executable, str(BOOTSTRAP)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    # The test suite runs after a setup, so a second one must find everything up to date.
    assert 'python packages: up to date' in proc.stdout
    assert 'cmake include paths: already correct' in proc.stdout
