"""A test-only Cartesian policy (backend ``cartesian_fakes:HoldPosePolicy``), no ROS.

Its checkpoint is a directory with ``cart.json``: the Cartesian layout/frame/convention/state
(``CartesianSpec.to_json()``), the chunk length, and a ``mode``: ``hold`` repeats the state
(an end-effector pose state: "stay where you are"), ``nan`` puts a NaN in the output,
``badquat`` outputs a quaternion of norm 2, ``fixed`` outputs ``values`` (H x D) as given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.core.policy import CartesianSpec, Observation, Policy, PolicyMetadata
from egoroll_ros.policies.fingerprint import fingerprint

BACKEND = 'cartesian_fakes:HoldPosePolicy'


def write_checkpoint(path: Path, spec: CartesianSpec, *, mode: str = 'hold',
                     chunk_length: int = 4, values: list | None = None,
                     state_size: int | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / 'cart.json').write_text(json.dumps({
        'spec': spec.to_json(), 'mode': mode, 'chunk_length': chunk_length, 'values': values,
        'state_size': state_size}))
    return path


class HoldPosePolicy(Policy):
    def __init__(self, path: Path) -> None:
        self.cfg = json.loads((path / 'cart.json').read_text())
        spec = CartesianSpec.from_json(self.cfg['spec'])
        self._meta = PolicyMetadata(
            backend='cartesian_fake', fingerprint=fingerprint({'config': path / 'cart.json'}),
            image_features=(),
            state_size=self.cfg['state_size'] or (spec.width if spec.state == 'ee_pose' else 8),
            action_size=spec.width, chunk_length=self.cfg['chunk_length'], step_period=0.05,
            normalization={'state': 1, 'action': 1}, action_space='cartesian', cartesian=spec)
        self.observations: list[Observation] = []

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> HoldPosePolicy:
        return cls(Path(path))

    @property
    def metadata(self) -> PolicyMetadata:
        return self._meta

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        self.observations.append(observation)
        h, d = self._meta.chunk_length, self._meta.action_size
        mode = self.cfg['mode']
        if mode == 'fixed':
            return np.asarray(self.cfg['values'], dtype=float)
        out = np.tile(np.resize(observation.state, d), (h, 1))
        if mode == 'nan':
            out[1, 0] = np.nan
        if mode == 'badquat':
            out[:, 3:7] = [0.0, 0.0, 0.0, 2.0]
        return out
