"""policy_node in one process: rollout control, stamping, stop race, faults, Quest, status."""

from __future__ import annotations

import math
from pathlib import Path
import sys
import threading
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
import numpy as np
import pytest
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from rclpy.task import Future
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from egoroll_interfaces.msg import ActionChunk, ExecutorState, GateVerdict, RolloutStatus
from egoroll_ros.core.rollout import State
from egoroll_ros.nodes.policy_node import PolicyNode
from egoroll_ros.ros.convert import time_to_sec
from egoroll_ros.ros.gate_stop import CONFIRMED, NO_GATE, NOT_CONFIRMED, PENDING, GateStop
from egoroll_ros.ros.runner import wait_for
from egoroll_ros.testing import run_callback, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'unit'))
from policy_fakes import BACKEND, JOINTS, make_fake_checkpoint  # noqa: E402, I001

# The policy node spins on one thread, as it does as a process (its callbacks never block).
pytestmark = [pytest.mark.integration, pytest.mark.ros_threads(1)]  # the default; explicit
STATE = np.array([0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 3.1, 0.02])


def _node(ros_graph, ck: Path, **params) -> PolicyNode:
    base = {'joints': JOINTS, 'continuous_joints': ['wrist_roll'], 'policy.backend': BACKEND,
            'policy.path': str(ck), 'query_frequency': 50.0, 'status_rate': 20.0,
            # generous: these tests are not about staleness and the machine is shared
            'max_age.joint_states': 1.0,
            'gate.arm_service': '', 'gate.stop_service': '',   # no safety gate in these tests
            'gate.require_preflight_acceptance': False}
    base.update(params)
    node = PolicyNode(context=ros_graph.context,
                      parameter_overrides=[Parameter(k, value=v) for k, v in base.items()])
    return ros_graph.add(node)


class Inputs:
    """Publishes joint_states at 100 Hz from a timer (stoppable)."""

    def __init__(self, ros_graph) -> None:
        self.node = ros_graph.node('inputs_driver')
        self.pub = self.node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
        self.joy = self.node.create_publisher(Joy, 'quest/joy', qos_profile_sensor_data)
        self.state = STATE.copy()
        self.timer = self.node.create_timer(0.01, self._tick)

    def _tick(self) -> None:
        msg = JointState(name=list(JOINTS), position=self.state.tolist())
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pub.publish(msg)

    def stop(self) -> None:
        self.timer.cancel()


def _call(node: PolicyNode, name: str) -> Trigger.Response:
    fn = {'preflight': node._srv_preflight, 'start': node._srv_start,
          'stop': node._srv_stop}[name]
    return run_callback(fn, Trigger.Request(), Trigger.Response())


def _wait_fresh(node: PolicyNode) -> None:
    wait_until(lambda: (node.inputs.ages(__import__('time').monotonic()).get('joint_states')
                        or 9) < 0.5, 10, 'joint_states received')


def test_preflight_then_start_publishes_numbered_stamped_chunks_via_services(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='wrap', offset=0.1, step_period=0.05)
    node = _node(ros_graph, ck)
    Inputs(ros_graph)
    probe = ros_graph.node('probe')
    chunks = ros_graph.collect(probe, ActionChunk, 'policy/chunk')
    markers = ros_graph.collect(probe, MarkerArray, 'policy/markers')
    clients = {n: probe.create_client(Trigger, f'policy/{n}') for n in
               ('preflight', 'start', 'stop')}
    for c in clients.values():
        assert c.wait_for_service(timeout_sec=10)
    ros_graph.wait_for_publishers(chunks.subscription)
    ros_graph.wait_for_publishers(markers.subscription)
    _wait_fresh(node)

    def call(name: str) -> Trigger.Response:
        return clients[name].call(Trigger.Request(), timeout_sec=10)

    assert not call('start').success  # no preflight yet
    res = call('preflight')
    assert res.success, res.message
    shadow = chunks.wait_for(lambda m: m.shadow, timeout=5)
    fp = node.policy.metadata.fingerprint
    assert shadow.policy_id == fp and len(fp) == 64
    assert node.sm.state is State.READY
    res = call('start')
    assert res.success, res.message
    live = [chunks.wait_for(lambda m, k=k: not m.shadow and m.sequence == shadow.sequence + k,
                            timeout=5) for k in (1, 2, 3)]
    # RViz: every live chunk also updates the status text on policy/markers.
    markers.wait_for(lambda a: any(f'chunk {live[0].sequence}' in m.text for m in a.markers),
                     timeout=5)
    stop = call('stop')
    assert stop.success and node.sm.state is State.IDLE
    now = node.get_clock().now().nanoseconds * 1e-9
    for m in live:
        assert m.policy_id == fp and list(m.trajectory.joint_names) == JOINTS
        assert 0 <= now - time_to_sec(m.header.stamp) < 5.0
        times = [time_to_sec(p.time_from_start) for p in m.trajectory.points]
        np.testing.assert_allclose(times, [0.05 * (k + 1) for k in range(5)], atol=1e-9)
        pos = np.array([p.positions for p in m.trajectory.points])
        # wrist_roll: policy said wrap(3.1 + 0.1) = 3.2 - 2 pi; unwrapped to 3.2 (short way)
        np.testing.assert_allclose(pos[:, 6], 3.2, atol=1e-9)
        np.testing.assert_allclose(pos[0, :6], STATE[:6] + 0.1, atol=1e-9)
        assert m.inference_latency > 0
    stamps = [time_to_sec(m.header.stamp) for m in live]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3


