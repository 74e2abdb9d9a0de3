"""The pure parts of ``egoroll evaluate``: action error, statistics, baseline comparison, plots.

No rclpy and no message types: inputs are arrays and plain records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.core.frames import cartesian_errors
from egoroll_ros.core.observation import wrap_angle
from egoroll_ros.errors import ConfigError


@dataclass(frozen=True)
class ChunkRecord:
    """One evaluated chunk.

    Attributes:
        sequence: 1, 2, ... in query order.
        stamp: observation time = query time (bag receive-time clock, s).
        times: (H,) seconds from ``stamp`` of each point.
        positions: (H, J) predicted positions (as published); for a Cartesian chunk the
            gate's IK solution, or None when the chunk did not pass IK.
        latency: seconds of assembly + inference (measured; not deterministic).
        accepted, needs_confirmation: the gate's decision.
        violations: ``(check, subject, point_index)`` of every violation.
        summary: the verdict's one-line summary.
        cartesian: Cartesian chunks: the predicted base-frame poses ``(positions (A, H, 3),
            rotations (A, H, 3, 3))`` per arm; None for joint chunks.
    """

    sequence: int
    stamp: float
    times: np.ndarray
    positions: np.ndarray | None
    latency: float
    accepted: bool
    needs_confirmation: bool
    violations: tuple[tuple[str, str, int], ...]
    summary: str
    cartesian: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def decision(self) -> str:
        """``'accepted'``, ``'needs_confirmation'`` or ``'rejected'``."""
        if self.accepted:
            return 'accepted'
        return 'needs_confirmation' if self.needs_confirmation else 'rejected'


def action_error(chunks: Sequence[ChunkRecord], joints: Sequence[str], rec_times: np.ndarray,
                 rec_positions: np.ndarray, continuous: Sequence[int] = ()) -> dict[str, Any]:
    """Predicted chunk points against the recorded joint trajectory.

    Point k of a chunk stamped t0 is compared with the recorded position at t0 + times[k],
    linearly interpolated between joint_states messages (continuous joints: the wrapped
    difference). Points after the last recorded joint_states are skipped and counted.
    Chunks without joint positions (Cartesian chunks that did not pass IK) are skipped and
    counted in ``chunks_without_joint_positions``.

    Returns:
        ``{'mae', 'rmse', 'max', 'points_compared', 'points_beyond_recording',
        'per_joint': {joint: {'mae', 'rmse', 'max'}}, 'per_step': [{'step', 'time_from_start',
        'mae', 'rmse', 'points'}]}``; errors in rad (m for prismatic joints); None where no
        point was compared.
    """
    joints = list(joints)
    rec_times = np.asarray(rec_times, dtype=float)
    rec_positions = np.asarray(rec_positions, dtype=float)
    n_steps = max((len(c.times) for c in chunks), default=0)
    per_step: list[list[np.ndarray]] = [[] for _ in range(n_steps)]
    beyond = 0
    end = rec_times[-1] if len(rec_times) else -math.inf
    cont = list(continuous)
    missing = sum(c.positions is None for c in chunks)
    chunks = [c for c in chunks if c.positions is not None]
    for c in chunks:
        t = c.stamp + np.asarray(c.times, dtype=float)
        inside = t <= end + 1e-6      # 1 us: float seconds of epoch stamps round
        beyond += int((~inside).sum())
        for k in np.nonzero(inside)[0].tolist():
            rec = np.array([np.interp(t[k], rec_times, rec_positions[:, j])
                            for j in range(len(joints))])
            err = np.asarray(c.positions[k], dtype=float) - rec
            if cont:
                err[cont] = wrap_angle(err[cont])
            per_step[k].append(err)
    all_err = [e for step in per_step for e in step]

    def stats(values: np.ndarray) -> dict[str, float | None]:
        if values.size == 0:
            return {'mae': None, 'rmse': None, 'max': None}
        a = np.abs(values)
        return {'mae': float(a.mean()), 'rmse': float(np.sqrt((values ** 2).mean())),
                'max': float(a.max())}

    mat = np.array(all_err).reshape(len(all_err), len(joints))
    step_times = chunks[0].times if chunks else []
    out: dict[str, Any] = {**stats(mat), 'points_compared': len(all_err),
                           'points_beyond_recording': beyond,
                           'chunks_without_joint_positions': missing}
    out['per_joint'] = {j: stats(mat[:, i]) for i, j in enumerate(joints)}
    out['per_step'] = []
    for k, errs in enumerate(per_step):
        s = stats(np.array(errs))
        out['per_step'].append({'step': k, 'time_from_start': float(step_times[k])
                                if k < len(step_times) else None, 'mae': s['mae'],
                                'rmse': s['rmse'], 'points': len(errs)})
    return out


def cartesian_error(chunks: Sequence[ChunkRecord], arms: Sequence[str],
                    rec_times: np.ndarray, rec_positions: np.ndarray,
                    fk: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
                    ) -> dict[str, Any]:
    """Predicted end-effector poses against the recorded ones, per horizon step and arm.

    Point k of a chunk stamped t0 is compared with the pose FK gives for the recorded joints
    at t0 + times[k] (joints linearly interpolated between joint_states messages), through
    :func:`egoroll_ros.core.frames.cartesian_errors`. Points after the recording are skipped.

    Args:
        chunks: records; those without ``cartesian`` are ignored.
        arms: arm names, in the order of ``ChunkRecord.cartesian``.
        rec_times, rec_positions: recorded joint_states (N,), (N, J).
        fk: (M, J) joints -> ``((A, M, 3), (A, M, 3, 3))`` base-frame poses of the arms.

    Returns:
        ``{'position': {'mae', 'rmse', 'max'} (m), 'rotation': {...} (rad), 'points_compared',
        'points_beyond_recording', 'per_arm': {arm: {'position', 'rotation'}}, 'per_step':
        [{'step', 'time_from_start', 'position_mae', 'rotation_mae', 'points'}]}``.
    """
    rec_times = np.asarray(rec_times, dtype=float)
    rec_positions = np.asarray(rec_positions, dtype=float)
    end = rec_times[-1] if len(rec_times) else -math.inf
    chunks = [c for c in chunks if c.cartesian is not None]
    n_steps = max((len(c.times) for c in chunks), default=0)
    per_step: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n_steps)]
    beyond = 0
    for c in chunks:
        t = c.stamp + np.asarray(c.times, dtype=float)
        inside = np.nonzero(t <= end + 1e-6)[0]
        beyond += len(t) - len(inside)
        if not len(inside):
            continue
        q = np.stack([np.interp(t[inside], rec_times, rec_positions[:, j])
                      for j in range(rec_positions.shape[1])], axis=-1)
        rec_p, rec_r = fk(q)
        pred_p, pred_r = c.cartesian
        pos, rot = cartesian_errors(pred_p[:, inside], pred_r[:, inside], rec_p, rec_r)
        for i, k in enumerate(inside.tolist()):
            per_step[k].append((pos[:, i], rot[:, i]))

    def stats(values: np.ndarray) -> dict[str, float | None]:
        if values.size == 0:
            return {'mae': None, 'rmse': None, 'max': None}
        return {'mae': float(values.mean()), 'rmse': float(np.sqrt((values ** 2).mean())),
                'max': float(values.max())}

    allp = np.array([p for step in per_step for p, _ in step]).reshape(-1, len(arms))
    allr = np.array([r for step in per_step for _, r in step]).reshape(-1, len(arms))
    step_times = chunks[0].times if chunks else []
    return {
        'position': stats(allp), 'rotation': stats(allr), 'points_compared': len(allp),
        'points_beyond_recording': beyond,
        'per_arm': {a: {'position': stats(allp[:, i]), 'rotation': stats(allr[:, i])}
                    for i, a in enumerate(arms)},
        'per_step': [{'step': k, 'time_from_start': float(step_times[k])
                      if k < len(step_times) else None,
                      'position_mae': stats(np.array([p for p, _ in errs]))['mae'],
                      'rotation_mae': stats(np.array([r for _, r in errs]))['mae'],
                      'points': len(errs)} for k, errs in enumerate(per_step)],
    }


class Stretches:
    """Stretches of bag time during which named conditions held, and why.

    :meth:`update_keys` is called at each moment the conditions are judged with the ones that
    hold then (``{(name, reason): since}``): a stretch opens at ``since`` (the moment the
    condition began for that reason) and closes at the first later update without it.
    ``drop_empty``: a stretch that closes when it opened (a condition that held for no time)
    is not reported.
    """

    def __init__(self, drop_empty: bool = False) -> None:
        self._drop_empty = drop_empty
        self._open: dict[tuple[str, str], float] = {}
        self._closed: list[tuple[str, str, float, float]] = []

    def update_keys(self, current: dict[tuple[str, str], float], now: float) -> None:
        """Record the conditions ``{(name, reason): since}`` that hold at ``now``."""
        for key in [k for k in self._open if k not in current]:
            start = self._open.pop(key)
            if not (self._drop_empty and start >= now):
                self._closed.append((*key, start, now))
        for key, since in current.items():
            self._open.setdefault(key, min(since, now))

    def report(self, end: float, origin: float, label: str = 'input') -> list[dict[str, Any]]:
        """Every stretch as ``{<label>, reason, start, end, open}`` in time order; ``start`` and
        ``end`` in s after ``origin``; ``open``: still holding at ``end`` (the bag's end)."""
        rows = [(n, r, a, b, False) for n, r, a, b in self._closed] + \
            [(n, r, a, end, True) for (n, r), a in self._open.items()]
        rows.sort(key=lambda x: (x[2], x[0], x[1]))
        return [{label: n, 'reason': r, 'start': a - origin, 'end': b - origin,
                 'open': o} for n, r, a, b, o in rows]


class StaleStretches(Stretches):
    """The stretches of bag time during which each input was stale, and why.

    :meth:`update` is called at every query with the stale inputs it found (empty when none):
    a stretch opens at the input's ``since`` (the moment it became stale for that reason)
    and closes at the first later query that does not find it stale for that reason.
    """

    def update(self, stale: Sequence[Any], now: float) -> None:
        """Record the :class:`~egoroll_ros.core.observation.StaleInput` list of a query at
        ``now``."""
        self.update_keys({(s.name, s.reason): (now if s.since is None else s.since)
                          for s in stale}, now)


def latency_stats(latencies: Sequence[float]) -> dict[str, float | None]:
    """Mean, median, p95, min and max (s) of inference latencies (None when empty)."""
    if not latencies:
        return {k: None for k in ('mean', 'median', 'p95', 'min', 'max')}
    a = np.asarray(latencies, dtype=float)
    return {'mean': float(a.mean()), 'median': float(np.median(a)),
            'p95': float(np.percentile(a, 95)), 'min': float(a.min()), 'max': float(a.max())}


def decisions(chunks: Sequence[ChunkRecord]) -> dict[str, Any]:
    """Acceptance rate and rejections by check.

    ``rejections_by_check`` counts, per check, the rejected (or needs-confirmation) chunks
    with at least one violation of it; ``violations_by_check`` counts every violation.
    """
    by_chunk: dict[str, int] = {}
    total: dict[str, int] = {}
    for c in chunks:
        for check in {v[0] for v in c.violations}:
            by_chunk[check] = by_chunk.get(check, 0) + 1
        for v in c.violations:
            total[v[0]] = total.get(v[0], 0) + 1
    n = len(chunks)
    accepted = sum(c.accepted for c in chunks)
    return {'chunks': n, 'accepted': accepted,
            'needs_confirmation': sum(c.needs_confirmation for c in chunks),
            'rejected': sum(not c.accepted and not c.needs_confirmation for c in chunks),
            'acceptance_rate': accepted / n if n else None,
            'rejections_by_check': dict(sorted(by_chunk.items())),
            'violations_by_check': dict(sorted(total.items()))}


def digest(chunks: Sequence[ChunkRecord]) -> str:
    """sha256 over what must be identical between two runs on the same inputs: each chunk's
    sequence, stamp, times and positions (exact float64 bytes) and its verdict (decision and
    violations). Latencies are excluded (measured wall time)."""
    h = hashlib.sha256()
    for c in chunks:
        h.update(json.dumps([c.sequence, repr(float(c.stamp)), c.decision,
                             [list(v) for v in c.violations]]).encode())
        h.update(np.ascontiguousarray(c.times, dtype='<f8').tobytes())
        if c.positions is not None:
            h.update(np.ascontiguousarray(c.positions, dtype='<f8').tobytes())
        for part in c.cartesian or ():
            h.update(np.ascontiguousarray(part, dtype='<f8').tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Thresholds:
    """How much worse than a baseline a run may be.

    Attributes:
        max_acceptance_drop: largest allowed drop of the acceptance rate (absolute, 0..1).
        max_error_increase: largest allowed relative growth of the action MAE (0.1 = 10 %).
        error_floor: absolute growth of the MAE (rad) always tolerated (noise on a tiny
            baseline error).
    """

    max_acceptance_drop: float = 0.02
    max_error_increase: float = 0.10
    error_floor: float = 1e-6

    def __post_init__(self) -> None:
        """Reject negative or non-finite thresholds (ConfigError naming the option)."""
        for name in ('max_acceptance_drop', 'max_error_increase', 'error_floor'):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"--{name.replace('_', '-')}: must be a number >= 0, got {v}")


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a report.json written by ``egoroll evaluate``.

    Raises:
        ConfigError: unreadable, not JSON, or not an evaluate report.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f'--baseline {path}: cannot read the report ({exc})') from None
    if not isinstance(data, dict) or data.get('format') != REPORT_FORMAT:
        raise ConfigError(f"--baseline {path}: not an egoroll evaluate report (format "
                          f"'{REPORT_FORMAT}')")
    return data


