"""The policy interface, its metadata, the observation it consumes, and the backend registry.

Backends are classes registered in the Python entry-point group ``egoroll_ros.policies``
(see ``setup.py``), so an adapter can live in another package. A backend may also be named
directly as ``package.module:Class``. Nothing here imports rclpy or message types.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
import importlib
from importlib.metadata import entry_points
import math
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.errors import CheckpointError, EgorollError

ENTRY_POINT_GROUP = 'egoroll_ros.policies'

#: Non-image, non-state inputs a policy may declare (the node can supply these from Quest).
EXTRA_FEATURES = {
    'quest.grip': 2,          # left, right grip axis values
    'quest.trigger': 2,       # left, right trigger axis values
    'quest.left_pose': 7,     # x y z qx qy qz qw
    'quest.right_pose': 7,
}


class PolicyError(EgorollError):
    """Inference failed (exception in the model, malformed or non-finite output)."""


class PolicyCrashError(PolicyError):
    """The process running the policy died."""


class PolicyTimeoutError(PolicyError):
    """The policy did not answer within its time limit."""


@dataclass(frozen=True)
class ImageFeature:
    """An image input of the policy: the camera it comes from and the size it wants.

    Attributes:
        camera: configured camera name supplying it.
        height, width: pixels the policy expects (the node resizes to this).
        channels: 3 (RGB, uint8) is the only layout supported.
    """

    camera: str
    height: int
    width: int
    channels: int = 3


@dataclass(frozen=True)
class PolicyMetadata:
    """What a loaded policy consumes and produces.

    Attributes:
        backend: backend name that loaded it.
        fingerprint: lowercase sha256 hex over weights, config and normalisation statistics.
        image_features: image inputs, in the order the model takes them.
        state_size: length of the state vector (the configured joints, in order).
        action_size: columns of a predicted chunk (must equal the joint count).
        chunk_length: rows H of a predicted chunk.
        step_period: seconds between consecutive points of a chunk.
        time_from_start: optional explicit per-point offsets (length H); default
            ``(k + 1) * step_period``.
        extra_features: names from :data:`EXTRA_FEATURES` the policy also needs.
        normalization: the statistics the policy applies (for reports; checked present).
    """

    backend: str
    fingerprint: str
    image_features: tuple[ImageFeature, ...]
    state_size: int
    action_size: int
    chunk_length: int
    step_period: float
    time_from_start: tuple[float, ...] | None = None
    extra_features: tuple[str, ...] = ()
    normalization: dict[str, Any] = field(default_factory=dict)

    def point_times(self) -> np.ndarray:
        """Seconds from the observation stamp of each of the H points."""
        if self.time_from_start is not None:
            return np.asarray(self.time_from_start, dtype=float)
        return (np.arange(self.chunk_length, dtype=float) + 1.0) * self.step_period

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (for the isolated backend's protocol)."""
        return {
            'backend': self.backend, 'fingerprint': self.fingerprint,
            'image_features': [[f.camera, f.height, f.width, f.channels]
                               for f in self.image_features],
            'state_size': self.state_size, 'action_size': self.action_size,
            'chunk_length': self.chunk_length, 'step_period': self.step_period,
            'time_from_start': list(self.time_from_start) if self.time_from_start else None,
            'extra_features': list(self.extra_features), 'normalization': self.normalization,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PolicyMetadata:
        """Inverse of :meth:`to_json`.

        Raises:
            CheckpointError: a field is missing or has the wrong type.
        """
        try:
            return cls(
                backend=str(d['backend']), fingerprint=str(d['fingerprint']),
                image_features=tuple(ImageFeature(str(c), int(h), int(w), int(ch))
                                     for c, h, w, ch in d['image_features']),
                state_size=int(d['state_size']), action_size=int(d['action_size']),
                chunk_length=int(d['chunk_length']), step_period=float(d['step_period']),
                time_from_start=tuple(float(t) for t in d['time_from_start'])
                if d.get('time_from_start') else None,
                extra_features=tuple(str(e) for e in d.get('extra_features', ())),
                normalization=dict(d.get('normalization') or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f'policy metadata malformed: {exc!r}') from None


@dataclass(frozen=True)
class Observation:
    """One observation as the policy sees it.

    Attributes:
        images: camera name -> uint8 array (height, width, 3), RGB, at the declared size.
        state: float64 array (state_size,), joints in the configured order.
        extras: name -> float64 array for each declared extra feature.
        stamp: observation time in seconds (ROS clock).
    """

    images: dict[str, np.ndarray]
    state: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    stamp: float = 0.0


class Policy(ABC):
    """A loaded policy: ``reset()`` at the start of a rollout, then ``predict_chunk`` per step.

    Subclasses implement :meth:`load` (a classmethod building the instance from a checkpoint
    directory; it must never unpickle anything and never write next to the checkpoint),
    :attr:`metadata` and :meth:`predict_chunk`.
    """

    @classmethod
    @abstractmethod
    def load(cls, path: str | Path, **options: Any) -> Policy:
        """Load the checkpoint at ``path``.

        Raises:
            CheckpointError: missing, malformed or unsafe files, missing normalisation.
        """

    @property
    @abstractmethod
    def metadata(self) -> PolicyMetadata:
        """What the policy consumes and produces."""

    def reset(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Forget any state carried between steps (called at each rollout start)."""

    @abstractmethod
    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """Predict an (H, A) chunk of absolute joint targets in SI units.

        Raises:
            PolicyError: inference failed.
        """

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources (child processes, files). Safe to call twice."""


def load_backend(name: str) -> type[Policy]:
    """The backend class for ``name``: an entry point of ``egoroll_ros.policies``, or a
    ``package.module:Class`` path.

    Raises:
        CheckpointError: unknown name, or the class cannot be imported.
    """
    if ':' in name:
        module, _, attr = name.partition(':')
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise CheckpointError(f"policy backend '{name}' cannot be imported: {exc}") from None
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            known = ', '.join(sorted(available_backends())) or 'none'
            raise CheckpointError(f"unknown policy backend '{name}' (entry points of "
                                  f"'{ENTRY_POINT_GROUP}': {known})")
        try:
            cls = found[0].load()
        except Exception as exc:  # noqa: BLE001 - an adapter's import may fail any way
            raise CheckpointError(f"policy backend '{name}' failed to import: {exc!r}") \
                from None
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise CheckpointError(f"policy backend '{name}' is not a Policy subclass")
    return cls


def available_backends() -> list[str]:
    """Names registered in the ``egoroll_ros.policies`` entry-point group."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def validate_metadata(meta: PolicyMetadata, joints: list[str] | tuple[str, ...],
                      cameras: dict[str, tuple[int, int]],
                      extras_available: set[str] | None = None) -> None:
    """Check that this configuration can feed the policy and execute its output.

    Args:
        meta: the loaded policy's metadata.
        joints: configured joints (state and action columns, in order).
        cameras: configured camera name -> (height, width) expected from the camera.
        extras_available: extra features the node can supply (default: all known).

    Raises:
        CheckpointError: naming the reason (action size, state size, missing camera or
            feature, missing normalisation, bad chunk timing, empty fingerprint).
    """
    problems = []
    if not meta.fingerprint or len(meta.fingerprint) != 64:
        problems.append('the policy has no valid fingerprint')
    if meta.action_size != len(joints):
        problems.append(f'action size {meta.action_size} differs from the {len(joints)} '
                        f'configured joints')
    if meta.state_size != len(joints):
        problems.append(f'state size {meta.state_size} differs from the {len(joints)} '
                        f'configured joints')
    for f in meta.image_features:
        if f.camera not in cameras:
            problems.append(f"image feature from camera '{f.camera}' cannot be supplied "
                            f"(configured cameras: {', '.join(cameras) or 'none'})")
        if f.channels != 3 or f.height <= 0 or f.width <= 0:
            problems.append(f"image feature '{f.camera}' has an unsupported shape "
                            f'{f.height}x{f.width}x{f.channels}')
    supplied = set(EXTRA_FEATURES) if extras_available is None else extras_available
    for e in meta.extra_features:
        if e not in supplied:
            problems.append(f"input feature '{e}' cannot be supplied")
    if meta.chunk_length < 1:
        problems.append(f'chunk length {meta.chunk_length} < 1')
    if not (math.isfinite(meta.step_period) and meta.step_period > 0):
        problems.append(f'step period {meta.step_period} is not a positive number')
    times = meta.point_times()
    if len(times) != meta.chunk_length or not np.all(np.isfinite(times)) or \
            np.any(times <= 0) or np.any(np.diff(times) <= 0):
        problems.append('time_from_start is not H strictly increasing positive values')
    for key in ('state', 'action'):
        if key not in meta.normalization:
            problems.append(f"normalisation statistics for '{key}' are missing")
    if problems:
        raise CheckpointError('policy refused: ' + '; '.join(problems))


def check_chunk(chunk: Any, meta: PolicyMetadata) -> np.ndarray:
    """Return ``chunk`` as a float64 (H, A) array, or raise.

    Raises:
        PolicyError: wrong shape, or a non-finite value (naming where).
    """
    try:
        arr = np.asarray(chunk, dtype=float)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f'policy output is not numeric: {exc}') from None
    want = (meta.chunk_length, meta.action_size)
    if arr.shape != want:
        raise PolicyError(f'policy output has shape {arr.shape}, expected {want}')
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise PolicyError(f'policy output is non-finite ({int(bad.sum())} values; first at '
                          f'point {row}, column {col}: {arr[row, col]})')
    return arr
