"""``lerobot``: a LeRobot (0.6.x) pretrained-policy directory, run exactly as LeRobot runs it.

The checkpoint is what LeRobot's training script saves: ``config.json``, ``model.safetensors``,
``policy_preprocessor.json`` and ``policy_postprocessor.json`` with every state file their steps
name (``policy_preprocessor_step_3_normalizer_processor.safetensors``, ...), and
``train_config.json`` when present. This backend needs the ``lerobot`` package, so it runs in
the managed runtime (:mod:`egoroll_ros.runtimes`, ``egoroll runtime lerobot``) behind the
``isolated`` worker; policy_node does that by itself for ``policy.backend: lerobot``.

Inference is LeRobot's own record/eval step, per chunk: the observation is built as
``lerobot.policies.utils.prepare_observation_for_inference`` builds it (float32 state, images
uint8 HWC -> float CHW in [0, 1], batch of one, ``task``), passed through the saved
preprocessor pipeline (normalisation, device, tokenizer...), the model predicts a chunk
(``predict_action_chunk``, the first ``n_action_steps`` rows, as ``select_action`` queues
them) and the saved postprocessor pipeline maps it back to real units. Policies that keep an
observation history (``n_obs_steps`` > 1, e.g. diffusion) are fed through LeRobot's own
``select_action``, which fills its observation queues as in LeRobot's control loop, one frame
per inference; that needs the node to query at the policy's step period (refused otherwise).
Normalisation is never rebuilt here: a pipeline or state file that is missing or does not load
refuses the checkpoint, naming the file, and so does a feature the policy's config normalises
whose statistics the loaded pipeline lacks (LeRobot would pass it through unnormalised).

Real-time chunking (option ``rtc``, node parameter ``policy.rtc``): for a policy LeRobot runs
with RTC (``lerobot.rollout.inference.rtc.supports_rtc_inference``: ``supports_rtc()`` and a
``predict_action_chunk`` taking ``inference_delay`` and ``prev_chunk_left_over``; in 0.6.1
the flow-matching pi0, pi05, smolvla and others), the load sets ``config.rtc_config`` (an
``RTCConfig`` with ``execution_horizon``, LeRobot's default unless ``rtc_execution_horizon``)
and calls ``init_rtc_processor()``, as ``lerobot-rollout --inference.type=rtc`` does. Each
prediction keeps its chunk in the model's own (normalised) action space, by observation
stamp; an observation carrying an :class:`~egoroll_ros.core.policy.RtcRequest` passes the
unexecuted rows of the named earlier prediction as ``prev_chunk_left_over`` (cut to the
execution horizon as LeRobot's RTC engine does, never zero-padded) and ``inference_delay``, under
``torch.no_grad`` (RTC guidance differentiates through the denoiser, which inference mode
forbids). Asking for RTC from a policy LeRobot does not run with it (ACT, diffusion...), one
with relative-action steps (LeRobot re-anchors their prefix against the robot state; egoroll
does not) or one with observation history is refused at load.

No network: Hugging Face access is forced offline before lerobot is imported, the config's
pretrained-backbone field is cleared for the load (the backbone weights are in
model.safetensors, loaded strictly: a missing weight refuses) and the isolated worker refuses
any socket connection.

Options (``backend_options`` of the isolated backend; node parameters in parentheses):
    device (``policy.device``): cpu, cuda, cuda:N or mps; unavailable -> refused.
    num_threads (``policy.num_threads``): torch intra-op threads (0: torch's default).
    step_period (``policy.step_period``): seconds between actions; 0: from train_config.json
        (``env.fps``); neither -> refused. Both and different -> refused.
    camera_map (``policy.camera_map``): checkpoint camera key -> configured camera name
        (default: the same name).
    cameras: the configured camera names (to name an unmapped image feature at load).
    environment_state (``policy.environment_state``): extra inputs (``quest.*``) whose
        concatenation is ``observation.environment_state``.
    task (``policy.task``): the language instruction; required by policies whose preprocessor
        tokenizes one.
    query_period: seconds between the node's inferences (checked for observation history).
    rtc: enable real-time chunking (see above); refused for a policy without it.
    rtc_execution_horizon: RTC's execution horizon in steps (0: LeRobot's default).
    seed: seed torch's generator at every ``reset()`` (stochastic samplers, e.g. diffusion).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.core.policy import (
    EXTRA_FEATURES,
    ImageFeature,
    Observation,
    Policy,
    PolicyError,
    PolicyMetadata,
)
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.device import torch_device
from egoroll_ros.policies.fingerprint import fingerprint

PREPROCESSOR = 'policy_preprocessor.json'
POSTPROCESSOR = 'policy_postprocessor.json'
STATE = 'observation.state'
ENV_STATE = 'observation.environment_state'
IMAGE_PREFIX = 'observation.images.'
#: RTC: earlier predictions kept (model space) for a later leftover.
MODEL_CHUNKS_KEPT = 16


def _offline() -> None:
    """Force every Hugging Face library offline (read at their import)."""
    for var in ('HF_HUB_OFFLINE', 'HF_DATASETS_OFFLINE', 'TRANSFORMERS_OFFLINE'):
        os.environ[var] = '1'
    os.environ['HF_HUB_DISABLE_TELEMETRY'] = '1'


def _read_json(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f'LeRobot checkpoint: {what} missing: {path}')
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f'LeRobot checkpoint: {what} {path} is not valid JSON: {exc}') \
            from None
    if not isinstance(data, dict):
        raise CheckpointError(f'LeRobot checkpoint: {what} {path} is not a JSON object')
    return data


def _pipeline_files(root: Path, name: str) -> tuple[dict[str, Any], list[Path]]:
    """A processor pipeline's JSON and the state files its steps name (all must exist)."""
    data = _read_json(root / name, 'processor pipeline')
    steps = data.get('steps')
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise CheckpointError(f"LeRobot checkpoint: {root / name} has no 'steps' list")
    files = []
    for i, step in enumerate(steps):
        state = step.get('state_file')
        if state is None:
            continue
        p = root / str(state)
        if Path(str(state)).name != str(state) or not p.is_file():
            raise CheckpointError(f'LeRobot checkpoint: state file {p} named by step {i} '
                                  f"({step.get('registry_name')}) of {root / name} is missing")
        files.append(p)
    return data, files