def _race_once(node: PolicyNode, stopped: threading.Event, wait_chunk: bool) -> None:
    res = _call(node, 'preflight')
    assert res.success, res.message
    stopped.clear()
    before = node.sm.chunks_published
    assert _call(node, 'start').success
    if wait_chunk:
        wait_until(lambda: node.sm.chunks_published > before, 5, 'a live chunk')
    _call(node, 'stop')
    stopped.set()


def test_no_chunk_is_published_after_stop_returns_100_repetitions(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='slow')
    node = _node(ros_graph, ck, query_frequency=1000.0)
    Inputs(ros_graph)
    _wait_fresh(node)
    stopped = threading.Event()
    late: list[int] = []
    publish = node.chunk_pub.publish

    def guarded(msg: ActionChunk) -> None:
        if stopped.is_set() and not msg.shadow:
            late.append(msg.sequence)
        publish(msg)

    node.chunk_pub.publish = guarded
    for k in range(100):
        _race_once(node, stopped, wait_chunk=k % 2 == 0)
    assert late == []
    assert node.sm.chunks_published >= 50


def test_stale_joint_states_skip_inference_and_report_by_how_much(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck')
    node = _node(ros_graph, ck, **{'max_age.joint_states': 0.1})
    inputs = Inputs(ros_graph)
    wait_until(lambda: _call(node, 'preflight').success, 10, 'a passing preflight')
    assert _call(node, 'start').success
    wait_until(lambda: node.sm.chunks_published >= 2, 5, 'chunks')
    inputs.stop()
    base = node.inferences_skipped
    wait_until(lambda: node.inferences_skipped >= base + 3
               and 'joint_states is' in node.last_skip_reason, 5, 'skipped inferences')
    assert 'joint_states is' in node.last_skip_reason and 'old (max 0.100 s)' in \
        node.last_skip_reason
    n = node.sm.chunks_published
    skipped = node.inferences_skipped
    wait_until(lambda: node.inferences_skipped >= skipped + 3, 5, 'more skips')
    assert node.sm.chunks_published == n
    assert node.sm.state is State.RUNNING  # waiting for fresh input, not faulted


def test_nan_output_faults_publishes_nothing_and_preflight_clears(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck')
    node = _node(ros_graph, ck)
    Inputs(ros_graph)
    probe = ros_graph.node('probe')
    chunks = ros_graph.collect(probe, ActionChunk, 'policy/chunk')
    ros_graph.wait_for_publishers(chunks.subscription)
    _wait_fresh(node)
    assert _call(node, 'preflight').success
    assert _call(node, 'start').success
    wait_until(lambda: node.sm.chunks_published >= 2, 5, 'chunks')
    node.policy.mode_override = 'nan'
    wait_until(lambda: node.sm.state is State.FAULT, 5, 'FAULT')
    assert 'non-finite' in node.sm.detail
    n = node.sm.chunks_published
    assert not _call(node, 'start').success
    res = _call(node, 'preflight')  # still NaN: preflight fails, stays in fault
    assert not res.success and node.sm.state is State.FAULT
    node.policy.mode_override = 'raise'
    assert not _call(node, 'preflight').success and 'fake policy failure' in node.sm.detail
    node.policy.mode_override = None
    assert _call(node, 'preflight').success and node.sm.state is State.READY
    assert node.sm.chunks_published == n
    for m in chunks.snapshot():
        assert all(np.all(np.isfinite(p.positions)) for p in m.trajectory.points)


@pytest.mark.parametrize('case', ['fingerprint', 'action_size', 'normalisation'])
def test_configure_refuses_bad_checkpoints_with_the_reason(ros_graph, tmp_path, case):
    kw, params, why = {}, {}, ''
    if case == 'fingerprint':
        params = {'policy.expected_fingerprint': 'ab' * 32}
        why = 'fingerprint mismatch'
    elif case == 'action_size':
        kw = {'action_size': 7}
        why = 'action size 7 differs from the 8 configured joints'
    else:
        kw = {'normalization': {'state': {'mean': [0] * 8, 'std': [1] * 8}}}
        why = "normalisation statistics for 'action' are missing"
    ck = make_fake_checkpoint(tmp_path / 'ck', **kw)
    node = _node(ros_graph, ck, **params)
    assert node.sm is None and why in node.unconfigured_detail   # lifecycle: unconfigured
    assert node.policy is None
    assert not [n for n, _ in node.get_service_names_and_types_by_node(
        node.get_name(), node.get_namespace()) if n.startswith('/policy/')]
    res = _call(node, 'preflight')
    assert not res.success and why in res.message


def test_matching_expected_fingerprint_configures(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck')
    from policy_fakes import FakePolicy
    fp = FakePolicy.load(ck).metadata.fingerprint
    node = _node(ros_graph, ck, **{'policy.expected_fingerprint': fp})
    assert node.sm.state is State.IDLE and node.policy.metadata.fingerprint == fp


def test_bouncing_quest_button_toggles_start_once(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck')
    node = _node(ros_graph, ck, **{'quest.toggle_button': 2, 'quest.debounce_time': 0.05})
    inputs = Inputs(ros_graph)
    ros_graph.wait_for_subscribers(inputs.joy)
    _wait_fresh(node)

    def joy(pressed: bool) -> Joy:
        return Joy(buttons=[0, 0, int(pressed)], axes=[0.0, 0.5])

    def hold(pressed: bool, what: str) -> None:
        # keep publishing until the debouncer reports that state
        def pred() -> bool:
            inputs.joy.publish(joy(pressed))
            return node._debounce.pressed is pressed
        wait_until(pred, 5, what, interval=0.01)

    hold(False, 'released')
    assert _call(node, 'preflight').success
    for k in range(12):  # bounce, faster than the debounce time
        inputs.joy.publish(joy(k % 2 == 0))
    hold(True, 'pressed')
    wait_until(lambda: node.sm.state is State.RUNNING, 5, 'RUNNING')
    hold(False, 'released again')
    assert node.sm.state is State.RUNNING  # exactly one toggle
    hold(True, 'second press')
    wait_until(lambda: node.sm.state is State.IDLE, 5, 'stopped by the button')


@pytest.mark.safety
def test_a_toggle_pressed_to_stop_stays_a_stop_when_the_rollout_ends_during_its_debounce(
        ros_graph, tmp_path):
    """The CI failure of 80a8ce2 under load: the gate, watching the same button, stopped the
    rollout before policy_node's debounce ended, and policy_node read the press at its edge as
    a start. Here the rollout ends during the press's debounce and a new preflight makes the
    node READY: the press began while RUNNING, so it is a stop (READY -> IDLE), never a start.
    A press that begins while READY starts, as before."""
    ck = make_fake_checkpoint(tmp_path / 'ck')
    node = _node(ros_graph, ck, **{'quest.toggle_button': 2, 'quest.debounce_time': 2.0})
    inputs = Inputs(ros_graph)
    ros_graph.wait_for_subscribers(inputs.joy)
    _wait_fresh(node)
    deb = node._debounce

    def joy(pressed: bool) -> Joy:
        return Joy(buttons=[0, 0, int(pressed)], axes=[0.0, 0.5])

    def hold(pressed: bool, what: str) -> None:
        def pred() -> bool:
            inputs.joy.publish(joy(pressed))
            return deb.pressed is pressed
        wait_until(pred, 10, what, interval=0.02)

    hold(False, 'released')
    assert _call(node, 'preflight').success and _call(node, 'start').success
    assert node.sm.state is State.RUNNING

    def pending() -> bool:
        inputs.joy.publish(joy(True))
        return deb.deadline is not None
    wait_until(pending, 5, 'the press begun (its debounce running)', interval=0.02)
    assert _call(node, 'stop').success            # the rollout ends during the debounce ...
    assert _call(node, 'preflight').success       # ... and the node is READY again
    assert deb.pressed is False, 'set-up: the debounce ended before the preflight returned'
    assert node.sm.state is State.READY
    states: list[State] = []
    hold(True, 'the press debounced')
    wait_until(lambda: states.append(node.sm.state) or node.sm.state is State.IDLE, 5,
               'the press stops (READY -> IDLE)', interval=0.01)
    assert State.RUNNING not in states
    n = node.sm.chunks_published
    hold(False, 'released again')
    assert node.sm.state is State.IDLE and node.sm.chunks_published == n

    # A press that begins while READY is a start.
    assert _call(node, 'preflight').success and node.sm.state is State.READY
    hold(True, 'a start press')
    wait_until(lambda: node.sm.state is State.RUNNING, 5, 'started by the press')


def test_status_at_5hz_or_more_with_input_ages_and_diagnostics(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck')
    node = _node(ros_graph, ck, status_rate=5.0)
    Inputs(ros_graph)
    probe = ros_graph.node('probe')
    status = ros_graph.collect(probe, RolloutStatus, 'policy/status')
    diags = ros_graph.collect(probe, DiagnosticArray, '/diagnostics')
    msgs = status.wait_count(8, timeout=10)
    rx = status.received[-6:]
    assert (rx[-1] - rx[0]) / 5 < 0.3  # ~0.2 s apart; tolerant of a loaded machine
    last = msgs[-1]
    assert last.state == RolloutStatus.STATE_IDLE and last.state_name == 'IDLE'
    assert last.policy_id == node.policy.metadata.fingerprint
    ages = dict(zip(last.input_names, last.input_ages, strict=True))
    assert 0 <= ages['joint_states'] < 0.5 and ages['quest/joy'] == -1.0
    assert math.isnan(last.last_inference_latency)
    d = diags.wait_for(lambda m: any('rollout' in s.name for s in m.status), timeout=5)
    assert 'IDLE' in d.status[0].message


@pytest.mark.safety
def test_max_age_is_live_only_within_its_bounds_and_never_while_running(ros_graph, tmp_path):
    """max_age.* are live within [0.001, 1] s and never while RUNNING (a rollout runs on the
    freshness limits it started with: a live 60 s would let the policy act on a stale frame);
    max_clock_offset is read-only (a live 0 would turn its check off). Stopped, a tightened
    limit judges the next observation: the preflight then fails on the stale input."""
    node = _node(ros_graph, make_fake_checkpoint(tmp_path / 'ck'),
                 **{'max_age.joint_states': 1.0})
    inputs = Inputs(ros_graph)
    wait_until(lambda: _call(node, 'preflight').success, 10, 'a passing preflight')
    assert _call(node, 'start').success
    wait_until(lambda: node.sm.chunks_published >= 2, 5, 'chunks')
    for name, value in (('max_age.joint_states', 0.1), ('max_age.camera', 0.5)):
        before = node.get_parameter(name).value
        result = node.set_parameters([Parameter(name, value=value)])[0]
        assert not result.successful and 'RUNNING' in result.reason, (name, result.reason)
        assert node.get_parameter(name).value == before and node.p[name] == before
    assert _call(node, 'stop').success
    for name, bad in (('max_age.camera', 0.0), ('max_age.quest', 100.0),
                      ('max_age.joint_states', 1.5), ('max_clock_offset', 0.0),
                      ('max_clock_offset', 60.0)):
        before = node.get_parameter(name).value
        result = node.set_parameters([Parameter(name, value=bad)])[0]
        assert not result.successful and result.reason, name
        assert node.get_parameter(name).value == before and node.p[name] == before
    result = node.set_parameters([Parameter('max_age.joint_states', value=0.1)])[0]
    assert result.successful, result.reason
    assert node.get_parameter('max_age.joint_states').value == 0.1
    inputs.stop()
    wait_until(lambda: not _call(node, 'preflight').success, 10,
               'the preflight fails on joint_states older than the new limit')
    result = node.set_parameters([Parameter('query_frequency', value=20.0)])[0]
    assert not result.successful and node.get_parameter('query_frequency').value == 50.0


@pytest.mark.safety
def test_preflight_and_start_need_the_gates_accepted_verdict_on_the_shadow_chunk(ros_graph,
                                                                                  tmp_path):
    """policy/preflight answers only with the gate's word on its shadow chunk (so a start
    right after it never races the verdict); start is refused until the gate accepted it."""
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='wrap', offset=0.1, step_period=0.05)
    node = _node(ros_graph, ck, **{'gate.require_preflight_acceptance': True,
                                   'gate.verdict_timeout': 1.0})
    Inputs(ros_graph)
    probe = ros_graph.node('probe')
    chunks = ros_graph.collect(probe, ActionChunk, 'policy/chunk')
    gate = probe.create_publisher(GateVerdict, 'safety/verdict', 10)   # the gate's topic
    client = probe.create_client(Trigger, 'policy/preflight')
    assert client.wait_for_service(timeout_sec=10)
    ros_graph.wait_for_publishers(chunks.subscription)
    ros_graph.wait_for_subscribers(gate)
    _wait_fresh(node)

    def verdict(seq: int, accepted: bool) -> None:
        gate.publish(GateVerdict(sequence=seq, shadow=True, accepted=accepted,
                                 summary='accepted' if accepted else 'rejected: x'))

    # no verdict: the preflight fails after gate.verdict_timeout, and start stays refused
    res = _call(node, 'preflight')
    assert not res.success and 'did not report' in res.message, res.message
    res = _call(node, 'start')
    assert not res.success and 'has not reported' in res.message, res.message
    # a rejection: the preflight answers with it
    n = len(chunks.snapshot())
    pending = client.call_async(Trigger.Request())
    shadow = chunks.wait_for(lambda m: m.shadow, timeout=5, start=n)
    res = _call(node, 'start')                   # the verdict is not in yet
    assert not res.success and 'has not reported' in res.message, res.message
    verdict(shadow.sequence - 1, True)           # about another chunk: no effect
    verdict(shadow.sequence, False)
    wait_until(pending.done, 5.0, 'the preflight answer')
    assert not pending.result().success and 'did not accept' in pending.result().message
    assert 'did not accept' in _call(node, 'start').message
    assert node.sm.state is State.READY
    # an acceptance: the preflight succeeds, and a start right after it is allowed
    n = len(chunks.snapshot())
    pending = client.call_async(Trigger.Request())
    shadow = chunks.wait_for(lambda m: m.shadow, timeout=5, start=n)
    verdict(shadow.sequence, True)
    wait_until(pending.done, 5.0, 'the preflight answer')
    assert pending.result().success and 'accepted by the safety gate' in \
        pending.result().message, pending.result().message
    assert _call(node, 'start').success
    assert node.sm.state is State.RUNNING
    _call(node, 'stop')


def test_stop_is_served_while_a_preflight_waits_for_the_worker(ros_graph, tmp_path):
    """policy/preflight awaits the worker's inference; policy/stop must not wait behind it
    (both are coroutines: in one mutually exclusive group the stop would queue until the
    preflight returned)."""
    ck = make_fake_checkpoint(tmp_path / 'ck', mode='sleep:6')
    node = _node(ros_graph, ck)
    Inputs(ros_graph)
    probe = ros_graph.node('probe')
    clients = {n: probe.create_client(Trigger, f'policy/{n}') for n in ('preflight', 'stop')}
    for c in clients.values():
        assert c.wait_for_service(timeout_sec=10)
    _wait_fresh(node)
    preflight = clients['preflight'].call_async(Trigger.Request())
    wait_until(lambda: node.sm.state is State.PREFLIGHT, 5, 'preflight running')
    stop = clients['stop'].call_async(Trigger.Request())
    wait_until(stop.done, 5, 'the stop answered')
    assert not preflight.done()             # the inference still sleeps on the worker
    assert stop.result().success and node.sm.state is State.IDLE
    (ck / 'mode').write_text('hold')
    wait_until(preflight.done, 15, 'the preflight answered')
    res = preflight.result()
    assert not res.success and 'interrupted' in res.message, res.message


def _mine(node: PolicyNode) -> tuple[set[str], set[str], set[str]]:
    """The node's own services, subscriptions and publishers (names), from the graph."""
    name, ns = node.get_name(), node.get_namespace()
    return ({n for n, _ in node.get_service_names_and_types_by_node(name, ns)},
            {n for n, _ in node.get_subscriber_names_and_types_by_node(name, ns)},
            {n for n, _ in node.get_publisher_names_and_types_by_node(name, ns)})


def test_lifecycle_configure_creates_activate_allows_deactivate_stops_cleanup_releases(
        ros_graph, tmp_path):
    from rclpy.lifecycle import TransitionCallbackReturn as R

    ck = make_fake_checkpoint(tmp_path / 'ck')
    node = _node(ros_graph, ck, autoconfigure=False)
    Inputs(ros_graph)
    ours = ('/policy/preflight', '/policy/start', '/policy/stop')
    # unconfigured: no policy, no worker, no inputs, outputs or rollout services
    srvs, subs, pubs = _mine(node)
    assert node.policy is None and node.sm is None and node._worker is None
    assert not set(ours) & srvs and '/joint_states' not in subs
    assert '/policy/chunk' not in pubs and '/policy/status' not in pubs
    assert '/policy_node/change_state' in srvs          # the lifecycle's own
    # configure: the policy is loaded and checked, everything is created; not yet active
    assert node.trigger_configure() == R.SUCCESS
    policy = node.policy
    srvs, subs, pubs = _mine(node)
    assert set(ours) <= srvs and '/joint_states' in subs and '/policy/chunk' in pubs
    assert node._worker.is_alive() and node.sm.state is State.IDLE
    _wait_fresh(node)
    res = _call(node, 'preflight')
    assert not res.success and 'inactive' in res.message, res.message
    # activate: preflight and start are allowed
    assert node.trigger_activate() == R.SUCCESS
    assert _call(node, 'preflight').success
    assert _call(node, 'start').success
    wait_until(lambda: node.sm.chunks_published >= 2, 5, 'live chunks')
    # deactivate: the rollout stops (nothing more is published) and requests are refused
    assert node.trigger_deactivate() == R.SUCCESS
    assert node.sm.state is State.IDLE and 'deactivated' in node.sm.detail
    n = node.sm.chunks_published
    assert not _call(node, 'preflight').success and not _call(node, 'start').success
    assert node.sm.chunks_published == n
    last = node.sm.last_sequence
    # cleanup: the worker stops, the policy is released, the entities are gone
    worker = node._worker
    assert node.trigger_cleanup() == R.SUCCESS
    assert policy.closed and node.policy is None and node.sm is None
    assert not worker.is_alive()
    assert not {s.srv_name for s in node.services} & set(ours)
    assert '/joint_states' not in {s.topic_name for s in node.subscriptions}

    def gone() -> bool:   # the graph learns it a moment later
        srvs, subs, pubs = _mine(node)
        return not set(ours) & srvs and '/joint_states' not in subs and \
            '/policy/chunk' not in pubs
    wait_until(gone, 5, 'entities gone from the graph')
    # configure again: a fresh policy; sequences continue above the last one
    assert node.trigger_configure() == R.SUCCESS
    assert node.policy is not None and node.policy is not policy
    assert node.sm.last_sequence >= last


class StandInGate:
    """A real std_srvs/Trigger service in the gate's place (``safety/stop`` by default): answers
    ``success`` after ``delay`` s, or never (``delay`` None), and records when it answered."""

    def __init__(self, ros_graph, service: str = 'safety/stop', success: bool = True,
                 delay: float | None = 0.0) -> None:
        self.node = ros_graph.node(f"stand_in_{service.replace('/', '_')}")
        self.success, self.delay = success, delay
        self.requests = 0
        self.answered_at: float | None = None       # steady clock
        self.node.create_service(Trigger, service, self._on_stop,
                                 callback_group=ReentrantCallbackGroup())

    async def _on_stop(self, req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        self.requests += 1
        if self.delay is None or self.delay > 0:     # an unanswered future: a plain wait
            await wait_for(self.node, Future(), 3600.0 if self.delay is None else self.delay)
        res.success, res.message = self.success, 'stand-in gate: the executor holds'
        self.answered_at = time.monotonic()
        return res


@pytest.mark.safety
def test_gate_stop_reports_confirmed_refused_silent_unreachable_and_no_gate(ros_graph):
    """The one stop request of every trigger reports what the gate answered, or why there is
    no answer, and always ends (by its timeout); it may be made from any thread."""
    gates = {'ok': StandInGate(ros_graph, 'ok/stop'),
             'no': StandInGate(ros_graph, 'no/stop', success=False),
             'silent': StandInGate(ros_graph, 'silent/stop', delay=None)}
    side = ros_graph.node('policy_side')
    stops = {k: GateStop(side, f'{k}/stop' if k != 'none' else '', 0.5)
             for k in (*gates, 'absent', 'none')}
    wait_until(lambda: all(stops[k]._client.service_is_ready() for k in gates), 10,
               'the stand-in gates discovered')

    def report(key: str, trigger: str = 'policy/stop'):
        future = stops[key].request(trigger)
        wait_until(future.done, 10, f'the {key} report')
        assert stops[key].last == future.result()
        return future.result()

    r = report('ok')
    assert r.state == CONFIRMED and r.confirmed and 'stand-in gate' in r.message, r
    assert r.text().startswith('stop (policy/stop): hold confirmed by the safety gate')
    r = report('no')
    assert r.state == NOT_CONFIRMED and 'stand-in gate' in r.message
    assert 'hold NOT confirmed' in r.text()
    future = stops['silent'].request('Quest toggle')
    assert stops['silent'].last.state == PENDING and 'NOT confirmed yet' in \
        stops['silent'].last.text()
    wait_until(future.done, 10, 'the silent gate reported')
    r = future.result()
    assert r.state == NOT_CONFIRMED and 'did not answer within 0.5 s' in r.message, r
    assert r.elapsed >= 0.5 and gates['silent'].requests == 1
    r = report('absent')
    assert r.state == NOT_CONFIRMED and 'unreachable' in r.message
    assert report('none').state == NO_GATE
    # From another thread (a fault is raised on the inference thread).
    made = []
    thread = threading.Thread(target=lambda: made.append(stops['ok'].request('policy fault')))
    thread.start()
    thread.join()
    wait_until(made[0].done, 10, 'the report of a request from another thread')
    assert made[0].result().state == CONFIRMED and gates['ok'].requests == 2
    stops['ok'].clear()
    assert stops['ok'].last is None


def _change_state(client, transition: int):
    """Request a lifecycle transition; (response, steady time the response was taken)."""
    taken: list[float] = []
    future = client.call_async(ChangeState.Request(transition=Transition(id=transition)))
    future.add_done_callback(lambda f: taken.append(time.monotonic()))
    wait_until(lambda: taken, 30, 'change_state answered')
    return future.result(), taken[0]


def _running(node: PolicyNode) -> None:
    assert _call(node, 'preflight').success
    assert _call(node, 'start').success
    wait_until(lambda: node.sm.chunks_published >= 1, 5, 'live chunks')


@pytest.mark.safety
def test_deactivate_completes_only_after_the_gate_answered_and_reports_an_unconfirmed_hold(
        ros_graph, tmp_path):
    """Lifecycle deactivate (the change_state service) of a running rollout returns only once
    the gate answered its stop; when the gate does not answer, it completes after
    gate.stop_timeout (publishing stopped, starts refused) with the unconfirmed hold in
    policy/status and as an ERROR in /diagnostics."""
    gate = StandInGate(ros_graph, delay=0.3)
    node = _node(ros_graph, make_fake_checkpoint(tmp_path / 'ck'),
                 **{'gate.stop_service': 'safety/stop', 'gate.stop_timeout': 1.0})
    Inputs(ros_graph)
    probe = ros_graph.node('probe')
    status = ros_graph.collect(probe, RolloutStatus, 'policy/status')
    diags = ros_graph.collect(probe, DiagnosticArray, '/diagnostics')
    lifecycle = probe.create_client(ChangeState, 'policy_node/change_state')
    assert lifecycle.wait_for_service(timeout_sec=10)
    wait_until(node._gate._client.service_is_ready, 10, 'the stand-in gate discovered')
    _wait_fresh(node)

    _running(node)
    res, taken = _change_state(lifecycle, Transition.TRANSITION_DEACTIVATE)
    assert res.success
    assert gate.requests == 1 and gate.answered_at is not None and taken >= gate.answered_at
    assert node.sm.state is State.IDLE and not node.active
    assert node._state_machine.current_state[1] == 'inactive'
    status.wait_for(lambda m: 'stop (lifecycle deactivate): hold confirmed by the safety gate'
                    in m.detail, timeout=5)

    # The gate never answers: the transition still completes, after gate.stop_timeout.
    gate.delay = None
    res, _ = _change_state(lifecycle, Transition.TRANSITION_ACTIVATE)
    assert res.success
    _running(node)
    asked = time.monotonic()
    res, taken = _change_state(lifecycle, Transition.TRANSITION_DEACTIVATE)
    assert res.success and taken - asked >= 1.0 and gate.requests == 2
    assert node._state_machine.current_state[1] == 'inactive'
    n = node.sm.chunks_published
    assert not _call(node, 'start').success
    st = status.wait_for(lambda m: 'stop (lifecycle deactivate): hold NOT confirmed' in m.detail,
                         timeout=5)
    assert 'did not answer within 1 s' in st.detail, st.detail
    assert node.sm.chunks_published == n            # nothing published since the return

    def error(a: DiagnosticArray) -> bool:
        return any(s.name.endswith('rollout') and s.level == DiagnosticStatus.ERROR and
                   any(kv.key == 'last stop' and 'NOT confirmed' in kv.value for kv in s.values)
                   for s in a.status)
    diags.wait_for(error, timeout=5)


@pytest.mark.safety
def test_quest_toggle_stop_edge_needs_no_second_sample_and_reports_an_unreachable_gate(
        ros_graph, tmp_path):
    """A joy stream that publishes only on change: the press's edge comes at the debounce
    deadline (a steady timer), not with a later sample. The stop cannot wait (a joy
    callback), so the gate's absence is reported in policy/status and /diagnostics."""
    node = _node(ros_graph, make_fake_checkpoint(tmp_path / 'ck'),
                 **{'quest.toggle_button': 2, 'quest.debounce_time': 0.05,
                    'gate.stop_service': 'nowhere/safety/stop'})
    inputs = Inputs(ros_graph)
    probe = ros_graph.node('probe')
    status = ros_graph.collect(probe, RolloutStatus, 'policy/status')
    diags = ros_graph.collect(probe, DiagnosticArray, '/diagnostics')
    ros_graph.wait_for_subscribers(inputs.joy)
    _wait_fresh(node)

    def joy(pressed: bool) -> Joy:
        return Joy(buttons=[0, 0, int(pressed)], axes=[0.0, 0.5])

    def released() -> bool:
        inputs.joy.publish(joy(False))
        return node._debounce.pressed is False
    wait_until(released, 5, 'released', interval=0.01)
    _running(node)
    for _ in range(3):            # one press, sent thrice (best effort), then nothing more
        inputs.joy.publish(joy(True))
    wait_until(lambda: node.sm.state is State.IDLE, 5, 'stopped by the press, with no later '
               'sample')
    st = status.wait_for(lambda m: 'stop (Quest toggle): hold NOT confirmed' in m.detail,
                         timeout=5)
    assert 'unreachable' in st.detail, st.detail
    diags.wait_for(lambda a: any(s.name.endswith('rollout') and
                                 s.level == DiagnosticStatus.ERROR for s in a.status), timeout=5)

@pytest.mark.parametrize('case', ['no_rtc', 'aggregation'])
def test_rtc_is_refused_at_configure_for_a_policy_without_it_or_with_aggregation(
        ros_graph, tmp_path, case):
    ck = make_fake_checkpoint(tmp_path / 'ck', rtc=case != 'no_rtc')
    params = {'policy.rtc': True}
    if case == 'aggregation':
        params['aggregation.mode'] = 'temporal_ensemble'
    node = _node(ros_graph, ck, **params)
    why = 'does not do real-time chunking' if case == 'no_rtc' else 'choose one'
    assert node.sm is None and why in node.unconfigured_detail, node.unconfigured_detail
    assert node.policy is None


def _rtc_rollout(ros_graph, tmp_path):
    ck = make_fake_checkpoint(tmp_path / 'ck', rtc=True, chunk_length=40, step_period=0.05)
    node = _node(ros_graph, ck, **{'policy.rtc': True, 'query_frequency': 10.0})
    Inputs(ros_graph)
    probe = ros_graph.node('probe')
    chunks = ros_graph.collect(probe, ActionChunk, 'policy/chunk')
    ros_graph.wait_for_publishers(chunks.subscription)
    _wait_fresh(node)
    assert _call(node, 'preflight').success
    assert _call(node, 'start').success
    return node, probe, chunks


def _live_stamps(node):
    """(sequence, stamp) of every live chunk the node recorded for RTC, oldest first."""
    return [(seq, stamp) for seq, stamp, _ in node.rtc.chunks]


def test_rtc_passes_the_last_chunks_leftover_and_the_inference_delay(ros_graph, tmp_path):
    node, _, _ = _rtc_rollout(ros_graph, tmp_path)
    wait_until(lambda: node.sm.chunks_published >= 5, 10, 'five live chunks')
    assert _call(node, 'stop').success
    live = _live_stamps(node)
    requests = [(stamp, r) for stamp, r in node.policy.rtc_requests]
    by_stamp = dict(requests)
    assert requests[0][1] is None                        # the preflight: no guidance
    first = by_stamp[live[0][1]]
    assert first is None                                 # first live chunk: nothing running
    for (_, prev), (_, stamp) in zip(live, live[1:], strict=False):   # own clock
        r = by_stamp[stamp]
        assert r is not None and r.prefix_stamp == prev
        assert r.executed == round((stamp - prev) / 0.05) and 1 <= r.executed < 40
        assert r.inference_delay >= 1                    # ceil(latency / step), latency > 0


def test_rtc_follows_the_chunk_executor_state_says_is_running(ros_graph, tmp_path):
    node, probe, _ = _rtc_rollout(ros_graph, tmp_path)
    wait_until(lambda: len(node.rtc.chunks) >= 1, 10, 'a live chunk')
    seq0, stamp0 = _live_stamps(node)[0]
    pub = probe.create_publisher(ExecutorState, 'executor/state', 10)
    said = {'state': 'executing'}

    def tick():
        pub.publish(ExecutorState(state=said['state'], active_sequence=seq0))
    probe.create_timer(0.02, tick)
    wait_until(lambda: node.rtc.executor_state is not None, 10, 'executor/state received')
    n = len(node.policy.rtc_requests)
    wait_until(lambda: len(node.policy.rtc_requests) >= n + 3, 10, 'three more inferences')
    guided = [(s, r) for s, r in node.policy.rtc_requests[n:] if r is not None]
    assert guided and all(r.prefix_stamp == stamp0 for _, r in guided)
    for s, r in guided:
        assert r.executed == round((s - stamp0) / 0.05)
    said['state'] = 'holding'
    wait_until(lambda: node.rtc.executor_state[2] == 'holding', 10, 'holding received')
    m = len(node.policy.rtc_requests)
    wait_until(lambda: len(node.policy.rtc_requests) >= m + 2, 10, 'two more inferences')
    assert node.policy.rtc_requests[-1][1] is None      # the executor holds: no leftover
    assert 'no chunk of this rollout running' in node.rtc.last
    assert _call(node, 'stop').success
