"""egoroll's real-time chunking passthrough (policy.rtc) against LeRobot's own RTC (0.6.1).

The policy is a real SmolVLA made by LeRobot's own API on a tiny local SmolVLM backbone
(lerobot_tool.tiny_vlm: config, tokenizer and processor written offline, random weights),
saved by save_checkpoint. The reference is LeRobot's RTC engine's inference step
(lerobot_tool rtc: RTC enabled as lerobot-rollout --inference.type=rtc enables it, the
leftover from LeRobot's ActionQueue, predict_action_chunk with inference_delay,
prev_chunk_left_over and execution_horizon). egoroll's chunks, through the isolated worker
with its own RtcRequest per inference, must equal it to 1e-4 in real units (and, without
guidance, LeRobot's record loop: the language task tokenized by the saved pipeline), and RTC must
change the chunks (pinning their first inference_delay rows to the running chunk's), so the
test fails if the passthrough is dropped. Everything runs with the network unreachable
(unshare -n) and empty Hugging Face / torch caches.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lerobot_testlib import SMOLVLA_SPEC, observation_frames, run_tool, save_frames
import numpy as np
import pytest

from egoroll_ros.core.policy import Observation, PolicyError, RtcRequest
from egoroll_ros.policies.isolated import IsolatedPolicy

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TOL = 1e-4
TASK = 'pick up the red cube'
HORIZON = 5
SEED = 11
#: One inference per frame: (inference_delay, actions executed after the chunk lands, pad).
#: The chunk of frame k starts at row delay_{k-1} + consumed_{k-1} of the chunk of frame
#: k - 1 (LeRobot's queue drops the rows due during the inference). Three delays; the last
#: leftover (3 rows) is shorter than the horizon: LeRobot's engine would zero-pad it to the
#: horizon (for torch.compile's fixed shapes) and so steer towards zeros, egoroll passes it
#: as it is, and LeRobot's RTC then caps the horizon at its length ("pad": false).
STEPS = [(0, 2, True), (2, 1, True), (3, 4, True), (1, 0, False)]


def _tree_hashes(*roots: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for root in roots for p in sorted(root.rglob('*')) if p.is_file()}


def _observation(frame: dict[str, np.ndarray], stamp: float,
                 rtc: RtcRequest | None = None) -> Observation:
    return Observation(images={'front': frame['observation.images.front']},
                       state=frame['observation.state'].astype(np.float64), extras={},
                       stamp=stamp, rtc=rtc)


def test_smolvla_rtc_chunks_equal_lerobots_own_rtc_inference(lerobot_python,
                                                             smolvla_checkpoint, tmp_path,
                                                             monkeypatch):
    vlm = smolvla_checkpoint.parents[1] / 'vlm'
    cfg = json.loads((smolvla_checkpoint / 'config.json').read_text())
    assert cfg['type'] == 'smolvla' and cfg['vlm_model_name'] == str(vlm)
    before = _tree_hashes(smolvla_checkpoint, vlm)
    caches = tmp_path / 'caches'
    monkeypatch.setenv('HF_HOME', str(caches / 'hf'))
    monkeypatch.setenv('TORCH_HOME', str(caches / 'torch'))

    frames = observation_frames(SMOLVLA_SPEC, len(STEPS), seed=2)
    plan = {'seed': SEED, 'horizon': HORIZON,
            'steps': [{'delay': d, 'consume': c, 'pad': pad} for d, c, pad in STEPS]}
    obs = save_frames(tmp_path / 'obs.npz', frames, TASK)
    run_tool(lerobot_python, 'rtc', str(smolvla_checkpoint), str(obs),
             str(tmp_path / 'ref.npz'), json.dumps(plan), offline=True)
    ref = np.load(tmp_path / 'ref.npz', allow_pickle=False)
    # want_plain: LeRobot's record loop (select_action, RTC off), same frames and seed
    want, want_plain = ref['chunks'], ref['plain']

    wrapper = tmp_path / 'python-offline'
    wrapper.write_text(f'#!/bin/sh\nexec unshare -n {lerobot_python} "$@"\n')
    wrapper.chmod(0o755)
    policy = IsolatedPolicy.load(
        smolvla_checkpoint, backend='lerobot', python_executable=str(wrapper),
        load_timeout=240.0, request_timeout=60.0,
        backend_options={'num_threads': 1, 'cameras': ['front'], 'task': TASK, 'rtc': True,
                         'rtc_execution_horizon': HORIZON, 'seed': SEED})
    try:
        meta = policy.metadata
        assert meta.rtc and (meta.chunk_length, meta.action_size) == (10, 6)
        # without guidance (no RtcRequest): the same noise draws, nothing inpainted
        policy.reset()
        plain = np.stack([policy.predict_chunk(_observation(f, 1.0 + k))
                          for k, f in enumerate(frames)])
        policy.reset()
        got, executed = [], []
        for k, (frame, (delay, _, _)) in enumerate(zip(frames, STEPS, strict=True)):
            req = None
            if k:
                prev_delay, prev_consumed, _ = STEPS[k - 1]
                executed.append(prev_delay + prev_consumed)
                req = RtcRequest(prefix_stamp=float(k), executed=executed[-1],
                                 inference_delay=delay)
            got.append(policy.predict_chunk(_observation(frame, 1.0 + k, req)))
        got = np.stack(got)
        # a running chunk this policy did not predict (or forgot at a reset): refused, named
        with pytest.raises(PolicyError, match=r'RTC: no prediction .* stamped 7\.0'):
            policy.predict_chunk(_observation(frames[0], 9.0, RtcRequest(7.0, 1, 1)))
    finally:
        policy.close()

    assert got.shape == want.shape == (len(STEPS), 10, 6)
    diff = np.abs(got - want).max()
    print(f'egoroll vs LeRobot RTC: max |diff| {diff:.2e}, without RTC vs its record loop '
          f'{np.abs(plain - want_plain).max():.2e} (actions up to {np.abs(want).max():.2f})')
    assert diff < TOL, f'egoroll vs LeRobot RTC: max |diff| {diff}'
    assert np.abs(plain[0] - got[0]).max() < TOL          # the first has no leftover
    # without guidance: LeRobot's own loop, task tokenized by the saved preprocessor
    assert plain.shape == want_plain.shape
    assert np.abs(plain - want_plain).max() < TOL, np.abs(plain - want_plain).max()
    for k in range(1, len(STEPS)):
        delay, start = STEPS[k][0], executed[k - 1]
        assert np.abs(got[k] - plain[k]).max() > 0.05, f'RTC did not change chunk {k}'
        # RTC pins the rows due during the inference to the running chunk's
        pinned = got[k - 1][start:start + delay]
        err_rtc = np.abs(got[k][:delay] - pinned).max()
        err_plain = np.abs(plain[k][:delay] - pinned).max()
        print(f'chunk {k}: delay {delay}, leftover from row {start}: max |RTC - plain| '
              f'{np.abs(got[k] - plain[k]).max():.3f}; pinned rows off the running chunk by '
              f'{err_rtc:.4f} (plain {err_plain:.4f})')
        assert err_rtc < 0.5 * err_plain, (k, err_rtc, err_plain)
    assert _tree_hashes(smolvla_checkpoint, vlm) == before, 'nothing written next to them'
    assert not caches.exists() or not any(caches.rglob('*')), 'nothing was downloaded'