def _needs_task(pre: dict[str, Any]) -> bool:
    for step in pre.get('steps', []):
        reg = str(step.get('registry_name') or step.get('class') or '')
        cfg = step.get('config') or {}
        if (reg.endswith('tokenizer_processor') and reg != 'action_tokenizer_processor') \
                or 'task_key' in cfg:
            return True
    return False


def checkpoint_parts(root: Path) -> dict[str, Path]:
    """Every file of a LeRobot checkpoint that changes numerics, by fingerprint role.

    Raises:
        CheckpointError: a required file (or a state file a pipeline names) is missing.
    """
    parts = {'config': root / 'config.json', 'weights': root / 'model.safetensors'}
    for p in parts.values():
        if not p.is_file():
            raise CheckpointError(f'LeRobot checkpoint file missing: {p}')
    for name in (PREPROCESSOR, POSTPROCESSOR):
        _, states = _pipeline_files(root, name)
        parts[f'processor:{name}'] = root / name
        parts.update({f'processor_state:{p.name}': p for p in states})
    if (root / 'train_config.json').is_file():
        parts['train_config'] = root / 'train_config.json'
    return parts


def _fps_period(root: Path) -> float | None:
    path = root / 'train_config.json'
    if not path.is_file():
        return None
    env = _read_json(path, 'training config').get('env') or {}
    fps = env.get('fps') if isinstance(env, dict) else None
    if fps is None:
        return None
    try:
        fps = float(fps)
    except (TypeError, ValueError):
        raise CheckpointError(f'{path}: env.fps {fps!r} is not a number') from None
    if not (math.isfinite(fps) and fps > 0):
        raise CheckpointError(f'{path}: env.fps {fps} is not positive')
    return 1.0 / fps


