"""Mean/std normalisation statistics of a policy's state and action, loaded from JSON."""

from __future__ import annotations

from dataclasses import dataclass
import json
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.errors import CheckpointError

#: Standard deviations below this are refused (they blow up normalised inputs).
MIN_STD = 1e-6


@dataclass(frozen=True)
class Stats:
    """Per-dimension mean and std."""

    mean: np.ndarray
    std: np.ndarray


@dataclass(frozen=True)
class Normalization:
    """State and action statistics: ``x_norm = (x - mean) / std``.

    Attributes:
        state: statistics of the state vector.
        action: statistics of each action column.
    """

    state: Stats
    action: Stats

    def normalize_state(self, state: np.ndarray) -> np.ndarray:
        """State in policy units."""
        return (np.asarray(state, dtype=np.float64) - self.state.mean) / self.state.std

    def unnormalize_action(self, action: np.ndarray) -> np.ndarray:
        """Policy output (..., A) back to SI units."""
        return np.asarray(action, dtype=np.float64) * self.action.std + self.action.mean

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable dict, the format :meth:`from_json` reads."""
        return {k: {'mean': getattr(self, k).mean.tolist(), 'std': getattr(self, k).std.tolist()}
                for k in ('state', 'action')}

    @classmethod
    def from_json(cls, data: Any, state_size: int, action_size: int,
                  source: str = 'normalization') -> Normalization:
        """Parse and validate ``{'state': {'mean': [...], 'std': [...]}, 'action': {...}}``.

        Raises:
            CheckpointError: missing section, wrong length, non-finite or too small std;
                names ``source`` and the key.
        """
        if not isinstance(data, dict):
            raise CheckpointError(f'{source}: normalisation statistics missing (not a dict)')
        out = {}
        for key, size in (('state', state_size), ('action', action_size)):
            sec = data.get(key)
            if not isinstance(sec, dict) or 'mean' not in sec or 'std' not in sec:
                raise CheckpointError(f"{source}: normalisation statistics for '{key}' are "
                                      f'missing (need mean and std)')
            try:
                mean = np.asarray(sec['mean'], dtype=np.float64)
                std = np.asarray(sec['std'], dtype=np.float64)
            except (TypeError, ValueError):
                raise CheckpointError(f"{source}: '{key}' statistics are not numbers") from None
            for name, arr in (('mean', mean), ('std', std)):
                if arr.shape != (size,):
                    raise CheckpointError(f"{source}: '{key}.{name}' has shape {arr.shape}, "
                                          f'expected ({size},)')
                if not np.all(np.isfinite(arr)):
                    raise CheckpointError(f"{source}: '{key}.{name}' is not finite")
            if np.any(std < MIN_STD):
                raise CheckpointError(f"{source}: '{key}.std' has values below {MIN_STD}")
            out[key] = Stats(mean, std)
        return cls(state=out['state'], action=out['action'])

    @classmethod
    def from_file(cls, path: str | Path, state_size: int, action_size: int) -> Normalization:
        """Read :meth:`from_json` data from a JSON file.

        Raises:
            CheckpointError: the file is missing or invalid.
        """
        return cls.from_json(read_json(path, 'normalisation statistics'), state_size,
                             action_size, source=str(path))

    @classmethod
    def fit(cls, states: np.ndarray, actions: np.ndarray, min_std: float = 1e-2
            ) -> Normalization:
        """Statistics of training data (N, S) states and (N, ..., A) actions; std floored at
        ``min_std`` so a constant dimension stays finite.
        """
        s = np.asarray(states, dtype=np.float64).reshape(-1, np.shape(states)[-1])
        a = np.asarray(actions, dtype=np.float64).reshape(-1, np.shape(actions)[-1])
        return cls(Stats(s.mean(0), np.maximum(s.std(0), min_std)),
                   Stats(a.mean(0), np.maximum(a.std(0), min_std)))


def read_json(path: str | Path, what: str) -> Any:
    """Load a JSON file of a checkpoint.

    Raises:
        CheckpointError: missing or not JSON, naming ``what`` and the path.
    """
    try:
        with open(path, encoding='utf-8') as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise CheckpointError(f'{what} missing: {path}') from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f'{what} unreadable ({path}): {exc}') from None
