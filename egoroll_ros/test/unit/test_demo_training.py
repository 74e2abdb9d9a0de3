"""Demo policy training: deterministic demonstrations; the shipped policy matches its manifest."""

import json
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
import numpy as np
import pytest

from egoroll_ros.demo.train import (
    MANIFEST,
    DemoTrainingConfig,
    collect,
    sha256_file,
    train_demo_policy,
)
from egoroll_ros.policies.act import ActPolicy, checkpoint_fingerprint
from egoroll_ros.sim.demo_task import DEMO_JOINTS, demo_urdf_path

SHIPPED = Path(get_package_share_directory('egoroll_ros')) / 'policies' / 'demo'


def test_demonstrations_are_deterministic_and_reach_their_targets():
    cfg = DemoTrainingConfig(episodes=3, seed=5)
    a = collect(demo_urdf_path(), cfg, log=None)
    b = collect(demo_urdf_path(), cfg, log=None)
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.actions, b.actions)
    assert a.episodes_reached == 3
    assert a.images.shape[1:] == (96, 96, 3) and a.images.dtype == np.uint8
    assert a.actions.shape[1:] == (20, len(DEMO_JOINTS))
    # The targets differ between episodes, so the images carry the task.
    assert not np.array_equal(a.images[0], a.images[-1])


def test_training_writes_a_checkpoint_whose_manifest_vouches_for_every_file(tmp_path):
    cfg = DemoTrainingConfig(episodes=2, steps=3, batch_size=8, dagger_rounds=1,
                             dagger_episodes=1, dagger_steps=2)
    manifest = train_demo_policy(tmp_path / 'ckpt', demo_urdf_path(), cfg, eval_episodes=0,
                                 log=None)
    ckpt = tmp_path / 'ckpt'
    assert manifest == json.loads((ckpt / MANIFEST).read_text())
    assert manifest['fingerprint'] == checkpoint_fingerprint(ckpt)
    for name, digest in manifest['files'].items():
        assert sha256_file(ckpt / name) == digest
    assert ActPolicy.load(ckpt).metadata.action_size == len(DEMO_JOINTS)
    assert manifest['training']['dagger'][0]['episodes'] == 1, 'the DAgger round ran'


def test_shipped_demo_policy_matches_its_manifest():
    if not (SHIPPED / MANIFEST).exists():
        pytest.fail(f'the demo policy is not installed at {SHIPPED}')
    manifest = json.loads((SHIPPED / MANIFEST).read_text())
    files = {p.name for p in SHIPPED.iterdir() if p.is_file() and p.name != MANIFEST}
    assert files == set(manifest['files']), 'every shipped file is in the manifest'
    for name, digest in manifest['files'].items():
        assert sha256_file(SHIPPED / name) == digest, f'{name} differs from the manifest'
    assert checkpoint_fingerprint(SHIPPED) == manifest['fingerprint']
    policy = ActPolicy.load(SHIPPED)
    assert policy.metadata.action_size == len(DEMO_JOINTS)
    assert manifest['joints'] == list(DEMO_JOINTS)


def test_training_renders_exactly_what_the_live_sim_camera_publishes():
    import yaml

    cam = yaml.safe_load((Path(get_package_share_directory('egoroll_ros')) / 'config' /
                          'sim_camera.yaml').read_text())['/**/sim_camera']['ros__parameters']
    cfg = DemoTrainingConfig()
    assert cfg.camera_size == (cam['height'], cam['width'])
    assert cfg.fov_deg == cam['fov_deg'] and cfg.target_radius == cam['target_radius']
    assert cfg.camera_frame == cam['camera_frame']
    policy_cfg = yaml.safe_load(
        (Path(get_package_share_directory('egoroll_ros')) / 'config' /
         'policy_node.yaml').read_text())['/**/policy_node']['ros__parameters']
    assert [policy_cfg['cameras.heights'][0], policy_cfg['cameras.widths'][0]] == \
        [cam['height'], cam['width']], 'the policy node expects the frames sim_camera sends'