def _step_period(root: Path, given: Any) -> float:
    try:
        given = float(given or 0.0)
    except (TypeError, ValueError):
        raise CheckpointError(f'policy.step_period {given!r} is not a number') from None
    recorded = _fps_period(root)
    if given > 0:
        if recorded is not None and abs(recorded - given) > 1e-9 * max(1.0, recorded):
            raise CheckpointError(
                f"policy.step_period {given:g} s differs from the checkpoint's training fps "
                f'({1 / recorded:g} Hz in {root / "train_config.json"}: {recorded:g} s)')
        return given
    if recorded is None:
        raise CheckpointError(
            f'no step period for {root}: LeRobot records the dataset fps nowhere in the '
            'checkpoint (train_config.json has no env.fps); set policy.step_period to '
            '1/fps of the training dataset')
    return recorded


class LeRobotPolicy(Policy):
    """A LeRobot policy with its own saved pipelines (see the module docstring)."""

    def __init__(self, root: Path, meta: PolicyMetadata, torch: Any, policy: Any, pre: Any,
                 post: Any, device: Any, keys: dict[str, str], env_extras: tuple[str, ...],
                 task: str, robot_type: str, n_action_steps: int, history: bool,
                 seed: int | None, rtc_horizon: int = 0) -> None:
        self._root = root
        self._meta = meta
        self._torch = torch
        self._policy = policy
        self._pre = pre
        self._post = post
        self._device = device
        self._keys = keys                    # lerobot image key -> our camera
        self._env_extras = env_extras
        self._task = task
        self._robot_type = robot_type
        self._n = n_action_steps
        self._history = history
        self._seed = seed
        #: RTC: execution horizon (0: off) and recent predictions in model space, by stamp.
        self._rtc_horizon = rtc_horizon
        self._model_chunks: dict[float, Any] = {}
        from lerobot.policies.utils import prepare_observation_for_inference
        self._prepare = prepare_observation_for_inference

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> LeRobotPolicy:
        """Load a local LeRobot pretrained-policy directory (options: module docstring).

        Raises:
            CheckpointError: lerobot not importable, a file missing or failing to load, an
                input feature without a source, no step period, the device unavailable, or a
                configuration LeRobot's own loop would run differently (temporal ensembling,
                observation history at another rate).
        """
        root = Path(path)
        parts = checkpoint_parts(root)
        cfg_json = _read_json(root / 'config.json', 'policy config')
        pre_json, _ = _pipeline_files(root, PREPROCESSOR)
        task = str(options.get('task') or '')
        if _needs_task(pre_json) and not task:
            raise CheckpointError(
                f"the '{cfg_json.get('type')}' policy at {root} is language-conditioned (its "
                f'preprocessor {root / PREPROCESSOR} tokenizes a task) but policy.task is empty')
        period = _step_period(root, options.get('step_period'))
        keys, env_extras, image_feats, state_size = _inputs(cfg_json, root, options)
        fp = fingerprint(parts)
        _offline()
        try:
            from lerobot.configs.policies import PreTrainedConfig
            from lerobot.policies.factory import get_policy_class, make_pre_post_processors
            import torch
        except Exception as exc:  # noqa: BLE001 - ImportError, RuntimeError (torch/CUDA)...
            raise CheckpointError(
                f"the 'lerobot' backend needs the lerobot package ({type(exc).__name__}: "
                f"{exc}); it runs in the managed runtime ('egoroll runtime lerobot')") from None
        threads = int(options.get('num_threads') or 0)
        if threads:
            torch.set_num_threads(threads)
        device = torch_device(options.get('device') or 'cpu', torch)
        try:
            cfg = PreTrainedConfig.from_pretrained(str(root))
        except Exception as exc:  # noqa: BLE001 - third-party code
            raise CheckpointError(f'LeRobot cannot read {root / "config.json"}: '
                                  f'{type(exc).__name__}: {exc}') from None
        if getattr(cfg, 'temporal_ensemble_coeff', None) is not None:
            raise CheckpointError(
                f'{root / "config.json"}: temporal_ensemble_coeff is set; LeRobot then '
                'ensembles a new chunk at every control step inside select_action, which '
                'egoroll does not do (it executes whole chunks): clear it or retrain')
        n_obs = int(getattr(cfg, 'n_obs_steps', 1) or 1)
        if hasattr(cfg, 'pretrained_backbone_weights'):
            cfg.pretrained_backbone_weights = None   # weights come from model.safetensors
        cfg.device = str(device)
        try:
            policy = get_policy_class(cfg.type).from_pretrained(str(root), config=cfg,
                                                                 strict=True)
        except Exception as exc:  # noqa: BLE001 - third-party code
            raise CheckpointError(f'LeRobot failed to load {root / "model.safetensors"}: '
                                  f'{type(exc).__name__}: {exc}') from None
        policy.eval()
        try:
            pre, post = make_pre_post_processors(
                cfg, pretrained_path=str(root),
                preprocessor_overrides={'device_processor': {'device': str(device)}})
        except Exception as exc:  # noqa: BLE001 - third-party code
            raise CheckpointError(f'LeRobot failed to load the processor pipeline '
                                  f'{_failing_pipeline(root)}: {type(exc).__name__}: '
                                  f'{exc}') from None
        _check_normalised(cfg, pre, root / PREPROCESSOR, inputs=True)
        _check_normalised(cfg, post, root / POSTPROCESSOR, inputs=False)
        history = n_obs > 1
        if history:
            _check_history(policy, cfg, period, options.get('query_period'), root)
        rtc_horizon = 0
        if options.get('rtc'):
            rtc_horizon = _enable_rtc(policy, cfg, pre, history, root,
                                      int(options.get('rtc_execution_horizon') or 0))
        action_size = int(cfg.output_features['action'].shape[0])
        n_action = int(getattr(cfg, 'n_action_steps', 0) or getattr(cfg, 'chunk_size', 0) or 1)
        meta = PolicyMetadata(
            backend='lerobot', fingerprint=fp, image_features=tuple(image_feats),
            state_size=state_size, action_size=action_size, chunk_length=n_action,
            step_period=period, extra_features=env_extras, rtc=rtc_horizon > 0,
            normalization={
                'state': f'lerobot:{PREPROCESSOR}', 'action': f'lerobot:{POSTPROCESSOR}',
                'preprocessor': [type(s).__name__ for s in pre.steps],
                'postprocessor': [type(s).__name__ for s in post.steps],
                'files': sorted(p.name for role, p in parts.items()
                                if role.startswith('processor'))})
        seed = options.get('seed')
        loaded = cls(root, meta, torch, policy, pre, post, device, keys, env_extras, task,
                     str(options.get('robot_type') or ''), n_action, history,
                     None if seed is None else int(seed), rtc_horizon)
        loaded.warm_up()
        return loaded

    @property
    def metadata(self) -> PolicyMetadata:
        """See :class:`PolicyMetadata`."""
        return self._meta

    @property
    def torch_threads(self) -> int:
        """torch's intra-op thread count in this process."""
        return int(self._torch.get_num_threads())

    def warm_up(self) -> None:
        """One inference on a blank observation, then :meth:`reset`: the first call through
        torch is several times slower than the next (lazy initialisation), and a preflight
        chunk must not arrive late because of it.

        Raises:
            CheckpointError: the policy cannot run on an observation of its declared shape.
        """
        m = self._meta
        blank = Observation(
            images={f.camera: np.zeros((f.height, f.width, 3), np.uint8)
                    for f in m.image_features},
            state=np.zeros(m.state_size),
            extras={e: np.zeros(EXTRA_FEATURES[e]) for e in self._env_extras})
        try:
            chunk = self.predict_chunk(blank)
        except PolicyError as exc:
            raise CheckpointError(f'{self._root}: the policy fails on an observation of its '
                                  f'declared shape: {exc}') from None
        if chunk.shape != (m.chunk_length, m.action_size):
            raise CheckpointError(f'{self._root}: the pipeline returns a {chunk.shape} chunk, '
                                  f'expected {(m.chunk_length, m.action_size)}')
        self.reset()

    def reset(self) -> None:
        """Reset the policy and both pipelines (as LeRobot's loop does per episode)."""
        self._policy.reset()
        self._pre.reset()
        self._post.reset()
        self._model_chunks.clear()
        if self._seed is not None:
            self._torch.manual_seed(self._seed)

    def _observation(self, obs: Observation) -> dict[str, np.ndarray]:
        frame = {STATE: np.asarray(obs.state, dtype=np.float32)}
        for key, cam in self._keys.items():
            img = np.ascontiguousarray(obs.images[cam], dtype=np.uint8)
            # torch.from_numpy wants a writable array (pipe buffers are read-only)
            frame[IMAGE_PREFIX + key] = img if img.flags.writeable else img.copy()
        if self._env_extras:
            frame[ENV_STATE] = np.concatenate(
                [np.asarray(obs.extras[e], dtype=np.float32).reshape(-1)
                 for e in self._env_extras])
        return frame

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """One chunk in real units through LeRobot's pipelines (module docstring).

        Raises:
            PolicyError: a missing input, or LeRobot raised.
        """
        torch = self._torch
        try:
            frame = self._observation(observation)
        except KeyError as exc:
            raise PolicyError(f'LeRobot observation input missing: {exc}') from None
        try:
            if self._rtc_horizon:
                out = self._predict_rtc(frame, observation)
            else:
                with torch.inference_mode():
                    batch = self._pre(self._prepare(frame, self._device, self._task,
                                                    self._robot_type))
                    if self._history:
                        actions = self._select_chunk(batch)
                    else:
                        actions = self._policy.predict_action_chunk(batch)[:, :self._n]
                    out = self._post(actions)
        except PolicyError:
            raise
        except Exception as exc:  # noqa: BLE001 - third-party code
            raise PolicyError(f'LeRobot inference failed: {type(exc).__name__}: {exc}') \
                from None
        return out[0].double().cpu().numpy()

    def _predict_rtc(self, frame: dict[str, np.ndarray], observation: Observation) -> Any:
        """One RTC prediction (module docstring): the leftover of the requested earlier
        prediction guides this one; this one is kept for the next."""
        torch = self._torch
        req = observation.rtc
        prev = None
        if req is not None:
            earlier = self._model_chunks.get(req.prefix_stamp)
            if earlier is None:
                raise PolicyError(f'RTC: no prediction of this policy from the observation '
                                  f'stamped {req.prefix_stamp!r} since the last reset (kept: '
                                  f'the last {MODEL_CHUNKS_KEPT})')
            if req.executed < earlier.shape[0]:
                # At most the execution horizon (LeRobot's engine cuts it there too; it also
                # pads a shorter one with zeros, which RTC would then steer towards: not here,
                # RTC's own guidance caps the horizon at the leftover's length).
                prev = earlier[req.executed:req.executed + self._rtc_horizon]
        with torch.no_grad():
            batch = self._pre(self._prepare(frame, self._device, self._task, self._robot_type))
            actions = self._policy.predict_action_chunk(
                batch, inference_delay=0 if req is None else req.inference_delay,
                prev_chunk_left_over=prev)[:, :self._n]
            self._model_chunks[float(observation.stamp)] = actions[0].detach().clone()
            while len(self._model_chunks) > MODEL_CHUNKS_KEPT:
                del self._model_chunks[next(iter(self._model_chunks))]
            return self._post(actions)

    def _select_chunk(self, batch: dict[str, Any]) -> Any:
        """LeRobot's ``select_action`` with an empty action queue: it appends this frame to
        its observation queues, predicts a chunk and queues it; we take the whole chunk."""
        from lerobot.utils.constants import ACTION

        queue = self._policy._queues[ACTION]
        queue.clear()
        first = self._policy.select_action(batch)
        rest = list(queue)
        queue.clear()
        if 1 + len(rest) != self._n:
            raise PolicyError(f'LeRobot select_action queued {1 + len(rest)} actions, '
                              f'expected n_action_steps = {self._n}')
        return self._torch.stack([first] + rest, dim=1)


