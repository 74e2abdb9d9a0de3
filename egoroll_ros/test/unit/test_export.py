"""egoroll export: frame rate, alignment and every refusal, before LeRobot is involved (the
round trip through LeRobot's own writer and reader is test_export_lerobot.py)."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess

import numpy as np
import pytest

from egoroll_ros.bag.export import ExportOptions, export, plan_episode
from egoroll_ros.bag.synth import recorded_episode_messages, write_messages
from egoroll_ros.core.dataset import (
    ExportError,
    fresh_window,
    latest_at,
    lerobot_features,
    measure_fps,
    nearest_at,
)
from egoroll_ros.errors import BagError
from egoroll_ros.testing import executable_path

T0 = 1_704_067_200.0


def test_measure_fps_of_a_regular_camera() -> None:
    assert measure_fps(T0 + np.arange(90) / 30.0) == 30
    jitter = np.random.default_rng(0).uniform(-0.004, 0.004, 90)
    assert measure_fps(T0 + np.arange(90) / 30.0 + jitter) == 30
    # a first frame 0.4 period late and a later one 0.4 period early: jitter, not a drop
    late_start = T0 + np.arange(20) / 5.0
    late_start[0] += 0.08
    late_start[3] -= 0.08
    assert measure_fps(late_start) == 5


@pytest.mark.parametrize(('stamps', 'match'), [
    (T0 + np.delete(np.arange(60), 30) / 30.0, 'irregular at 30 Hz: frame 30'),
    (T0 + np.delete(np.arange(60), 10) / 30.0, 'irregular at 30 Hz: frame 10'),
    # 29.97 Hz stays within half a period of a 30 Hz grid for 16 s, then drifts off it
    (T0 + np.arange(1200) / 29.97, 'irregular at 30 Hz'),
    (T0 + np.arange(60) / 12.5, 'not an integer rate'),
    (T0 + np.array([0.0, 0.1, 0.1, 0.2]), 'do not increase'),
    (T0 + np.array([0.0, 0.1]), 'at least 3'),
])
def test_an_irregular_or_missing_rate_is_refused(stamps: np.ndarray, match: str) -> None:
    with pytest.raises(ExportError, match=match):
        measure_fps(stamps)


def test_latest_at_and_nearest_at() -> None:
    stamps = np.array([0.0, 0.1, 0.2])
    assert latest_at(np.array([-0.01, 0.0, 0.15, 0.35]), stamps, 0.1).tolist() == \
        [-1, 0, 1, -1]
    assert nearest_at(np.array([0.04, 0.06, 0.26]), stamps, 0.05).tolist() == [0, 1, -1]


def test_fresh_window_trims_the_ends_and_refuses_a_gap() -> None:
    t = np.arange(6) * 0.1
    assert fresh_window(t, {'a': np.array([-1, 0, 1, 2, 3, -1]),
                            'b': np.array([0, 1, 2, 3, 4, 5])}) == (1, 4)
    with pytest.raises(ExportError, match='a is missing or stale at 1 frames'):
        fresh_window(t, {'a': np.array([0, 1, -1, 3, 4, 5])})
    with pytest.raises(ExportError, match=r'\(b never\)'):
        fresh_window(t, {'a': np.zeros(6), 'b': -np.ones(6)})


def test_features_are_named_as_lerobot_policies_expect() -> None:
    f = lerobot_features(['a', 'b'], {'front': (48, 64)})
    assert f['observation.state'] == {'dtype': 'float32', 'shape': [2], 'names': ['a', 'b']}
    assert f['action']['names'] == ['a', 'b']
    assert f['observation.images.front']['shape'] == [48, 64, 3]
    assert f['observation.images.front']['dtype'] == 'image'
    assert lerobot_features(['a'], {'c': (2, 2)}, video=True)['observation.images.c'][
        'dtype'] == 'video'
    assert {f[k]['dtype'] for k in ('intervention', 'next.done', 'next.success')} == {'bool'}


def _bag(tmp_path: Path, name: str = 'ep', drop: tuple[str, ...] = (), **kw) -> Path:
    msgs = [m for m in recorded_episode_messages(**kw) if m[0] not in drop]
    return write_messages(tmp_path / name, msgs)


def test_plan_picks_joints_by_name_trims_to_fresh_inputs_and_labels_intervention(
        tmp_path: Path) -> None:
    plan = plan_episode(_bag(tmp_path), ExportOptions(bags=[], out=tmp_path / 'o'))
    assert plan.fps == 30 and plan.joints == ('j1', 'j2', 'j3')
    # commanded starts at 0.2 s: frames 0..5 (0 .. 0.1667 s) have no action yet
    assert plan.dropped == (6, 0)
    t = plan.frames - plan.frames[0] + 0.2
    np.testing.assert_allclose(plan.state, np.arange(1, 4)[None, :] + t[:, None], atol=0.011)
    assert plan.state.shape == (40, 3) and np.all(plan.action < 0)
    on = (t >= 0.5 - 1e-9) & (t < 1.0 - 1e-9)
    assert plan.intervention.tolist() == on.tolist() and plan.has_intervention
    assert plan.outcome == 'success'


def test_no_intervention_topic_means_all_false(tmp_path: Path) -> None:
    plan = plan_episode(_bag(tmp_path, intervention=None), ExportOptions(bags=[], out=tmp_path))
    assert not plan.has_intervention and not plan.intervention.any()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([executable_path('egoroll'), 'export', *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(('kind', 'needle'), [
    ('not_episode', 'not an egoroll episode (no /egoroll/episode'),
    ('no_commanded', 'topic /executor/commanded (sensor_msgs/msg/JointState) is missing'),
    ('no_camera', 'topic /camera/wrist/image_raw (sensor_msgs/msg/Image) is missing'),
    ('joints', '/joint_states lacks joints j1, j2, j3 of the configuration (it has: a, b, c)'),
    ('dropped_frame', 'irregular at 30 Hz: frame 20'),
    ('gap', '/executor/commanded is missing or stale'),
])
def test_a_bag_that_cannot_be_exported_exits_2_with_one_line(tmp_path: Path, kind: str,
                                                              needle: str) -> None:
    kw: dict = {}
    drop: tuple[str, ...] = ()
    if kind == 'not_episode':
        drop = ('/egoroll/episode',)
    elif kind == 'no_commanded':
        drop = ('/executor/commanded',)
    elif kind == 'no_camera':
        drop = ('/camera/wrist/image_raw',)
    elif kind == 'joints':
        kw['bag_joints'] = ('a', 'b', 'c')
    elif kind == 'dropped_frame':
        kw['drop_frames'] = (20,)
    bag = _bag(tmp_path, drop=drop, **kw)
    if kind == 'gap':   # commanded silent from 0.6 to 0.9 s
        msgs = [m for m in recorded_episode_messages()
                if not (m[0] == '/executor/commanded' and 0.6 < m[2] * 1e-9 - T0 < 0.9)]
        bag = write_messages(tmp_path / 'gap', msgs)
    res = _cli(str(bag), '--out', str(tmp_path / 'ds'))
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.stderr
    assert not (tmp_path / 'ds').exists()


def test_an_existing_dataset_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / 'ds'
    out.mkdir()
    (out / 'meta').mkdir()
    (out / 'meta' / 'info.json').write_text(json.dumps({'codebase_version': 'v3.0'}))
    with pytest.raises(ExportError, match='already exists and is not empty; refusing'):
        export(ExportOptions(bags=[_bag(tmp_path)], out=out))
    assert json.loads((out / 'meta' / 'info.json').read_text()) == {'codebase_version': 'v3.0'}


def test_episodes_of_different_robots_are_refused(tmp_path: Path) -> None:
    a = _bag(tmp_path, 'a')
    b = _bag(tmp_path, 'b', joints=('j1', 'j2'), bag_joints=('j1', 'j2'))
    with pytest.raises(ExportError, match=r"joints \('j1', 'j2'\) differ"):
        export(ExportOptions(bags=[a, b], out=tmp_path / 'ds', python='/nonexistent'))
    assert not (tmp_path / 'ds').exists()


def test_a_bag_that_is_not_a_bag_is_a_bag_error(tmp_path: Path) -> None:
    with pytest.raises(BagError, match='bag not found'):
        plan_episode(tmp_path / 'nope', ExportOptions(bags=[], out=tmp_path / 'o'))
