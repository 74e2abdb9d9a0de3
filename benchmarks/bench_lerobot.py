"""Cost of isolation for a LeRobot policy: the isolated backend next to LeRobot in-process.

An ACT made by LeRobot's own API (LeRobot's default architecture: ResNet-18 backbone,
dim_model 512, chunk 100; random weights), two 224x224 cameras and 14-dim state, in the
managed LeRobot runtime. Per inference, in one run and interleaved in blocks so load hits
both alike:
  - isolated: wall time of ``IsolatedPolicy.predict_chunk`` in this (the node's) process:
    the observation framed over the pipe, LeRobot's prepare -> preprocessor ->
    predict_action_chunk -> postprocessor in the worker, the chunk back;
  - in-process: the same LeRobot calls timed inside the runtime's own process (a second
    process of the same runtime, same thread count), no egoroll in between.
Prints p50/p99 of each, the overhead (isolated - in-process) and the ratios.

Run: tools/in_env.sh python benchmarks/bench_lerobot.py [--iterations 200] [--threads 1]
(the runtime is built first when missing: egoroll runtime lerobot).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = Path(__file__).resolve().parent
TOOL = HERE.parent / 'egoroll_ros' / 'test' / 'integration' / 'helpers' / 'lerobot_tool.py'
SPEC = {'policy': 'act', 'state': 14, 'action': 14,
        'cameras': {'top': [224, 224], 'wrist': [224, 224]}, 'env_fps': 50, 'scale': 1.0,
        'config': {'chunk_size': 100, 'n_action_steps': 100}}
BLOCK = 10


def serve(ckpt: str, obs_npz: str, threads: int) -> int:
    """Runtime side: time LeRobot's own chunk inference, BLOCK calls per request line."""
    os.environ['HF_HUB_OFFLINE'] = '1'
    import torch

    sys.path.insert(0, str(TOOL.parent))
    from lerobot.policies.utils import prepare_observation_for_inference
    from lerobot_tool import _frames, _load

    torch.set_num_threads(threads)
    answer, sys.stdout = sys.stdout, sys.stderr     # LeRobot prints while loading
    cfg, policy, pre, post = _load(ckpt)
    frames, task = _frames(obs_npz)
    policy.reset()
    i = 0
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            frame = frames[i % len(frames)]
            i += 1
            t0 = time.perf_counter()
            with torch.inference_mode():
                obs = prepare_observation_for_inference(dict(frame), torch.device('cpu'),
                                                        task, None)
                out = post(policy.predict_action_chunk(pre(obs))[:, :cfg.n_action_steps])
                out[0].double().cpu().numpy()
            times.append(time.perf_counter() - t0)
        print(json.dumps(times), file=answer, flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--iterations', type=int, default=200)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--serve', nargs=2, metavar=('CKPT', 'OBS'), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve[0], args.serve[1], args.threads)

    from egoroll_ros.core.policy import Observation
    from egoroll_ros.policies.isolated import IsolatedPolicy
    from egoroll_ros.runtimes import clean_env, ensure_runtime

    python = str(ensure_runtime('lerobot', log=print))
    tmp = Path(tempfile.mkdtemp(prefix='bench-lerobot-'))
    out = subprocess.run([python, str(TOOL), 'make', str(tmp), json.dumps(SPEC)],
                         capture_output=True, text=True, env=clean_env(), check=True)
    ckpt = out.stdout.strip().splitlines()[-1]
    rng = np.random.default_rng(0)
    frames = [{'observation.state': rng.uniform(-1, 1, 14).astype(np.float32),
               **{f'observation.images.{c}': rng.integers(0, 256, (224, 224, 3), np.uint8)
                  for c in SPEC['cameras']}} for _ in range(8)]
    obs_npz = tmp / 'obs.npz'
    np.savez(obs_npz, frames=np.array(len(frames)),
             **{f'{k}/{n}': v for k, f in enumerate(frames) for n, v in f.items()})
    observations = [Observation(
        images={c: f[f'observation.images.{c}'] for c in SPEC['cameras']},
        state=f['observation.state'].astype(np.float64)) for f in frames]

    policy = IsolatedPolicy.load(ckpt, backend='lerobot', python_executable=python,
                                 load_timeout=600.0, request_timeout=60.0,
                                 backend_options={'num_threads': args.threads,
                                                  'cameras': list(SPEC['cameras'])})
    server = subprocess.Popen([python, __file__, '--threads', str(args.threads), '--serve',
                               ckpt, str(obs_npz)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=clean_env())
    iso, inproc = [], []
    try:
        policy.reset()
        warm = 2
        for k in range(warm * BLOCK + args.iterations):
            t0 = time.perf_counter()
            policy.predict_chunk(observations[k % len(observations)])
            dt = time.perf_counter() - t0
            if k >= warm * BLOCK:
                iso.append(dt)
            if (k + 1) % BLOCK == 0:
                server.stdin.write(f'{BLOCK}\n')
                server.stdin.flush()
                times = json.loads(server.stdout.readline())
                if k >= warm * BLOCK:
                    inproc += times
    finally:
        policy.close()
        server.stdin.close()
        server.wait(30)
    a, b = np.array(iso) * 1e3, np.array(inproc) * 1e3
    p = {name: (np.percentile(x, 50), np.percentile(x, 99)) for name, x in
         (('isolated', a), ('in-process', b))}
    print(f'LeRobot ACT (ResNet-18, dim 512, chunk 100), 2 x 224x224 cameras, 14-dim state, '
          f'{args.threads} torch thread(s), {len(a)} + {len(b)} inferences interleaved in '
          f'blocks of {BLOCK}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} '
          'CPUs')
    for name, (p50, p99) in p.items():
        print(f'  {name:10s}  p50 {p50:8.2f} ms   p99 {p99:8.2f} ms')
    print(f'  overhead    p50 {p["isolated"][0] - p["in-process"][0]:8.2f} ms   '
          f'p99 {p["isolated"][1] - p["in-process"][1]:8.2f} ms   (target <= 2 ms p99)')
    print(f'  ratio       p50 {p["isolated"][0] / p["in-process"][0]:8.3f} x    '
          f'p99 {p["isolated"][1] / p["in-process"][1]:8.3f} x    (target <= 1.1x)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
