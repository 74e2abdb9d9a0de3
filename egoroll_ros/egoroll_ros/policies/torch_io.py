"""Shared torch helpers of the built-in backends: observation -> tensors, safe loading."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from egoroll_ros.core.policy import Observation, PolicyMetadata
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.normalization import Normalization


def image_tensors(obs: Observation, meta: PolicyMetadata) -> list[torch.Tensor]:
    """One float32 (1, 3, H, W) tensor in [0, 1] per image feature, in metadata order."""
    out = []
    for f in meta.image_features:
        img = obs.images[f.camera]
        if img.shape != (f.height, f.width, 3) or img.dtype != np.uint8:
            raise ValueError(f"image '{f.camera}' is {img.shape} {img.dtype}, expected "
                             f'({f.height}, {f.width}, 3) uint8')
        t = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).unsqueeze(0)
        out.append(t.to(torch.float32).div_(255.0))
    return out


def state_tensor(obs: Observation, norm: Normalization) -> torch.Tensor:
    """The normalised state as a float32 (1, S) tensor."""
    return torch.from_numpy(norm.normalize_state(obs.state).astype(np.float32)).unsqueeze(0)


def load_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file (never unpickles).

    Raises:
        CheckpointError: missing, or not a valid safetensors file (e.g. a pickle).
    """
    from safetensors.torch import load_file

    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f'weights missing: {p}')
    try:
        return load_file(str(p))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several error types
        raise CheckpointError(f'weights are not a valid safetensors file ({p}): {exc}') \
            from None
