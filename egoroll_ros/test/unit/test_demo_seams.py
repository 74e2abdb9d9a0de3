"""Seam figures of the demo report (demo/report.py): acceleration and jerk of the stamped
commanded setpoints at seams and elsewhere."""

import numpy as np

from egoroll_ros.demo.report import DemoLog, VerdictRecord, seam_figures, summarize

DT = 0.01


def _log(step_at_seams: bool):
    log = DemoLog(joint_names=['a', 'b'])
    ts = np.arange(0.0, 2.0, DT)
    q = np.zeros((len(ts), 2))
    v = 0.1
    for i in range(1, len(ts)):
        if step_at_seams and i % 10 == 0:
            v = -v                                      # a velocity step at every seam
        q[i] = q[i - 1] + v * DT
    for t, row in zip(ts, q, strict=True):
        log.t_commanded.append(float(t))
        log.stamp_commanded.append(1000.0 + float(t))
        log.commanded.append(row.tolist())
    for k in range(1, 20):
        log.verdicts.append(VerdictRecord(t=k * 0.1 - 0.015, sequence=k, accepted=True,
                                          needs_confirmation=False, shadow=False,
                                          forwarded=True, summary='accepted'))
    return log


def test_velocity_steps_at_seams_show_as_seam_acceleration():
    fig = seam_figures(_log(True), acceleration_limits=[5.0, 5.0], jerk_limits=[100.0, 100.0])
    acc = fig['acceleration']
    assert fig['seams'] == 19
    assert acc['at_seams']['max'][0] > 15       # 0.2 rad/s in 10 ms
    assert acc['elsewhere']['max'][0] < 1e-6
    assert acc['beyond_limits'] > 0 and fig['jerk']['beyond_limits'] > 0


def test_smooth_commands_have_no_seam_figures_beyond_limits():
    fig = seam_figures(_log(False), acceleration_limits=[5.0, 5.0], jerk_limits=[100.0, 100.0])
    assert fig['acceleration']['beyond_limits'] == 0
    assert fig['jerk']['beyond_limits'] == 0


def test_summary_carries_the_seam_figures():
    summary = summarize(_log(True), 2.0)
    assert summary['seams']['seams'] == 19
    assert 'acceleration' in summary['seams'] and 'jerk' in summary['seams']


def _stamped(ts, q):
    log = DemoLog(joint_names=['a'])
    for t, row in zip(ts, q, strict=True):
        log.t_commanded.append(float(t))
        log.stamp_commanded.append(1000.0 + float(t))
        log.commanded.append([float(row)])
    return log


def test_a_missed_tick_does_not_read_as_jerk_beyond_what_was_commanded():
    # q = J t^3 / 6 has jerk J everywhere; the executor skipped the ticks at 0.05 and 0.06 s
    # (a missed deadline), so its stamps are 10 ms apart except one 30 ms gap.
    jerk = 1000.0
    ts = np.array([t for t in np.arange(0.0, 0.2, DT) if not 0.045 < t < 0.065])
    fig = seam_figures(_stamped(ts, jerk * ts ** 3 / 6.0), acceleration_limits=[1000.0],
                       jerk_limits=[jerk])
    assert fig['jerk']['beyond_limits'] == 0
    np.testing.assert_allclose(fig['jerk']['elsewhere']['max'], [jerk], rtol=1e-6)
