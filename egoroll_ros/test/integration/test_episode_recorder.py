"""Rollout recording: each rollout of a real policy_node becomes one episode bag (inputs,
chunks, status, the policy fingerprint and the configuration), opened by the preflight, closed
after the stop, labelled by the operator's service call or Quest button."""

from __future__ import annotations

import json
from pathlib import Path
import re
import sys

import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState, Joy
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import ActionChunk
from egoroll_ros.bag.reader import BagReader
from egoroll_ros.nodes.episode_recorder import EpisodeRecorder
from egoroll_ros.nodes.policy_node import PolicyNode
from egoroll_ros.testing import run_callback, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'unit'))
from policy_fakes import BACKEND, JOINTS, make_fake_checkpoint  # noqa: E402, I001

pytestmark = [pytest.mark.integration, pytest.mark.ros_threads(1)]
H, W = 24, 32


def test_each_rollout_is_one_labelled_episode(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck', cameras=(('scene', H, W),))
    cfg = tmp_path / 'policy.yaml'
    cfg.write_text('policy_node:\n  ros__parameters:\n    query_frequency: 20.0\n')
    policy = ros_graph.add(PolicyNode(context=ros_graph.context, parameter_overrides=[
        Parameter(k, value=v) for k, v in {
            'joints': JOINTS, 'policy.backend': BACKEND, 'policy.path': str(ck),
            'cameras.names': ['scene'], 'cameras.heights': [H], 'cameras.widths': [W],
            'query_frequency': 20.0, 'status_rate': 20.0, 'max_age.camera': 0.6,
            'max_age.joint_states': 0.6,
            # no safety gate in this graph: start without its verdict on the preflight
            'gate.require_preflight_acceptance': False, 'gate.arm_service': ''}.items()]))
    rec = ros_graph.add(EpisodeRecorder(context=ros_graph.context, parameter_overrides=[
        Parameter(k, value=v) for k, v in {
            'out_dir': str(tmp_path / 'episodes'), 'cameras.names': ['scene'],
            'config_files': [str(cfg)], 'outcome_window': 0.5,
            'quest.failure_button': 2, 'quest.debounce_time': 0.0}.items()]))
    feeder = ros_graph.node('feeder')
    js = feeder.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
    cam = feeder.create_publisher(Image, 'camera/scene/image_raw', qos_profile_sensor_data)
    joy = feeder.create_publisher(Joy, 'quest/joy', qos_profile_sensor_data)
    rng = np.random.default_rng(0)

    def tick() -> None:
        stamp = feeder.get_clock().now().to_msg()
        m = JointState(name=list(JOINTS), position=[0.1] * len(JOINTS))
        m.header.stamp = stamp
        js.publish(m)
        img = Image(height=H, width=W, encoding='rgb8', step=W * 3)
        img.header.stamp = stamp
        img.data = rng.integers(0, 255, H * W * 3, dtype=np.uint8).tobytes()
        cam.publish(img)

    feeder.create_timer(0.05, tick)
    chunks = ros_graph.collect(feeder, ActionChunk, 'policy/chunk')
    ros_graph.wait_for_publishers(chunks.subscription)

    def call(fn) -> Trigger.Response:  # noqa: ANN001
        return run_callback(fn, Trigger.Request(), Trigger.Response())

    def rollout(n_chunks: int) -> None:
        wait_until(lambda: call(policy._srv_preflight).success, 20, 'a passing preflight')
        assert call(policy._srv_start).success
        start = len(chunks.snapshot())
        wait_until(lambda: sum(not m.shadow for m in chunks.snapshot()[start:]) >= n_chunks,
                   10, f'{n_chunks} live chunks')
        call(policy._srv_stop)     # no gate here: the hold is not confirmed, stop is

    rollout(3)
    wait_until(lambda: rec.tracker.current is not None and rec.tracker.current.ended,
               10, 'the rollout ended in the recorder')
    res = call(rec._srv('success'))
    assert res.success, res.message
    wait_until(lambda: len(rec.closed) == 1, 10, 'episode 1 closed')

    rollout(2)                                  # not marked: closes after the window
    wait_until(lambda: len(rec.closed) == 2, 10, 'episode 2 closed')

    rollout(2)                                  # marked a failure with the Quest button
    wait_until(lambda: rec.tracker.current is not None and rec.tracker.current.ended,
               10, 'the rollout ended in the recorder')
    for pressed in (0, 1, 0):
        joy.publish(Joy(axes=[0.0] * 4, buttons=[0, 0, pressed]))
        if pressed:
            wait_until(lambda: len(rec.closed) == 3, 10, 'episode 3 closed by the button')
    rec.close()

    outcomes = []
    # Directories are numbered in the order the episodes opened; an episode's index counts the
    # session's preflights, so a preflight retried before the first rollout (inputs not yet
    # fresh on a loaded machine: that episode is discarded) leaves the two apart.
    names = [path.name for path, _ in rec.closed]
    assert all(re.fullmatch(r'episode_\d{4}', n) for n in names) and names == sorted(set(names))
    assert [ep.index for _, ep in rec.closed] == sorted({ep.index for _, ep in rec.closed})
    for path, ep in rec.closed:
        with BagReader(path) as bag:
            topics = bag.info.topics
            assert topics['/policy/chunk'].count >= 2 and topics['/joint_states'].count > 0
            assert topics['/camera/scene/image_raw'].count > 0
            assert topics['/policy/status'].count > 0
            from rclpy.serialization import deserialize_message
            from std_msgs.msg import String
            (head,) = [json.loads(deserialize_message(bytes(raw), String).data)
                       for _, _, _, raw in bag.messages(['/egoroll/episode'])]
            assert head['index'] == ep.index
            assert head['policy_id'] == policy.policy.metadata.fingerprint
            assert head['configs'] == {str(cfg): cfg.read_text()}
            chunk_msgs = [deserialize_message(bytes(raw), ActionChunk)
                          for _, _, _, raw in bag.messages(['/policy/chunk'])]
            # the live chunks (the preflight's shadow chunk too, when its status was seen)
            assert sum(not m.shadow for m in chunk_msgs) >= 2
        import yaml
        meta = yaml.safe_load((path / 'metadata.yaml').read_text())
        custom = json.loads(meta['rosbag2_bagfile_information']['custom_data'][
            'egoroll.episode'])
        assert custom['ran'] and custom['policy_id'] == head['policy_id']
        outcomes.append(custom['outcome'])
    assert outcomes == ['success', None, 'failure']


def test_egoroll_record_runs_the_recorder_with_the_configs_cameras_and_stops_on_ctrl_c(
        ros_graph, tmp_path):
    import signal
    import subprocess

    from egoroll_ros.testing import executable_path
    cfg = tmp_path / 'p.yaml'
    cfg.write_text('policy_node:\n  ros__parameters:\n    cameras.names: [scene, wrist]\n'
                   '    cameras.heights: [24, 24]\n    cameras.widths: [32, 32]\n'
                   '    cameras.compressed: [false, true]\n')
    proc = subprocess.Popen([executable_path('egoroll'), 'record', '--out',
                             str(tmp_path / 'eps'), '--config', str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        node = ros_graph.node('record_probe')
        client = node.create_client(Trigger, 'record/mark_success')
        assert client.wait_for_service(timeout_sec=20)
        res = client.call(Trigger.Request(), timeout_sec=10)
        assert not res.success and 'no episode to mark' in res.message
        # the compressed wrist camera and the raw scene camera are subscribed
        wait_until(lambda: {'/camera/scene/image_raw', '/camera/wrist/image_raw/compressed'}
                   <= {n for n, _ in node.get_topic_names_and_types()}, 10,
                   'the camera subscriptions')
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert '(13 topics)' in err and list((tmp_path / 'eps').iterdir()) == []


def test_egoroll_record_refuses_an_outcome_button_the_gate_or_policy_node_uses(tmp_path):
    import subprocess

    from ament_index_python.packages import get_package_share_directory

    from egoroll_ros.testing import executable_path
    cfg = Path(get_package_share_directory('egoroll_ros')) / 'config'
    base = [executable_path('egoroll'), 'record', '--out', str(tmp_path / 'eps'),
            '--config', str(cfg / 'policy_node_cartesian.yaml'),
            '--gate-config', str(cfg / 'safety_gate_cartesian.yaml')]
    for buttons, other in ((['--success-button', '0'], 'safety_gate confirm_button'),
                           (['--failure-button', '1'], 'safety_gate estop_button'),
                           (['--success-button', '3'], 'policy_node takeover.button')):
        res = subprocess.run(base + buttons, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res.stderr
        line = next(x for x in res.stderr.splitlines() if 'FATAL' in x)
        assert f'button {buttons[1]} is also {other}' in line, line
    assert not (tmp_path / 'eps').exists()              # refused before anything was made
