"""What a demo run observed, its summary and its plot (pure: numpy + matplotlib, no rclpy)."""

from __future__ import annotations

from dataclasses import dataclass, field
import json
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class VerdictRecord:
    """One gate verdict as the demo saw it (``t``: seconds since the rollout started)."""

    t: float
    sequence: int
    accepted: bool
    needs_confirmation: bool
    shadow: bool
    forwarded: bool
    summary: str
    violations: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class TargetRecord:
    """One task target: when it was shown, where, and when the tool reached it (or None)."""

    t_set: float
    position: list[float]
    t_reached: float | None = None
    min_distance: float = float('inf')


@dataclass
class DemoLog:
    """Time series and events of one demo run; times are seconds since the rollout started."""

    joint_names: list[str]
    t_measured: list[float] = field(default_factory=list)
    measured: list[list[float]] = field(default_factory=list)
    t_commanded: list[float] = field(default_factory=list)
    commanded: list[list[float]] = field(default_factory=list)
    verdicts: list[VerdictRecord] = field(default_factory=list)
    targets: list[TargetRecord] = field(default_factory=list)
    executor_errors: list[str] = field(default_factory=list)
    executor_refusals: list[str] = field(default_factory=list)
    gate_faults: list[str] = field(default_factory=list)
    policy_faults: list[str] = field(default_factory=list)
    inference_latencies: list[float] = field(default_factory=list)
    gate_check_durations: list[float] = field(default_factory=list)
    #: Per forwarded chunk: observation stamp -> gate forwarded it (s, ROS clock), and the same
    #: minus the chunk's own inference latency (the pipeline's share).
    obs_to_forward: list[float] = field(default_factory=list)
    obs_to_forward_excl_inference: list[float] = field(default_factory=list)
    executor_ticks: int = 0
    executor_late_ticks: int = 0
    #: Header stamps of the commanded setpoints (s, ROS clock, counted from the first one
    #: in exact nanoseconds: float seconds of the epoch resolve only ~240 ns), beside
    #: ``t_commanded``: the executor's own tick times, for differentiating (receipt times
    #: carry transport jitter).
    stamp_commanded: list[float] = field(default_factory=list)


#: Seconds after a forwarded chunk's verdict that count as its seam (adoption at the next
#: executor tick and the start of the join).
SEAM_WINDOW = 0.05


def commanded_derivatives(log: DemoLog) -> dict[str, np.ndarray]:
    """Accelerations and jerks of ``executor/commanded`` by divided differences of the stamped
    setpoints (2x the second and 6x the third divided difference: each a weighted mean of the
    true acceleration / jerk over its samples, also across a missed tick): times (monotonic
    since start, for each acceleration / jerk sample) and values (samples x joints). Duplicate
    or out-of-order stamps are dropped."""
    n = len(log.stamp_commanded)
    empty = {'t_acc': np.zeros(0), 'acc': np.zeros((0, len(log.joint_names))),
             't_jerk': np.zeros(0), 'jerk': np.zeros((0, len(log.joint_names)))}
    if n < 4 or len(log.t_commanded) != n:
        return empty
    ts = np.asarray(log.stamp_commanded)
    order = np.argsort(ts, kind='stable')
    ts, q = ts[order], np.asarray(log.commanded)[order]
    tr = np.asarray(log.t_commanded)[order]
    keep = np.concatenate([[True], np.diff(ts) > 1e-6])
    ts, q, tr = ts[keep], q[keep], tr[keep]
    if len(ts) < 4:
        return empty
    # Map the stamps onto the log's clock (seconds since start) by their median offset.
    tl = ts + float(np.median(tr - ts))
    dt = np.diff(ts)
    v = np.diff(q, axis=0) / dt[:, None]
    mid = 0.5 * (ts[1:] + ts[:-1])
    a = np.diff(v, axis=0) / np.diff(mid)[:, None]          # at ts[1:-1]
    # The third divided difference (x 6) over ts[i..i+3]: a weighted mean of the jerk there
    # for any spacing, so never beyond its max. Dividing by ts[i+2] - ts[i+1] instead (right
    # only for equal steps) made a missed tick read as up to 1.5x the jerk commanded.
    j = 3.0 * np.diff(a, axis=0) / (ts[3:] - ts[:-3])[:, None]   # between ts[1:-1] samples
    return {'t_acc': tl[1:-1], 'acc': a, 't_jerk': 0.5 * (tl[1:-2] + tl[2:-1]), 'jerk': j}


