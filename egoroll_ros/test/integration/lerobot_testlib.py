"""Helpers of the LeRobot tests (fixtures in conftest.py): LeRobot's own side runs in the
managed runtime through helpers/lerobot_tool.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
import shutil
import subprocess
from typing import Any

import numpy as np

HELPERS = Path(__file__).resolve().parent / 'helpers'
LEROBOT_TOOL = HELPERS / 'lerobot_tool.py'

#: A small ACT: two cameras, 6-dim state, statistics far from 0/1, 50 Hz training env (the
#: step period comes from train_config.json), the default ImageNet-backbone config field.
ACT_SPEC = {'policy': 'act', 'state': 6, 'action': 6,
            'cameras': {'front': [64, 80], 'wrist': [48, 48]}, 'env_fps': 50, 'scale': 2.0,
            'config': {'dim_model': 32, 'n_heads': 2, 'dim_feedforward': 64,
                       'n_encoder_layers': 1, 'n_decoder_layers': 1, 'latent_dim': 8,
                       'chunk_size': 10, 'n_action_steps': 8}}
#: A small Diffusion policy with observation history (n_obs_steps 2) and environment state.
DIFFUSION_SPEC = {'policy': 'diffusion', 'state': 4, 'action': 4, 'env_state': 7,
                  'cameras': {'top': [48, 48]}, 'env_fps': 10, 'scale': 3.0,
                  'config': {'n_obs_steps': 2, 'horizon': 16, 'n_action_steps': 8,
                             'down_dims': [16, 32], 'diffusion_step_embed_dim': 16,
                             'spatial_softmax_num_keypoints': 8, 'n_groups': 4,
                             'num_inference_steps': 3, 'use_group_norm': True,
                             'drop_n_last_frames': 7}}
#: A tiny SmolVLA (LeRobot 0.6.1's flow-matching VLA, which does real-time chunking) on a
#: tiny local SmolVLM backbone made offline (lerobot_tool.tiny_vlm; no Hub, no weights
#: downloaded): one camera, 6-dim state, 3 Euler steps, a whole 10-step chunk executed (as
#: LeRobot's RTC engine executes them).
SMOLVLA_SPEC = {'policy': 'smolvla', 'tiny_vlm': True, 'state': 6, 'action': 6,
                'cameras': {'front': [40, 48]}, 'env_fps': 30, 'scale': 2.0, 'seed': 1,
                'config': {'load_vlm_weights': False, 'num_vlm_layers': 2,
                           'self_attn_every_n_layers': 2, 'expert_width_multiplier': 0.75,
                           'resize_imgs_with_padding': [32, 32], 'chunk_size': 10,
                           'n_action_steps': 10, 'tokenizer_max_length': 16, 'num_steps': 3,
                           'max_state_dim': 8, 'max_action_dim': 8}}


def lerobot_env() -> dict[str, str]:
    """The environment for the runtime's python: none of this venv's packages."""
    from egoroll_ros.runtimes import clean_env
    return clean_env()


def run_tool(python: str, *args: str, timeout: float = 300.0, offline: bool = False) -> str:
    """Run helpers/lerobot_tool.py in the runtime; its stdout (fails the test on an error).
    ``offline``: in a network namespace of its own (``unshare -n``: no network at all)."""
    cmd = [python, str(LEROBOT_TOOL), *args]
    proc = subprocess.run((['unshare', '-n'] if offline else []) + cmd, capture_output=True,
                          text=True, timeout=timeout, env=lerobot_env())
    assert proc.returncode == 0, f'lerobot_tool {args[0]} failed:\n{proc.stderr[-4000:]}'
    return proc.stdout


def make_checkpoint(python: str, out: Path, spec: dict[str, Any], offline: bool = False
                    ) -> Path:
    """A checkpoint saved by lerobot's save_checkpoint; its pretrained_model directory."""
    return Path(run_tool(python, 'make', str(out), json.dumps(spec),
                         offline=offline).strip().splitlines()[-1])


def linked_copy(src: Path, dst: Path) -> Path:
    """A copy of checkpoint ``src`` whose files are hard links (cheap for 45 MB weights);
    change a file only with :func:`rewrite`, which replaces the link."""
    shutil.copytree(src, dst, copy_function=os.link)
    return dst


def rewrite(path: Path, text: str) -> None:
    """Replace ``path`` (maybe a hard link into a shared checkpoint) with new contents."""
    path.unlink()
    path.write_text(text)


def observation_frames(spec: dict[str, Any], n: int, seed: int = 0
                       ) -> list[dict[str, np.ndarray]]:
    """``n`` observations in LeRobot's feature names (uint8 HWC images, float32 vectors)."""
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(n):
        f = {'observation.state': rng.uniform(-3, 3, spec['state']).astype(np.float32)}
        for cam, (h, w) in spec.get('cameras', {}).items():
            f[f'observation.images.{cam}'] = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if spec.get('env_state'):
            f['observation.environment_state'] = rng.uniform(
                -1, 1, spec['env_state']).astype(np.float32)
        frames.append(f)
    return frames


def save_frames(path: Path, frames: list[dict[str, np.ndarray]], task: str | None = None
                ) -> Path:
    arrays = {f'{k}/{name}': v for k, f in enumerate(frames) for name, v in f.items()}
    extra = {'task': np.array(task)} if task else {}
    np.savez(path, frames=np.array(len(frames)), **arrays, **extra)
    return path
