"""The isolated backend: protocol, a real child process, crash, timeout, restart."""

from __future__ import annotations

import io
import os
from pathlib import Path
import time

import numpy as np
from policy_fakes import BACKEND, make_fake_checkpoint  # noqa: I001 - test helper on sys.path
import pytest

from egoroll_ros.core.policy import (
    Observation,
    PolicyCrashError,
    PolicyError,
    PolicyTimeoutError,
)
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.protocol import encode_frame, read_frame_blocking
from egoroll_ros.policies.registry import load_backend

HERE = str(Path(__file__).parent)


@pytest.fixture
def child_env(monkeypatch):
    monkeypatch.setenv('PYTHONPATH', os.pathsep.join(
        [HERE] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]))


def _obs() -> Observation:
    return Observation(images={'scene': np.arange(24 * 32 * 3, dtype=np.uint8).reshape(24, 32, 3)
                               % 251}, state=np.linspace(-1, 1, 8), stamp=5.0)


def _load(path: Path, **kw):
    return load_backend('isolated').load(path, backend=BACKEND, **kw)


def test_protocol_round_trips_json_and_arrays_without_pickle():
    arrays = {'state': np.linspace(0, 1, 8), 'image:scene': np.ones((4, 5, 3), np.uint8)}
    frame = encode_frame({'op': 'predict', 'stamp': 1.5}, arrays)
    assert b'pickle' not in frame and frame[4:5] == b'{'
    header, out = read_frame_blocking(io.BytesIO(frame))
    assert header['op'] == 'predict' and header['stamp'] == 1.5
    for k, v in arrays.items():
        np.testing.assert_array_equal(out[k], v)
        assert out[k].dtype == v.dtype


def test_isolated_policy_runs_in_a_child_and_matches_in_process(tmp_path, child_env):
    ck = make_fake_checkpoint(tmp_path / 'ck', cameras=(('scene', 24, 32),), offset=0.5)
    local = load_backend(BACKEND).load(ck)
    policy = _load(ck)
    try:
        assert policy.child_pid not in (None, os.getpid())
        assert policy.metadata.fingerprint == local.metadata.fingerprint
        assert policy.metadata.backend == 'isolated:fake'
        policy.reset()
        np.testing.assert_array_equal(policy.predict_chunk(_obs()), local.predict_chunk(_obs()))
    finally:
        policy.close()


def test_inner_error_is_a_policy_error_and_the_child_survives(tmp_path, child_env):
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='raise')
    policy = _load(ck)
    try:
        pid = policy.child_pid
        with pytest.raises(PolicyError, match='fake policy failure'):
            policy.predict_chunk(_obs())
        assert policy.child_pid == pid
    finally:
        policy.close()


def test_child_crash_is_a_typed_error_and_the_next_request_restarts_it(tmp_path, child_env):
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='crash')
    policy = _load(ck)
    try:
        pid = policy.child_pid
        with pytest.raises(PolicyCrashError, match='exit status 3'):
            policy.predict_chunk(_obs())
        (ck / 'mode').write_text('zeros')
        assert policy.predict_chunk(_obs()).shape == (5, 8)
        assert policy.child_pid not in (None, pid)
    finally:
        policy.close()


def test_hanging_child_times_out_and_is_killed(tmp_path, child_env):
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='hang')
    policy = _load(ck, request_timeout=0.3)
    try:
        pid = policy.child_pid
        t0 = time.monotonic()
        with pytest.raises(PolicyTimeoutError, match='within 0.3 s'):
            policy.predict_chunk(_obs())
        assert time.monotonic() - t0 < 5.0
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        policy.close()


def test_load_failures_in_the_child_are_checkpoint_errors(tmp_path, child_env):
    with pytest.raises(CheckpointError, match='fake checkpoint missing'):
        _load(tmp_path / 'nothing')
    with pytest.raises(CheckpointError, match='cannot start the policy worker'):
        _load(tmp_path, python_executable=str(tmp_path / 'no-python'))


