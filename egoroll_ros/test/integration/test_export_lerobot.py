"""egoroll export round trip: episode bags -> LeRobot's own writer (managed runtime) -> loaded
back by LeRobot's own LeRobotDataset; every frame equals the bag's (state, action, images
bit-exact, stored as PNG), fps measured, intervention and success flags as recorded."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess

from lerobot_testlib import run_tool
import numpy as np

from egoroll_ros.bag.synth import recorded_episode_messages, write_messages
from egoroll_ros.testing import executable_path

FPS = 30


def test_exported_episodes_load_in_lerobot_with_the_bags_frames(lerobot_python: str,
                                                                 tmp_path: Path) -> None:
    a = write_messages(tmp_path / 'a', recorded_episode_messages(duration=1.5))
    b = write_messages(tmp_path / 'b', recorded_episode_messages(
        duration=1.0, intervention=None, outcome='failure', command_start=0.0))
    out = tmp_path / 'ds'
    res = subprocess.run([executable_path('egoroll'), 'export', str(a), str(b), '--out',
                          str(out), '--python', lerobot_python, '--task', 'reach'],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert 'no policy/intervention topic in the episode: all frames false' in res.stdout
    summary = json.loads((out / 'egoroll_export.json').read_text())
    assert summary['fps'] == FPS and summary['num_episodes'] == 2

    run_tool(lerobot_python, 'dataset', str(out), summary['repo_id'], str(tmp_path / 'f.npz'))
    got = np.load(tmp_path / 'f.npz', allow_pickle=False)
    assert int(got['fps']) == FPS
    feats = json.loads(str(got['features']))
    assert feats['observation.state']['names'] == ['j1', 'j2', 'j3']
    assert feats['action']['names'] == ['j1', 'j2', 'j3']
    assert feats['observation.images.front']['dtype'] == 'image'

    # Expected, in closed form (see recorded_episode_messages): episode a starts at camera
    # frame 6 (the first commanded setpoint is at 0.2 s), episode b at frame 0.
    rows = []
    for ep, (first, n, iv, success) in enumerate(((6, 40, True, True), (0, 31, False, False))):
        for i in range(n):
            k = first + i
            t = k / FPS
            js = np.floor(t * 100 + 1e-6) / 100      # the last joint_states at or before
            cmd = max(js, 0.2 if ep == 0 else 0.0)
            rows.append((ep, i, k, np.arange(1, 4) + js, -(np.arange(1, 4) + cmd),
                         iv and 0.5 - 1e-9 <= t < 1.0 - 1e-9, i == n - 1,
                         success and i == n - 1))
    assert got['episode_index'].tolist() == [r[0] for r in rows]
    assert got['frame_index'].tolist() == [r[1] for r in rows]
    np.testing.assert_allclose(got['timestamp'], [r[1] / FPS for r in rows], atol=1e-6)
    # float32, as LeRobot stores state and action
    assert got['observation.state'].dtype == np.float32 == got['action'].dtype
    np.testing.assert_allclose(got['observation.state'], [r[3] for r in rows], rtol=0,
                               atol=1e-6)
    np.testing.assert_allclose(got['action'], [r[4] for r in rows], rtol=0, atol=1e-6)
    assert got['intervention'].tolist() == [r[5] for r in rows]
    assert got['next.done'].tolist() == [r[6] for r in rows]
    assert got['next.success'].tolist() == [r[7] for r in rows]
    assert set(got['task'].tolist()) == {'reach'}
    for c, cam in enumerate(('front', 'wrist')):
        imgs = got[f'observation.images.{cam}']
        assert imgs.shape == (len(rows), 24, 32, 3)
        assert imgs[..., 0].reshape(len(rows), -1).max(axis=1).tolist() == \
            [r[2] for r in rows]                    # the frame's own index: lossless
        assert np.all(imgs[..., 1] == c * 50)
        assert np.all(imgs[..., 2] == (np.arange(32, dtype=np.uint8) * 5)[None, None, :])
