"""Record the scripted expert on the demo task and train the demo ``egoroll_act`` policy.

Everything runs offline and deterministically (given ``seed``), with no ROS graph: the camera
images come from the same renderer sim_camera uses, resized with the same function the policy
node uses, and the expert's chunks are executed kinematically with a lag and noise model so
the policy also sees states off the expert's own path.

``egoroll train-demo --out DIR`` writes a checkpoint directory plus ``manifest.json`` (the
fingerprint, the sha256 of every file and how it was made). The shipped demo policy under
``egoroll_ros/policies/demo`` was made with the defaults.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import hashlib
import json
from pathlib import Path
import time
from typing import Any

import numpy as np

from egoroll_ros.core.images import resize_rgb
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.sim.demo_task import (
    DEMO_JOINTS,
    HOME,
    TABLE_WORKSPACE,
    ExpertConfig,
    ReachExpert,
    Workspace,
    execute,
    reached,
)
from egoroll_ros.sim.render import Intrinsics, SceneRenderer

MANIFEST = 'manifest.json'
EXPERT_DT = ExpertConfig().dt


@dataclass(frozen=True)
class DemoTrainingConfig:
    """How the demo policy is made.

    Attributes:
        episodes: expert episodes recorded.
        max_queries: policy queries per episode at most.
        hold_queries: queries recorded after the target is reached (teaches staying there).
        record_every: record one query in this many (many short-lived targets generalise
            better than many samples of few targets: the policy must read the target from the
            image, not remember it).
        points_per_query: chunk points executed between queries (query period / step period:
            0.1 s at 10 Hz over 0.05 s steps = 2).
        lag: fraction of each step the simulated arm lags behind (0 = perfect tracking).
        state_noise: std of the noise added to the state after each query (rad).
        start_noise: std of the start posture around HOME (rad).
        camera_size: rendered frame (height, width): what sim_camera publishes.
        policy_image_size: (height, width) the policy takes (the node resizes).
        fov_deg, target_radius, camera_frame: the camera's horizontal field of view, drawn
            target size and optical frame. Rendering must match the live sim_camera exactly
            (config/sim_camera.yaml; a test keeps them equal): the first trained policy saw a
            0.025 m disc offline and a 0.03 m one live.
        steps, batch_size, lr: training on the expert's demonstrations.
        dagger_rounds, dagger_episodes, dagger_steps: DAgger: roll the trained policy out,
            label the states it visits with the expert, add them, train on (continuing from
            the current weights). Fixes the drift a policy trained only on expert states shows
            in closed loop.
        pool_size, coord_conv: image encoding of the model (finer tokens and pixel-coordinate
            channels: the task hinges on where the target disc is in the frame).
        relative_actions: the model predicts offsets from the measured joints (precision: a
            few centimetres at the tool are small joint offsets but a tiny fraction of the
            absolute joint ranges).
        seed: everything random derives from it.
    """

    episodes: int = 400
    max_queries: int = 90
    hold_queries: int = 6
    record_every: int = 3
    points_per_query: int = 2
    lag: float = 0.3
    state_noise: float = 0.01
    start_noise: float = 0.25
    camera_size: tuple[int, int] = (224, 224)
    policy_image_size: tuple[int, int] = (96, 96)
    fov_deg: float = 50.0
    target_radius: float = 0.03
    camera_frame: str = 'camera_optical_frame'
    steps: int = 3000
    dagger_rounds: int = 0
    dagger_episodes: int = 150
    dagger_steps: int = 1500
    batch_size: int = 64
    lr: float = 1e-3
    pool_size: int = 8
    coord_conv: bool = True
    relative_actions: bool = True
    seed: int = 0


@dataclass
class Dataset:
    """Recorded demonstrations: images (N, h, w, 3), states (N, 8), actions (N, H, 8)."""

    images: np.ndarray
    states: np.ndarray
    actions: np.ndarray
    episodes_reached: int
    episodes: int


def _setup(urdf: Path, cfg: DemoTrainingConfig) -> tuple[RobotModel, ReachExpert, SceneRenderer]:
    model = RobotModel.from_file(urdf)
    expert = ReachExpert(model)
    h, w = cfg.camera_size
    renderer = SceneRenderer(model, Intrinsics.from_fov(w, h, cfg.fov_deg),
                             camera_frame=cfg.camera_frame, target_radius=cfg.target_radius)
    if renderer.joint_names != DEMO_JOINTS:
        raise ValueError(f'{urdf}: renderer joints {renderer.joint_names} != {DEMO_JOINTS}')
    return model, expert, renderer


def observe(renderer: SceneRenderer, q: np.ndarray, target: np.ndarray,
            size: tuple[int, int]) -> np.ndarray:
    """The policy's view: the rendered frame resized as policy_node resizes it."""
    return resize_rgb(renderer.render(q, target), size[0], size[1])


