"""Policy backends: egoroll_act, exported, lerobot refusal, registry, fingerprint, safety."""

from __future__ import annotations

import json
import os
from pathlib import Path
import pickle
import shutil
import stat

import numpy as np
from policy_fakes import JOINTS, EvilPickle  # noqa: I001 - test helper on sys.path
import pytest
import torch

from egoroll_ros.core.policy import (
    ImageFeature,
    Observation,
    PolicyError,
    check_chunk,
    validate_metadata,
)
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies import act, exported
from egoroll_ros.policies.fingerprint import cache_dir, file_sha256, fingerprint
from egoroll_ros.policies.normalization import Normalization, Stats
from egoroll_ros.policies.registry import available_backends, load_backend

torch.set_num_threads(1)
CAMS = {'scene': (24, 32)}


def _train(path: Path, seed: int = 0, steps: int = 2) -> act.TrainResult:
    rng = np.random.default_rng(0)
    n, h = 6, 4
    images = {'scene': rng.integers(0, 255, (n, 24, 32, 3), dtype=np.uint8)}
    states = rng.normal(size=(n, 8))
    actions = rng.normal(size=(n, h, 8))
    return act.train_act(images, states, actions, path, step_period=0.05, steps=steps,
                         batch_size=4, seed=seed, d_model=16, n_heads=2, n_layers=1,
                         dim_feedforward=32, conv_channels=4)


def _obs(meta, state=None) -> Observation:
    imgs = {f.camera: np.full((f.height, f.width, 3), 100, np.uint8)
            for f in meta.image_features}
    return Observation(images=imgs, state=np.linspace(-1, 1, 8) if state is None else state)


@pytest.fixture(scope='module')
def act_ckpt(tmp_path_factory) -> act.TrainResult:
    return _train(tmp_path_factory.mktemp('act') / 'ckpt')


def _tree(path: Path) -> dict[str, tuple[int, float]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime)
            for p in sorted(path.rglob('*'))}


def test_act_trains_saves_loads_and_predicts_a_finite_chunk(act_ckpt):
    assert sorted(os.listdir(act_ckpt.path)) == ['config.json', 'model.safetensors',
                                                  'normalization.json']
    policy = act.ActPolicy.load(act_ckpt.path)
    meta = policy.metadata
    assert meta.fingerprint == act_ckpt.fingerprint == act.checkpoint_fingerprint(act_ckpt.path)
    assert (meta.chunk_length, meta.action_size, meta.state_size) == (4, 8, 8)
    assert meta.image_features == (ImageFeature('scene', 24, 32),)
    np.testing.assert_allclose(meta.point_times(), [0.05, 0.1, 0.15, 0.2])
    out = policy.predict_chunk(_obs(meta))
    assert out.shape == (4, 8) and np.all(np.isfinite(out))
    validate_metadata(meta, JOINTS, CAMS)


def test_act_training_is_deterministic_given_the_seed(tmp_path, act_ckpt):
    assert _train(tmp_path / 'a', seed=0).fingerprint == act_ckpt.fingerprint
    assert _train(tmp_path / 'b', seed=1).fingerprint != act_ckpt.fingerprint


def test_read_only_checkpoint_loads_and_nothing_is_written_next_to_it(tmp_path, act_ckpt,
                                                                       monkeypatch):
    ro = tmp_path / 'ro'
    _train(ro)
    before = _tree(ro)
    for p in [*ro.iterdir(), ro]:
        p.chmod(stat.S_IRUSR | stat.S_IXUSR if p.is_dir() else stat.S_IRUSR)
    monkeypatch.setenv('EGOROLL_CACHE_DIR', str(tmp_path / 'cache'))
    try:
        policy = act.ActPolicy.load(ro)
        policy.predict_chunk(_obs(policy.metadata))
        assert _tree(ro) == before
    finally:
        ro.chmod(0o755)


def test_act_refuses_missing_normalisation_and_misfit_weights(tmp_path, act_ckpt):
    bad = tmp_path / 'bad'
    _train(bad)
    norm = json.loads((bad / 'normalization.json').read_text())
    del norm['action']
    (bad / 'normalization.json').write_text(json.dumps(norm))
    with pytest.raises(CheckpointError, match="normalisation statistics for 'action'"):
        act.ActPolicy.load(bad)
    (bad / 'normalization.json').unlink()
    with pytest.raises(CheckpointError, match='normalisation statistics missing'):
        act.ActPolicy.load(bad)
    other = tmp_path / 'other'
    _train(other)
    cfg = json.loads((other / 'config.json').read_text())
    cfg['d_model'] = 32
    (other / 'config.json').write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match='do not fit'):
        act.ActPolicy.load(other)


