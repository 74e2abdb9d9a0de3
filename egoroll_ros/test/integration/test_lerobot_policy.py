"""The lerobot backend against LeRobot itself (lerobot 0.6.1 in the managed runtime).

Checkpoints are made by LeRobot's own API and saved by its training script's save_checkpoint
(random weights, statistics far from 0/1). egoroll's chunk, through the isolated worker, must
equal LeRobot's own record-loop inference (preprocessor -> select_action -> postprocessor) on
the same observation to 1e-4 in real units; every refusal of the issue has a test here.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
import stat

from lerobot_testlib import (
    ACT_SPEC,
    DIFFUSION_SPEC,
    linked_copy,
    observation_frames,
    rewrite,
    run_tool,
    save_frames,
)
import numpy as np
import pytest

from egoroll_ros.core.policy import Observation
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.fingerprint import fingerprint
from egoroll_ros.policies.isolated import IsolatedPolicy
from egoroll_ros.policies.lerobot import checkpoint_parts

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TOL = 1e-4


def load(path: Path, python: str, **options) -> IsolatedPolicy:
    return IsolatedPolicy.load(path, backend='lerobot', python_executable=python,
                               load_timeout=240.0, request_timeout=60.0,
                               backend_options={'num_threads': 1, **options})


def to_observation(frame: dict[str, np.ndarray], env_extras: tuple[str, ...] = ()
                   ) -> Observation:
    images = {k.rsplit('.', 1)[1]: v for k, v in frame.items()
              if k.startswith('observation.images.')}
    extras = {}
    if env_extras:
        extras = {env_extras[0]: frame['observation.environment_state'].astype(np.float64)}
    return Observation(images=images, state=frame['observation.state'].astype(np.float64),
                       extras=extras, stamp=1.0)


def lerobot_chunks(python: str, ckpt: Path, frames, tmp: Path, seed: int | None = None,
                   task: str | None = None) -> np.ndarray:
    obs = save_frames(tmp / 'obs.npz', frames, task)
    out = tmp / 'ref.npz'
    run_tool(python, 'infer', str(ckpt), str(obs), str(out),
             *([] if seed is None else [str(seed)]))
    return np.load(out, allow_pickle=False)['chunks']


def test_act_chunk_equals_lerobots_own_inference_in_real_units(lerobot_python, act_checkpoint,
                                                                tmp_path):
    frames = observation_frames(ACT_SPEC, 3)
    want = lerobot_chunks(lerobot_python, act_checkpoint, frames, tmp_path)
    policy = load(act_checkpoint, lerobot_python, cameras=['front', 'wrist'])
    try:
        meta = policy.metadata
        assert (meta.chunk_length, meta.action_size, meta.state_size) == (8, 6, 6)
        assert not meta.rtc                       # ACT: no real-time chunking
        assert meta.step_period == pytest.approx(1 / 50)        # train_config.json env.fps
        assert {(f.camera, f.height, f.width) for f in meta.image_features} == \
            {('front', 64, 80), ('wrist', 48, 48)}
        policy.reset()
        got = np.stack([policy.predict_chunk(to_observation(f)) for f in frames])
    finally:
        policy.close()
    assert got.shape == want.shape == (3, 8, 6)
    assert np.abs(got - want).max() < TOL, np.abs(got - want).max()
    # Real units: the made-up action statistics are far from 0/1, so a normalised chunk
    # (the old defect) would be off by whole units.
    stats = _stats(act_checkpoint / 'policy_postprocessor_step_0_unnormalizer_processor'
                   '.safetensors', 'action')
    z = (got - stats['mean']) / stats['std']
    assert np.abs(got).max() > 2.0 and np.abs(z).max() < 20.0


def _stats(path: Path, feature: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file
    return {k.rsplit('.', 1)[1]: v for k, v in load_file(str(path)).items()
            if k.startswith(feature + '.')}


def test_diffusion_with_observation_history_equals_lerobots_loop(lerobot_python,
                                                                 diffusion_checkpoint,
                                                                 tmp_path):
    """n_obs_steps 2: egoroll feeds LeRobot's own observation queues one frame per inference,
    as LeRobot's control loop does; the sampler's noise is seeded on both sides."""
    frames = observation_frames(DIFFUSION_SPEC, 3, seed=1)
    want = lerobot_chunks(lerobot_python, diffusion_checkpoint, frames, tmp_path, seed=7)
    env = ('quest.left_pose',)
    policy = load(diffusion_checkpoint, lerobot_python, cameras=['top'], seed=7,
                  environment_state=list(env), query_period=0.1)
    try:
        assert policy.metadata.extra_features == env
        assert policy.metadata.step_period == pytest.approx(0.1)
        policy.reset()
        got = np.stack([policy.predict_chunk(to_observation(f, env)) for f in frames])
    finally:
        policy.close()
    assert got.shape == want.shape == (3, 8, 4)
    assert np.abs(got - want).max() < TOL, np.abs(got - want).max()
    # the history matters: the second chunk is not the chunk of its frame alone
    assert np.abs(got[1] - got[0]).max() > 1e-3


def test_torch_threads_are_set_in_the_worker(lerobot_python, act_checkpoint):
    policy = load(act_checkpoint, lerobot_python, cameras=['front', 'wrist'], num_threads=2)
    try:
        assert policy.worker_info['torch_threads'] == 2
        assert policy.worker_info['version'].startswith('3.12')
    finally:
        policy.close()


def _tree_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob('*')) if p.is_file()}


def test_the_checkpoint_directory_is_never_written(lerobot_python, act_checkpoint, tmp_path):
    ck = linked_copy(act_checkpoint, tmp_path / 'ro')
    for p in ck.iterdir():
        p.chmod(stat.S_IRUSR | stat.S_IRGRP)
    ck.chmod(stat.S_IRUSR | stat.S_IXUSR)
    before = _tree_hashes(ck)
    try:
        policy = load(ck, lerobot_python, cameras=['front', 'wrist'])
        try:
            policy.reset()
            policy.predict_chunk(to_observation(observation_frames(ACT_SPEC, 1)[0]))
        finally:
            policy.close()
        after = _tree_hashes(ck)
    finally:
        ck.chmod(0o755)
    assert after == before       # root may write despite the mode bits: the hashes prove it


def test_no_network_act_with_the_imagenet_backbone_config_loads_offline(
        lerobot_python, act_checkpoint, tmp_path):
    """The checkpoint's config names torchvision's ImageNet weights (LeRobot's default); the
    worker runs in a network namespace of its own, so any download attempt would fail."""
    cfg = json.loads((act_checkpoint / 'config.json').read_text())
    assert cfg['pretrained_backbone_weights'] == 'ResNet18_Weights.IMAGENET1K_V1'
    wrapper = tmp_path / 'python-offline'
    wrapper.write_text(f'#!/bin/sh\nexec unshare -n {lerobot_python} "$@"\n')
    wrapper.chmod(0o755)
    empty = tmp_path / 'caches'
    os.environ['TORCH_HOME'] = str(empty / 'torch')
    os.environ['HF_HOME'] = str(empty / 'hf')
    try:
        policy = load(act_checkpoint, str(wrapper), cameras=['front', 'wrist'])
        try:
            policy.reset()
            chunk = policy.predict_chunk(to_observation(observation_frames(ACT_SPEC, 1)[0]))
        finally:
            policy.close()
    finally:
        del os.environ['TORCH_HOME'], os.environ['HF_HOME']
    assert chunk.shape == (8, 6)
    assert not empty.exists() or not any(empty.rglob('*')), 'nothing was downloaded'


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize('name', ['policy_preprocessor.json', 'policy_postprocessor.json',
                                  'policy_preprocessor_step_3_normalizer_processor.safetensors',
                                  'policy_postprocessor_step_0_unnormalizer_processor'
                                  '.safetensors', 'model.safetensors', 'config.json'])
def test_a_missing_checkpoint_file_is_refused_naming_it(lerobot_python, act_checkpoint,
                                                        tmp_path, name):
    ck = linked_copy(act_checkpoint, tmp_path / 'ck')
    (ck / name).unlink()
    with pytest.raises(CheckpointError, match=str(ck / name).replace('.', r'\.')):
        load(ck, lerobot_python, cameras=['front', 'wrist'])


def test_a_processor_file_that_fails_to_load_is_refused_naming_it(lerobot_python,
                                                                  act_checkpoint, tmp_path):
    ck = linked_copy(act_checkpoint, tmp_path / 'ck')
    pre = json.loads((ck / 'policy_preprocessor.json').read_text())
    pre['steps'][1]['registry_name'] = 'no_such_processor_step'
    rewrite(ck / 'policy_preprocessor.json', json.dumps(pre))
    with pytest.raises(CheckpointError, match='processor pipeline .*policy_preprocessor.json'):
        load(ck, lerobot_python, cameras=['front', 'wrist'])


def test_statistics_missing_from_a_state_file_are_refused(lerobot_python, act_checkpoint,
                                                          tmp_path):
    from safetensors.numpy import load_file, save_file

    ck = linked_copy(act_checkpoint, tmp_path / 'ck')
    path = ck / 'policy_postprocessor_step_0_unnormalizer_processor.safetensors'
    stats = {k: v for k, v in load_file(str(path)).items() if not k.startswith('action.')}
    stats['unused.mean'] = np.zeros(1, dtype=np.float32)
    path.unlink()
    save_file(stats, str(path))
    with pytest.raises(CheckpointError, match=r"statistics for \['action'\]"):
        load(ck, lerobot_python, cameras=['front', 'wrist'])


def test_editing_any_numerics_file_changes_the_fingerprint(act_checkpoint, tmp_path):
    ck = linked_copy(act_checkpoint, tmp_path / 'ck')
    parts = checkpoint_parts(ck)
    assert set(parts) == {
        'config', 'weights', 'train_config', 'processor:policy_preprocessor.json',
        'processor:policy_postprocessor.json',
        'processor_state:policy_preprocessor_step_3_normalizer_processor.safetensors',
        'processor_state:policy_postprocessor_step_0_unnormalizer_processor.safetensors'}
    base = fingerprint(parts)
    (ck / 'README.md').write_text('not numerics')
    assert fingerprint(checkpoint_parts(ck)) == base
    post = (ck / 'policy_postprocessor.json').read_text()
    assert '"ACTION": "MEAN_STD"' in post
    rewrite(ck / 'policy_postprocessor.json', post.replace('"ACTION": "MEAN_STD"',
                                                           '"ACTION": "MIN_MAX"'))
    seen = {base, fingerprint(checkpoint_parts(ck))}
    assert len(seen) == 2, 'MEAN_STD -> MIN_MAX changes the fingerprint'
    for role, path in checkpoint_parts(ck).items():
        data = path.read_bytes()
        path.unlink()
        path.write_bytes(data + b' ')
        fp = fingerprint(checkpoint_parts(ck))
        assert fp not in seen, f'{role} is not fingerprinted'
        seen.add(fp)


def test_the_worker_reports_the_same_fingerprint(lerobot_python, act_checkpoint):
    policy = load(act_checkpoint, lerobot_python, cameras=['front', 'wrist'])
    try:
        assert policy.metadata.fingerprint == fingerprint(checkpoint_parts(act_checkpoint))
    finally:
        policy.close()


def test_an_unmapped_camera_is_refused_naming_the_feature(lerobot_python, act_checkpoint):
    with pytest.raises(CheckpointError, match=r"'observation\.images\.front' is not mapped"):
        load(act_checkpoint, lerobot_python, cameras=['scene', 'wrist'])
    policy = load(act_checkpoint, lerobot_python, cameras=['scene', 'hand'],
                  camera_map={'front': 'scene', 'wrist': 'hand'})
    try:
        assert {f.camera for f in policy.metadata.image_features} == {'scene', 'hand'}
    finally:
        policy.close()
    with pytest.raises(CheckpointError, match='camera_map names checkpoint cameras .*side'):
        load(act_checkpoint, lerobot_python, cameras=['front', 'wrist'],
             camera_map={'side': 'front'})


def test_unmapped_environment_state_is_refused_naming_it(lerobot_python,
                                                         diffusion_checkpoint):
    with pytest.raises(CheckpointError,
                       match=r"'observation\.environment_state' \(7 values\) is not mapped"):
        load(diffusion_checkpoint, lerobot_python, cameras=['top'], query_period=0.1)
    with pytest.raises(CheckpointError, match='gives 2 values'):
        load(diffusion_checkpoint, lerobot_python, cameras=['top'], query_period=0.1,
             environment_state=['quest.grip'])


def test_an_input_feature_without_a_source_is_refused(lerobot_python, act_checkpoint,
                                                      tmp_path):
    ck = linked_copy(act_checkpoint, tmp_path / 'ck')
    cfg = json.loads((ck / 'config.json').read_text())
    cfg['input_features']['observation.tactile'] = {'type': 'STATE', 'shape': [12]}
    rewrite(ck / 'config.json', json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"'observation\.tactile' has no source"):
        load(ck, lerobot_python, cameras=['front', 'wrist'])


def test_a_language_policy_without_a_task_is_refused(lerobot_python, act_checkpoint,
                                                     tmp_path):
    """A preprocessor that tokenizes the task (as SmolVLA's and pi0's do) needs policy.task."""
    ck = linked_copy(act_checkpoint, tmp_path / 'ck')
    pre = json.loads((ck / 'policy_preprocessor.json').read_text())
    pre['steps'].insert(2, {'registry_name': 'tokenizer_processor', 'config': {
        'tokenizer_name': 'HuggingFaceTB/SmolVLM2-500M-Video-Instruct', 'max_length': 48,
        'task_key': 'task', 'padding_side': 'right', 'padding': 'max_length',
        'truncation': True}})
    rewrite(ck / 'policy_preprocessor.json', json.dumps(pre))
    with pytest.raises(CheckpointError, match='language-conditioned .* policy.task is empty'):
        load(ck, lerobot_python, cameras=['front', 'wrist'])


def test_no_step_period_is_refused(lerobot_python, act_checkpoint, tmp_path):
    ck = linked_copy(act_checkpoint, tmp_path / 'ck')
    train = json.loads((ck / 'train_config.json').read_text())
    train['env'] = None
    rewrite(ck / 'train_config.json', json.dumps(train))
    with pytest.raises(CheckpointError, match='no step period .* set policy.step_period'):
        load(ck, lerobot_python, cameras=['front', 'wrist'])
    policy = load(ck, lerobot_python, cameras=['front', 'wrist'], step_period=0.02)
    try:
        assert policy.metadata.step_period == 0.02
    finally:
        policy.close()


def test_a_step_period_contradicting_the_training_fps_is_refused(lerobot_python,
                                                                 act_checkpoint):
    with pytest.raises(CheckpointError, match='differs from the checkpoint.s training fps'):
        load(act_checkpoint, lerobot_python, cameras=['front', 'wrist'], step_period=0.033)


def test_cuda_requested_without_cuda_is_refused(lerobot_python, act_checkpoint, monkeypatch):
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '')        # no GPU visible to the worker
    with pytest.raises(CheckpointError, match="'cuda' requested but CUDA is not available"):
        load(act_checkpoint, lerobot_python, cameras=['front', 'wrist'], device='cuda')
    with pytest.raises(CheckpointError, match='not one of cpu, cuda, cuda:N, mps'):
        load(act_checkpoint, lerobot_python, cameras=['front', 'wrist'], device='gpu')


def test_history_at_another_rate_than_the_policy_step_is_refused(lerobot_python,
                                                                 diffusion_checkpoint):
    with pytest.raises(CheckpointError, match='n_obs_steps = 2: .* Set query_frequency to 10'):
        load(diffusion_checkpoint, lerobot_python, cameras=['top'], query_period=0.2,
             environment_state=['quest.left_pose'])


def test_temporal_ensembling_is_refused_with_the_reason(lerobot_python, act_checkpoint,
                                                        tmp_path):
    ck = linked_copy(act_checkpoint, tmp_path / 'ck')
    cfg = json.loads((ck / 'config.json').read_text())
    cfg.update(temporal_ensemble_coeff=0.01, n_action_steps=1)
    rewrite(ck / 'config.json', json.dumps(cfg))
    with pytest.raises(CheckpointError, match='temporal_ensemble_coeff is set'):
        load(ck, lerobot_python, cameras=['front', 'wrist'])



@pytest.mark.parametrize('kind', ['act', 'diffusion'])
def test_rtc_asked_of_a_policy_lerobot_runs_without_it_is_refused(lerobot_python, kind,
                                                                  act_checkpoint,
                                                                  diffusion_checkpoint):
    # ACT and diffusion do not do real-time chunking in LeRobot 0.6.1 (supports_rtc() is
    # false): policy.rtc with them is refused at load, naming the policy type.
    if kind == 'act':
        args, kw = act_checkpoint, dict(cameras=['front', 'wrist'])
    else:
        args, kw = diffusion_checkpoint, dict(cameras=['top'], query_period=0.1,
                                              environment_state=['quest.left_pose'])
    with pytest.raises(CheckpointError, match=f"the '{kind}' policy .* does not do real-time "
                                              'chunking'):
        load(args, lerobot_python, rtc=True, **kw)