def seam_figures(log: DemoLog, window: float = SEAM_WINDOW,
                 acceleration_limits: list[float] | None = None,
                 jerk_limits: list[float] | None = None) -> dict[str, Any]:
    """Per-joint max |acceleration| and |jerk| of the commanded setpoints within ``window`` s
    after each forwarded chunk (at seams) and elsewhere, the p99 over all joints of each and
    their seam/elsewhere ratios; with limits, the number of samples beyond them."""
    d = commanded_derivatives(log)
    seams = np.array(sorted(v.t for v in log.verdicts if v.forwarded and not v.shadow))
    out: dict[str, Any] = {'seams': int(len(seams)), 'window_s': window,
                           'samples': int(len(d['t_acc']))}
    if len(d['t_acc']) == 0:
        return out

    def at_seam(t: np.ndarray) -> np.ndarray:
        if len(seams) == 0:
            return np.zeros(len(t), dtype=bool)
        i = np.searchsorted(seams, t, side='right') - 1
        return (i >= 0) & (t - seams[np.clip(i, 0, None)] <= window)

    def stats(values: np.ndarray, mask: np.ndarray) -> dict[str, Any]:
        if not mask.any():
            return {'max': [], 'p99': float('nan')}
        sub = np.abs(values[mask])
        return {'max': [round(float(x), 4) for x in sub.max(axis=0)],
                'p99': float(np.percentile(sub, 99))}

    for name, tkey in (('acceleration', 't_acc'), ('jerk', 't_jerk')):
        key = 'acc' if name == 'acceleration' else 'jerk'
        seam = at_seam(d[tkey])
        s_in, s_out = stats(d[key], seam), stats(d[key], ~seam)
        ratio = s_in['p99'] / s_out['p99'] if s_out['p99'] and s_out['p99'] > 0 else \
            float('nan')
        out[name] = {'at_seams': s_in, 'elsewhere': s_out, 'p99_ratio': ratio}
        limits = acceleration_limits if name == 'acceleration' else jerk_limits
        if limits is not None:
            over = np.abs(d[key]) > np.asarray(limits) * (1.0 + 1e-3)
            out[name]['beyond_limits'] = int(over.sum())
    return out


def tracking_error(log: DemoLog) -> dict[str, float]:
    """Max and RMS |commanded - measured| (rad or m), commanded sampled at measurement times."""
    if len(log.t_commanded) < 2 or not log.t_measured:
        return {'max': float('nan'), 'rms': float('nan')}
    tc = np.asarray(log.t_commanded)
    qc = np.asarray(log.commanded)
    tm = np.asarray(log.t_measured)
    qm = np.asarray(log.measured)
    inside = (tm >= tc[0]) & (tm <= tc[-1])
    if not inside.any():
        return {'max': float('nan'), 'rms': float('nan')}
    tm, qm = tm[inside], qm[inside]
    interp = np.stack([np.interp(tm, tc, qc[:, j]) for j in range(qc.shape[1])], axis=1)
    err = np.abs(interp - qm)
    return {'max': float(err.max()), 'rms': float(np.sqrt(np.mean(err ** 2)))}


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {'count': 0}
    arr = np.asarray(values)
    return {'count': int(arr.size), 'p50': float(np.percentile(arr, 50)),
            'p99': float(np.percentile(arr, 99)), 'max': float(arr.max())}


#: Without a task (the scripted Cartesian demo), a run must at least execute this many chunks.
MIN_ACCEPTED_WITHOUT_TASK = 10


def summarize(log: DemoLog, duration: float, task: bool = True,
              limits: tuple[list, list] | None = None) -> dict[str, Any]:
    """The report's summary: counts, success rate, rejections with reasons, failures.

    Args:
        task: the run showed reach targets (the vision demo); without, it must instead have
            executed at least :data:`MIN_ACCEPTED_WITHOUT_TASK` chunks.
    """
    live = [v for v in log.verdicts if not v.shadow]
    rejected = [v for v in live if not v.accepted]
    reached = [t for t in log.targets if t.t_reached is not None]
    finished = [t for t in log.targets if t.t_reached is not None or
                duration - t.t_set >= 5.0]
    reasons: dict[str, int] = {}
    for v in rejected:
        for viol in v.violations or [{'check': 'unknown'}]:
            reasons[viol['check']] = reasons.get(viol['check'], 0) + 1
    failures = []
    if log.gate_faults:
        failures.append('safety fault latched: ' + log.gate_faults[0])
    if log.executor_errors:
        failures.append('executor aborted: ' + log.executor_errors[0])
    if log.policy_faults:
        failures.append('policy fault: ' + log.policy_faults[0])
    if task and not reached:
        failures.append('no target was reached')
    if not task and len(live) - len(rejected) < MIN_ACCEPTED_WITHOUT_TASK:
        failures.append(f'only {len(live) - len(rejected)} chunks accepted '
                        f'(at least {MIN_ACCEPTED_WITHOUT_TASK} expected)')
    return {
        'duration_s': duration,
        'joint_names': log.joint_names,
        'chunks_verdicted': len(live),
        'chunks_accepted': len(live) - len(rejected),
        'chunks_rejected': len(rejected),
        'rejections': [{'t': v.t, 'sequence': v.sequence, 'summary': v.summary,
                        'violations': v.violations} for v in rejected],
        'rejections_by_check': reasons,
        'targets_shown': len(log.targets),
        'targets_reached': len(reached),
        'success_rate': (len(reached) / len(finished)) if finished else 0.0,
        'time_to_reach_s': [t.t_reached - t.t_set for t in reached],
        'closest_approach_m': [round(t.min_distance, 4) for t in log.targets],
        'tracking_error': tracking_error(log),
        'inference_latency_s': _percentiles(log.inference_latencies),
        'gate_check_duration_s': _percentiles(log.gate_check_durations),
        'observation_to_forward_s': _percentiles(log.obs_to_forward),
        'observation_to_forward_excluding_inference_s':
            _percentiles(log.obs_to_forward_excl_inference),
        'executor_ticks': log.executor_ticks,
        'executor_late_ticks': log.executor_late_ticks,
        'seams': seam_figures(log, acceleration_limits=limits[0] if limits else None,
                              jerk_limits=limits[1] if limits else None),
        'executor_errors': log.executor_errors,
        'executor_refusals': log.executor_refusals,
        'gate_faults': log.gate_faults,
        'policy_faults': log.policy_faults,
        'failures': failures,
        'ok': not failures,
    }