REPORT_FORMAT = 'egoroll_evaluate/1'


def compare(report: dict[str, Any], baseline: dict[str, Any],
            thresholds: Thresholds) -> dict[str, Any]:
    """Compare ``report`` with an earlier ``baseline`` report.

    Returns:
        ``{'regressions': [text...], 'acceptance_rate': {...}, 'action_mae': {...},
        'per_joint_mae': {...}}``; an empty ``regressions`` list means no regression.
    """
    regressions = []
    a_new = report['decisions']['acceptance_rate']
    a_old = baseline['decisions']['acceptance_rate']
    if a_old is not None and (a_new is None or a_old - a_new > thresholds.max_acceptance_drop):
        regressions.append(f'acceptance rate dropped from {a_old:.3f} to '
                           f"{'none' if a_new is None else f'{a_new:.3f}'} (allowed drop "
                           f'{thresholds.max_acceptance_drop:g})')
    e_new = report['action_error']['mae']
    e_old = baseline['action_error']['mae']
    allowed = None
    if e_old is not None:
        allowed = e_old * (1.0 + thresholds.max_error_increase) + thresholds.error_floor
        if e_new is None or e_new > allowed:
            regressions.append(f'action error (MAE) grew from {e_old:.6g} to '
                               f"{'none' if e_new is None else f'{e_new:.6g}'} (allowed up to "
                               f'{allowed:.6g})')
    per_joint = {}
    for j, s in report['action_error']['per_joint'].items():
        old = baseline['action_error']['per_joint'].get(j, {}).get('mae')
        per_joint[j] = {'baseline': old, 'now': s['mae']}
    if baseline.get('policy', {}).get('fingerprint') == report.get('policy', {}).get(
            'fingerprint') and baseline.get('digest') not in (None, report.get('digest')):
        regressions.append('same policy fingerprint as the baseline but different chunks or '
                           'verdicts (not deterministic, or different inputs/configuration)')
    return {'regressions': regressions,
            'acceptance_rate': {'baseline': a_old, 'now': a_new,
                                'max_drop': thresholds.max_acceptance_drop},
            'action_mae': {'baseline': e_old, 'now': e_new, 'allowed': allowed},
            'per_joint_mae': per_joint,
            'baseline_fingerprint': baseline.get('policy', {}).get('fingerprint')}