@pytest.mark.parametrize('change', ['missing', 'extra'])
def test_a_weights_file_with_a_missing_or_an_extra_tensor_is_refused(tmp_path, act_ckpt,
                                                                    change):
    """Issue 24.8: weights load strictly: a tensor the model needs that the file lacks (it
    would keep its random initialisation), or one the model does not have (weights of another
    architecture), refuses the checkpoint naming the tensor."""
    from safetensors.torch import load_file, save_file

    bad = tmp_path / 'bad'
    shutil.copytree(act_ckpt.path, bad)
    tensors = load_file(str(bad / 'model.safetensors'))
    name = sorted(tensors)[0]
    if change == 'missing':
        del tensors[name]
    else:
        name = 'head.unexpected_weight'
        tensors[name] = torch.zeros(3)
    save_file(tensors, str(bad / 'model.safetensors'))
    with pytest.raises(CheckpointError, match='do not fit') as err:
        act.ActPolicy.load(bad)
    assert name in str(err.value)


def test_planted_pickle_is_never_unpickled(tmp_path):
    marker = tmp_path / 'UNPICKLED'
    evil = pickle.dumps(EvilPickle(str(marker)))
    # egoroll_act: a pickle named model.safetensors
    ck = tmp_path / 'act'
    _train(ck)
    (ck / 'model.safetensors').write_bytes(evil)
    with pytest.raises(CheckpointError, match='safetensors'):
        act.ActPolicy.load(ck)
    # exported: a raw pickle and a torch.save archive (zip with data.pkl) as model.pt
    ex = tmp_path / 'ex'
    _save_exported(ex)
    for payload in ('raw', 'torch.save'):
        if payload == 'raw':
            (ex / 'model.pt').write_bytes(evil)
        else:
            torch.save(EvilPickle(str(marker)), ex / 'model.pt')
        with pytest.raises(CheckpointError, match='not a TorchScript archive'):
            exported.ExportedPolicy.load(ex)
    assert not marker.exists()
    # sanity: the payload really is live
    pickle.loads(evil)
    assert marker.exists()


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8 * 3)

    def forward(self, state: torch.Tensor, images: list[torch.Tensor]) -> torch.Tensor:
        x = self.lin(state)
        for img in images:
            x = x + img.mean()
        return x.reshape(1, 3, 8)


def _save_exported(path: Path, norm: Normalization | None = None) -> str:
    torch.manual_seed(0)
    norm = norm or Normalization(Stats(np.zeros(8), np.ones(8)),
                                 Stats(np.arange(8.0), np.full(8, 2.0)))
    return exported.save_exported(_Tiny(), path, state_size=8, action_size=8, chunk_length=3,
                                  step_period=0.1, normalization=norm,
                                  image_features=[ImageFeature('scene', 24, 32)])


def test_exported_torchscript_matches_the_module_and_unnormalises(tmp_path):
    fp = _save_exported(tmp_path / 'ex')
    policy = exported.ExportedPolicy.load(tmp_path / 'ex')
    assert policy.metadata.fingerprint == fp
    obs = _obs(policy.metadata)
    module = torch.jit.load(str(tmp_path / 'ex' / 'model.pt'))
    with torch.no_grad():
        ref = module(torch.tensor(obs.state, dtype=torch.float32)[None],
                     [torch.full((1, 3, 24, 32), 100 / 255.0)])[0].double().numpy()
    np.testing.assert_allclose(policy.predict_chunk(obs), ref * 2.0 + np.arange(8.0),
                               rtol=1e-5, atol=1e-5)


def test_fingerprint_covers_weights_config_and_normalisation(tmp_path):
    base = _save_exported(tmp_path / 'a')
    for name, edit in (('normalization.json', lambda d: d['action']['std'].__setitem__(0, 3.0)),
                       ('manifest.json', lambda d: d.__setitem__('step_period', 0.2))):
        d = tmp_path / f'edit_{name}'
        _save_exported(d)
        data = json.loads((d / name).read_text())
        edit(data)
        (d / name).write_text(json.dumps(data))
        assert exported.ExportedPolicy.load(d).metadata.fingerprint != base
    d = tmp_path / 'weights'
    _save_exported(d)
    torch.manual_seed(1)
    torch.jit.save(torch.jit.script(_Tiny()), str(d / 'model.pt'))
    assert exported.ExportedPolicy.load(d).metadata.fingerprint != base
    expected = fingerprint({'weights': tmp_path / 'a' / 'model.pt',
                            'config': tmp_path / 'a' / 'manifest.json',
                            'normalization': tmp_path / 'a' / 'normalization.json'})
    assert base == expected and len(base) == 64
    assert file_sha256(tmp_path / 'a' / 'model.pt') != base


def test_exported_refuses_torch_export_archives(tmp_path):
    _save_exported(tmp_path / 'ex')
    man = json.loads((tmp_path / 'ex' / 'manifest.json').read_text())
    man['model'] = 'model.pt2'
    (tmp_path / 'ex' / 'model.pt2').write_bytes(b'PK')
    (tmp_path / 'ex' / 'manifest.json').write_text(json.dumps(man))
    with pytest.raises(CheckpointError, match='torch.export archives are refused'):
        exported.ExportedPolicy.load(tmp_path / 'ex')


