"""The example_adapter backend wraps a framework's rollout-policy factory (defined here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import save_file
import torch
from torch import nn

from egoroll_ros.core.inference import predict_cartesian, setup_from_params
from egoroll_ros.core.observation import JOINT_STATES, LatestInputs, camera_input
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import JointStateData
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.loading import load_policy
from egoroll_ros.policies.registry import load_backend
from egoroll_ros.policies.scripted_cartesian import CONVENTION
from egoroll_ros.ros.images import prepare_image
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME

URDF = Path(__file__).resolve().parents[2] / 'urdf' / 'demo_arm.urdf'
H, D = 3, 7          # x y z roll pitch yaw gripper
FACTORY = f'{__name__}:create_rollout_policy'
CALLS: list[dict] = []


class TinyNet(nn.Module):
    """The "framework's" model: a linear map of the ee pose state to an H x D chunk, plus a
    step along x per point and a term from the image mean (so the image must arrive)."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(D, H * D)
        self.image_gain = nn.Parameter(torch.zeros(()))

    def forward(self, state: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        out = self.head(state).reshape(-1, H, D)
        return out + self.image_gain * image.mean()


class RolloutPolicy:
    """robomimic/EgoMimic-style rollout wrapper: start_episode(), __call__(ob) -> action."""

    def __init__(self, net: TinyNet) -> None:
        self.net = net
        self.episodes = 0

    def start_episode(self) -> None:
        self.episodes += 1

    def __call__(self, ob: dict) -> torch.Tensor:
        CALLS.append({k: v.clone() for k, v in ob.items()})
        return self.net(ob['ee_pose'], ob['front_img_1'])


def create_rollout_policy(checkpoint_dir: str, device: str = 'cpu') -> RolloutPolicy:
    """The factory an adapter config names ('module:function')."""
    from safetensors.torch import load_file

    net = TinyNet()
    net.load_state_dict(load_file(str(Path(checkpoint_dir) / 'model.safetensors')))
    return RolloutPolicy(net.to(device).eval())


def make_checkpoint(path: Path, step: float = 0.01, factory: str = FACTORY) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    net = TinyNet()
    with torch.no_grad():
        w = torch.zeros(H * D, D)
        b = torch.zeros(H * D)
        for k in range(H):
            w[k * D:(k + 1) * D] = torch.eye(D)
            b[k * D] = step * (k + 1)              # +x (dataset frame) per point
        net.head.weight.copy_(w)
        net.head.bias.copy_(b)
        net.image_gain.fill_(0.0)
    save_file({k: v.contiguous() for k, v in net.state_dict().items()},
              str(path / 'model.safetensors'))
    cart = {'arms': [['arm', 'tool0', 'rpy:xyz', True]], 'frame': 'base', 'state': 'ee_pose',
            'convention': json.loads(json.dumps(_conv()))}
    (path / 'adapter.json').write_text(json.dumps({
        'factory': factory, 'factory_kwargs': {'device': 'cpu'},
        'files': ['model.safetensors'], 'chunk_length': H, 'step_period': 0.1,
        'state_key': 'ee_pose', 'state_size': D,
        'images': {'front_img_1': ['scene', 16, 16]}, 'image_layout': 'chw_float',
        'action_space': 'cartesian', 'cartesian': cart,
        'normalization': {'state': 'inside the framework policy',
                          'action': 'inside the framework policy'}}))
    return path


def _conv() -> dict:
    from egoroll_ros.core.policy import CartesianArm, CartesianSpec
    return CartesianSpec((CartesianArm('arm', 'tool0'),), convention=CONVENTION).to_json()[
        'convention']


def params():
    return {'joints': list(DEMO_JOINTS), 'continuous_joints': [], 'cameras.names': ['scene'],
            'cameras.heights': [32], 'cameras.widths': [32], 'cameras.compressed': [False],
            'quest.grip_axes': [-1, -1], 'quest.trigger_axes': [-1, -1],
            'policy.backend': 'example_adapter', 'policy.isolated': False,
            'policy.num_threads': 0, 'policy.expected_fingerprint': '',
            'max_age.camera': 0.2, 'max_age.joint_states': 0.1, 'max_age.quest': 0.2,
            'max_clock_offset': 0.5,
            'cartesian.arms': ['arm'], 'cartesian.ee_frames': ['tool0'],
            'cartesian.gripper_joints': ['gripper'], 'urdf_path': str(URDF),
            'cartesian.camera_frames': [], 'cartesian.camera_poses': []}


def test_adapter_is_an_installed_entry_point_and_maps_framework_io(tmp_path):
    from sensor_msgs.msg import Image

    assert load_backend('example_adapter').__name__ == 'FrameworkPolicyAdapter'
    ck = make_checkpoint(tmp_path / 'ck')
    p = params()
    loaded = load_policy(p, setup_from_params(p), str(ck), 'python', lambda _: None,
                         prepare=prepare_image)
    meta = loaded.policy.metadata
    assert meta.backend == 'example_adapter' and meta.action_space == 'cartesian'
    assert len(meta.fingerprint) == 64
    loaded.policy.reset()
    assert loaded.policy.rollout.episodes == 1                # start_episode was called
    store = LatestInputs([JOINT_STATES, camera_input('scene')])
    store.put(JOINT_STATES, JointStateData(tuple(DEMO_JOINTS), np.array(HOME), received=1.0),
              1.0, 1.0)
    img = Image(height=32, width=32, encoding='rgb8', step=96)
    img.data = bytes(np.full((32, 32, 3), 51, np.uint8).tobytes())
    store.put(camera_input('scene'), img, 1.0, 1.0)
    obs = loaded.builder.build(store, 1.0, 1.0)
    CALLS.clear()
    targets = predict_cartesian(loaded.policy, obs, loaded.cartesian)
    ob = CALLS[-1]
    assert ob['front_img_1'].shape == (1, 3, 16, 16)
    assert torch.allclose(ob['front_img_1'], torch.full((1, 3, 16, 16), 0.2))
    assert np.allclose(ob['ee_pose'][0].numpy(), obs.state, atol=1e-6)
    # The framework's +x steps are in its dataset frame; reference rotation is identity, so
    # the base-frame targets step along +x from the measured tool0 position (FK).
    t, _ = RobotModel.from_file(URDF).fk(['tool0'], DEMO_JOINTS, np.array(HOME)[None])
    (arm,) = targets
    want = t[0, 0] + np.outer([0.01, 0.02, 0.03], [1.0, 0.0, 0.0])
    assert np.allclose(arm.positions, want, atol=1e-5)
    assert np.allclose(arm.gripper, HOME[7], atol=1e-6)


def test_fingerprint_covers_the_weights_and_the_factory_is_imported_lazily(tmp_path):
    from egoroll_ros.policies.adapter_example import FrameworkPolicyAdapter

    a = FrameworkPolicyAdapter.load(make_checkpoint(tmp_path / 'a', step=0.01))
    b = FrameworkPolicyAdapter.load(make_checkpoint(tmp_path / 'b', step=0.02))
    assert a.metadata.fingerprint != b.metadata.fingerprint
    with pytest.raises(CheckpointError, match='cannot be imported'):
        FrameworkPolicyAdapter.load(make_checkpoint(tmp_path / 'c',
                                                    factory='no_such_framework.x:make'))
    with pytest.raises(CheckpointError, match="not 'module:function'"):
        FrameworkPolicyAdapter.load(make_checkpoint(tmp_path / 'd', factory='nocolon'))
