"""Test-only policies and checkpoint builders for the policy tests (no ROS).

``FakePolicy`` is loaded as backend ``policy_fakes:FakePolicy``; its checkpoint is a
directory with ``fake.json``; a ``mode`` file there (re-read on every predict) switches
behaviour across processes: zeros, hold (repeat the state + offset), wrap, nan, raise,
crash, die (a message on stderr, then exit), hang, slow, sleep:SECONDS, drive (joint
``drive_joint`` moves from the state at ``offset`` rad per step, the others stay).
``download`` in fake.json makes the load fetch that URL (the worker must refuse it).
``rtc`` in fake.json declares real-time chunking (metadata.rtc): every observation's
``rtc`` is recorded in ``rtc_requests``, and mode ``rtc_echo`` returns it in row 0
(prefix_stamp, executed, inference_delay; -1 each without one) so it can be seen across the
isolated protocol.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import random
import time
from typing import Any

import numpy as np

from egoroll_ros.core.policy import ImageFeature, Observation, Policy, PolicyMetadata
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.fingerprint import fingerprint

JOINTS = ['shoulder_pan', 'shoulder_lift', 'upper_arm_roll', 'elbow', 'forearm_roll',
          'wrist_pitch', 'wrist_roll', 'gripper']
BACKEND = 'policy_fakes:FakePolicy'
NORM = {'state': {'mean': [0.0] * 8, 'std': [1.0] * 8},
        'action': {'mean': [0.0] * 8, 'std': [1.0] * 8}}


def make_fake_checkpoint(path: Path, *, action_size: int = 8, chunk_length: int = 5,
                         step_period: float = 0.05, cameras: tuple = (),
                         normalization: dict | None = NORM, mode: str = 'hold',
                         offset: float = 0.0, drive_joint: int = 0, rtc: bool = False) -> Path:
    """Write a FakePolicy checkpoint; ``cameras`` are (name, height, width)."""
    path.mkdir(parents=True, exist_ok=True)
    cfg = {'state_size': 8, 'action_size': action_size, 'chunk_length': chunk_length,
           'step_period': step_period, 'cameras': [list(c) for c in cameras],
           'normalization': normalization, 'offset': offset, 'drive_joint': drive_joint,
           'rtc': rtc}
    (path / 'fake.json').write_text(json.dumps(cfg))
    (path / 'mode').write_text(mode)
    return path


class FakePolicy(Policy):
    """Deterministic fake; see the module docstring."""

    def __init__(self, path: Path, cfg: dict[str, Any]) -> None:
        self.path = path
        self.cfg = cfg
        self.mode_override: str | None = None
        self.resets = 0
        self.calls = 0
        self.last_observation: Observation | None = None
        self.rtc_requests: list = []
        self.closed = False
        self._meta = PolicyMetadata(
            backend='fake', fingerprint=fingerprint({'config': path / 'fake.json'}),
            image_features=tuple(ImageFeature(c, h, w) for c, h, w in cfg['cameras']),
            state_size=cfg['state_size'], action_size=cfg['action_size'],
            chunk_length=cfg['chunk_length'], step_period=cfg['step_period'],
            normalization=cfg['normalization'] or {}, rtc=bool(cfg.get('rtc')))

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> FakePolicy:
        p = Path(path)
        try:
            cfg = json.loads((p / 'fake.json').read_text())
        except OSError as exc:
            raise CheckpointError(f'fake checkpoint missing: {exc}') from None
        if cfg.get('download'):   # a backend that reaches for the network while loading
            import urllib.request
            urllib.request.urlopen(cfg['download'], timeout=5)
        return cls(p, cfg)

    @property
    def metadata(self) -> PolicyMetadata:
        return self._meta

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        self.closed = True

    def mode(self) -> str:
        if self.mode_override is not None:
            return self.mode_override
        return (self.path / 'mode').read_text().strip()

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        self.calls += 1
        self.last_observation = observation
        mode = self.mode()
        h, a = self.cfg['chunk_length'], self.cfg['action_size']
        if self._meta.rtc:
            self.rtc_requests.append((observation.stamp, observation.rtc))
        if mode == 'rtc_echo':
            out = np.zeros((h, a))
            r = observation.rtc
            out[0, :3] = [-1, -1, -1] if r is None else \
                [r.prefix_stamp, r.executed, r.inference_delay]
            return out
        if mode == 'crash':
            os._exit(3)
        if mode == 'die':   # a worker that says why it dies (as a CUDA or native error does)
            import sys
            print('RuntimeError: CUDA error: an illegal memory access was encountered',
                  file=sys.stderr, flush=True)
            os._exit(4)
        if mode == 'hang':
            time.sleep(60)
        if mode == 'raise':
            raise RuntimeError('fake policy failure')
        if mode == 'nan':
            out = np.zeros((h, a))
            out[1, 2] = np.nan
            return out
        if mode.startswith('sleep:'):   # sleep:SECONDS, then hold
            time.sleep(float(mode.split(':', 1)[1]))
        if mode == 'slow':
            time.sleep(random.uniform(0.0, 0.002))
        if mode == 'wrap':  # state + offset, wrapped to [-pi, pi) like a naive policy
            out = np.resize(observation.state, a) + self.cfg.get('offset', 0.0)
            return np.tile((out + np.pi) % (2 * np.pi) - np.pi, (h, 1))
        if mode == 'zeros':
            return np.zeros((h, a))
        if mode == 'drive':
            out = np.tile(np.resize(observation.state, a), (h, 1))
            out[:, self.cfg.get('drive_joint', 0)] += self.cfg['offset'] * np.arange(1, h + 1)
            return out
        state = np.resize(observation.state, a)
        return np.tile(state + self.cfg.get('offset', 0.0), (h, 1))


class EvilPickle:
    """Unpickling this creates ``marker`` (proof that something was unpickled)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (open, (self.marker, 'w'))