def _inputs(cfg: dict[str, Any], root: Path, options: dict[str, Any]
            ) -> tuple[dict[str, str], tuple[str, ...], list[ImageFeature], int]:
    """Map the checkpoint's input features to what the node supplies, or refuse."""
    feats = cfg.get('input_features') or {}
    if not isinstance(feats, dict) or not feats:
        raise CheckpointError(f'{root / "config.json"} declares no input_features')
    camera_map = dict(options.get('camera_map') or {})
    cameras = options.get('cameras')
    env_extras = tuple(str(e) for e in (options.get('environment_state') or ()))
    keys: dict[str, str] = {}
    images: list[ImageFeature] = []
    state_size = 0
    problems = []
    for name, ft in feats.items():
        shape = [int(s) for s in (ft or {}).get('shape', [])]
        if name.startswith(IMAGE_PREFIX):
            key = name[len(IMAGE_PREFIX):]
            cam = camera_map.pop(key, key)
            if cameras is not None and cam not in cameras:
                problems.append(
                    f"input feature '{name}' is not mapped: no configured camera '{cam}' "
                    f"(cameras.names: {', '.join(cameras) or 'none'}; map it with "
                    f"policy.camera_map: ['{key}=<camera>'])")
            if len(shape) != 3 or shape[0] != 3:
                problems.append(f"input feature '{name}' has shape {shape}, not (3, H, W)")
                continue
            keys[key] = cam
            images.append(ImageFeature(cam, shape[1], shape[2]))
        elif name == STATE:
            if len(shape) != 1:
                problems.append(f"input feature '{name}' has shape {shape}, not (S,)")
            else:
                state_size = shape[0]
        elif name == ENV_STATE:
            width = sum(EXTRA_FEATURES.get(e, -10 ** 6) for e in env_extras)
            unknown = [e for e in env_extras if e not in EXTRA_FEATURES]
            if not env_extras:
                problems.append(
                    f"input feature '{name}' ({shape[0] if shape else '?'} values) is not "
                    'mapped: set policy.environment_state to the inputs that form it '
                    f"({', '.join(EXTRA_FEATURES)})")
            elif unknown:
                problems.append(f"policy.environment_state names unknown inputs {unknown} "
                                f"(known: {', '.join(EXTRA_FEATURES)})")
            elif shape != [width]:
                problems.append(f"input feature '{name}' has shape {shape} but "
                                f'policy.environment_state {list(env_extras)} gives {width} '
                                'values')
        else:
            problems.append(f"input feature '{name}' has no source in egoroll (supplied: "
                            f"{STATE}, {IMAGE_PREFIX}<camera>, {ENV_STATE})")
    if STATE not in feats:
        problems.append(f"the policy takes no '{STATE}'; egoroll's policies always do")
    if env_extras and ENV_STATE not in feats:
        problems.append(f"policy.environment_state is set but the policy takes no '{ENV_STATE}'")
    if camera_map:
        problems.append(f'policy.camera_map names checkpoint cameras the policy does not '
                        f"take: {', '.join(sorted(camera_map))} (it takes: "
                        f"{', '.join(keys) or 'none'})")
    if problems:
        raise CheckpointError(f'LeRobot checkpoint {root} refused: ' + '; '.join(problems))
    return keys, env_extras, images, state_size


