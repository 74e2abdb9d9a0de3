"""LeRobot's own side of the LeRobot tests; run with the managed runtime's python (lerobot 0.6.1).

    python lerobot_tool.py make OUT SPEC_JSON
        A small policy with random weights and made-up statistics far from 0/1, saved as
        lerobot's training script saves one (``save_checkpoint``: config.json,
        model.safetensors, train_config.json, both processor pipelines and their state files).
        ``"tiny_vlm": true`` in SPEC_JSON first writes a tiny local SmolVLM backbone to
        OUT/vlm (:func:`tiny_vlm`) and names it as the policy's ``vlm_model_name`` (SmolVLA).
    python lerobot_tool.py infer CKPT OBS_NPZ OUT_NPZ
        LeRobot's own inference (``lerobot.common.control_utils.predict_action``, the record
        loop's step: prepare_observation_for_inference -> preprocessor -> select_action ->
        postprocessor) on every frame of OBS_NPZ, n_action_steps calls per frame; writes the
        actions as one (n_action_steps, A) chunk per frame. OBS_NPZ holds ``frames`` (count),
        ``task`` (optional) and per frame ``<k>/<feature>`` arrays.
    python lerobot_tool.py rtc CKPT OBS_NPZ OUT_NPZ PLAN_JSON
        LeRobot's own real-time chunking, as its RTC engine (``lerobot-rollout
        --inference.type=rtc``) runs it, one inference per frame of OBS_NPZ: RTC enabled as
        ``rollout/context.py`` does, the leftover from LeRobot's ``ActionQueue``, padded to the
        horizon as the engine does unless the step says ``"pad": false``, then
        ``predict_action_chunk(batch, inference_delay=, prev_chunk_left_over=,
        execution_horizon=)`` and ``ActionQueue.merge``; after each inference ``consume``
        actions are taken from the queue. PLAN_JSON: ``{"seed", "horizon", "steps": [{"delay",
        "consume", "pad"}...]}``. Writes each inference's whole chunk in real units
        (``chunks``), and first, before RTC is enabled, ``infer``'s chunks with the same seed
        (``plain``).
    python lerobot_tool.py dataset ROOT REPO_ID OUT_NPZ
        Loads the dataset at ROOT with LeRobot's own ``LeRobotDataset`` and writes every frame:
        ``fps``, ``features`` (JSON text), and stacked ``<feature>`` arrays (images back to
        HxWx3 uint8; ``timestamp``, ``episode_index``, ``task``).
    python lerobot_tool.py bench CKPT OBS_NPZ N
        Times N in-process calls of the chunk path (predict_action_chunk) for benchmarks.

Not installed: only the tests and benchmarks run it. Never reaches the network: the pretrained
backbone field is cleared for the load (the weights come from model.safetensors).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import sys
import time

os.environ.setdefault('HF_HUB_OFFLINE', '1')

import numpy as np  # noqa: E402
import torch  # noqa: E402


def _stats(shape: tuple[int, ...], rng: np.random.Generator, scale: float) -> dict:
    mean = rng.uniform(-3.0, 3.0, size=shape) * scale + 2.5 * scale
    std = rng.uniform(0.05, 0.5, size=shape) * scale
    lo = mean - rng.uniform(1.0, 4.0, size=shape) * scale
    hi = mean + rng.uniform(1.0, 4.0, size=shape) * scale
    return {k: torch.tensor(v, dtype=torch.float32) for k, v in
            {'mean': mean, 'std': std, 'min': lo, 'max': hi}.items()}


def tiny_vlm(out: Path) -> Path:
    """A tiny SmolVLM-style backbone directory made offline, for SmolVLA, which reads its
    backbone's config, processor and tokenizer with transformers' ``from_pretrained`` (a
    local directory works as a Hub name): ``config.json`` (``SmolVLMConfig``: a 1-layer
    vision tower, a 2-layer Llama text model), a word-level tokenizer built with
    ``tokenizers`` and saved through ``PreTrainedTokenizerFast`` (with SmolVLM's image
    special tokens) and the ``SmolVLMProcessor`` (image and video processors). No weights:
    the policy is made with ``load_vlm_weights`` false and saves its own."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        SmolVLMConfig,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
    )
    from transformers.models.smolvlm.video_processing_smolvlm import SmolVLMVideoProcessor

    special = ['<pad>', '<unk>', '<|im_start|>', '<end_of_utterance>',
               '<fake_token_around_image>', '<image>', '<global-img>', '<video>']
    words = 'pick up the cube place it on red blue green a to and in box'.split()
    vocab = {t: i for i, t in enumerate(special + words)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token='<unk>'))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token='<pad>', unk_token='<unk>',
        extra_special_tokens={'fake_image_token': '<fake_token_around_image>',
                              'image_token': '<image>', 'global_image_token': '<global-img>',
                              'end_of_utterance_token': '<end_of_utterance>'})
    side, patch, scale = 32, 8, 2
    SmolVLMConfig(
        vision_config={'hidden_size': 16, 'intermediate_size': 32, 'num_hidden_layers': 1,
                       'num_attention_heads': 2, 'image_size': side, 'patch_size': patch},
        text_config={'model_type': 'llama', 'vocab_size': len(vocab), 'hidden_size': 32,
                     'intermediate_size': 64, 'num_hidden_layers': 2,
                     'num_attention_heads': 4, 'num_key_value_heads': 2, 'head_dim': 8,
                     'max_position_embeddings': 256, 'pad_token_id': 0},
        scale_factor=scale, image_token_id=vocab['<image>'], pad_token_id=0,
    ).save_pretrained(out)
    images = SmolVLMImageProcessor(size={'longest_edge': side},
                                   max_image_size={'longest_edge': side},
                                   do_image_splitting=False)
    SmolVLMProcessor(image_processor=images, tokenizer=tokenizer,
                     video_processor=SmolVLMVideoProcessor(),
                     image_seq_len=(side // patch) ** 2 // scale ** 2).save_pretrained(out)
    return out


def make(out: str, spec: dict) -> None:
    from lerobot.common.train_utils import save_checkpoint
    from lerobot.configs.default import DatasetConfig
    from lerobot.configs.train import TrainPipelineConfig
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.factory import (
        get_policy_class,
        make_policy_config,
        make_pre_post_processors,
    )

    torch.manual_seed(int(spec.get('seed', 0)))
    rng = np.random.default_rng(int(spec.get('seed', 0)))
    inputs: dict[str, PolicyFeature] = {
        'observation.state': PolicyFeature(FeatureType.STATE, (int(spec['state']),))}
    for cam, (h, w) in spec.get('cameras', {}).items():
        inputs[f'observation.images.{cam}'] = PolicyFeature(FeatureType.VISUAL, (3, h, w))
    if spec.get('env_state'):
        inputs['observation.environment_state'] = PolicyFeature(
            FeatureType.ENV, (int(spec['env_state']),))
    outputs = {'action': PolicyFeature(FeatureType.ACTION, (int(spec['action']),))}
    kwargs = dict(spec.get('config', {}))
    if spec.get('tiny_vlm'):
        kwargs['vlm_model_name'] = str(tiny_vlm(Path(out) / 'vlm'))
    cfg = make_policy_config(spec['policy'], input_features=inputs, output_features=outputs,
                             device='cpu', push_to_hub=False, **kwargs)
    backbone = getattr(cfg, 'pretrained_backbone_weights', None)
    if backbone is not None:
        cfg.pretrained_backbone_weights = None       # random weights here, no download
    policy = get_policy_class(cfg.type)(cfg)
    stats = {}
    for name, ft in {**inputs, **outputs}.items():
        if ft.type is FeatureType.VISUAL:
            stats[name] = _stats((3, 1, 1), rng, 0.2)
        else:
            stats[name] = _stats(ft.shape, rng, float(spec.get('scale', 1.0)))
        for key, value in (spec.get('stats', {}).get(name) or {}).items():
            stats[name][key] = torch.tensor(value, dtype=torch.float32)
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    if backbone is not None and not spec.get('clear_backbone'):
        cfg.pretrained_backbone_weights = backbone   # as a trained checkpoint records it
    train_cfg = TrainPipelineConfig(dataset=DatasetConfig(repo_id='egoroll/made-up'),
                                    policy=cfg, output_dir=Path(out) / 'run')
    if spec.get('env_fps'):
        from lerobot.envs.configs import AlohaEnv
        train_cfg.env = AlohaEnv(fps=int(spec['env_fps']))
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
    ckpt = Path(out) / 'checkpoint'
    save_checkpoint(ckpt, 1, train_cfg, policy, optimizer, None, pre, post)
    print(ckpt / 'pretrained_model')


def _load(ckpt: str):  # noqa: ANN202
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    cfg = PreTrainedConfig.from_pretrained(ckpt)
    if getattr(cfg, 'pretrained_backbone_weights', None) is not None:
        cfg.pretrained_backbone_weights = None
    cfg.device = 'cpu'
    policy = get_policy_class(cfg.type).from_pretrained(ckpt, config=cfg, strict=True)
    pre, post = make_pre_post_processors(
        cfg, pretrained_path=ckpt, preprocessor_overrides={'device_processor': {'device': 'cpu'}})
    return cfg, policy, pre, post


def _frames(obs_npz: str) -> tuple[list[dict[str, np.ndarray]], str | None]:
    data = np.load(obs_npz, allow_pickle=False)
    frames = [{} for _ in range(int(data['frames']))]
    for key in data.files:
        if '/' in key:
            k, name = key.split('/', 1)
            frames[int(k)][name] = data[key]
    task = str(data['task']) if 'task' in data.files else None
    return frames, task


def _record_loop(cfg, policy, pre, post, frames, task, seed):  # noqa: ANN001, ANN202
    from lerobot.common.control_utils import predict_action

    policy.reset()
    pre.reset()
    post.reset()
    if seed is not None:
        torch.manual_seed(seed)
    chunks = []
    for frame in frames:
        rows = [predict_action(dict(frame), policy, torch.device('cpu'), pre, post,
                               use_amp=False, task=task).squeeze(0).double().numpy()
                for _ in range(cfg.n_action_steps)]
        chunks.append(np.stack(rows))
    return np.stack(chunks)


def infer(ckpt: str, obs_npz: str, out_npz: str, seed: int | None) -> None:
    cfg, policy, pre, post = _load(ckpt)
    frames, task = _frames(obs_npz)
    np.savez(out_npz, chunks=_record_loop(cfg, policy, pre, post, frames, task, seed))


def rtc(ckpt: str, obs_npz: str, out_npz: str, plan: dict) -> None:
    from lerobot.policies.rtc.action_queue import ActionQueue
    from lerobot.policies.rtc.configuration_rtc import RTCConfig
    from lerobot.policies.utils import prepare_observation_for_inference
    from lerobot.rollout.inference.rtc import _normalize_prev_actions_length

    cfg, policy, pre, post = _load(ckpt)
    frames, task = _frames(obs_npz)
    # first (RTC still off: select_action refuses it) the record loop, as ``infer``
    plain = _record_loop(cfg, policy, pre, post, frames, task, int(plan['seed']))
    horizon = int(plan['horizon'])
    rtc_cfg = RTCConfig(execution_horizon=horizon)
    policy.config.rtc_config = rtc_cfg          # as lerobot/rollout/context.py enables RTC
    policy.init_rtc_processor()
    queue = ActionQueue(rtc_cfg)
    policy.reset()
    pre.reset()
    post.reset()
    torch.manual_seed(int(plan['seed']))
    chunks = []
    for frame, step in zip(frames, plan['steps'], strict=True):
        prev = queue.get_left_over()
        if prev is not None and step.get('pad', True):
            prev = _normalize_prev_actions_length(prev, target_steps=horizon)
        with torch.no_grad():
            obs = prepare_observation_for_inference(dict(frame), torch.device('cpu'), task,
                                                    None)
            actions = policy.predict_action_chunk(
                pre(obs), inference_delay=int(step['delay']), prev_chunk_left_over=prev,
                execution_horizon=horizon)
            original = actions.squeeze(0).clone()
            processed = post(actions).squeeze(0)
        queue.merge(original, processed, int(step['delay']))
        for _ in range(int(step['consume'])):
            queue.get()
        chunks.append(processed.double().numpy())
    np.savez(out_npz, chunks=np.stack(chunks), plain=plain)


def bench(ckpt: str, obs_npz: str, n: int) -> None:
    from lerobot.policies.utils import prepare_observation_for_inference

    torch.set_num_threads(int(os.environ.get('EGOROLL_BENCH_THREADS', '1')))
    cfg, policy, pre, post = _load(ckpt)
    frames, task = _frames(obs_npz)
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        with torch.inference_mode():
            obs = prepare_observation_for_inference(
                {k: v.copy() for k, v in frames[i % len(frames)].items()},
                torch.device('cpu'), task, None)
            out = post(policy.predict_action_chunk(pre(obs))[:, :cfg.n_action_steps])
            out.double().numpy()
        times.append(time.perf_counter() - t0)
    print(json.dumps({'seconds': times}))


def dataset(root: str, repo_id: str, out_npz: str) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    ds = LeRobotDataset(repo_id, root=root)
    cols: dict[str, list] = {}
    for i in range(len(ds)):
        for k, v in ds[i].items():
            if k.startswith('observation.images.'):
                v = (v.permute(1, 2, 0).numpy() * 255.0).round().astype(np.uint8)
            elif isinstance(v, torch.Tensor):
                v = v.numpy()
            cols.setdefault(k, []).append(v)
    arrays = {k: np.stack([np.asarray(x) for x in v]) for k, v in cols.items()}
    np.savez(out_npz, fps=np.asarray(ds.fps), features=np.asarray(json.dumps(
        {k: {'dtype': f['dtype'], 'shape': list(f['shape']), 'names': f.get('names')}
         for k, f in ds.meta.features.items()})), **arrays)


def main(argv: list[str]) -> int:
    if argv[1] == 'make':
        make(argv[2], json.loads(argv[3]))
    elif argv[1] == 'infer':
        infer(argv[2], argv[3], argv[4], int(argv[5]) if len(argv) > 5 else None)
    elif argv[1] == 'rtc':
        rtc(argv[2], argv[3], argv[4], json.loads(argv[5]))
    elif argv[1] == 'dataset':
        dataset(argv[2], argv[3], argv[4])
    elif argv[1] == 'bench':
        bench(argv[2], argv[3], int(argv[4]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
