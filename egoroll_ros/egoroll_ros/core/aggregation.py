"""Chunk aggregation and latency-aware chunking: the policy-side stage between a predicted
joint chunk and the published one (the safety gate checks what this stage returns).

Pure module (numpy only). Chunks are compared on absolute time (``stamp + time_from_start``,
ROS clock); an earlier chunk's value at a point's time is linearly interpolated between its
points, and only where it has points on both sides (no extrapolation).

Modes (``AggregationConfig.mode``; all off, ``none``, unless chosen):

- ``temporal_ensemble``: ACT's temporal ensembling (Zhao et al., "Learning Fine-Grained Bimanual
  Manipulation with Low-Cost Hardware", RSS 2023, sec. IV): every point is the weighted mean of
  all predictions for its time, from the raw chunks that cover it and the new one, with weights
  ``exp(-m * i)``, ``i = 0`` for the oldest prediction (ACT's ``m`` defaults to 0.01; here ``i``
  counts inferences, not control steps).
- ``weighted_average``: LeRobot async inference's default aggregate function,
  ``weighted_average`` (``AGGREGATE_FUNCTIONS`` of its robot client's configuration:
  ``0.3 * old + 0.7 * new`` per overlapping action): where the new chunk
  overlaps the previously PUBLISHED chunk, ``old_weight * old + (1 - old_weight) * new``;
  beyond it, the new chunk.
- ``keep``: keep ``keep_points`` of the running chunk, replace the rest: the new chunk's first
  ``keep_points`` points that the previously published chunk covers take its values.

``blend_points`` (0 = exactly the formulas above) ramps every hand-over from older chunks to the
new prediction linearly over that many points, so the published chunk has no step in it: the
points after a kept or pinned prefix go from the old values to the new ones, and (in
``weighted_average`` and ``temporal_ensemble``) an older chunk's weight fades out over its last
``blend_points`` + 1 covered points instead of dropping to zero after its last one. Without it,
the sources' formulas put a step of ``old_weight`` (or the ensemble's share) times the two
chunks' disagreement where an older chunk ends: on the demo policy's chunks, 20 points 50 ms
apart, the finite-difference acceleration of the published chunks reached 26.6
(weighted_average) and 41.7 rad/s^2 (temporal_ensemble) against 9.7 for the raw predictions,
beyond the safety gate's 20; with ``blend_points`` 3, 10.2 (weighted_average) and 23.1
(temporal_ensemble, whose many overlapping chunks end two points apart), with 5, 17.3 and with
8, 12.5 rad/s^2 (temporal_ensemble), measured offline on a recorded demo bag.

Latency-aware chunking (``pin_latency``, with any mode): by the time a chunk is published, the
executor has already run ``published_at - stamp`` seconds of the chunk before it (the inference
latency, known exactly at publish time), and the chunk lands ``pin_margin`` later still. The
new chunk's points due by then are pinned to what the previously published chunk commands
(as real-time chunking freezes the executed prefix; Black et al., "Real-Time Execution of Action
Chunking Flow Policies", 2025), and the ``blend_points`` after them ramp linearly from the old
chunk's values to the new ones. When the previously published chunk ends before the new one
lands, the inference was slower than the overlap: :attr:`Aggregated.underrun` says by how much
(the executor then has decelerated to a hold at that chunk's end).
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from egoroll_ros.core.types import Chunk
from egoroll_ros.errors import ConfigError

AGGREGATIONS = ('none', 'temporal_ensemble', 'weighted_average', 'keep')


@dataclass(frozen=True)
class AggregationConfig:
    """Settings of the aggregation stage (the policy node's ``aggregation.*`` parameters).

    Attributes:
        mode: one of :data:`AGGREGATIONS`.
        ensemble_coefficient: ACT's ``m`` (>= 0) for ``temporal_ensemble``.
        old_weight: weight of the published chunk in ``weighted_average`` (0..1).
        keep_points: points kept from the running chunk for ``keep`` (>= 1 there).
        pin_latency: pin the prefix due before the chunk lands to the running chunk.
        pin_margin: s after publishing that the chunk is expected to land (transport, gate).
        blend_points: points over which each hand-over from older chunks to the new one ramps
            (after a pinned or kept prefix; at the end of an older chunk's coverage).
    """

    mode: str = 'none'
    ensemble_coefficient: float = 0.01
    old_weight: float = 0.3
    keep_points: int = 0
    pin_latency: bool = False
    pin_margin: float = 0.0
    blend_points: int = 0

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ConfigError:
            return ConfigError(f"parameter 'aggregation.{name}': {why}")

        if self.mode not in AGGREGATIONS:
            raise bad('mode', f'must be one of {AGGREGATIONS}, got {self.mode!r}')
        if not (math.isfinite(self.ensemble_coefficient) and self.ensemble_coefficient >= 0.0):
            raise bad('ensemble_coefficient', 'must be finite and >= 0')
        if not 0.0 <= self.old_weight <= 1.0:
            raise bad('old_weight', 'must be in [0, 1]')
        if self.keep_points < 0 or (self.mode == 'keep' and self.keep_points < 1):
            raise bad('keep_points', "must be >= 1 for mode 'keep' (and never negative)")
        if not (math.isfinite(self.pin_margin) and self.pin_margin >= 0.0):
            raise bad('pin_margin', 'must be finite and >= 0')
        if self.blend_points < 0:
            raise bad('blend_points', 'must be >= 0')

    @property
    def active(self) -> bool:
        """Whether the stage changes anything."""
        return self.mode != 'none' or self.pin_latency


def config_from_params(p: Mapping[str, Any], cartesian: bool) -> AggregationConfig:
    """The stage's settings from policy_node's ``aggregation.*`` parameter values.

    Raises:
        ConfigError: a bad value (named), or an active stage for a Cartesian configuration
            (``cartesian``: aggregation and pin_latency apply to joint policies only).
    """
    cfg = AggregationConfig(
        mode=p['aggregation.mode'], ensemble_coefficient=p['aggregation.ensemble_coefficient'],
        old_weight=p['aggregation.old_weight'], keep_points=p['aggregation.keep_points'],
        pin_latency=p['aggregation.pin_latency'], pin_margin=p['aggregation.pin_margin'],
        blend_points=p['aggregation.blend_points'])
    if cfg.active and cartesian:
        raise ConfigError("parameter 'aggregation.mode': aggregation and pin_latency apply "
                          'to joint policies only (this one is Cartesian)')
    return cfg


@dataclass(frozen=True)
class Aggregated:
    """What :meth:`ChunkAggregator.aggregate` produced.

    Attributes:
        positions: (N, J) the chunk to publish (same point times as the prediction).
        pinned: points taken from the running chunk (kept or pinned prefix).
        blended: points ramped from the running chunk to the new prediction.
        underrun: s by which the running chunk ended before this one lands (> 0), else None.
    """

    positions: np.ndarray
    pinned: int = 0
    blended: int = 0
    underrun: float | None = None


@dataclass
class _Past:
    times: np.ndarray      # absolute
    positions: np.ndarray  # (N, J)

    def at(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values at absolute times ``ts`` and a mask of those it covers."""
        covered = (ts >= self.times[0]) & (ts <= self.times[-1])
        vals = np.empty((len(ts), self.positions.shape[1]))
        for j in range(self.positions.shape[1]):
            vals[:, j] = np.interp(ts, self.times, self.positions[:, j])
        return vals, covered

    def fade(self, ts: np.ndarray, points: int) -> np.ndarray:
        """Weight factors at ``ts`` in [0, 1]: 1, falling linearly over this chunk's last
        ``points`` + 1 point spacings to 0 one spacing after its last point (all 1 for
        ``points`` 0: no fade)."""
        if points <= 0 or len(self.times) < 2:
            return np.ones(len(ts))
        spacing = float(np.median(np.diff(self.times)))
        left = (self.times[-1] - np.asarray(ts, dtype=float)) / spacing
        return np.clip((left + 1.0) / (points + 1.0), 0.0, 1.0)


class ChunkAggregator:
    """Combines each predicted chunk with the ones before it (see the module docstring).

    One per rollout: :meth:`reset` at every start (never mixes two rollouts).
    """

    def __init__(self, config: AggregationConfig) -> None:
        self.config = config
        self._raw: list[_Past] = []       # raw predictions, oldest first
        self._published: _Past | None = None
        self.underruns = 0

    def reset(self) -> None:
        """Forget every earlier chunk (a new rollout)."""
        self._raw.clear()
        self._published = None

    def aggregate(self, stamp: float, times: np.ndarray, positions: np.ndarray,
                  published_at: float) -> Aggregated:
        """The chunk to publish for a prediction, and record both.

        Args:
            stamp: observation time (s, ROS clock); ``times`` count from it.
            times: (N,) time_from_start of the points, strictly increasing.
            positions: (N, J) the predicted positions.
            published_at: ROS-clock time at which the chunk is being published.

        Returns:
            The aggregated chunk (a copy; the prediction is never modified in place).
        """
        cfg = self.config
        times = np.asarray(times, dtype=float)
        raw = np.asarray(positions, dtype=float)
        abs_t = stamp + times
        out = raw.copy()
        prev = self._published
        if cfg.mode == 'temporal_ensemble':
            out = self._ensemble(abs_t, raw)
        elif cfg.mode == 'weighted_average' and prev is not None:
            old, covered = prev.at(abs_t)
            w = (cfg.old_weight * prev.fade(abs_t, cfg.blend_points))[:, None]
            out[covered] = (w * old + (1.0 - w) * raw)[covered]
        pinned = blended = 0
        underrun = None
        if prev is not None:
            lands = published_at + cfg.pin_margin
            n_fix = 0
            if cfg.mode == 'keep':
                n_fix = cfg.keep_points
            if cfg.pin_latency:
                n_fix = max(n_fix, int(np.searchsorted(abs_t, lands, side='right')))
                if prev.times[-1] < lands:
                    underrun = float(lands - prev.times[-1])
                    self.underruns += 1
            if n_fix or (cfg.pin_latency and cfg.blend_points):
                old, covered = prev.at(abs_t)
                n_fix = min(n_fix, len(abs_t))
                fix = np.zeros(len(abs_t), dtype=bool)
                fix[:n_fix] = True
                fix &= covered
                out[fix] = old[fix]
                pinned = int(fix.sum())
                k = cfg.blend_points
                if k and pinned:
                    last = int(np.nonzero(fix)[0][-1])
                    for r in range(1, k + 1):
                        i = last + r
                        if i >= len(abs_t) or not covered[i]:
                            break
                        w = 1.0 - r / (k + 1)
                        out[i] = w * old[i] + (1.0 - w) * out[i]
                        blended += 1
        self._remember(abs_t, raw, out)
        return Aggregated(out, pinned, blended, underrun)

    def apply(self, chunk: Any, published_at: float) -> tuple[Any, str]:
        """The chunk to publish for a predicted one, and, when the running chunk ended before
        it lands, the underrun in words ('' otherwise).

        A no-op (the chunk itself, '') unless the stage is active and ``chunk`` is a joint
        :class:`~egoroll_ros.core.types.Chunk`.
        """
        if not self.config.active or not isinstance(chunk, Chunk):
            return chunk, ''
        traj = chunk.trajectory
        res = self.aggregate(chunk.stamp, traj.times, traj.positions, published_at)
        underrun = '' if res.underrun is None else (
            f'inference slower than the chunk overlap: the running chunk ended '
            f'{res.underrun:.3f} s before this one lands (the executor decelerated to a hold '
            'at its end)')
        return dataclasses.replace(chunk, trajectory=dataclasses.replace(
            traj, positions=res.positions)), underrun

    def _ensemble(self, abs_t: np.ndarray, raw: np.ndarray) -> np.ndarray:
        m = self.config.ensemble_coefficient
        total = np.zeros_like(raw)
        weight = np.zeros(len(abs_t))
        preds = []
        for past in self._raw:
            vals, covered = past.at(abs_t)
            preds.append((vals, covered))
        preds.append((raw, np.ones(len(abs_t), dtype=bool)))
        # i counts, per point, the predictions that cover it, oldest first.
        index = np.zeros(len(abs_t))
        fades = [p.fade(abs_t, self.config.blend_points) for p in self._raw]
        fades.append(np.ones(len(abs_t)))
        for (vals, covered), fade in zip(preds, fades, strict=True):
            w = np.where(covered, np.exp(-m * index) * fade, 0.0)
            total += w[:, None] * vals
            weight += w
            index += covered
        return total / weight[:, None]

    def _remember(self, abs_t: np.ndarray, raw: np.ndarray, out: np.ndarray) -> None:
        self._published = _Past(abs_t.copy(), out.copy())
        if self.config.mode == 'temporal_ensemble':
            self._raw.append(_Past(abs_t.copy(), raw.copy()))
            start = abs_t[0]
            self._raw = [p for p in self._raw if p.times[-1] >= start]
