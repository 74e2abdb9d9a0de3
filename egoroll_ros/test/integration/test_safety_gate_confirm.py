"""safety_gate's needs-confirmation flow over real DDS, against a recording action server.

A chunk that only crosses the soft end-effector translation limit waits for an operator
confirmation (``safety/confirm`` or the Quest confirm button); the confirmation authorises
exactly that chunk, re-checked against the latest measured state, until ``confirm_timeout``.

A confirmed chunk is re-stamped to the confirmation time (its points keep their
``time_from_start``), so a confirmation that comes later than ``max_chunk_age`` still works.
"""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger
from test_safety_gate import ARM, QM, URDF, RecordingServer

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.nodes.safety_gate import SafetyGate
from egoroll_ros.ros.convert import chunk_to_msg
from egoroll_ros.testing import wait_until
from egoroll_ros.testing.arming import GateArmer

pytestmark = [pytest.mark.integration, pytest.mark.safety]

# lift at 0.1 rad/s for 60 points x 0.05 s: tool0 (0.5 m from the lift axis) ends ~0.15 m from
# the measured pose: beyond the soft limit (0.10 m), within the hard one (0.25 m), every other
# check passes (steps 5 mm / 0.005 rad, 3 s long).
SOFT = (0.0, 0.1, 0.0, 0.0, 0.0)
SMALL = (0.02, 0.0, 0.02, 0.0, 0.0)           # stays well inside the soft limit
N = 60


class ConfirmRig:
    """The gate in-process under a namespace of its own, a recording action server, a
    joint_states publisher whose positions the test can move, and a safety/confirm client.

    The namespace is unique per rig: a previous test's action server, still being undiscovered
    by DDS, can otherwise make ``server_is_ready`` flap and a forward fail.
    """

    _count = itertools.count()

    def __init__(self, graph, tmp_path, **params) -> None:
        self.q = QM.copy()
        urdf = tmp_path / 'arm.urdf'
        urdf.write_text(URDF)
        values = dict(joints=ARM, urdf_path=str(urdf), ee_frames=['tool0'],
                      gripper_joints=['gripper'], gripper_min=[0.0], gripper_max=[0.035],
                      max_step=[0.2, 0.2, 0.2, 0.2, 0.01], require_deadman=False,
                      # no Quest stream here: no e-stop channel to watch (the quest/joy
                      # watchdog has its own tests in test_safety_gate.py)
                      estop_button=-1, confirm_timeout=10.0)
        values.update(params)
        ns = f'/confirm_{os.getpid()}_{next(self._count)}'
        self.graph = graph
        self.tester = graph.node('gate_tester', namespace=ns)
        self.server = RecordingServer(self.tester)
        self.gate = graph.add(SafetyGate(
            context=graph.context, namespace=ns,
            parameter_overrides=[Parameter(k, value=v) for k, v in values.items()]))
        self.verdicts = graph.collect(self.tester, GateVerdict, 'safety/verdict')
        self.chunk_pub = self.tester.create_publisher(ActionChunk, 'policy/chunk', 10)
        self.joy_pub = self.tester.create_publisher(Joy, 'quest/joy', 10)
        self.js_pub = self.tester.create_publisher(JointState, 'joint_states', 10)
        self.tester.create_timer(0.01, self._publish_js)
        self.confirm = self.tester.create_client(Trigger, 'safety/confirm')
        graph.wait_for_subscribers(self.chunk_pub)
        graph.wait_for_subscribers(self.js_pub)
        graph.wait_for_subscribers(self.joy_pub)
        graph.wait_for_publishers(self.verdicts.subscription)
        wait_until(lambda: self.gate._js is not None, 5.0, 'gate receives joint_states')
        wait_until(self.gate._client.server_is_ready, 10.0, 'gate discovers the action server')
        # The gate starts disarmed: a preflight 0 and safety/arm, as policy_node's start.
        pre = self.send(0, [0.0] * len(ARM), shadow=True)
        assert pre.accepted, pre.summary
        answer = GateArmer(self.tester).arm(0, 'ab' * 32)
        assert answer.success, answer.message

    def _publish_js(self) -> None:
        msg = JointState(name=ARM, position=self.q.tolist())
        msg.header.stamp = self.tester.get_clock().now().to_msg()
        self.js_pub.publish(msg)

    def send(self, seq: int, velocity, n: int = 20,  # noqa: ANN001
             shadow: bool = False) -> GateVerdict:
        stamp = self.tester.get_clock().now().nanoseconds * 1e-9
        times = 0.05 * np.arange(1, n + 1)
        traj = JointTrajectoryData(tuple(ARM), times, QM + np.outer(times, velocity),
                                   stamp=stamp)
        start = len(self.verdicts.snapshot())
        self.chunk_pub.publish(chunk_to_msg(Chunk(seq, 'ab' * 32, stamp, traj, shadow=shadow)))
        return self.verdicts.wait_for(lambda v: v.sequence == seq, 5.0, start=start)

    def call_confirm(self) -> Trigger.Response:
        assert self.confirm.wait_for_service(timeout_sec=5.0)
        future = self.confirm.call_async(Trigger.Request())
        wait_until(future.done, 5.0, 'safety/confirm response')
        return future.result()

    def confirm_verdict(self, seq: int, start: int) -> GateVerdict:
        return self.verdicts.wait_for(
            lambda v: v.sequence == seq and v.summary.startswith('operator confirmation'),
            5.0, start=start)

    def pending(self, seq: int) -> GateVerdict:
        """Send a chunk beyond the soft limit and check that it waits, not forwarded."""
        verdict = self.send(seq, velocity=SOFT, n=N)
        assert verdict.needs_confirmation and not verdict.accepted, verdict.summary
        assert not verdict.forwarded
        assert {v.check for v in verdict.violations} == {'ee_soft_translation'}
        return verdict

    def sync_then_goals(self, seq: int) -> list[int]:
        """Forward a plain chunk ``seq`` and return every goal the server got up to it.

        The gate sends goals in order on one client, so a goal sent before ``seq`` by mistake
        would be listed before it: a positive sync point instead of waiting and hoping.
        """
        assert self.send(seq, velocity=SMALL).forwarded
        wait_until(lambda: seq in self.server.sequences(), 5.0, f'goal {seq}')
        return self.server.sequences()

    def press_joy(self, confirm: int) -> None:
        """Publish a Joy message and wait until the gate has processed it."""
        before = self.gate.interlock.joy_time
        self.joy_pub.publish(Joy(axes=[0.0] * 4, buttons=[confirm, 0]))
        wait_until(lambda: self.gate.interlock.joy_time != before, 5.0, 'gate receives quest/joy')