def test_validate_metadata_refuses_with_the_reason(act_ckpt):
    meta = act.ActPolicy.load(act_ckpt.path).metadata
    with pytest.raises(CheckpointError, match='action size 8 differs from the 7'):
        validate_metadata(meta, JOINTS[:7], CAMS)
    with pytest.raises(CheckpointError, match="camera 'scene' cannot be supplied"):
        validate_metadata(meta, JOINTS, {'wrist': (24, 32)})
    no_norm = type(meta)(**{**meta.__dict__, 'normalization': {'state': {}}})
    with pytest.raises(CheckpointError, match="'action' are missing"):
        validate_metadata(no_norm, JOINTS, CAMS)
    quest = type(meta)(**{**meta.__dict__, 'extra_features': ('quest.telepathy',)})
    with pytest.raises(CheckpointError, match="'quest.telepathy' cannot be supplied"):
        validate_metadata(quest, JOINTS, CAMS)


def test_check_chunk_rejects_nan_and_wrong_shape(act_ckpt):
    meta = act.ActPolicy.load(act_ckpt.path).metadata
    good = np.zeros((4, 8))
    assert check_chunk(good, meta).shape == (4, 8)
    bad = good.copy()
    bad[2, 5] = np.inf
    with pytest.raises(PolicyError, match='point 2, column 5'):
        check_chunk(bad, meta)
    with pytest.raises(PolicyError, match='shape'):
        check_chunk(np.zeros((4, 7)), meta)


def test_registry_finds_builtin_backends_by_entry_point_and_module_path():
    assert {'exported', 'egoroll_act', 'isolated', 'lerobot'} <= set(available_backends())
    assert load_backend('egoroll_act') is act.ActPolicy
    assert load_backend('exported') is exported.ExportedPolicy
    assert load_backend('policy_fakes:FakePolicy').__name__ == 'FakePolicy'
    with pytest.raises(CheckpointError, match="unknown policy backend 'nope'"):
        load_backend('nope')
    with pytest.raises(CheckpointError, match='not a Policy subclass'):
        load_backend('os.path:join')


def test_lerobot_backend_refuses_clearly_where_lerobot_is_missing(tmp_path):
    pytest.importorskip('torch')
    try:
        import lerobot  # noqa: F401
        pytest.skip('lerobot is installed here')
    except ImportError:
        pass
    cls = load_backend('lerobot')
    with pytest.raises(CheckpointError, match='config.json'):
        cls.load(tmp_path)
    (tmp_path / 'config.json').write_text(json.dumps({'type': 'act', 'input_features': {
        'observation.state': {'type': 'STATE', 'shape': [8]}}}))
    (tmp_path / 'model.safetensors').write_bytes(b'')
    with pytest.raises(CheckpointError, match='processor pipeline missing: .*policy_preprocessor'):
        cls.load(tmp_path)
    for name in ('policy_preprocessor.json', 'policy_postprocessor.json'):
        (tmp_path / name).write_text('{"steps": []}')
    with pytest.raises(CheckpointError, match='needs the lerobot package'):
        cls.load(tmp_path, step_period=0.05)


def test_cache_dir_follows_env_then_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv('EGOROLL_CACHE_DIR', str(tmp_path / 'c1'))
    assert cache_dir() == tmp_path / 'c1' and (tmp_path / 'c1').is_dir()
    monkeypatch.delenv('EGOROLL_CACHE_DIR')
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
    assert cache_dir(create=False) == tmp_path / 'xdg' / 'egoroll'


def test_act_relative_actions_predict_absolute_targets_around_the_state(tmp_path):
    """With relative_actions the network learns offsets; the output is still absolute."""
    rng = np.random.default_rng(3)
    n, h = 8, 3
    states = rng.normal(size=(n, 8)) * 2.0
    offsets = np.full((h, 8), 0.05) * np.arange(1, h + 1)[:, None]
    actions = states[:, None, :] + offsets[None]            # absolute: state + fixed offsets
    images = {'scene': np.full((n, 24, 32, 3), 100, np.uint8)}
    res = act.train_act(images, states, actions, tmp_path / 'rel', step_period=0.05,
                        steps=300, batch_size=8, d_model=16, n_heads=2, n_layers=1,
                        dim_feedforward=32, conv_channels=4, relative_actions=True, lr=3e-3)
    policy = act.ActPolicy.load(res.path)
    state = np.linspace(-3.0, 3.0, 8)                        # far from every training state
    out = policy.predict_chunk(_obs(policy.metadata, state))
    np.testing.assert_allclose(out - state[None, :], offsets, atol=0.02)
    cfg = json.loads((res.path / 'config.json').read_text())
    assert cfg['relative_actions'] is True


def test_act_relative_actions_need_actions_as_wide_as_the_state(tmp_path):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match='same width'):
        act.train_act({}, rng.normal(size=(4, 8)), rng.normal(size=(4, 2, 7)),
                      tmp_path / 'x', step_period=0.05, steps=1, relative_actions=True)