def test_isolated_egoroll_act_in_another_interpreter_path(tmp_path):
    """The real egoroll_act backend behind the protocol, with an explicit interpreter."""
    import sys

    from test_policy_backends import _obs as act_obs
    from test_policy_backends import _train

    res = _train(tmp_path / 'act')
    local = load_backend('egoroll_act').load(res.path)
    policy = load_backend('isolated').load(res.path, backend='egoroll_act',
                                           python_executable=sys.executable,
                                           request_timeout=30.0)
    try:
        assert policy.metadata.fingerprint == res.fingerprint
        obs = act_obs(local.metadata)
        np.testing.assert_allclose(policy.predict_chunk(obs), local.predict_chunk(obs),
                                   rtol=1e-6, atol=1e-6)
    finally:
        policy.close()


def test_a_dying_worker_faults_with_its_own_last_words(tmp_path, child_env):
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='die')
    policy = _load(ck)
    try:
        with pytest.raises(PolicyCrashError) as err:
            policy.predict_chunk(_obs())
        assert 'exit status 4' in str(err.value)
        assert 'CUDA error: an illegal memory access' in str(err.value)
    finally:
        policy.close()


def test_a_runtime_error_while_importing_the_backend_is_a_checkpoint_error(tmp_path,
                                                                          child_env):
    ck = make_fake_checkpoint(tmp_path / 'ck')
    with pytest.raises(CheckpointError, match='CUDA driver initialization failed'):
        load_backend('isolated').load(ck, backend='broken_backend:Policy')
    with pytest.raises(CheckpointError, match='RuntimeError: CUDA driver initialization'):
        load_backend('broken_backend:Policy')


def test_the_worker_refuses_any_download_attempt(tmp_path, child_env):
    import json

    ck = make_fake_checkpoint(tmp_path / 'ck')
    cfg = json.loads((ck / 'fake.json').read_text())
    cfg['download'] = 'https://download.pytorch.org/models/resnet18-f37072fd.pth'
    (ck / 'fake.json').write_text(json.dumps(cfg))
    t0 = time.monotonic()
    with pytest.raises(CheckpointError, match='network access refused'):
        _load(ck)
    assert time.monotonic() - t0 < 30.0, 'refused at once, not after a network timeout'


def test_worker_reports_its_interpreter_and_torch_threads(tmp_path, child_env):
    ck = make_fake_checkpoint(tmp_path / 'ck')
    policy = _load(ck)
    try:
        info = policy.worker_info
        assert info['pid'] == policy.child_pid and info['python']
    finally:
        policy.close()


def test_rtc_guidance_crosses_the_isolated_protocol_and_metadata_says_rtc(tmp_path, child_env):
    from egoroll_ros.core.policy import RtcRequest
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='rtc_echo', rtc=True)
    policy = _load(ck)
    try:
        assert policy.metadata.rtc
        plain = policy.predict_chunk(_obs())
        np.testing.assert_array_equal(plain[0, :3], [-1, -1, -1])
        stamp = 1764590000.123456789   # a ROS-clock stamp: must arrive exactly
        obs = Observation(images=_obs().images, state=_obs().state, stamp=stamp + 0.1,
                          rtc=RtcRequest(stamp, 2, 3))
        row = policy.predict_chunk(obs)[0, :3]
        assert row[0] == stamp and row[1] == 2 and row[2] == 3
    finally:
        policy.close()
    plain_ck = make_fake_checkpoint(tmp_path / 'plain')
    other = _load(plain_ck)
    try:
        assert not other.metadata.rtc
    finally:
        other.close()


def test_rtc_request_is_checked_and_round_trips():
    from egoroll_ros.core.policy import PolicyMetadata, RtcRequest
    r = RtcRequest(12.5, 3, 1)
    assert RtcRequest.from_json(r.to_json()) == r
    for bad in ((float('nan'), 0, 0), (1.0, -1, 0), (1.0, 0, -2), (1.0, 1.5, 0)):
        with pytest.raises(ValueError):
            RtcRequest(*bad)
    with pytest.raises(PolicyError, match='malformed RTC request'):
        RtcRequest.from_json({'prefix_stamp': 1.0})
    meta = PolicyMetadata('b', 'f' * 64, (), 8, 8, 5, 0.05, rtc=True)
    assert PolicyMetadata.from_json(meta.to_json()) == meta
    legacy = meta.to_json()
    del legacy['rtc']
    assert not PolicyMetadata.from_json(legacy).rtc
