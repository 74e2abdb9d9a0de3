#!/usr/bin/env python3
"""Smooth motion across chunks: the shipped demo policy on the simulated robot, each seam and
aggregation mode side by side in one run, at 100 and 500 Hz.

For every (rate, mode) it runs ``egoroll demo`` (the whole graph as installed, with the mode's
parameter overrides) and reads the report's seam figures: per-joint max |acceleration| and
|jerk| of ``executor/commanded`` by differences of the stamped setpoints, within 50 ms after
each forwarded chunk (at seams) and elsewhere, their p99 ratio, the number of samples beyond the
executor's configured ``max_acceleration`` / ``max_jerk``, task success and tracking error.
Figures are printed as a table, then as ratios to today's splice at the same rate.

    tools/in_env.sh python benchmarks/bench_seams.py [--seconds 30] [--rates 100 500]
        [--modes splice blend ...] [--out DIR]

Targets (issue 15): zero setpoints beyond the configured acceleration and jerk limits; seam
acceleration p99 within 2x the between-seam p99; task success not lower than 5 of 6 targets.
"""

from __future__ import annotations

import argparse
import io
import json
import math
from pathlib import Path
import sys
import tempfile

import yaml

from egoroll_ros.demo.run import DemoOptions, run_demo, share_dir
from egoroll_ros.testing.domains import use_private_domain

#: mode name -> per-node parameter overrides (trajectory_server.yaml ships seam: blend with
#: blend_join: correction; blend_ruckig is the time-optimal Ruckig join of before).
MODES: dict[str, dict[str, dict]] = {
    'splice': {'trajectory_server': {'seam': 'splice'}},
    'blend': {},
    'blend_ruckig': {'trajectory_server': {'blend_join': 'ruckig'}},
    # the aggregation modes ramp their hand-overs (aggregation.blend_points, docs/policy.md):
    # the exact formulas leave a step where an older chunk ends that the gate refuses
    'blend+temporal_ensemble': {'policy_node': {'aggregation.mode': 'temporal_ensemble',
                                                'aggregation.blend_points': 5}},
    'blend+weighted_average': {'policy_node': {'aggregation.mode': 'weighted_average',
                                               'aggregation.blend_points': 3}},
    'blend+keep3': {'policy_node': {'aggregation.mode': 'keep', 'aggregation.keep_points': 3,
                                    'aggregation.blend_points': 3}},
    'blend+pin_latency': {'policy_node': {'aggregation.pin_latency': True,
                                          'aggregation.pin_margin': 0.02,
                                          'aggregation.blend_points': 3}},
}


def executor_limits() -> tuple[list[float], list[float]]:
    """max_acceleration and max_jerk of the installed trajectory_server.yaml."""
    data = yaml.safe_load((share_dir() / 'config' / 'trajectory_server.yaml').read_text())
    from egoroll_ros.core.launch_graph import node_parameters
    p = node_parameters(data, 'trajectory_server')
    return list(p['max_acceleration']), list(p['max_jerk'])