def _failing_pipeline(root: Path) -> str:
    """Which of the two pipeline files fails to load on its own (for the error message)."""
    from lerobot.processor import PolicyProcessorPipeline

    bad = []
    for name in (PREPROCESSOR, POSTPROCESSOR):
        try:
            PolicyProcessorPipeline.from_pretrained(str(root), config_filename=name)
        except Exception:  # noqa: BLE001 - third-party code
            bad.append(str(root / name))
    return ' and '.join(bad) or f'{root / PREPROCESSOR} / {root / POSTPROCESSOR}'


def _check_normalised(cfg: Any, pipeline: Any, path: Path, inputs: bool) -> None:
    """Every feature the policy config normalises has its statistics in a loaded step."""
    from lerobot.configs.types import NormalizationMode

    mapping = getattr(cfg, 'normalization_mapping', {}) or {}
    want = {}
    features = cfg.input_features if inputs else cfg.output_features
    for name, ft in features.items():
        mode = mapping.get(getattr(ft.type, 'value', ft.type))
        if mode is not None and mode != NormalizationMode.IDENTITY:
            want[name] = mode
    covered = set()
    for step in pipeline.steps:
        stats = getattr(step, '_tensor_stats', None)
        if stats is None:
            continue
        for name in want:
            if name in stats and stats[name]:
                covered.add(name)
    missing = sorted(set(want) - covered)
    if missing:
        raise CheckpointError(
            f'{path}: no loaded step holds statistics for {missing}, which '
            f'{path.parent / "config.json"} normalises ({[want[m].value for m in missing]}); '
            'LeRobot would pass them through unnormalised')