_COLORS = {'accepted': '#2ca02c', 'needs_confirmation': '#ff9f0e', 'rejected': '#d62728'}


def plot_chunks(path: Path, chunks: Sequence[ChunkRecord], joints: Sequence[str],
                rec_times: np.ndarray, rec_positions: np.ndarray, t_origin: float) -> None:
    """PNG: one panel per joint, the recorded trajectory and every predicted chunk (coloured
    by the gate's decision)."""
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    n = len(joints)
    cols = 2 if n > 3 else 1
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 2.0 * rows + 0.6), sharex=True,
                             squeeze=False)
    for i, j in enumerate(joints):
        ax = axes[i // cols][i % cols]
        ax.plot(rec_times - t_origin, rec_positions[:, i], color='k', lw=1.2, label='recorded')
        for c in chunks:
            if c.positions is None:
                continue
            t = c.stamp - t_origin + np.asarray(c.times)
            ax.plot(t, c.positions[:, i], color=_COLORS[c.decision], lw=0.8, alpha=0.7)
        ax.set_ylabel(j, fontsize=8)
        ax.tick_params(labelsize=7)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis('off')
    for ax in axes[-1]:
        ax.set_xlabel('bag time (s)')
    handles = [plt.Line2D([], [], color='k', label='recorded')] + \
        [plt.Line2D([], [], color=v, label=k.replace('_', ' ')) for k, v in _COLORS.items()]
    fig.legend(handles=handles, loc='upper center', ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_rejections(path: Path, chunks: Sequence[ChunkRecord], t_origin: float,
                    t_end: float) -> None:
    """PNG: a timeline of the gate's decisions, and which checks rejected which chunk."""
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    checks = sorted({v[0] for c in chunks for v in c.violations})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 2.2 + 0.3 * len(checks)), sharex=True,
                                      gridspec_kw={'height_ratios': [1, max(1, len(checks))]})
    for c in chunks:
        top.axvline(c.stamp - t_origin, color=_COLORS[c.decision], lw=1.5)
    top.set_yticks([])
    top.set_title('gate decision per chunk (green accepted, orange needs confirmation, '
                  'red rejected)', fontsize=9)
    for y, check in enumerate(checks):
        xs = [c.stamp - t_origin for c in chunks if any(v[0] == check for v in c.violations)]
        bottom.scatter(xs, [y] * len(xs), marker='|', s=120, color='#d62728')
    bottom.set_yticks(range(len(checks)), checks, fontsize=8)
    if not checks:
        bottom.text(0.5, 0.5, 'no violations', ha='center', va='center',
                    transform=bottom.transAxes)
        bottom.set_yticks([])
    bottom.set_xlim(0.0, max(t_end - t_origin, 1e-3))
    bottom.set_xlabel('bag time (s)')
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
