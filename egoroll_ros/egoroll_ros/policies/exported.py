"""``exported``: a TorchScript model file plus a JSON manifest.

Checkpoint directory:
    ``manifest.json``: ``{"format": "egoroll_exported/1", "model": "model.pt",
    "normalization": "normalization.json", "image_features": [{"camera": "scene",
    "height": 96, "width": 128}], "state_size": 8, "action_size": 8, "chunk_length": 20,
    "step_period": 0.05, "time_from_start": null}``
    the model file named by ``model``: a TorchScript archive (``torch.jit.save``) whose
    ``forward(state: Tensor[1, S], images: List[Tensor[1, 3, H, W]]) -> Tensor[1, H, A]``
    takes the normalised state and float RGB images in [0, 1] (manifest order) and returns
    normalised actions;
    the normalisation file named by ``normalization`` (:class:`Normalization` JSON).

torch.export (``.pt2``) archives are refused: in torch 2.13 ``torch.export.load`` falls back
to unrestricted unpickling for some archive entries, which this project never allows.
TorchScript archives are read by torch's restricted C++ loader, which executes no Python.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
import zipfile

import numpy as np
import torch

from egoroll_ros.core.policy import (
    ImageFeature,
    Observation,
    Policy,
    PolicyError,
    PolicyMetadata,
)
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.device import torch_device
from egoroll_ros.policies.fingerprint import fingerprint
from egoroll_ros.policies.normalization import Normalization, read_json
from egoroll_ros.policies.torch_io import image_tensors, state_tensor

MANIFEST_FILE = 'manifest.json'
FORMAT = 'egoroll_exported/1'


def _inside(root: Path, name: Any, what: str) -> Path:
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"manifest: '{what}' must name a file in the checkpoint")
    path = (root / name).resolve()
    if root.resolve() not in path.parents:
        raise CheckpointError(f"manifest: '{what}' ({name}) is outside the checkpoint")
    return path


def _is_torchscript(path: Path) -> bool:
    """A TorchScript archive is a zip holding ``*/code/`` and ``*/constants.pkl``."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
    return any('/code/' in n for n in names) and any(n.endswith('/constants.pkl')
                                                     for n in names)


class ExportedPolicy(Policy):
    """The ``exported`` backend (see the module docstring)."""

    def __init__(self, module: torch.jit.ScriptModule, meta: PolicyMetadata,
                 norm: Normalization) -> None:
        self._module = module
        self._meta = meta
        self._norm = norm
        self._device = torch.device('cpu')

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> ExportedPolicy:
        """Load the checkpoint directory ``path``.

        Raises:
            CheckpointError: missing/invalid manifest, model or normalisation; a model file
                that is not a TorchScript archive (e.g. a pickle) is refused unread.
        """
        root = Path(path)
        mpath = root / MANIFEST_FILE
        man = read_json(mpath, 'exported manifest')
        if not isinstance(man, dict) or man.get('format') != FORMAT:
            raise CheckpointError(f"{mpath}: not an exported-policy manifest (format must be "
                                  f"'{FORMAT}')")
        model_path = _inside(root, man.get('model'), 'model')
        norm_path = _inside(root, man.get('normalization'), 'normalization')
        try:
            feats = tuple(ImageFeature(str(f['camera']), int(f['height']), int(f['width']))
                          for f in man.get('image_features', []))
            state_size = int(man['state_size'])
            action_size = int(man['action_size'])
            chunk_length = int(man['chunk_length'])
            step_period = float(man['step_period'])
            tfs = man.get('time_from_start')
            tfs = tuple(float(t) for t in tfs) if tfs else None
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f'{mpath}: missing or invalid field: {exc!r}') from None
        norm = Normalization.from_file(norm_path, state_size, action_size)
        if not model_path.is_file():
            raise CheckpointError(f'model file missing: {model_path}')
        if model_path.suffix == '.pt2':
            raise CheckpointError(f'{model_path}: torch.export archives are refused (their '
                                  f'loader may unpickle); export with torch.jit.script/trace')
        if not _is_torchscript(model_path):
            raise CheckpointError(f'{model_path} is not a TorchScript archive; refusing to '
                                  f'load it (pickled weights are never loaded)')
        device = torch_device(options.get('device') or 'cpu')
        if options.get('num_threads'):
            torch.set_num_threads(int(options['num_threads']))
        try:
            module = torch.jit.load(str(model_path), map_location=device)
        except Exception as exc:  # noqa: BLE001 - torch raises several types
            raise CheckpointError(f'TorchScript model unreadable ({model_path}): {exc}') \
                from None
        module.eval()
        fp = fingerprint({'weights': model_path, 'config': mpath, 'normalization': norm_path})
        meta = PolicyMetadata(backend='exported', fingerprint=fp, image_features=feats,
                              state_size=state_size, action_size=action_size,
                              chunk_length=chunk_length, step_period=step_period,
                              time_from_start=tfs, normalization=norm.to_json())
        policy = cls(module, meta, norm)
        policy._device = device
        return policy

    @property
    def metadata(self) -> PolicyMetadata:
        """See :class:`PolicyMetadata`."""
        return self._meta

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """(H, A) absolute joint targets.

        Raises:
            PolicyError: the model raised or returned something that is not a tensor.
        """
        try:
            with torch.inference_mode():
                dev = self._device
                out = self._module(state_tensor(observation, self._norm).to(dev),
                                   [t.to(dev) for t in image_tensors(observation, self._meta)])
        except Exception as exc:  # noqa: BLE001 - TorchScript raises many types
            raise PolicyError(f'exported model inference failed: {exc}') from None
        if not isinstance(out, torch.Tensor) or out.ndim != 3 or out.shape[0] != 1:
            raise PolicyError(f'exported model returned {type(out).__name__} '
                              f'{tuple(getattr(out, "shape", ()))}, expected (1, H, A)')
        return self._norm.unnormalize_action(out[0].double().cpu().numpy())


def save_exported(module: torch.nn.Module, out_dir: str | Path, *, state_size: int,
                  action_size: int, chunk_length: int, step_period: float,
                  normalization: Normalization,
                  image_features: list[ImageFeature] | tuple[ImageFeature, ...] = (),
                  time_from_start: list[float] | None = None) -> str:
    """Script ``module`` with ``torch.jit.script`` and write an exported checkpoint.

    Returns:
        The checkpoint's fingerprint.
    """
    import json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.jit.save(torch.jit.script(module), str(out / 'model.pt'))
    (out / 'normalization.json').write_text(json.dumps(normalization.to_json()))
    man = {'format': FORMAT, 'model': 'model.pt', 'normalization': 'normalization.json',
           'image_features': [{'camera': f.camera, 'height': f.height, 'width': f.width}
                              for f in image_features],
           'state_size': state_size, 'action_size': action_size,
           'chunk_length': chunk_length, 'step_period': step_period,
           'time_from_start': time_from_start}
    (out / MANIFEST_FILE).write_text(json.dumps(man, indent=2))
    return fingerprint({'weights': out / 'model.pt', 'config': out / MANIFEST_FILE,
                        'normalization': out / 'normalization.json'})