def _check_history(policy: Any, cfg: Any, period: float, query_period: Any, root: Path) -> None:
    from lerobot.utils.constants import ACTION

    queues = getattr(policy, '_queues', None)
    if not isinstance(queues, dict) or ACTION not in queues:
        raise CheckpointError(
            f"{root / 'config.json'}: n_obs_steps = {cfg.n_obs_steps} for a '{cfg.type}' "
            'policy whose observation queues egoroll cannot feed as LeRobot does; refused '
            '(never one frame where the policy expects several)')
    if query_period is None:
        raise CheckpointError(
            f'n_obs_steps = {cfg.n_obs_steps}: the policy needs its last {cfg.n_obs_steps} '
            f'observations {period:g} s apart, and the query period is not known')
    if abs(float(query_period) - period) > 1e-6 * max(period, 1e-3):
        raise CheckpointError(
            f'n_obs_steps = {cfg.n_obs_steps}: LeRobot feeds this policy its last '
            f'{cfg.n_obs_steps} observations {period:g} s apart (one per control step); '
            f'policy_node infers every {float(query_period):g} s. Set query_frequency to '
            f'{1.0 / period:g} Hz')


def _enable_rtc(policy: Any, cfg: Any, pre: Any, history: bool, root: Path,
                horizon: int) -> int:
    """Switch LeRobot's RTC on as ``lerobot-rollout --inference.type=rtc`` does; returns the
    execution horizon.

    Raises:
        CheckpointError: the policy does not do RTC in LeRobot, has relative-action steps or
            an observation history.
    """
    from lerobot.policies.rtc.configuration_rtc import RTCConfig
    from lerobot.rollout.inference.rtc import supports_rtc_inference

    if not supports_rtc_inference(policy):
        raise CheckpointError(
            f"policy.rtc is true but the '{cfg.type}' policy at {root} does not do real-time "
            'chunking in LeRobot (supports_rtc() with a predict_action_chunk taking '
            'inference_delay and prev_chunk_left_over: the flow-matching policies such as '
            'pi0, pi05, smolvla); set policy.rtc false')
    relative = [type(s).__name__ for s in getattr(pre, 'steps', ())
                if 'relative' in type(s).__name__.lower() and getattr(s, 'enabled', True)]
    if relative:
        raise CheckpointError(
            f'policy.rtc: {root / PREPROCESSOR} has relative-action steps {relative}, whose '
            'RTC prefix LeRobot re-anchors against the robot state; egoroll does not: refused')
    if history:
        raise CheckpointError(f'policy.rtc: n_obs_steps = {cfg.n_obs_steps} (observation '
                              'history) together with RTC is not supported: refused')
    rtc = RTCConfig() if horizon <= 0 else RTCConfig(execution_horizon=horizon)
    policy.config.rtc_config = rtc
    if hasattr(policy, 'init_rtc_processor'):
        policy.init_rtc_processor()
    return int(rtc.execution_horizon)
