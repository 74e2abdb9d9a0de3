"""policy_node end to end with two cameras, one of them compressed: frames decode into the
observation, and a camera that freezes (same stamp, or same frame with fresh stamps) stops the
chunks with the reason in the status."""

from __future__ import annotations

from pathlib import Path
import sys

import cv2
import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk, RolloutStatus
from egoroll_ros.nodes.policy_node import PolicyNode
from egoroll_ros.ros.convert import time_to_sec
from egoroll_ros.testing import run_callback, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'unit'))
from policy_fakes import BACKEND, JOINTS, make_fake_checkpoint  # noqa: E402, I001

pytestmark = [pytest.mark.integration, pytest.mark.ros_threads(1)]
H, W = 24, 32


def _rgb(k: int) -> np.ndarray:
    return np.random.default_rng(k).integers(0, 255, (H, W, 3), dtype=np.uint8)


class Feeder:
    """Publishes joint_states, a raw scene camera and a PNG-compressed wrist camera at 20 Hz;
    ``freeze`` makes the wrist camera republish its last frame (``'stamp'``: with its stamp,
    ``'frame'``: with fresh stamps)."""

    def __init__(self, ros_graph) -> None:
        self.node = ros_graph.node('camera_feeder')
        qos = qos_profile_sensor_data
        self.js = self.node.create_publisher(JointState, 'joint_states', qos)
        self.scene = self.node.create_publisher(Image, 'camera/scene/image_raw', qos)
        self.wrist = self.node.create_publisher(CompressedImage,
                                                'camera/wrist/image_raw/compressed', qos)
        self.k = 0
        self.freeze: str | None = None
        self.last_wrist: CompressedImage | None = None
        self.sent: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.node.create_timer(0.05, self._tick)

    def _tick(self) -> None:
        self.k += 1
        stamp = self.node.get_clock().now().to_msg()
        m = JointState(name=list(JOINTS), position=[0.1] * len(JOINTS))
        m.header.stamp = stamp
        self.js.publish(m)
        scene_rgb, wrist_rgb = _rgb(2 * self.k), _rgb(2 * self.k + 1)
        img = Image(height=H, width=W, encoding='rgb8', step=W * 3)
        img.header.stamp = stamp
        img.data = scene_rgb.tobytes()
        self.scene.publish(img)
        if self.freeze is not None and self.last_wrist is not None:
            if self.freeze == 'frame':
                self.last_wrist.header.stamp = stamp
            self.wrist.publish(self.last_wrist)
            return
        ok, png = cv2.imencode('.png', wrist_rgb[:, :, ::-1])
        c = CompressedImage(format='rgb8; png compressed bgr8')
        c.header.stamp = stamp
        c.data = png.tobytes()
        self.wrist.publish(c)
        self.last_wrist = c
        self.sent[stamp.sec * 10**9 + stamp.nanosec] = (scene_rgb, wrist_rgb)


def _call(node: PolicyNode, name: str) -> Trigger.Response:
    fn = {'preflight': node._srv_preflight, 'start': node._srv_start,
          'stop': node._srv_stop}[name]
    return run_callback(fn, Trigger.Request(), Trigger.Response())


@pytest.mark.parametrize('freeze', ['stamp', 'frame'])
def test_two_cameras_one_compressed_feed_the_policy_and_a_frozen_one_stops_it(
        ros_graph, tmp_path, freeze):
    ck = make_fake_checkpoint(tmp_path / 'ck', cameras=(('scene', H, W), ('wrist', H, W)))
    params = {'joints': JOINTS, 'policy.backend': BACKEND, 'policy.path': str(ck),
              'cameras.names': ['scene', 'wrist'], 'cameras.heights': [H, H],
              'cameras.widths': [W, W], 'cameras.compressed': [False, True],
              'query_frequency': 20.0, 'status_rate': 20.0,
              # generous ages: a loaded 2-core machine delays callbacks; the freeze lasts
              # far longer than these
              'max_age.camera': 0.6, 'max_age.joint_states': 0.6,
              # no safety gate in this graph: start without its verdict on the preflight
              'gate.require_preflight_acceptance': False, 'gate.arm_service': ''}
    node = ros_graph.add(PolicyNode(context=ros_graph.context, parameter_overrides=[
        Parameter(k, value=v) for k, v in params.items()]))
    feeder = Feeder(ros_graph)
    probe = ros_graph.node('probe')
    chunks = ros_graph.collect(probe, ActionChunk, 'policy/chunk')
    status = ros_graph.collect(probe, RolloutStatus, 'policy/status')
    ros_graph.wait_for_publishers(chunks.subscription)
    ros_graph.wait_for_subscribers(feeder.wrist)
    ros_graph.wait_for_subscribers(feeder.scene)

    def preflight_ok() -> bool:
        return _call(node, 'preflight').success

    wait_until(preflight_ok, 20, 'a passing preflight with both cameras')
    assert _call(node, 'start').success
    first = chunks.wait_for(lambda m: not m.shadow, timeout=10)
    obs = node.policy.last_observation
    assert set(obs.images) == {'scene', 'wrist'}
    # the frames of one tick (same stamp) decode to what was sent, the PNG losslessly
    stamp = round(obs.stamp * 1e9)
    assert any(np.array_equal(obs.images['scene'], s) for s, _ in feeder.sent.values())
    pairs = [(s, w) for s, w in feeder.sent.values()
             if np.array_equal(obs.images['wrist'], w)]
    assert pairs, 'the compressed wrist frame did not decode to a sent frame'
    assert first.policy_id == node.policy.metadata.fingerprint and stamp > 0

    feeder.freeze = freeze
    reason = 'header stamp has not advanced' if freeze == 'stamp' else \
        'frame identical to the previous ones'
    seen = status.wait_for(lambda m: f'camera/wrist: {reason}' in m.detail, timeout=15)
    before = node.inferences_skipped
    wait_until(lambda: node.inferences_skipped >= before + 5, 10, 'skipped inferences')
    # once stale, the wrist camera stays stale while frozen: no chunk from an observation
    # assembled after the status reported it
    t_seen = time_to_sec(seen.header.stamp)
    late = [m.sequence for m in chunks.snapshot()
            if not m.shadow and time_to_sec(m.header.stamp) > t_seen]
    assert late == [], 'a chunk was published from a frozen camera'
    feeder.freeze = None                    # the camera moves again: chunks resume
    chunks.wait_for(lambda m: not m.shadow and m.sequence > first.sequence + 1, timeout=10)
    _call(node, 'stop')