def plot(log: DemoLog, path: Path) -> None:
    """Commanded vs measured joints, chunk boundaries and verdicts, targets reached."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    n = len(log.joint_names)
    fig, axes = plt.subplots(n + 1, 1, figsize=(11, 1.6 * (n + 1) + 1.0), sharex=True,
                             squeeze=False)
    qm = np.asarray(log.measured) if log.measured else np.zeros((0, n))
    qc = np.asarray(log.commanded) if log.commanded else np.zeros((0, n))
    for j, ax in enumerate(axes[:n, 0]):
        if len(qc):
            ax.plot(log.t_commanded, qc[:, j], color='tab:blue', lw=1.0, label='commanded')
        if len(qm):
            ax.plot(log.t_measured, qm[:, j], color='tab:orange', lw=1.0, ls='--',
                    label='measured')
        for v in log.verdicts:
            if v.shadow:
                continue
            ax.axvline(v.t, color='tab:green' if v.accepted else 'tab:red', lw=0.4,
                       alpha=0.35 if v.accepted else 0.9)
        for t in log.targets:
            if t.t_reached is not None:
                ax.axvline(t.t_reached, color='k', lw=1.0, ls=':')
        ax.set_ylabel(log.joint_names[j], rotation=0, ha='right', fontsize=8)
    axes[0, 0].legend(loc='upper right', fontsize=8)
    axes[0, 0].set_title('commanded vs measured; green/red lines: accepted/rejected chunks; '
                         'dotted: target reached', fontsize=9)
    _plot_seams(log, axes[n, 0])
    axes[-1, 0].set_xlabel('time since start [s]')
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_seams(log: DemoLog, ax: Any) -> None:
    """Max |acceleration| over the joints of the commanded setpoints; seam samples marked."""
    d = commanded_derivatives(log)
    if len(d['t_acc']):
        mag = np.abs(d['acc']).max(axis=1)
        ax.plot(d['t_acc'], mag, color='tab:purple', lw=0.8, label='max |acc| over joints')
        fig = seam_figures(log)
        acc = fig.get('acceleration', {})
        title = (f"seams: acc p99 {acc.get('at_seams', {}).get('p99', float('nan')):.3g} vs "
                 f"{acc.get('elsewhere', {}).get('p99', float('nan')):.3g} rad/s^2 elsewhere; "
                 f"jerk max {max(fig.get('jerk', {}).get('at_seams', {}).get('max') or [0]):.3g}"
                 f" vs {max(fig.get('jerk', {}).get('elsewhere', {}).get('max') or [0]):.3g} "
                 'rad/s^3')
        ax.set_title(title, fontsize=8)
    for v in log.verdicts:
        if v.forwarded and not v.shadow:
            ax.axvspan(v.t, v.t + SEAM_WINDOW, color='tab:green', alpha=0.15, lw=0)
    ax.set_ylabel('|acc|', rotation=0, ha='right', fontsize=8)


def write_report(log: DemoLog, duration: float, out_dir: Path,
                 task: bool = True, limits: tuple[list, list] | None = None) -> dict[str, Any]:
    """Write ``summary.json`` and ``joints.png`` into ``out_dir``; return the summary."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(log, duration, task, limits)
    (out_dir / 'summary.json').write_text(json.dumps(summary, indent=2) + '\n')
    plot(log, out_dir / 'joints.png')
    return summary
