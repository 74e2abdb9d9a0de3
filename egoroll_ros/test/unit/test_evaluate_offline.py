"""egoroll evaluate on tiny generated bags: hand-checked report, stale inputs, the output bag,
the regression mode, determinism, and bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from egoroll_ros.bag.evaluate import EvaluateOptions, evaluate
from egoroll_ros.bag.report import Thresholds
from egoroll_ros.bag.synth import episode_messages, write_episode, write_messages
from egoroll_ros.errors import BagError, ConfigError
from egoroll_ros.ros.bagio import typestore
from egoroll_ros.sim.demo_task import demo_urdf_path
from egoroll_ros.testing import executable_path

UNIT = Path(__file__).resolve().parent
sys.path.insert(0, str(UNIT))
from policy_fakes import BACKEND, JOINTS, make_fake_checkpoint  # noqa: E402, I001

H, DT = 5, 0.05
VEL = 0.1   # rad/s of every arm joint in the synthetic episode (gripper still)


def policy_yaml(path: Path, backend: str = BACKEND, **extra: object) -> Path:
    lines = [f'    joints: [{", ".join(JOINTS)}]', '    continuous_joints: [wrist_roll]',
             f"    policy.backend: '{backend}'", '    cameras.names: [scene]',
             '    cameras.heights: [24]', '    cameras.widths: [32]', '    query_frequency: 10.0']
    lines += [f'    {k}: {v}' for k, v in extra.items()]
    path.write_text('policy_node:\n  ros__parameters:\n' + '\n'.join(lines) + '\n')
    return path


@pytest.fixture
def setup(tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck', chunk_length=H, step_period=DT,
                              cameras=(('scene', 24, 32),), mode='hold', offset=0.0)
    return tmp_path, ck, policy_yaml(tmp_path / 'policy.yaml')


def run(tmp: Path, bag: Path, cfg: Path, ck: Path, out: str, **kw) -> dict:
    return evaluate(EvaluateOptions(bag=bag, config=cfg, checkpoint=ck, out_dir=tmp / out,
                                    urdf=kw.pop('urdf', demo_urdf_path()), **kw),
                    log=lambda s: None)


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_report_matches_hand_checked_expectations(setup, storage):
    tmp, ck, cfg = setup
    ep = write_episode(tmp / 'bag', storage, duration=1.0, joy_rate=20.0,
                       robot_description=demo_urdf_path().read_text())
    rep = evaluate(EvaluateOptions(bag=ep.path, config=cfg, checkpoint=ck, out_dir=tmp / 'o'))
    assert rep['robot_model'] == '/robot_description in the bag'
    # joint_states and camera both start at t=0: queries at 0.0, 0.1, ..., 1.0
    assert rep['first_query'] == 0.0 and rep['queries'] == 11
    assert [round(c['t'], 6) for c in rep['chunk_list']] == [round(0.1 * k, 6)
                                                               for k in range(11)]
    assert rep['skipped']['count'] == 0 and rep['inference_errors'] == []
    d = rep['decisions']
    assert d['chunks'] == 11 and d['accepted'] == 11 and d['acceptance_rate'] == 1.0
    # the deadman is held throughout: the interlock forwards every chunk
    assert rep['interlock']['forwarded'] == 11 and rep['interlock']['stretches'] == []
    # the fake holds the measured state: point k misses the recording by VEL * (k+1) * DT on
    # each of the 7 arm joints and 0 on the gripper
    e = rep['action_error']
    for k, step in enumerate(e['per_step']):
        assert step['mae'] == pytest.approx(7 / 8 * VEL * (k + 1) * DT, abs=1e-6)
        assert step['time_from_start'] == pytest.approx((k + 1) * DT)
    assert e['per_joint']['gripper']['mae'] == pytest.approx(0.0, abs=1e-9)
    # chunks at 0.8, 0.9, 1.0 reach past the end of the recording (1.0 s): 1 + 3 + 5 points
    assert e['points_beyond_recording'] == 9 and e['points_compared'] == 11 * H - 9
    assert rep['latency']['median'] > 0
    # outputs: an mcap bag rosbags can read (with our types), the report and two PNGs
    store = typestore()
    with Reader(tmp / 'o' / 'evaluation') as reader:
        assert {c.topic: c.msgcount for c in reader.connections} == {
            '/policy/chunk': 11, '/safety/verdict': 11}
        msgs = [(c.topic, store.deserialize_cdr(raw, c.msgtype))
                for c, _, raw in reader.messages()]
    from rclpy.serialization import deserialize_message

    from egoroll_interfaces.msg import ActionChunk
    with Reader(tmp / 'o' / 'evaluation') as reader:   # rclpy reads it as well
        raw = next(raw for c, _, raw in reader.messages() if c.topic == '/policy/chunk')
        assert deserialize_message(bytes(raw), ActionChunk).sequence == 1
    chunks = [m for t, m in msgs if t == '/policy/chunk']
    verdicts = [m for t, m in msgs if t == '/safety/verdict']
    assert [c.sequence for c in chunks] == list(range(1, 12))
    assert all(v.accepted for v in verdicts)
    np.testing.assert_allclose(chunks[3].trajectory.points[0].positions,
                               ep.positions[30], atol=1e-12)   # the state at t = 0.3 s
    assert json.loads((tmp / 'o' / 'report.json').read_text())['digest'] == rep['digest']
    for png in rep['outputs']['plots']:
        assert (tmp / 'o' / png).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_stale_camera_skips_queries_with_the_reason(setup):
    tmp, ck, _ = setup
    cfg = policy_yaml(tmp / 'p2.yaml', **{'max_age.camera': 0.25})
    msgs, _ = episode_messages(duration=1.0)
    cut = msgs[0][2] + 450_000_000       # the camera stops after 0.45 s
    write_messages(tmp / 'bag', [m for m in msgs
                                 if not (m[0].startswith('/camera') and m[2] > cut)])
    rep = run(tmp, tmp / 'bag', cfg, ck, 'o')
    # last frame at 0.4 s, max age 0.25 s: the queries at 0.7, 0.8, 0.9 and 1.0 s are skipped
    assert rep['queries'] == 11 and rep['decisions']['chunks'] == 7
    assert rep['skipped'] == {'count': 4, 'reasons': {'stale input: camera/scene no message': 4}}
    # one stale stretch: from 0.4 + 0.25 s to the end of the bag
    (st,) = rep['stale_stretches']
    assert st == {'input': 'camera/scene', 'reason': 'no message', 'start': pytest.approx(0.65),
                  'end': pytest.approx(1.0), 'open': True}


def test_config_needs_a_topic_the_bag_lacks(setup):
    tmp, ck, cfg = setup
    write_episode(tmp / 'bag', 'mcap', duration=0.2, camera=None, joy_rate=10.0)
    with pytest.raises(BagError) as err:
        run(tmp, tmp / 'bag', cfg, ck, 'o')
    assert 'topic /camera/scene/image_raw (sensor_msgs/msg/Image) is missing' in str(err.value)
    assert '/quest/joy (sensor_msgs/msg/Joy, 3)' in str(err.value)


def test_no_robot_model_is_a_config_error(setup):
    tmp, ck, cfg = setup
    write_episode(tmp / 'bag', 'mcap', duration=0.2)
    with pytest.raises(ConfigError, match='no robot model for the gate'):
        run(tmp, tmp / 'bag', cfg, ck, 'o', urdf=None)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, 'PYTHONPATH': f"{UNIT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([executable_path('egoroll'), 'evaluate', *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_regression_mode_catches_a_worse_checkpoint(setup):
    tmp, ck, cfg = setup
    ep = write_episode(tmp / 'bag', 'mcap', duration=1.0)
    base = run(tmp, ep.path, cfg, ck, 'base')
    worse = make_fake_checkpoint(tmp / 'worse', chunk_length=H, step_period=DT,
                                 cameras=(('scene', 24, 32),), mode='hold', offset=0.3)
    common = [str(ep.path), '--config', str(cfg), '--urdf', str(demo_urdf_path()),
              '--baseline', str(tmp / 'base' / 'report.json'), '--no-plots']
    bad = _cli(*common, '--checkpoint', str(worse), '--out', str(tmp / 'worse_out'))
    assert bad.returncode == 1, bad.stderr
    assert 'REGRESSION: acceptance rate dropped from 1.000 to 0.000' in bad.stdout
    assert 'REGRESSION: action error (MAE) grew' in bad.stdout
    rep = json.loads((tmp / 'worse_out' / 'report.json').read_text())
    # 0.3 rad away from the measured state: every chunk fails start_deviation (max 0.15)
    assert rep['decisions']['rejections_by_check']['start_deviation'] == 11
    same = _cli(*common, '--checkpoint', str(ck), '--out', str(tmp / 'same_out'))
    assert same.returncode == 0, same.stderr + same.stdout
    assert 'no regression against the baseline' in same.stdout
    again = json.loads((tmp / 'same_out' / 'report.json').read_text())
    assert again['digest'] == base['digest']
    # thresholds are honoured: a small offset passes a loose error threshold only
    slight = make_fake_checkpoint(tmp / 'slight', chunk_length=H, step_period=DT,
                                  cameras=(('scene', 24, 32),), mode='hold', offset=-0.002)
    rep_s = run(tmp, ep.path, cfg, slight, 's1', baseline=tmp / 'base' / 'report.json',
                thresholds=Thresholds(max_error_increase=0.05), plots=False)
    assert any('action error' in r for r in rep_s['comparison']['regressions'])
    rep_l = run(tmp, ep.path, cfg, slight, 's2', baseline=tmp / 'base' / 'report.json',
                thresholds=Thresholds(max_error_increase=1.0), plots=False)
    assert rep_l['comparison']['regressions'] == []


def _bag_contents(path: Path) -> list:
    store = typestore()
    out = []
    with Reader(path) as reader:
        for c, t, raw in reader.messages():
            m = store.deserialize_cdr(raw, c.msgtype)
            if c.topic == '/policy/chunk':
                out.append((t, m.sequence, m.header.stamp.sec, m.header.stamp.nanosec,
                            [list(p.positions) for p in m.trajectory.points]))
            else:
                out.append((t, m.sequence, m.accepted, [(v.check, v.subject, v.point_index,
                                                         v.value) for v in m.violations]))
    return out


def test_two_runs_of_an_act_policy_give_identical_chunks_and_verdicts(tmp_path):
    import torch

    from egoroll_ros.policies.act import train_act
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    res = train_act({'scene': rng.integers(0, 255, (8, 24, 32, 3), dtype=np.uint8)},
                    rng.normal(0.3, 0.2, size=(8, 8)), rng.normal(0.3, 0.2, size=(8, H, 8)),
                    tmp_path / 'act', step_period=DT, steps=3, batch_size=4, d_model=16,
                    n_heads=2, n_layers=1, dim_feedforward=32, conv_channels=4)
    cfg = policy_yaml(tmp_path / 'act.yaml', backend='egoroll_act',
                      **{'policy.expected_fingerprint': res.fingerprint})
    ep = write_episode(tmp_path / 'bag', 'sqlite3', duration=1.0)
    first = run(tmp_path, ep.path, cfg, res.path, 'one', plots=False)
    second = _cli(str(ep.path), '--config', str(cfg), '--checkpoint', str(res.path),
                  '--urdf', str(demo_urdf_path()), '--out', str(tmp_path / 'two'),
                  '--no-plots', '--baseline', str(tmp_path / 'one' / 'report.json'))
    assert second.returncode in (0, 1), second.stderr
    two = json.loads((tmp_path / 'two' / 'report.json').read_text())
    assert first['decisions']['chunks'] == 11
    assert two['digest'] == first['digest']
    assert two['comparison']['regressions'] == []
    a = _bag_contents(tmp_path / 'one' / 'evaluation')
    assert a == _bag_contents(tmp_path / 'two' / 'evaluation') and len(a) == 22


def _joy_bag(path: Path, held, estop) -> None:
    """A 1 s episode whose quest/joy (20 Hz) holds the deadman where ``held(t)`` and presses
    the e-stop where ``estop(t)`` (t in s after the start)."""
    from sensor_msgs.msg import Joy

    msgs, _ = episode_messages(duration=1.0, joy_rate=20.0)
    t0 = msgs[0][2]
    out = []
    for topic, mtype, t, msg in msgs:
        if topic == '/quest/joy':
            s = (t - t0) * 1e-9
            msg = Joy(header=msg.header, axes=[0.0, 0.0, 0.0, 1.0 if held(s) else 0.0],
                      buttons=[0, 1 if estop(s) else 0])
        out.append((topic, mtype, t, msg))
    write_messages(path, out)


def test_the_interlock_runs_over_quest_joy(setup):
    tmp, ck, cfg = setup
    # deadman released 0.3-0.6 s; e-stop pressed at 0.9 s (released at 0.95, never reset)
    _joy_bag(tmp / 'bag', held=lambda s: not 0.3 - 1e-6 < s < 0.6 - 1e-6,
             estop=lambda s: abs(s - 0.9) < 1e-6)
    rep = run(tmp, tmp / 'bag', cfg, ck, 'o')
    # the checks accept every chunk; the interlock forwards those at 0.0-0.2 and 0.6-0.8 s
    assert rep['decisions']['accepted'] == 11
    assert [c['forwarded'] for c in rep['chunk_list']] == [True] * 3 + [False] * 3 + \
        [True] * 3 + [False] * 2
    assert [c['blocked_by'] for c in rep['chunk_list'][3:6]] == [['deadman']] * 3
    assert all('estop' in c['blocked_by'] for c in rep['chunk_list'][9:])
    il = rep['interlock']
    assert il['simulated'] and il['forwarded'] == 6 and il['blocked_by_check'] == {
        'deadman': 3, 'estop': 2, 'rollout_stopped': 2}     # the e-stop disarms the gate
    rows = [(s['condition'], s['reason'], round(s['start'], 6), round(s['end'], 6), s['open'])
            for s in il['stretches']]
    assert rows == [('deadman', 'deadman released', 0.3, 0.6, False),
                    ('estop', 'e-stop pressed', 0.9, 0.95, False),
                    ('stopped', 'rollout stopped: e-stop pressed', 0.9, 1.0, True),
                    ('estop', 'e-stop latched (released; no safety/reset in a bag)', 0.95,
                     1.0, True)]
    # the output bag's verdicts say what the gate would have published
    store = typestore()
    with Reader(tmp / 'o' / 'evaluation') as reader:
        verdicts = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()
                    if c.topic == '/safety/verdict']
    assert [v.forwarded for v in verdicts] == [c['forwarded'] for c in rep['chunk_list']]
    assert [v.check for v in verdicts[4].violations] == ['deadman']
    assert verdicts[4].stage == 'node'


def test_a_bag_without_quest_joy_says_the_interlock_was_not_simulated(setup):
    tmp, ck, cfg = setup
    ep = write_episode(tmp / 'bag', 'mcap', duration=0.3)
    rep = run(tmp, ep.path, cfg, ck, 'o', plots=False)
    note = 'interlock not simulated: no /quest/joy in the bag'
    assert rep['interlock'] == {'simulated': False, 'reason': note}
    assert all(c['forwarded'] is None and c['interlock'] == note for c in rep['chunk_list'])
    assert any(w.startswith(note) for w in rep['warnings'])
    store = typestore()
    with Reader(tmp / 'o' / 'evaluation') as reader:
        verdicts = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()
                    if c.topic == '/safety/verdict']
    assert verdicts and all(v.summary.startswith(note) and not v.forwarded for v in verdicts)
    res = _cli(str(ep.path), '--config', str(cfg), '--checkpoint', str(ck), '--urdf',
               str(demo_urdf_path()), '--no-plots', '--out', str(tmp / 'cli'))
    assert res.returncode == 0, res.stderr
    assert f'warning: {note}' in res.stderr
