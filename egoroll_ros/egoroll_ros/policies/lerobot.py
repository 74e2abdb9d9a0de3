"""``lerobot``: adapter for a LeRobot pretrained-policy directory (``config.json`` +
``model.safetensors``), used only where the ``lerobot`` package is importable.

It never downloads: the directory must exist locally and Hugging Face Hub access is forced
offline. Not exercised in this repository's tests (lerobot is not installed here); the import
check and the refusal paths are. Typical use is through the ``isolated`` backend with
``python_executable`` pointing at a venv that has lerobot, so its dependencies never meet the
node's.

LeRobot's API moves between releases; this adapter targets ``lerobot.policies.factory
.get_policy_class`` and a policy with ``from_pretrained``, ``reset`` and
``predict_action_chunk``. Input feature names map as ``observation.state`` -> the joint state,
``observation.images.<camera>`` -> the configured camera ``<camera>``. Normalisation is the
policy's own (LeRobot applies it inside the model or its processors); the adapter requires the
statistics file(s) to be present in the directory and fingerprints them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.core.policy import (
    ImageFeature,
    Observation,
    Policy,
    PolicyError,
    PolicyMetadata,
)
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.fingerprint import fingerprint


def _stats_files(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_file() and p.suffix == '.safetensors'
                  and p.name != 'model.safetensors' and ('normaliz' in p.name
                                                         or 'stats' in p.name))


class LeRobotPolicy(Policy):
    """Wraps a LeRobot policy (see the module docstring)."""

    def __init__(self, policy: Any, meta: PolicyMetadata, torch: Any) -> None:
        self._policy = policy
        self._meta = meta
        self._torch = torch

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> LeRobotPolicy:
        """Load a local LeRobot pretrained-policy directory.

        Options: ``step_period`` (float, seconds between actions; default 1 / config ``fps``
        or 0.033), ``device`` (default ``cpu``).

        Raises:
            CheckpointError: lerobot not importable, missing files, unknown policy type.
        """
        root = Path(path)
        cfg_path, weights = root / 'config.json', root / 'model.safetensors'
        for p in (cfg_path, weights):
            if not p.is_file():
                raise CheckpointError(f'LeRobot checkpoint file missing: {p}')
        stats = _stats_files(root)
        if not stats:
            raise CheckpointError(f'LeRobot checkpoint {root} has no normalisation statistics '
                                  f'file (*normaliz*.safetensors / *stats*.safetensors)')
        try:
            os.environ.setdefault('HF_HUB_OFFLINE', '1')
            from lerobot.policies.factory import get_policy_class
            import torch
        except ImportError as exc:
            raise CheckpointError(f"the 'lerobot' backend needs the lerobot package ({exc}); "
                                  f"use the 'isolated' backend with a lerobot venv") from None
        cfg = json.loads(cfg_path.read_text())
        try:
            policy = get_policy_class(cfg['type']).from_pretrained(str(root))
        except Exception as exc:  # noqa: BLE001 - third-party code
            raise CheckpointError(f'LeRobot failed to load {root}: {exc}') from None
        policy.to(options.get('device', 'cpu')).eval()
        feats, state_size = [], 0
        for name, ft in (cfg.get('input_features') or {}).items():
            shape = list(ft.get('shape', []))
            if name.startswith('observation.images.') and len(shape) == 3:
                feats.append(ImageFeature(name.split('.', 2)[2], shape[1], shape[2]))
            elif name == 'observation.state':
                state_size = int(shape[0])
        action_size = int((cfg.get('output_features') or {}).get('action', {})
                          .get('shape', [0])[0])
        chunk = int(cfg.get('n_action_steps') or cfg.get('chunk_size') or 1)
        period = float(options.get('step_period') or (1.0 / cfg['fps'] if cfg.get('fps')
                                                      else 0.033))
        parts = {'weights': weights, 'config': cfg_path}
        parts.update({f'normalization:{p.name}': p for p in stats})
        meta = PolicyMetadata(
            backend='lerobot', fingerprint=fingerprint(parts), image_features=tuple(feats),
            state_size=state_size, action_size=action_size, chunk_length=chunk,
            step_period=period,
            normalization={'state': 'lerobot', 'action': 'lerobot',
                           'files': [p.name for p in stats]})
        return cls(policy, meta, torch)

    @property
    def metadata(self) -> PolicyMetadata:
        """See :class:`PolicyMetadata`."""
        return self._meta

    def reset(self) -> None:
        """Reset the LeRobot policy's action queue."""
        self._policy.reset()

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """Call the LeRobot policy's ``predict_action_chunk``.

        Raises:
            PolicyError: LeRobot raised.
        """
        torch = self._torch
        batch = {'observation.state': torch.from_numpy(
            observation.state.astype(np.float32)).unsqueeze(0)}
        for f in self._meta.image_features:
            img = torch.from_numpy(np.ascontiguousarray(observation.images[f.camera]))
            batch[f'observation.images.{f.camera}'] = \
                img.permute(2, 0, 1).float().div(255.0).unsqueeze(0)
        try:
            with torch.inference_mode():
                out = self._policy.predict_action_chunk(batch)
        except Exception as exc:  # noqa: BLE001 - third-party code
            raise PolicyError(f'LeRobot inference failed: {exc}') from None
        return out[0, :self._meta.chunk_length].double().cpu().numpy()