def run_one(rate: float, mode: str, seconds: float, out_dir: Path, seed: int) -> dict:
    overrides = {k: dict(v) for k, v in MODES[mode].items()}
    overrides.setdefault('trajectory_server', {})['control_rate'] = float(rate)
    report = out_dir / f'{int(rate)}hz-{mode}'
    log = io.StringIO()
    code = run_demo(DemoOptions(duration=seconds, report_dir=report, quiet=True, seed=seed,
                                overrides=overrides), out=log)
    try:
        summary = json.loads((report / 'summary.json').read_text())
    except (OSError, ValueError):
        return {'code': code, 'error': log.getvalue().strip().splitlines()[-1:]}
    summary['code'] = code
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seconds', type=float, default=30.0, help='rollout seconds per mode')
    ap.add_argument('--rates', type=float, nargs='+', default=[100.0, 500.0])
    ap.add_argument('--modes', nargs='+', default=list(MODES), choices=list(MODES))
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--out', type=Path, default=None, help='keep the reports here')
    args = ap.parse_args(argv)
    use_private_domain()     # never shared with another graph on this machine
    out_dir = args.out or Path(tempfile.mkdtemp(prefix='bench_seams-'))
    acc_lim, jerk_lim = executor_limits()
    rows = []
    for rate in args.rates:
        for mode in args.modes:
            s = run_one(rate, mode, args.seconds, out_dir, args.seed)
            rows.append((rate, mode, s))
            print(f'ran {int(rate)} Hz {mode}: exit {s.get("code")}', file=sys.stderr,
                  flush=True)
    print(f'\nbench_seams: {args.seconds:g} s per mode, reports in {out_dir}')
    print(f'executor limits: max_acceleration {acc_lim}, max_jerk {jerk_lim}\n')
    head = (f'{"rate":>5} {"mode":<24} {"acc max seam":>12} {"acc max else":>12} '
            f'{"acc p99 s/e":>11} {"jerk max seam":>13} {"jerk max else":>13} '
            f'{"jerk p99 s/e":>12} {">acc":>5} {">jerk":>5} {"targets":>8} {"track max":>9} '
            f'{"refused":>7}')
    print(head)
    base: dict[float, dict] = {}
    for rate, mode, s in rows:
        if 'seams' not in s:
            print(f'{int(rate):>5} {mode:<24} failed: {s.get("error")}')
            continue
        fig = _figures(s, acc_lim, jerk_lim)
        if mode == 'splice':
            base[rate] = fig
        print(f'{int(rate):>5} {mode:<24} {fig["acc_seam"]:12.3g} {fig["acc_else"]:12.3g} '
              f'{fig["acc_ratio"]:11.2f} {fig["jerk_seam"]:13.4g} {fig["jerk_else"]:13.4g} '
              f'{fig["jerk_ratio"]:12.2f} {fig["over_acc"]:5d} {fig["over_jerk"]:5d} '
              f'{fig["targets"]:>8} {fig["track"]:9.4f} {fig["refused"]:7d}')
    print('\nratios to splice at the same rate (max |acc| at seams, max |jerk| at seams, '
          'tracking error max):')
    for rate, mode, s in rows:
        if 'seams' not in s or mode == 'splice' or rate not in base:
            continue
        fig, b = _figures(s, acc_lim, jerk_lim), base[rate]
        print(f'{int(rate):>5} {mode:<24} acc {_ratio(fig["acc_seam"], b["acc_seam"]):.2f}  '
              f'jerk {_ratio(fig["jerk_seam"], b["jerk_seam"]):.2f}  '
              f'track {_ratio(fig["track"], b["track"]):.2f}')
    return 0


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def _figures(s: dict, acc_lim: list[float], jerk_lim: list[float]) -> dict:
    seams = s['seams']
    acc, jerk = seams.get('acceleration', {}), seams.get('jerk', {})

    def mx(part: dict, key: str) -> float:
        vals = part.get(key, {}).get('max') or [math.nan]
        return float(max(vals))

    return {
        'acc_seam': mx(acc, 'at_seams'), 'acc_else': mx(acc, 'elsewhere'),
        'acc_ratio': float(acc.get('p99_ratio', math.nan)),
        'jerk_seam': mx(jerk, 'at_seams'), 'jerk_else': mx(jerk, 'elsewhere'),
        'jerk_ratio': float(jerk.get('p99_ratio', math.nan)),
        'over_acc': int(acc.get('beyond_limits', -1)), 'over_jerk': int(jerk.get('beyond_limits',
                                                                                -1)),
        'targets': f'{s["targets_reached"]}/{s["targets_shown"]}',
        'track': float(s['tracking_error']['max']),
        'refused': len([r for r in s.get('executor_refusals', [])
                        if 'refused at the seam' in r]),
    }


if __name__ == '__main__':
    sys.exit(main())
