"""policy.device is honoured by every backend: a device that is not available is refused,
never silently replaced by the CPU (this machine's torch is a CPU build)."""

from __future__ import annotations

import numpy as np
import pytest
from test_policy_backends import _obs, _save_exported, _train  # noqa: I001 - test helpers
import torch

from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.device import check_device_name, require_cpu, torch_device
from egoroll_ros.policies.registry import load_backend


def test_device_names_are_checked():
    for ok in ('cpu', 'cuda', 'cuda:1', 'mps'):
        assert check_device_name(ok) == ok
    for bad in ('gpu', 'cuda:x', 'CPU', 'cuda:0:1'):
        with pytest.raises(CheckpointError, match='not one of cpu, cuda, cuda:N, mps'):
            check_device_name(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason='needs a machine without CUDA')
@pytest.mark.parametrize('spec', ['cuda', 'cuda:0'])
def test_cuda_without_cuda_is_refused(spec):
    with pytest.raises(CheckpointError, match='CUDA is not available'):
        torch_device(spec)


def test_cpu_is_cpu():
    assert torch_device('cpu') == torch.device('cpu')


@pytest.mark.skipif(torch.cuda.is_available(), reason='needs a machine without CUDA')
def test_egoroll_act_honours_device(tmp_path):
    res = _train(tmp_path / 'act')
    with pytest.raises(CheckpointError, match="'cuda' requested but CUDA is not available"):
        load_backend('egoroll_act').load(res.path, device='cuda')
    policy = load_backend('egoroll_act').load(res.path, device='cpu')
    assert next(policy._model.parameters()).device == torch.device('cpu')
    assert np.isfinite(policy.predict_chunk(_obs(policy.metadata))).all()


@pytest.mark.skipif(torch.cuda.is_available(), reason='needs a machine without CUDA')
def test_exported_honours_device(tmp_path):
    _save_exported(tmp_path / 'ex')
    with pytest.raises(CheckpointError, match='CUDA is not available'):
        load_backend('exported').load(tmp_path / 'ex', device='cuda:0')


def test_cpu_only_backends_refuse_other_devices(tmp_path):
    with pytest.raises(CheckpointError, match='scripted_cartesian backend computes on the CPU'):
        load_backend('scripted_cartesian').load(tmp_path, device='cuda')
    with pytest.raises(CheckpointError, match='computes on the CPU only'):
        require_cpu('mps', 'x')
