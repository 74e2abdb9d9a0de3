"""The installed policy_node script with the installed demo config and an egoroll_act
checkpoint (read-only), fed 224x224 camera frames (the size the config expects) and joint
states over DDS."""

from __future__ import annotations

from pathlib import Path
import stat
import sys

import numpy as np
import pytest
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk, RolloutStatus
from egoroll_ros.policies.act import train_act

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'unit'))
from policy_fakes import JOINTS  # noqa: E402, I001

pytestmark = pytest.mark.integration


def _installed_config() -> Path:
    from ament_index_python.packages import get_package_share_directory
    return Path(get_package_share_directory('egoroll_ros')) / 'config' / 'policy_node.yaml'


def test_installed_node_preflights_and_runs_a_read_only_act_checkpoint(ros_graph, launcher,
                                                                        tmp_path):
    import torch
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    ck = tmp_path / 'ckpt'
    res = train_act({'scene': rng.integers(0, 255, (4, 24, 32, 3), dtype=np.uint8)},
                    rng.normal(size=(4, 8)), rng.normal(size=(4, 3, 8)), ck, step_period=0.1,
                    steps=2, batch_size=2, d_model=16, n_heads=2, n_layers=1,
                    dim_feedforward=32, conv_channels=4)
    for p in [*ck.iterdir(), ck]:
        p.chmod(stat.S_IRUSR | stat.S_IXUSR if p.is_dir() else stat.S_IRUSR)
    before = sorted(ck.iterdir())

    node = ros_graph.node('feeder')
    cam = node.create_publisher(Image, 'camera/scene/image_raw', qos_profile_sensor_data)
    js = node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
    frame = Image(height=224, width=224, encoding='rgb8', step=224 * 3)
    frame.data = rng.integers(0, 255, 224 * 224 * 3, dtype=np.uint8).tobytes()

    def feed() -> None:
        stamp = node.get_clock().now().to_msg()
        frame.header.stamp = stamp
        frame.data = rng.integers(0, 255, 224 * 224 * 3, dtype=np.uint8).tobytes()  # not frozen
        cam.publish(frame)
        m = JointState(name=JOINTS, position=[0.0] * 8)
        m.header.stamp = stamp
        js.publish(m)

    node.create_timer(0.05, feed)
    status = ros_graph.collect(node, RolloutStatus, 'policy/status')
    chunks = ros_graph.collect(node, ActionChunk, 'policy/chunk')
    launcher.start('policy_node', 'policy_node', params_files=[_installed_config()],
                   params={'policy.path': str(ck),
                           'policy.expected_fingerprint': res.fingerprint,
                           'policy.num_threads': 1,
                           # this test is about the installed node and config, not staleness:
                           # tolerate a loaded 2-core machine
                           'max_age.camera': 1.0, 'max_age.joint_states': 1.0,  # (the bound)
                           'gate.arm_service': '', 'gate.stop_service': '',   # no safety gate here
                           'gate.require_preflight_acceptance': False},
                   wait_services=['policy/preflight', 'policy/start', 'policy/stop'],
                   wait_publishers=['policy/chunk', 'policy/status'],
                   env={**__import__('os').environ, 'EGOROLL_CACHE_DIR': str(tmp_path / 'c')})
    status.wait_for(lambda m: m.state == RolloutStatus.STATE_IDLE
                    and m.policy_id == res.fingerprint, timeout=20)
    status.wait_for(lambda m: dict(zip(m.input_names, m.input_ages, strict=True))
                    .get('camera/scene', -1) >= 0, timeout=20)
    clients = {n: node.create_client(Trigger, f'policy/{n}') for n in ('preflight', 'start',
                                                                         'stop')}
    for c in clients.values():
        assert c.wait_for_service(timeout_sec=10)
    r = clients['preflight'].call(Trigger.Request(), timeout_sec=20)
    assert r.success, r.message
    shadow = chunks.wait_for(lambda m: m.shadow, timeout=10)
    assert shadow.policy_id == res.fingerprint and len(shadow.trajectory.points) == 3
    r = clients['start'].call(Trigger.Request(), timeout_sec=10)
    assert r.success, r.message
    live = chunks.wait_for(lambda m: not m.shadow and m.sequence == shadow.sequence + 2,
                           timeout=10)
    assert live.policy_id == res.fingerprint
    r = clients['stop'].call(Trigger.Request(), timeout_sec=10)
    assert r.success
    assert sorted(ck.iterdir()) == before
    ck.chmod(0o755)
