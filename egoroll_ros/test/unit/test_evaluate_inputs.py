"""egoroll evaluate refuses what it cannot evaluate and names every stale stretch: a frozen
camera republishing its last frame and stamp, a frozen frame with fresh stamps, a camera
clock far from ours, and a bag with other joint names (bags written here with rosbags)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
import subprocess
import sys

import pytest

from egoroll_ros.bag.evaluate import EvaluateOptions, evaluate
from egoroll_ros.bag.synth import episode_messages, write_messages
from egoroll_ros.errors import BagError
from egoroll_ros.sim.demo_task import demo_urdf_path
from egoroll_ros.testing import executable_path

UNIT = Path(__file__).resolve().parent
sys.path.insert(0, str(UNIT))
from policy_fakes import JOINTS, make_fake_checkpoint  # noqa: E402, I001
from test_evaluate_offline import policy_yaml  # noqa: E402, I001

H, DT = 5, 0.05


@pytest.fixture
def setup(tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck', chunk_length=H, step_period=DT,
                              cameras=(('scene', 24, 32),), mode='hold', offset=0.0)
    return tmp_path, ck, policy_yaml(tmp_path / 'policy.yaml', **{'max_age.camera': 0.25})


def run(tmp: Path, bag: Path, cfg: Path, ck: Path, out: str = 'o') -> dict:
    return evaluate(EvaluateOptions(bag=bag, config=cfg, checkpoint=ck, out_dir=tmp / out,
                                    urdf=demo_urdf_path(), plots=False), log=lambda s: None)


def _frozen(msgs: list, t_from: int, t_to: int, *, keep_stamp: bool) -> list:
    """The camera freezes on its frame at ``t_from`` until ``t_to`` (receive time, ns): it
    keeps publishing that frame, with its stamp (``keep_stamp``) or with fresh stamps."""
    out, last = [], None
    for topic, mtype, t, msg in msgs:
        if topic.startswith('/camera') and t_from <= t < t_to:
            if last is None:
                last = msg
            else:
                frozen = copy.deepcopy(last)
                if not keep_stamp:
                    frozen.header.stamp = msg.header.stamp
                msg = frozen
        out.append((topic, mtype, t, msg))
    return out


@pytest.mark.parametrize('keep_stamp', [True, False], ids=['same_stamp', 'fresh_stamps'])
def test_a_frozen_camera_is_one_stale_stretch_and_no_chunk_inside_it(setup, keep_stamp):
    tmp, ck, cfg = setup
    msgs, ep = episode_messages(duration=3.0, camera_rate=30.0)
    t0 = msgs[0][2]
    # frozen from 1.0 s to 2.0 s (30 frames of the same picture keep coming)
    write_messages(tmp / 'bag', _frozen(msgs, t0 + 1_000_000_000, t0 + 2_000_000_000,
                                        keep_stamp=keep_stamp))
    rep = run(tmp, tmp / 'bag', cfg, ck)
    reason = 'stamp not advancing' if keep_stamp else 'frame unchanged'
    (st,) = rep['stale_stretches']
    # stale from 1.0 + max age 0.25 s until the first query after it moves again (2.0 s)
    assert (st['input'], st['reason'], st['open']) == ('camera/scene', reason, False)
    assert st['start'] == pytest.approx(1.25, abs=1e-6)
    assert st['end'] == pytest.approx(2.0, abs=1e-6)
    # queries at 0.0, 0.1, ... 3.0: those at 1.3 ... 1.9 s are skipped (7), none accepted
    times = [round(c['t'], 6) for c in rep['chunk_list']]
    assert not [t for t in times if 1.25 < t < 2.0]
    assert rep['skipped'] == {'count': 7, 'reasons': {f'stale input: camera/scene {reason}': 7}}
    assert rep['decisions']['chunks'] == 31 - 7


def test_a_camera_clock_beyond_the_max_offset_is_refused_and_the_offset_reported(setup):
    tmp, ck, _ = setup
    cfg = policy_yaml(tmp / 'p.yaml', max_clock_offset=0.5)
    msgs, _ = episode_messages(duration=1.0)
    from egoroll_ros.ros.convert import sec_to_time, time_to_sec
    shifted = []
    for topic, mtype, t, msg in msgs:
        if topic.startswith('/camera'):       # camera clock 0.8 s behind the recorder's
            msg.header.stamp = sec_to_time(time_to_sec(msg.header.stamp) - 0.8)
        shifted.append((topic, mtype, t, msg))
    write_messages(tmp / 'bag', shifted)
    rep = run(tmp, tmp / 'bag', cfg, ck)
    off = rep['clock_offsets']['camera/scene']
    assert off['min'] == pytest.approx(0.8, abs=1e-6) and off['max'] == pytest.approx(0.8,
                                                                                      abs=1e-6)
    assert rep['clock_offsets']['joint_states']['max'] == pytest.approx(0.0, abs=1e-6)
    assert rep['decisions']['chunks'] == 0 and rep['skipped']['count'] == 11
    assert rep['stale_stretches'][0]['reason'] == 'clock offset'
    # within the limit: accepted, offset still reported
    cfg2 = policy_yaml(tmp / 'p2.yaml', max_clock_offset=1.0)
    rep2 = run(tmp, tmp / 'bag', cfg2, ck, 'o2')
    assert rep2['decisions']['chunks'] == 11 and rep2['stale_stretches'] == []


def _other_joints_bag(tmp: Path) -> Path:
    names = ['arm_' + j for j in JOINTS]
    msgs, _ = episode_messages(duration=0.5, joints=names)
    return write_messages(tmp / 'bag', msgs)


def test_a_bag_with_other_joint_names_is_refused_before_any_inference(setup):
    tmp, ck, cfg = setup
    bag = _other_joints_bag(tmp)
    (ck / 'mode').write_text('raise')          # any inference would raise
    with pytest.raises(BagError) as err:
        run(tmp, bag, cfg, ck)
    text = str(err.value)
    assert '/joint_states lacks the configured joints shoulder_pan, shoulder_lift' in text
    assert "the bag's /joint_states has: arm_shoulder_pan, arm_shoulder_lift" in text
    assert not (tmp / 'o' / 'report.json').exists()


def test_cli_exits_2_with_one_line_for_other_joint_names(setup):
    tmp, ck, cfg = setup
    bag = _other_joints_bag(tmp)
    env = {**os.environ, 'PYTHONPATH': f"{UNIT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    res = subprocess.run([executable_path('egoroll'), 'evaluate', str(bag), '--config',
                          str(cfg), '--checkpoint', str(ck), '--urdf', str(demo_urdf_path()),
                          '--out', str(tmp / 'o'), '--no-plots'], capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and 'lacks the configured joints' in lines[0], res.stderr
    assert 'arm_gripper' in lines[0] and res.stdout == ''


def test_cli_exits_2_naming_a_missing_camera_topic_and_what_the_bag_has(setup):
    tmp, ck, _ = setup
    cfg = policy_yaml(tmp / 'p.yaml')
    msgs, _ = episode_messages(duration=0.5, camera='wrist')
    bag = write_messages(tmp / 'bag', msgs)
    env = {**os.environ, 'PYTHONPATH': f"{UNIT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    res = subprocess.run([executable_path('egoroll'), 'evaluate', str(bag), '--config',
                          str(cfg), '--checkpoint', str(ck), '--urdf', str(demo_urdf_path()),
                          '--out', str(tmp / 'o'), '--no-plots'], capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert 'topic /camera/scene/image_raw (sensor_msgs/msg/Image) is missing' in lines[0]
    assert '/camera/wrist/image_raw (sensor_msgs/msg/Image' in lines[0]
