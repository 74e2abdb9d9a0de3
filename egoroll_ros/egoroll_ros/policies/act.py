"""``egoroll_act``: a small ACT-style policy defined here, its checkpoint format and training.

Model: a shared convolutional image encoder turns each camera image into a grid of tokens; a
linear layer turns the normalised state into one token; a transformer decoder whose H learned
queries attend to those tokens predicts an (H x A) chunk of normalised absolute joint targets.

Checkpoint directory (read-only is fine; nothing is written there when loading):
    ``config.json``         :class:`ActConfig` fields (sizes, cameras, step period, layers)
    ``normalization.json``  state/action mean and std (:class:`Normalization`)
    ``model.safetensors``   the weights (never a pickle)

The fingerprint is sha256 over those three files (:func:`fingerprint`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

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
from egoroll_ros.policies.torch_io import image_tensors, load_safetensors, state_tensor

CONFIG_FILE = 'config.json'
NORMALIZATION_FILE = 'normalization.json'
WEIGHTS_FILE = 'model.safetensors'
FORMAT = 'egoroll_act/1'


@dataclass(frozen=True)
class ActConfig:
    """Architecture and I/O of an egoroll_act model.

    Attributes:
        state_size, action_size: S and A.
        chunk_length: H, points per predicted chunk.
        step_period: seconds between points.
        cameras: camera name -> [height, width] the model takes (RGB).
        d_model, n_heads, n_layers, dim_feedforward, conv_channels: model size.
        dropout: dropout of the decoder layers during training.
        pool_size: the image features are pooled to pool_size x pool_size tokens per camera.
        coord_conv: append normalised x/y pixel-coordinate channels to each image, which
            helps the encoder localise things (e.g. a task target) in the frame.
        relative_actions: the network predicts each chunk point minus the current state
            (needs action_size == state_size); the output is still absolute targets. Small
            offsets keep their precision after normalisation, absolute positions spread over
            the whole workspace do not. The normalisation statistics are of the offsets.
    """

    state_size: int
    action_size: int
    chunk_length: int
    step_period: float
    cameras: dict[str, list[int]] = field(default_factory=dict)
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    dim_feedforward: int = 128
    conv_channels: int = 16
    dropout: float = 0.0
    pool_size: int = 4
    coord_conv: bool = False
    relative_actions: bool = False

    @classmethod
    def from_json(cls, data: Any, source: str) -> ActConfig:
        """Parse and validate a config dict.

        Raises:
            CheckpointError: wrong format tag, unknown/missing fields or bad values.
        """
        if not isinstance(data, dict) or data.get('format') != FORMAT:
            raise CheckpointError(f"{source}: not an egoroll_act config (format must be "
                                  f"'{FORMAT}')")
        fields = {k: v for k, v in data.items() if k != 'format'}
        try:
            cfg = cls(**fields)
        except TypeError as exc:
            raise CheckpointError(f'{source}: {exc}') from None
        for name in ('state_size', 'action_size', 'chunk_length', 'd_model', 'n_heads',
                     'n_layers', 'dim_feedforward', 'conv_channels', 'pool_size'):
            v = getattr(cfg, name)
            if not isinstance(v, int) or v < 1:
                raise CheckpointError(f"{source}: '{name}' must be a positive integer, got {v!r}")
        for flag in ('coord_conv', 'relative_actions'):
            if not isinstance(getattr(cfg, flag), bool):
                raise CheckpointError(f"{source}: '{flag}' must be true or false")
        if cfg.relative_actions and cfg.action_size != cfg.state_size:
            raise CheckpointError(f"{source}: 'relative_actions' needs action_size == "
                                  f'state_size, got {cfg.action_size} and {cfg.state_size}')
        if cfg.d_model % cfg.n_heads:
            raise CheckpointError(f"{source}: 'd_model' must be a multiple of 'n_heads'")
        if not (isinstance(cfg.step_period, (int, float)) and math.isfinite(cfg.step_period)
                and cfg.step_period > 0):
            raise CheckpointError(f"{source}: 'step_period' must be a positive number")
        for cam, size in cfg.cameras.items():
            if not (isinstance(size, list) and len(size) == 2 and all(
                    isinstance(s, int) and s >= 8 for s in size)):
                raise CheckpointError(f"{source}: camera '{cam}' size must be [height, width] "
                                      f'>= 8, got {size!r}')
        return cfg

    def to_json(self) -> dict[str, Any]:
        """The dict written to ``config.json``."""
        return {'format': FORMAT, **asdict(self)}


class ActModel(nn.Module):
    """The ACT-style network: images + normalised state -> normalised (H, A) chunk."""

    def __init__(self, cfg: ActConfig) -> None:
        super().__init__()
        self.cfg = cfg
        c, d = cfg.conv_channels, cfg.d_model
        self.cameras = list(cfg.cameras)
        self.encoder = nn.Sequential(
            nn.Conv2d(5 if cfg.coord_conv else 3, c, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(2 * c, d, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d((cfg.pool_size, cfg.pool_size)))
        self.image_pos = nn.Parameter(torch.zeros(max(1, len(self.cameras)),
                                                  cfg.pool_size ** 2, d))
        self.state_proj = nn.Linear(cfg.state_size, d)
        self.queries = nn.Parameter(torch.zeros(cfg.chunk_length, d))
        layer = nn.TransformerDecoderLayer(d, cfg.n_heads, cfg.dim_feedforward, cfg.dropout,
                                           batch_first=True)
        self.decoder = nn.TransformerDecoder(layer, cfg.n_layers)
        self.head = nn.Linear(d, cfg.action_size)
        nn.init.normal_(self.image_pos, std=0.02)
        nn.init.normal_(self.queries, std=0.02)

    def forward(self, state: torch.Tensor, images: list[torch.Tensor]) -> torch.Tensor:
        """state (B, S), images: one (B, 3, H, W) in [0, 1] per camera -> (B, H_chunk, A)."""
        tokens = [self.state_proj(state).unsqueeze(1)]
        for i, img in enumerate(images):
            x = img * 2.0 - 1.0
            if self.cfg.coord_conv:
                b, _, h, w = x.shape
                ys = torch.linspace(-1.0, 1.0, h, dtype=x.dtype).view(1, 1, h, 1)
                xs = torch.linspace(-1.0, 1.0, w, dtype=x.dtype).view(1, 1, 1, w)
                x = torch.cat([x, xs.expand(b, 1, h, w), ys.expand(b, 1, h, w)], dim=1)
            feat = self.encoder(x)                            # (B, d, pool, pool)
            tokens.append(feat.flatten(2).transpose(1, 2) + self.image_pos[i])
        memory = torch.cat(tokens, dim=1)
        queries = self.queries.unsqueeze(0).expand(state.shape[0], -1, -1)
        return self.head(self.decoder(queries, memory))


def _metadata(cfg: ActConfig, norm: Normalization, fp: str) -> PolicyMetadata:
    return PolicyMetadata(
        backend='egoroll_act', fingerprint=fp,
        image_features=tuple(ImageFeature(cam, h, w) for cam, (h, w) in cfg.cameras.items()),
        state_size=cfg.state_size, action_size=cfg.action_size,
        chunk_length=cfg.chunk_length, step_period=float(cfg.step_period),
        normalization=norm.to_json())


def checkpoint_fingerprint(path: str | Path) -> str:
    """Fingerprint of an egoroll_act checkpoint directory (weights, config, normalisation)."""
    p = Path(path)
    return fingerprint({'weights': p / WEIGHTS_FILE, 'config': p / CONFIG_FILE,
                        'normalization': p / NORMALIZATION_FILE})


class ActPolicy(Policy):
    """The ``egoroll_act`` backend (see the module docstring for the checkpoint format)."""

    def __init__(self, model: ActModel, cfg: ActConfig, norm: Normalization, fp: str) -> None:
        self._model = model.eval()
        self._cfg = cfg
        self._norm = norm
        self._meta = _metadata(cfg, norm, fp)
        self._device = torch.device('cpu')

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> ActPolicy:
        """Load ``path`` (a checkpoint directory). Options: ``num_threads`` (int, torch intra-op
        threads; default: torch's), ``device`` (cpu, cuda, cuda:N, mps; unavailable: refused).

        Raises:
            CheckpointError: missing or invalid files, weights that do not fit the config.
        """
        p = Path(path)
        if not p.is_dir():
            raise CheckpointError(f'egoroll_act checkpoint is not a directory: {p}')
        cfg = ActConfig.from_json(read_json(p / CONFIG_FILE, 'egoroll_act config'),
                                  str(p / CONFIG_FILE))
        norm = Normalization.from_file(p / NORMALIZATION_FILE, cfg.state_size, cfg.action_size)
        tensors = load_safetensors(p / WEIGHTS_FILE)
        model = ActModel(cfg)
        try:
            model.load_state_dict(tensors, strict=True)
        except RuntimeError as exc:
            raise CheckpointError(f'weights do not fit the config ({p}): {exc}') from None
        if options.get('num_threads'):
            torch.set_num_threads(int(options['num_threads']))
        device = torch_device(options.get('device') or 'cpu')
        policy = cls(model.to(device), cfg, norm, checkpoint_fingerprint(p))
        policy._device = device
        return policy

    @property
    def metadata(self) -> PolicyMetadata:
        """See :class:`PolicyMetadata`."""
        return self._meta

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """(H, A) absolute joint targets.

        Raises:
            PolicyError: the model raised.
        """
        try:
            with torch.inference_mode():
                dev = self._device
                out = self._model(state_tensor(observation, self._norm).to(dev),
                                  [t.to(dev) for t in image_tensors(observation, self._meta)])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise PolicyError(f'egoroll_act inference failed: {exc}') from None
        chunk = self._norm.unnormalize_action(out[0].double().cpu().numpy())
        if self._cfg.relative_actions:
            chunk = chunk + np.asarray(observation.state, dtype=np.float64)[None, :]
        return chunk


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train_act` produced.

    Attributes:
        path: the checkpoint directory.
        fingerprint: its fingerprint (the value for ``expected_fingerprint``).
        losses: training loss per step.
    """

    path: Path
    fingerprint: str
    losses: list[float]


def train_act(images: Mapping[str, np.ndarray], states: np.ndarray, actions: np.ndarray,
              out_dir: str | Path, *, step_period: float, steps: int = 2000,
              batch_size: int = 32, lr: float = 1e-3, seed: int = 0,
              image_size: tuple[int, int] | None = None, d_model: int = 64, n_heads: int = 4,
              n_layers: int = 2, dim_feedforward: int = 128, conv_channels: int = 16,
              weight_decay: float = 1e-4, log_every: int = 0, pool_size: int = 4,
              coord_conv: bool = False, init: str | Path | None = None,
              relative_actions: bool = False) -> TrainResult:
    """Train an egoroll_act policy on demonstrations and write its checkpoint directory.

    Args:
        images: camera name -> uint8 array (N, H, W, 3), RGB, already at the size the policy
            will take (the node resizes live images to it); may be empty (state-only policy).
        states: (N, S) measured joint positions, columns in the configured joint order.
        actions: (N, H_chunk, A) absolute joint targets of the next H_chunk steps after each
            observation (A == S for joint-space policies), one step = ``step_period`` s.
        out_dir: checkpoint directory to create (existing files are overwritten).
        step_period: seconds between consecutive action rows.
        steps, batch_size, lr, weight_decay: AdamW optimisation (L1 loss on normalised
            actions, as ACT).
        seed: makes training deterministic on one machine (data order, init).
        image_size: optional (height, width) to record; defaults to the arrays' size.
        d_model, n_heads, n_layers, dim_feedforward, conv_channels, pool_size, coord_conv:
            model size and image encoding (see :class:`ActConfig`).
        log_every: print the loss every so many steps (0: silent).
        relative_actions: see :class:`ActConfig` (``actions`` stay absolute here).
        init: an egoroll_act checkpoint to continue training from (its config and
            normalisation are kept, e.g. for DAgger rounds on aggregated data); the model-size
            arguments are then ignored.

    Returns:
        :class:`TrainResult` with the fingerprint to put in ``expected_fingerprint``.

    Raises:
        ValueError: inconsistent array shapes or non-finite data.
    """
    from safetensors.torch import save_file

    states = np.asarray(states, dtype=np.float64)
    actions = np.asarray(actions, dtype=np.float64)
    if states.ndim != 2 or actions.ndim != 3 or len(states) != len(actions) or not len(states):
        raise ValueError(f'states must be (N, S) and actions (N, H, A) with the same N > 0; got '
                         f'{states.shape} and {actions.shape}')
    if not (np.all(np.isfinite(states)) and np.all(np.isfinite(actions))):
        raise ValueError('states and actions must be finite')
    n = len(states)
    cams: dict[str, list[int]] = {}
    for cam, arr in images.items():
        if arr.ndim != 4 or arr.shape[0] != n or arr.shape[3] != 3 or arr.dtype != np.uint8:
            raise ValueError(f"images['{cam}'] must be uint8 (N, H, W, 3) with N={n}; got "
                             f'{arr.shape} {arr.dtype}')
        h, w = image_size or arr.shape[1:3]
        if (h, w) != arr.shape[1:3]:
            raise ValueError(f"images['{cam}'] are {arr.shape[1:3]}, image_size says {(h, w)}")
        cams[cam] = [int(h), int(w)]
    cfg = ActConfig(state_size=states.shape[1], action_size=actions.shape[2],
                    chunk_length=actions.shape[1], step_period=float(step_period), cameras=cams,
                    d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                    dim_feedforward=dim_feedforward, conv_channels=conv_channels,
                    pool_size=pool_size, coord_conv=coord_conv,
                    relative_actions=relative_actions)
    if relative_actions and actions.shape[2] != states.shape[1]:
        raise ValueError('relative_actions needs actions and states of the same width')
    norm = Normalization.fit(states, actions - states[:, None, :] if relative_actions
                             else actions)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = ActModel(cfg)
    if init is not None:
        base = ActPolicy.load(init)
        if (base._cfg.state_size, base._cfg.action_size, base._cfg.chunk_length,
                base._cfg.cameras) != (cfg.state_size, cfg.action_size, cfg.chunk_length,
                                       cfg.cameras):
            raise ValueError(f'init checkpoint {init} does not fit the data (sizes/cameras)')
        cfg, norm = base._cfg, base._norm
        model = ActModel(cfg)
        model.load_state_dict(base._model.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    s_all = torch.from_numpy(norm.normalize_state(states).astype(np.float32))
    targets = actions - states[:, None, :] if cfg.relative_actions else actions
    a_all = torch.from_numpy(((targets - norm.action.mean) / norm.action.std).astype(np.float32))
    img_all = {cam: torch.from_numpy(np.ascontiguousarray(images[cam])) for cam in cams}
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, n, (min(batch_size, n),), generator=gen)
        imgs = [img_all[cam][idx].permute(0, 3, 1, 2).float().div_(255.0) for cam in cams]
        loss = torch.nn.functional.l1_loss(model(s_all[idx], imgs), a_all[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if log_every and (step + 1) % log_every == 0:
            print(f'step {step + 1}/{steps} loss {losses[-1]:.4f}', flush=True)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state_dict = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state_dict, str(out / WEIGHTS_FILE))
    (out / CONFIG_FILE).write_text(json.dumps(cfg.to_json(), indent=2, sort_keys=True) + '\n')
    (out / NORMALIZATION_FILE).write_text(json.dumps(norm.to_json(), indent=2) + '\n')
    return TrainResult(out, checkpoint_fingerprint(out), losses)
