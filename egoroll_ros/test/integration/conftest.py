"""Session fixtures of the LeRobot tests: the managed runtime and small checkpoints made by
LeRobot's own API in it (once per session: making one takes a few seconds)."""

from __future__ import annotations

from pathlib import Path

from lerobot_testlib import ACT_SPEC, DIFFUSION_SPEC, SMOLVLA_SPEC, make_checkpoint
import pytest


@pytest.fixture(scope='session')
def lerobot_python() -> str:
    """The managed LeRobot runtime's interpreter (built here when missing, as make test does)."""
    from egoroll_ros.runtimes import ensure_runtime
    return str(ensure_runtime('lerobot', log=print))


@pytest.fixture(scope='session')
def act_checkpoint(lerobot_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(lerobot_python, tmp_path_factory.mktemp('act'), ACT_SPEC)


@pytest.fixture(scope='session')
def diffusion_checkpoint(lerobot_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(lerobot_python, tmp_path_factory.mktemp('diffusion'), DIFFUSION_SPEC)




@pytest.fixture(scope='session')
def smolvla_checkpoint(lerobot_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny SmolVLA with its tiny local backbone (next to it, in vlm/), made with the
    network unreachable."""
    return make_checkpoint(lerobot_python, tmp_path_factory.mktemp('smolvla'), SMOLVLA_SPEC,
                           offline=True)
