"""egoroll replay (the installed command) into a live graph: every message, in order, with the
recorded spacing scaled by --rate; /clock, remap, loop, pause; SIGINT/SIGTERM end it within 1 s
in every mode; only sensor topics by default and never into a robot graph; a replayed episode
recorded by the demo's recorder evaluates like the original."""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState, Joy
from std_msgs.msg import String
from std_srvs.srv import Trigger

from egoroll_ros.bag.evaluate import EvaluateOptions, evaluate
from egoroll_ros.bag.synth import write_episode
from egoroll_ros.ros.bagio import BagRecorder
from egoroll_ros.sim.demo_task import demo_urdf_path
from egoroll_ros.testing import executable_path, wait_until

pytestmark = pytest.mark.integration
#: The promise of docs/replay (egoroll replay --help): a signal ends a replay within 1 s.
SIGNAL_BOUND = 1.0
UNIT = Path(__file__).resolve().parents[1] / 'unit'


def replay(*args: str) -> subprocess.Popen:
    return subprocess.Popen([executable_path('egoroll'), 'replay', *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(('storage', 'rate'), [('mcap', 2.0), ('sqlite3', 0.5)])
def test_replay_delivers_every_message_in_order_with_spacing_scaled_by_rate(
        ros_graph, tmp_path, storage, rate):
    duration = 0.6 if rate > 1 else 0.3
    ep = write_episode(tmp_path / 'ep', storage, duration=duration, joint_rate=50.0,
                       camera_rate=10.0)
    node = ros_graph.node('replay_sink')
    js = ros_graph.collect(node, JointState, 'joint_states')
    cam = ros_graph.collect(node, Image, 'camera/scene/image_raw')
    recorder = None
    if storage == 'mcap':     # record what is replayed with the demo's recorder
        recorder = BagRecorder(ros_graph.node('replay_recorder'), tmp_path / 'rec',
                               [('joint_states', 'sensor_msgs/msg/JointState'),
                                ('camera/scene/image_raw', 'sensor_msgs/msg/Image')])
    proc = replay(str(ep.path), '--rate', str(rate), '--wait-for-subscribers', '20',
                  '--topics', '/joint_states', '/camera/scene/image_raw')
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    n_js, n_cam = len(ep.js_times), len(ep.image_times)
    msgs = js.wait_count(n_js, timeout=10)
    cam.wait_count(n_cam, timeout=10)
    assert len(msgs) == n_js and len(cam.snapshot()) == n_cam     # none lost, none extra
    np.testing.assert_array_equal([m.position[0] for m in msgs], ep.positions[:, 0])
    assert [m.header.stamp.nanosec for m in msgs] == sorted(m.header.stamp.nanosec
                                                            for m in msgs)
    # paced: the whole episode takes (duration / rate) s on arrival, not an instant burst
    span = js.received[-1] - js.received[0]
    assert span >= 0.9 * duration / rate, span
    assert span < duration / rate + 2.0, span
    assert f'published {n_js + n_cam} messages' in err
    if recorder is not None:
        wait_until(lambda: recorder.counts['joint_states'] == n_js, 10.0, 'recorded')
        recorder.close()
        sys.path.insert(0, str(UNIT))
        from policy_fakes import JOINTS, make_fake_checkpoint
        ck = make_fake_checkpoint(tmp_path / 'ck', chunk_length=5, step_period=0.05,
                                  cameras=(('scene', 24, 32),))
        cfg = tmp_path / 'p.yaml'
        cfg.write_text('policy_node:\n  ros__parameters:\n'
                       f'    joints: [{", ".join(JOINTS)}]\n'
                       "    policy.backend: 'policy_fakes:FakePolicy'\n"
                       '    cameras.names: [scene]\n    cameras.heights: [24]\n'
                       '    cameras.widths: [32]\n    max_age.camera: 1.0\n'
                       '    max_age.joint_states: 1.0\n'
                       # replayed without --clock: the 2024 stamps meet today's receive
                       # times; the offset is measured and reported, not checked
                       '    max_clock_offset: 0.0\n')
        rep = evaluate(EvaluateOptions(bag=tmp_path / 'rec', config=cfg, checkpoint=ck,
                                       out_dir=tmp_path / 'eval', urdf=demo_urdf_path(),
                                       plots=False))
        assert rep['decisions']['chunks'] >= 1
        assert rep['decisions']['acceptance_rate'] == 1.0
        assert rep['clock_offsets']['camera/scene']['min'] > 3600 * 24 * 300
        assert any("'max_clock_offset' is 0" in w for w in rep['warnings'])


def _stop_within_bound(proc: subprocess.Popen, sig: int) -> tuple[str, float]:
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - sent
    return proc.stderr.read(), took


def test_replay_clock_remap_loop_and_a_clean_ctrl_c(ros_graph, tmp_path):
    ep = write_episode(tmp_path / 'ep', 'mcap', duration=0.3, joint_rate=50.0, camera=None)
    node = ros_graph.node('replay_sink2')
    js = ros_graph.collect(node, JointState, '/replayed/joint_states')
    clock = ros_graph.collect(node, Clock, '/clock')
    proc = replay(str(ep.path), '--loop', '--clock', '50', '--remap',
                  '/joint_states:=/replayed/joint_states', '--wait-for-subscribers', '20',
                  '--progress', 'on')
    try:
        js.wait_count(2 * len(ep.js_times) + 1, timeout=30)    # wrapped around at least once
        clock.wait_count(5, timeout=10)
    finally:
        err, took = _stop_within_bound(proc, signal.SIGINT)
    assert proc.returncode == 130, err
    assert took <= SIGNAL_BOUND, f'SIGINT took {took:.2f} s'
    assert 'stopped by Ctrl-C after' in err and 'Traceback' not in err
    assert '% ' in err and 'bag time' in err          # the progress bar
    loops = [m.position[0] for m in js.snapshot()]
    n = len(ep.js_times)
    np.testing.assert_array_equal(loops[:2 * n], np.tile(ep.positions[:, 0], 2))
    lo, hi = int(round(ep.js_times[0] * 1e9)), int(round(ep.js_times[-1] * 1e9))
    for c in clock.snapshot():
        t = c.clock.sec * 1_000_000_000 + c.clock.nanosec
        assert lo - 1_000 <= t <= hi + 1_000


@pytest.mark.parametrize(('mode', 'sig', 'code'), [
    (('--rate', '0.2', '--clock', '100'), signal.SIGTERM, 143),
    (('--loop', '--rate', '5'), signal.SIGTERM, 143),
    (('--start-paused', '--clock', '50'), signal.SIGINT, 130),
    (('--wait-for-subscribers', '60', '--remap', '/joint_states:=/nobody_listens'),
     signal.SIGINT, 130),
], ids=['slow-rate-clock', 'loop-fast', 'paused', 'waiting-for-subscribers'])
def test_a_signal_ends_a_replay_within_a_second_in_every_mode(ros_graph, tmp_path, mode, sig,
                                                             code):
    ep = write_episode(tmp_path / 'ep', 'mcap', duration=2.0, joint_rate=100.0, camera=None)
    node = ros_graph.node('replay_sink3')
    clock = ros_graph.collect(node, Clock, '/clock')
    js = ros_graph.collect(node, JointState, '/replay/joint_states')
    proc = replay(str(ep.path), '--discovery-time', '0.5', *mode)
    try:
        if '--clock' in mode:
            clock.wait_count(3, timeout=30)
        elif '--loop' in mode:
            js.wait_count(3, timeout=30)
        else:
            # waiting for a subscriber that never comes: wait until its publisher is seen
            wait_until(lambda: node.count_publishers('/nobody_listens') > 0, 30.0,
                       'replay publisher discovered')
    finally:
        err, took = _stop_within_bound(proc, sig)
    assert proc.returncode == code, err
    assert took <= SIGNAL_BOUND, f'{signal.Signals(sig).name} took {took:.2f} s: {err}'
    assert 'Traceback' not in err and 'stopped by' in err
    if '--start-paused' in mode:
        # paused: /clock repeats the paused time, nothing else is published
        assert len({(c.clock.sec, c.clock.nanosec) for c in clock.snapshot()}) == 1
        assert js.snapshot() == []


def _control_bag(tmp_path):
    urdf = demo_urdf_path().read_text()
    return write_episode(tmp_path / 'ep', 'mcap', duration=0.5, joint_rate=50.0,
                         camera_rate=10.0, joy_rate=20.0, robot_description=urdf)


def test_replay_plays_only_sensor_topics_by_default_and_joint_states_away_from_the_live_name(
        ros_graph, tmp_path):
    ep = _control_bag(tmp_path)
    node = ros_graph.node('replay_sink4')
    replayed_js = ros_graph.collect(node, JointState, '/replay/joint_states')
    live_js = ros_graph.collect(node, JointState, '/joint_states')
    joy = ros_graph.collect(node, Joy, '/quest/joy')
    desc = ros_graph.collect(node, String, '/robot_description')
    cam = ros_graph.collect(node, Image, '/camera/scene/image_raw')
    proc = replay(str(ep.path), '--wait-for-subscribers', '20', '--discovery-time', '0.5')
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert 'not replayed' in err and '/quest/joy' in err and '/robot_description' in err
    replayed_js.wait_count(len(ep.js_times), timeout=10)
    cam.wait_count(len(ep.image_times), timeout=10)
    # Whatever was replayed has arrived (reliable, acknowledged before exit): nothing else came.
    assert live_js.snapshot() == [] and joy.snapshot() == [] and desc.snapshot() == []


def test_a_control_topic_is_replayed_only_when_named(ros_graph, tmp_path):
    ep = _control_bag(tmp_path)
    node = ros_graph.node('replay_sink5')
    joy = ros_graph.collect(node, Joy, '/quest/joy')
    proc = replay(str(ep.path), '--topics', '/quest/joy', '--wait-for-subscribers', '20',
                  '--discovery-time', '0.5')
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    joy.wait_count(len(ep.joy_times), timeout=10)


@pytest.mark.safety
@pytest.mark.parametrize('stranger', ['safety_gate', 'trajectory_server'])
def test_replay_refuses_a_domain_with_a_robot_graph(ros_graph, tmp_path, stranger):
    ep = _control_bag(tmp_path)
    ros_graph.node(stranger)                      # a robot half on this domain
    node = ros_graph.node('replay_sink6')
    js = ros_graph.collect(node, JointState, '/replay/joint_states')
    res = subprocess.run([executable_path('egoroll'), 'replay', str(ep.path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 3, res.stderr
    assert f'/{stranger}' in res.stderr and 'refused' in res.stderr
    assert 'Traceback' not in res.stderr and 'replaying' not in res.stderr
    assert js.snapshot() == []
    # Explicitly asked for, it plays.
    res = subprocess.run([executable_path('egoroll'), 'replay', str(ep.path),
                          '--into-live-graph', '--wait-for-subscribers', '20'],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    js.wait_count(len(ep.js_times), timeout=10)


def test_a_paused_replay_resumes_on_its_service(ros_graph, tmp_path):
    ep = write_episode(tmp_path / 'ep', 'mcap', duration=0.3, joint_rate=50.0, camera=None)
    node = ros_graph.node('replay_sink7')
    js = ros_graph.collect(node, JointState, '/replay/joint_states')
    clock = ros_graph.collect(node, Clock, '/clock')
    proc = replay(str(ep.path), '--start-paused', '--clock', '50', '--discovery-time', '0.5',
                  '--wait-for-subscribers', '20')
    try:
        clock.wait_count(10, timeout=30)
        assert js.snapshot() == [], 'a paused replay published'
        assert len({(c.clock.sec, c.clock.nanosec) for c in clock.snapshot()}) == 1
        client = node.create_client(Trigger, '/egoroll_replay/resume')
        assert client.wait_for_service(timeout_sec=20)
        future = client.call_async(Trigger.Request())
        wait_until(future.done, 10.0, 'resume answered')
        assert future.result().success
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, proc.stderr.read()
    js.wait_count(len(ep.js_times), timeout=10)


def test_replay_of_a_missing_topic_names_what_the_bag_has(tmp_path):
    ep = write_episode(tmp_path / 'ep', 'sqlite3', duration=0.1)
    res = subprocess.run([executable_path('egoroll'), 'replay', str(ep.path), '--remap',
                          '/quest/joy:=/x'], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ))
    assert res.returncode == 2 and 'Traceback' not in res.stderr
    assert 'no topic /quest/joy in the bag. The bag has: /camera/scene/image_raw' in res.stderr
