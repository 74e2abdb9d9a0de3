"""The demo report: success rate, rejections with reasons, failures that make the run fail."""

import json

import numpy as np

from egoroll_ros.demo.report import (
    DemoLog,
    TargetRecord,
    VerdictRecord,
    summarize,
    tracking_error,
    write_report,
)


def _log() -> DemoLog:
    log = DemoLog(joint_names=['a', 'b'])
    t = np.linspace(0, 10, 101)
    log.t_commanded = t.tolist()
    log.commanded = np.stack([np.sin(t), np.cos(t)], axis=1).tolist()
    log.t_measured = t[5:95].tolist()
    log.measured = (np.stack([np.sin(t), np.cos(t)], axis=1)[5:95] + 0.01).tolist()
    log.verdicts = [VerdictRecord(0.1, 1, True, False, True, False, 'shadow ok'),
                    VerdictRecord(0.5, 2, True, False, False, True, 'ok'),
                    VerdictRecord(0.7, 3, False, False, False, False, 'max_step',
                                  [{'check': 'max_step', 'subject': 'a', 'message': 'x'}])]
    log.targets = [TargetRecord(0.0, [0.4, 0, 0.3], 4.0), TargetRecord(4.0, [0.3, 0.1, 0.3])]
    return log


def test_summary_counts_live_verdicts_rejection_reasons_and_success_rate():
    s = summarize(_log(), duration=10.0)
    assert s['chunks_verdicted'] == 2 and s['chunks_accepted'] == 1
    assert s['rejections_by_check'] == {'max_step': 1}
    assert s['rejections'][0]['sequence'] == 3
    assert s['targets_reached'] == 1 and s['success_rate'] == 0.5
    np.testing.assert_allclose(s['tracking_error']['max'], 0.01, atol=1e-9)
    assert s['ok'] is True


def test_faults_and_no_target_reached_fail_the_run():
    log = _log()
    log.targets[0].t_reached = None
    log.gate_faults.append('rejected chunk 3 (max_step)')
    log.executor_errors.append('PATH_TOLERANCE_VIOLATED')
    s = summarize(log, duration=10.0)
    assert s['ok'] is False
    assert any('no target' in f for f in s['failures'])
    assert any('safety fault' in f for f in s['failures'])
    assert any('executor aborted' in f for f in s['failures'])


def test_tracking_error_is_nan_without_data():
    assert np.isnan(tracking_error(DemoLog(joint_names=['a']))['max'])


def test_report_directory_has_summary_and_plot(tmp_path):
    summary = write_report(_log(), 10.0, tmp_path / 'r')
    assert json.loads((tmp_path / 'r' / 'summary.json').read_text()) == summary
    png = (tmp_path / 'r' / 'joints.png').read_bytes()
    assert png[:8] == b'\x89PNG\r\n\x1a\n' and len(png) > 5000