@pytest.fixture
def make_rig(ros_graph, tmp_path):
    rigs = []

    def make(**params) -> ConfirmRig:
        rigs.append(ConfirmRig(ros_graph, tmp_path, **params))
        return rigs[-1]

    yield make
    for r in rigs:                                   # let running goals end before teardown
        r.server.closing.set()


@pytest.fixture
def rig(make_rig):
    return make_rig()


def test_soft_limit_chunk_waits_and_confirm_forwards_exactly_that_chunk(rig):
    rig.pending(1)                                   # its verdict says: not forwarded
    start = len(rig.verdicts.snapshot())
    resp = rig.call_confirm()
    assert resp.success, resp.message
    verdict = rig.confirm_verdict(1, start)
    assert verdict.forwarded and not any(v.check != 'ee_soft_translation'
                                         for v in verdict.violations), verdict.summary
    wait_until(lambda: rig.server.sequences() == [1], 5.0, 'the confirmed chunk as goal 1')
    goal = rig.server.goals[0]
    assert len(goal.trajectory.points) == N and list(goal.trajectory.joint_names) == ARM
    times = 0.05 * np.arange(1, N + 1)
    expected = QM + np.outer(times, SOFT)
    sent = np.array([p.positions for p in goal.trajectory.points])
    np.testing.assert_allclose(sent, expected, atol=1e-12)
    assert goal.source == rig.gate.get_fully_qualified_name()   # allowed_sources matches it


