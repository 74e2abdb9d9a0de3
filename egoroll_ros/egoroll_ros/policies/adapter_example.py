"""``example_adapter``: run a policy class of an external training framework, unchanged.

Training frameworks (EgoMimic, robomimic, ...) ship a factory that turns a checkpoint into a
ready rollout policy, e.g. ``policy = create_rollout_policy(checkpoint_dir, device='cpu')``
followed by ``policy.start_episode()`` at each episode and ``action = policy(ob)`` per step
with ``ob`` a dict of framework-named tensors. This backend is the pattern for wrapping one:
it imports the factory named by a configuration string ``'module:function'`` LAZILY (only at
load, so egoroll never depends on the framework), calls it on the checkpoint directory, and
maps egoroll's :class:`~egoroll_ros.core.policy.Observation` to the framework's observation
dict and its output back to an (H, A) array. Copy it for a real framework; the mapping is
what changes.

Checkpoint directory: ``adapter.json`` (:data:`ADAPTER_FILE`) plus whatever the factory reads
(weights as safetensors; the adapter never unpickles anything itself). ``adapter.json``::

    {
      "factory": "my_framework.rollout:create_rollout_policy",   # imported lazily
      "factory_kwargs": {"device": "cpu"},    # passed with checkpoint_dir=<the directory>
      "files": ["model.safetensors"],         # fingerprinted together with adapter.json
      "chunk_length": 10, "step_period": 0.1,
      "state_key": "ee_pose",                 # framework key of the state vector
      "state_size": 7,
      "images": {"front_img_1": ["scene", 96, 96]},   # framework key -> camera, height, width
      "image_layout": "chw_float",            # chw_float (0..1, 1 x 3 x H x W) or hwc_uint8
      "action_key": null,                     # output dict key, or null for a plain array
      "action_space": "cartesian",            # or "joint"
      "cartesian": {"arms": [["arm", "tool0", "rpy:xyz", true]], "frame": "base",
                    "state": "ee_pose", "convention": null},
      "normalization": {"state": "...", "action": "..."}   # what the framework applies
    }

Nothing is downloaded: ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` are set (unless
already set) before the factory's module is imported. The factory's output may be a numpy
array or a torch tensor of shape (H, A) or (1, H, A).
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.core.policy import (
    CartesianSpec,
    ImageFeature,
    Observation,
    Policy,
    PolicyError,
    PolicyMetadata,
)
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.device import check_device_name
from egoroll_ros.policies.fingerprint import fingerprint

ADAPTER_FILE = 'adapter.json'
IMAGE_LAYOUTS = ('chw_float', 'hwc_uint8')


def import_factory(spec: str) -> Any:
    """The callable named ``'module:function'`` (imported now, offline).

    Raises:
        CheckpointError: malformed name, import failure, or not callable.
    """
    module, _, attr = spec.partition(':')
    if not module or not attr:
        raise CheckpointError(f"adapter factory '{spec}' is not 'module:function'")
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
    try:
        fn = getattr(importlib.import_module(module), attr)
    except Exception as exc:  # noqa: BLE001 - a framework's import may fail any way
        raise CheckpointError(f"adapter factory '{spec}' cannot be imported: {exc!r}") \
            from None
    if not callable(fn):
        raise CheckpointError(f"adapter factory '{spec}' is not callable")
    return fn


class FrameworkPolicyAdapter(Policy):
    """A framework rollout policy behind egoroll's :class:`Policy` (see the module docstring).

    Args:
        rollout: what the factory returned (``start_episode()`` optional, called per step).
        cfg: the parsed ``adapter.json``.
        meta: the metadata derived from it.
    """

    def __init__(self, rollout: Any, cfg: dict[str, Any], meta: PolicyMetadata) -> None:
        self.rollout = rollout
        self.cfg = cfg
        self._meta = meta
        self._images = {key: cam for key, (cam, _, _) in cfg.get('images', {}).items()}

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> FrameworkPolicyAdapter:
        """Read ``adapter.json``, fingerprint it with the listed files, call the factory.

        Raises:
            CheckpointError: missing/malformed ``adapter.json``, a listed file missing, the
                factory failing to import or to build the policy.
        """
        root = Path(path)
        cfg_path = root / ADAPTER_FILE
        try:
            cfg = json.loads(cfg_path.read_text())
            files = {f'file:{f}': root / f for f in cfg.get('files', [])}
            if any('/' in f or f.startswith('..') for f in cfg.get('files', [])):
                raise CheckpointError(f'{cfg_path}: files must be names inside {root}')
            cart = cfg.get('cartesian')
            images = tuple(ImageFeature(str(c), int(h), int(w))
                           for c, h, w in cfg.get('images', {}).values())
            layout = cfg.get('image_layout', 'chw_float')
            if layout not in IMAGE_LAYOUTS:
                raise CheckpointError(f"{cfg_path}: image_layout '{layout}' is not one of "
                                      f"{', '.join(IMAGE_LAYOUTS)}")
            spec = CartesianSpec.from_json(cart) if cart is not None else None
            action_size = spec.width if spec is not None else int(cfg['action_size'])
            meta = PolicyMetadata(
                backend='example_adapter',
                fingerprint=fingerprint({'config': cfg_path, **files}),
                image_features=images, state_size=int(cfg['state_size']),
                action_size=action_size, chunk_length=int(cfg['chunk_length']),
                step_period=float(cfg['step_period']),
                normalization=dict(cfg.get('normalization') or {}),
                action_space=str(cfg.get('action_space', 'joint')), cartesian=spec)
            factory = import_factory(str(cfg['factory']))
        except OSError as exc:
            raise CheckpointError(f'{cfg_path}: {exc.strerror or exc}') from None
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f'{cfg_path}: malformed ({exc!r})') from None
        kwargs = dict(cfg.get('factory_kwargs') or {})
        device = check_device_name(options.get('device') or 'cpu')
        if 'device' in kwargs and str(kwargs['device']) != device:
            raise CheckpointError(f"{cfg_path}: factory_kwargs.device is "
                                  f"'{kwargs['device']}' but policy.device is '{device}'")
        if device != 'cpu':
            kwargs['device'] = device   # the framework's factory places (or refuses) it
        try:
            rollout = factory(checkpoint_dir=str(root), **kwargs)
        except Exception as exc:  # noqa: BLE001 - the framework's own errors
            raise CheckpointError(f"adapter factory '{cfg['factory']}' failed on {root}: "
                                  f'{exc!r}') from None
        return cls(rollout, cfg, meta)

    @property
    def metadata(self) -> PolicyMetadata:
        """Derived from ``adapter.json``."""
        return self._meta

    def reset(self) -> None:
        """The framework's ``start_episode()`` when it has one."""
        start = getattr(self.rollout, 'start_episode', None)
        if callable(start):
            start()

    def framework_observation(self, obs: Observation) -> dict[str, Any]:
        """egoroll's observation as the framework's dict (batch of 1)."""
        import torch

        ob: dict[str, Any] = {self.cfg.get('state_key', 'state'):
                              torch.as_tensor(obs.state, dtype=torch.float32)[None]}
        for key, cam in self._images.items():
            img = torch.from_numpy(np.ascontiguousarray(obs.images[cam]))
            if self.cfg.get('image_layout', 'chw_float') == 'chw_float':
                img = img.permute(2, 0, 1).to(torch.float32) / 255.0
            ob[key] = img[None]
        return ob

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """Call the framework policy; its output as an (H, A) float64 array.

        Raises:
            PolicyError: the framework raised, or returned no array.
        """
        import torch

        try:
            with torch.inference_mode():
                out = self.rollout(self.framework_observation(observation))
        except Exception as exc:  # noqa: BLE001 - a framework error faults the rollout
            raise PolicyError(f'framework policy raised {exc!r}') from None
        key = self.cfg.get('action_key')
        if key is not None:
            if not isinstance(out, dict) or key not in out:
                raise PolicyError(f"framework policy output has no '{key}'")
            out = out[key]
        if isinstance(out, torch.Tensor):
            out = out.detach().to('cpu', torch.float64).numpy()
        arr = np.asarray(out, dtype=float)
        if arr.ndim == 3 and arr.shape[0] == 1:
            arr = arr[0]
        return arr