def _step(q: np.ndarray, chunk_positions: np.ndarray, k: int, lag: float,
          noise: float, rng: np.random.Generator) -> np.ndarray:
    """Advance ``k`` points of a chunk with a lagging, noisy arm."""
    target = execute(q, _as_traj(chunk_positions), k)
    q_next = target + lag * (q - target)
    q_next[:-1] += rng.normal(0.0, noise, q_next.shape[0] - 1)
    return q_next


def _episode_start(cfg: DemoTrainingConfig, workspace: Workspace,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A start posture around HOME (gripper at HOME) and a target."""
    q = np.asarray(HOME, dtype=float).copy()
    q[:-1] += rng.normal(0.0, cfg.start_noise, q.shape[0] - 1)
    return q, workspace.sample(rng)


def _as_traj(positions: np.ndarray):  # noqa: ANN202 - a JointTrajectoryData
    from egoroll_ros.core.types import JointTrajectoryData
    return JointTrajectoryData(DEMO_JOINTS, np.arange(1, len(positions) + 1, dtype=float),
                               positions)


def collect(urdf: Path, cfg: DemoTrainingConfig, log: Any = print, policy: Any = None,
            episodes: int | None = None, seed: int | None = None) -> Dataset:
    """Record expert-labelled episodes (deterministic given the seed).

    Args:
        policy: None: the expert's chunks are executed; a policy: its chunks are executed and
            the expert only labels the states it visits (DAgger).
        episodes, seed: default ``cfg.episodes`` and ``cfg.seed``.
    """
    from egoroll_ros.core.policy import Observation

    _, expert, renderer = _setup(urdf, cfg)
    rng = np.random.default_rng(cfg.seed if seed is None else seed)
    workspace = TABLE_WORKSPACE
    images, states, actions = [], [], []
    n_reached = 0
    n_episodes = cfg.episodes if episodes is None else episodes
    for ep in range(n_episodes):
        q, target = _episode_start(cfg, workspace, rng)
        hold = None
        for k in range(cfg.max_queries):
            chunk = expert.chunk(q, target)
            executed = chunk.positions
            record = (k + ep) % cfg.record_every == 0 or hold is not None
            if record or policy is not None:
                image = observe(renderer, q, target, cfg.policy_image_size)
            if policy is not None:
                executed = np.asarray(policy.predict_chunk(
                    Observation(images={'scene': image}, state=q.copy())))
            if record:
                images.append(image)
                states.append(q.copy())
                actions.append(chunk.positions.copy())
            if hold is None and reached(expert.tool_position(q), target):
                hold = cfg.hold_queries
            if hold is not None:
                hold -= 1
                if hold <= 0:
                    break
            q = _step(q, executed, cfg.points_per_query, cfg.lag, cfg.state_noise, rng)
        n_reached += hold is not None
        if log and (ep + 1) % 50 == 0:
            log(f'recorded {ep + 1}/{n_episodes} episodes, {len(states)} samples, '
                f'{n_reached} reached')
    return Dataset(np.stack(images), np.stack(states), np.stack(actions), n_reached,
                   n_episodes)


def evaluate(policy: Any, urdf: Path, cfg: DemoTrainingConfig, episodes: int = 10,
             seed: int = 1000) -> dict[str, Any]:
    """Closed-loop offline success rate of ``policy`` on fresh targets (same lag model)."""
    from egoroll_ros.core.policy import Observation

    _, expert, renderer = _setup(urdf, cfg)
    rng = np.random.default_rng(seed)
    workspace = TABLE_WORKSPACE
    results = []
    for _ in range(episodes):
        q, target = _episode_start(cfg, workspace, rng)
        ok = False
        for _ in range(cfg.max_queries):
            obs = Observation(images={'scene': observe(renderer, q, target,
                                                       cfg.policy_image_size)}, state=q.copy())
            chunk = np.asarray(policy.predict_chunk(obs))
            q = _step(q, chunk, cfg.points_per_query, cfg.lag, 0.0, rng)
            if reached(expert.tool_position(q), target):
                ok = True
                break
        results.append(ok)
    return {'episodes': episodes, 'reached': int(sum(results)),
            'success_rate': float(np.mean(results))}


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(ckpt: Path, fingerprint: str, info: dict[str, Any]) -> dict[str, Any]:
    """Write ``manifest.json``: fingerprint, sha256 of every other file, provenance."""
    files = {p.name: sha256_file(p) for p in sorted(ckpt.iterdir())
             if p.is_file() and p.name != MANIFEST}
    manifest = {'backend': 'egoroll_act', 'fingerprint': fingerprint, 'files': files, **info}
    (ckpt / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + '\n')
    return manifest


def train_demo_policy(out_dir: Path, urdf: Path, cfg: DemoTrainingConfig | None = None,
                      eval_episodes: int = 10, log: Any = print) -> dict[str, Any]:
    """Record demonstrations, train, evaluate offline, write the checkpoint and manifest.

    Returns:
        The manifest dict.
    """
    import torch

    from egoroll_ros.policies.act import ActPolicy, train_act

    cfg = cfg or DemoTrainingConfig()
    log = log or (lambda *_: None)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    t0 = time.monotonic()
    data = collect(urdf, cfg, log)
    t_collect = time.monotonic() - t0
    log(f'{len(data.states)} samples from {data.episodes} episodes '
        f'({data.episodes_reached} reached) in {t_collect:.0f} s; training {cfg.steps} steps')
    t1 = time.monotonic()
    common = dict(step_period=EXPERT_DT, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed,
                  pool_size=cfg.pool_size, coord_conv=cfg.coord_conv,
                  relative_actions=cfg.relative_actions)
    result = train_act({'scene': data.images}, data.states, data.actions, out_dir,
                       steps=cfg.steps, log_every=max(1, cfg.steps // 10), **common)
    rounds = []
    for r in range(cfg.dagger_rounds):
        policy = ActPolicy.load(out_dir)
        extra = collect(urdf, cfg, log=None, policy=policy, episodes=cfg.dagger_episodes,
                        seed=cfg.seed + 1 + r)
        data = Dataset(np.concatenate([data.images, extra.images]),
                       np.concatenate([data.states, extra.states]),
                       np.concatenate([data.actions, extra.actions]),
                       data.episodes_reached, data.episodes)
        rounds.append({'episodes': extra.episodes, 'policy_reached': extra.episodes_reached,
                       'samples': int(len(extra.states))})
        log(f'DAgger round {r + 1}: the policy reached {extra.episodes_reached}/'
            f'{extra.episodes}; {len(data.states)} samples; training {cfg.dagger_steps} steps')
        result = train_act({'scene': data.images}, data.states, data.actions, out_dir,
                           steps=cfg.dagger_steps, init=out_dir,
                           log_every=max(1, cfg.dagger_steps // 5), **common)
    t_train = time.monotonic() - t1
    policy = ActPolicy.load(out_dir)
    ev = evaluate(policy, urdf, cfg, episodes=eval_episodes) if eval_episodes else {}
    log(f'trained in {t_train:.0f} s, final loss {result.losses[-1]:.4f}; offline success '
        f"{ev.get('reached', '-')}/{ev.get('episodes', '-')}")
    info = {'training': {**{k: (list(v) if isinstance(v, tuple) else v)
                            for k, v in asdict(cfg).items()},
                         'samples': int(len(data.states)),
                         'expert_episodes_reached': int(data.episodes_reached),
                         'final_loss': float(result.losses[-1]),
                         'dagger': rounds,
                         'collect_seconds': round(t_collect, 1),
                         'train_seconds': round(t_train, 1)},
            'offline_evaluation': ev,
            'joints': list(DEMO_JOINTS)}
    return write_manifest(Path(out_dir), result.fingerprint, info)