def test_confirmation_later_than_max_chunk_age_runs_the_chunk_from_the_confirmation(
        make_rig):
    rig = make_rig(max_chunk_age=0.3)
    rig.pending(1)
    t_sent = rig.tester.get_clock().now().nanoseconds * 1e-9
    wait_until(lambda: rig.tester.get_clock().now().nanoseconds * 1e-9 - t_sent > 0.6, 5.0,
               'twice max_chunk_age passes')
    start = len(rig.verdicts.snapshot())
    resp = rig.call_confirm()
    assert resp.success, resp.message
    verdict = rig.confirm_verdict(1, start)
    assert verdict.forwarded, verdict.summary
    goal = rig.server.goals[0]
    stamp = goal.trajectory.header.stamp.sec + goal.trajectory.header.stamp.nanosec * 1e-9
    assert stamp - t_sent > 0.6, 'the goal counts its points from the confirmation'


def test_confirm_with_nothing_pending_forwards_nothing(rig):
    rig.pending(1)
    assert rig.call_confirm().success
    wait_until(lambda: rig.server.sequences() == [1], 5.0, 'goal 1')
    again = rig.call_confirm()
    assert not again.success and 'no chunk is waiting' in again.message, again.message
    fresh = rig.call_confirm()                       # and with nothing ever pending since
    assert not fresh.success
    assert rig.sync_then_goals(2) == [1, 2]


def test_quest_confirm_button_press_edge_confirms(rig):
    rig.press_joy(0)
    rig.pending(1)
    start = len(rig.verdicts.snapshot())
    rig.press_joy(1)                                 # rising edge: confirms
    assert rig.confirm_verdict(1, start).forwarded
    wait_until(lambda: rig.server.sequences() == [1], 5.0, 'goal 1 from the Quest button')
    # Holding the button is not a new press: the next pending chunk still waits. The gate
    # handles quest/joy one message at a time, so once the third held message is in, the
    # first two have been handled completely (a confirmation included).
    rig.pending(2)
    start = len(rig.verdicts.snapshot())
    for _ in range(3):
        rig.press_joy(1)
    assert rig.gate.interlock.pending_sequence == 2
    assert not [v for v in rig.verdicts.snapshot()[start:] if v.sequence == 2]
    rig.press_joy(0)
    rig.press_joy(1)                                 # release and press again
    assert rig.confirm_verdict(2, start).forwarded
    wait_until(lambda: rig.server.sequences() == [1, 2], 5.0, 'goal 2 after a new press')


def test_pending_chunk_expires_after_confirm_timeout(make_rig):
    rig = make_rig(confirm_timeout=0.3)
    rig.pending(1)
    expires = rig.gate.interlock.pending_expires
    wait_until(lambda: time.monotonic() > expires + 0.05, 5.0, 'confirm_timeout passes')
    resp = rig.call_confirm()
    assert not resp.success and 'expired' in resp.message, resp.message
    assert rig.sync_then_goals(2) == [2]             # the expired chunk never ran


def test_pending_chunk_whose_recheck_fails_is_rejected_on_confirm(rig):
    rig.pending(1)
    rig.q = QM + np.array([0.3, 0.0, 0.0, 0.0, 0.0])  # the arm moved (pan) since the chunk
    wait_until(lambda: rig.gate._js is not None and abs(rig.gate._js.positions[0] - 0.3) < 1e-9,
               5.0, 'gate sees the moved joint state')
    start = len(rig.verdicts.snapshot())
    resp = rig.call_confirm()
    assert not resp.success and 'not forwarded' in resp.message, resp.message
    verdict = rig.confirm_verdict(1, start)
    assert not verdict.forwarded and not verdict.accepted and not verdict.needs_confirmation
    assert {'start_deviation', 'max_step'} <= {v.check for v in verdict.violations}
    assert rig.server.sequences() == []
    rig.q = QM.copy()
    wait_until(lambda: abs(rig.gate._js.positions[0]) < 1e-9, 5.0, 'joint state back')
    assert rig.sync_then_goals(2) == [2]


def test_newer_forwarded_chunk_replaces_the_pending_one(rig):
    rig.pending(1)
    assert rig.sync_then_goals(2) == [2]
    resp = rig.call_confirm()
    assert not resp.success and 'no chunk is waiting' in resp.message, resp.message
    assert rig.sync_then_goals(3) == [2, 3]
