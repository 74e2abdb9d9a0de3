"""Every launch file's graph, started from the shared description (egoroll_ros.core.launch_graph)
in a namespace with launch_ros's command line, reaches accepted chunks; and the parameters each
node reads back are the ones its shipped YAML gives it there.

What runs here is exactly what ``ros2 launch egoroll_ros <file> namespace:=arm1`` runs: the same
node list, parameter files, overrides and remaps (the launch files call the same description).
"""

from __future__ import annotations

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
import numpy as np
import pytest
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters, ListParameters
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger
import yaml

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_ros.core.launch_graph import describe, node_parameters
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.ros.convert import chunk_to_msg
from egoroll_ros.testing import wait_until
from egoroll_ros.testing.arming import GateArmer

pytestmark = pytest.mark.integration
SHARE = Path(get_package_share_directory('egoroll_ros'))
NS = '/arm1'
#: Verdicts of a gate that is still starting (then reset), not of a bad chunk.
NOT_READY = {'robot_model', 'joint_state', 'deadman', 'chunk_age', 'chunk_in_past',
             'executor_unavailable', 'latched_fault'}


def _call(node, srv_type, name, request=None, timeout=30.0):
    client = node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=timeout), f'no service {name}'
    future = client.call_async(request if request is not None else srv_type.Request())
    wait_until(future.done, timeout, f'{name} reply')
    return future.result()


def _value(pv):
    t = pv.type
    return {ParameterType.PARAMETER_BOOL: lambda: pv.bool_value,
            ParameterType.PARAMETER_INTEGER: lambda: pv.integer_value,
            ParameterType.PARAMETER_DOUBLE: lambda: pv.double_value,
            ParameterType.PARAMETER_STRING: lambda: pv.string_value,
            ParameterType.PARAMETER_BOOL_ARRAY: lambda: list(pv.bool_array_value),
            ParameterType.PARAMETER_INTEGER_ARRAY: lambda: list(pv.integer_array_value),
            ParameterType.PARAMETER_DOUBLE_ARRAY: lambda: list(pv.double_array_value),
            ParameterType.PARAMETER_STRING_ARRAY: lambda: list(pv.string_array_value),
            }.get(t, lambda: None)()


def _flatten(params: dict, prefix: str = '') -> dict:
    out = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f'{prefix}{key}.'))
        else:
            out[prefix + key] = value
    return out


def _assert_parameters_read_back(node, spec) -> None:
    """Every parameter the node's YAML (and the description's overrides) give it in its
    namespace reads back with that value through ``<ns>/<node>/get_parameters``."""
    expected: dict = {}
    for path in spec.params_files:
        section = node_parameters(yaml.safe_load(Path(path).read_text()), spec.name,
                                  spec.namespace)
        assert section is not None, f'{path} has no section for {spec.fqn}'
        expected.update(_flatten(section))
    expected.update(spec.overrides)
    # An empty array in a YAML has no type: rcl leaves such a parameter declared but unset (it
    # keeps the node's empty default), and get_parameters answers nothing for it; those are
    # checked as declared instead.
    empty = sorted(k for k, v in expected.items() if v == [])
    if empty:
        listed = _call(node, ListParameters, f'{spec.fqn}/list_parameters',
                       ListParameters.Request(depth=0)).result.names
        assert set(empty) <= set(listed), (spec.fqn, set(empty) - set(listed))
    names = sorted(k for k in expected if k not in empty)
    res = _call(node, GetParameters, f'{spec.fqn}/get_parameters',
                GetParameters.Request(names=names))
    if len(res.values) != len(names):     # rclpy answers nothing when one is undeclared
        missing = [n for n in names if not _call(node, GetParameters,
                                                 f'{spec.fqn}/get_parameters',
                                                 GetParameters.Request(names=[n])).values]
        raise AssertionError(f'{spec.fqn} does not declare {missing}')
    got = dict(zip(names, (_value(v) for v in res.values), strict=True))
    for name in names:
        want = expected[name]
        if isinstance(want, list) and want and isinstance(got[name], list):
            assert got[name] == pytest.approx(want) if not isinstance(want[0], str) \
                else got[name] == want, (spec.fqn, name)
        elif isinstance(want, float) or isinstance(got[name], float):
            assert got[name] == pytest.approx(want), (spec.fqn, name, got[name], want)
        else:
            assert got[name] == want, (spec.fqn, name, got[name], want)


def _rollout_reaches_an_accepted_chunk(ros_graph, specs) -> None:
    node = ros_graph.node('graph_tester', namespace=NS)
    verdicts = ros_graph.collect(node, GateVerdict, 'safety/verdict')
    joy = node.create_publisher(Joy, 'quest/joy', 10)

    def hold_deadman() -> None:         # the operator holds the Quest deadman
        msg = Joy(axes=[0.0, 0.0, 0.0, 1.0], buttons=[0, 0, 0, 0])
        msg.header.stamp = node.get_clock().now().to_msg()
        joy.publish(msg)

    node.create_timer(0.05, hold_deadman)
    for spec in specs:
        if spec.package == 'egoroll_ros':
            _assert_parameters_read_back(node, spec)
    # Preflight until the pipeline is ready (inputs still arriving: the message says which).
    last = ''

    def preflight_passes() -> bool:
        nonlocal last
        res = _call(node, Trigger, 'policy/preflight', timeout=60.0)
        last = res.message
        return res.success

    try:
        wait_until(preflight_passes, 90.0, 'a passing preflight', interval=0.5)
    except AssertionError as exc:
        raise AssertionError(f'{exc}: {last}') from None
    assert _call(node, Trigger, 'policy/start').success
    verdict = verdicts.wait_for(lambda v: v.accepted and not v.shadow and v.forwarded,
                                timeout=60.0)
    assert not verdict.violations
    assert _call(node, Trigger, 'policy/stop').success


def _no_key(specs):
    """The specs without their per-launch auth_key_file."""
    import dataclasses
    return [dataclasses.replace(s, overrides={k: v for k, v in s.overrides.items()
                                              if k != 'auth_key_file'}) for s in specs]


@pytest.mark.parametrize('graph', ['sim', 'robot+policy'])
def test_launch_graph_in_a_namespace_reaches_accepted_chunks(ros_graph, launcher, graph):
    args = {'namespace': NS.strip('/')}
    if graph == 'sim':
        specs = describe('sim', args, SHARE)
    else:
        # The split-host pair (robot_launch.py + policy_launch.py) on the simulated robot's
        # driver nodes; rollout_launch.py starts exactly this pair (checked below).
        sim = [s for s in describe('sim', args, SHARE)
               if s.name in ('sim_robot', 'sim_camera')]
        robot, policy = describe('robot', args, SHARE), describe('policy', args, SHARE)
        # (each launch has its own auth key: compared without it)
        assert _no_key(describe('rollout', args, SHARE)) == _no_key(robot + policy)
        specs = sim[:1] + robot + sim[1:] + policy
    assert all(s.namespace == NS for s in specs)
    launcher.start_graph(specs)
    _rollout_reaches_an_accepted_chunk(ros_graph, specs)


def test_bimanual_robot_half_in_a_namespace_accepts_and_executes_a_chunk(ros_graph, launcher):
    """robot_launch.py bimanual:=true on the simulated bimanual robot: a 16-joint chunk from
    the measured state is accepted, forwarded, and moves both arms."""
    args = {'namespace': NS, 'bimanual': 'true'}
    sim = describe('sim', args, SHARE)[0]
    assert sim.name == 'sim_robot'
    specs = [sim, *describe('robot', args, SHARE)]
    launcher.start_graph(specs)
    node = ros_graph.node('bimanual_tester', namespace=NS)
    for spec in specs:
        _assert_parameters_read_back(node, spec)
    verdicts = ros_graph.collect(node, GateVerdict, 'safety/verdict')
    states = ros_graph.collect(node, JointState, 'joint_states', qos_profile_sensor_data)
    joy = node.create_publisher(Joy, 'quest/joy', 10)
    chunks = node.create_publisher(ActionChunk, 'policy/chunk', 10)

    def hold_deadman() -> None:
        msg = Joy(axes=[0.0, 0.0, 0.0, 1.0], buttons=[0, 0, 0, 0])
        msg.header.stamp = node.get_clock().now().to_msg()
        joy.publish(msg)

    node.create_timer(0.05, hold_deadman)
    ros_graph.wait_for_subscribers(chunks)
    first = states.wait_for(timeout=10.0)
    joints = list(first.name)
    assert len(joints) == 16

    def send(seq: int, shadow: bool = False) -> GateVerdict:
        last = states.snapshot()[-1]
        start = np.array(last.position)
        times = 0.05 * np.arange(1, 21)
        step = np.zeros(16)
        step[[joints.index('left_shoulder_pan'), joints.index('right_shoulder_pan')]] = 0.1
        stamp = node.get_clock().now().nanoseconds * 1e-9
        n = len(verdicts.snapshot())
        chunks.publish(chunk_to_msg(Chunk(seq, 'ab' * 32, stamp, JointTrajectoryData(
            tuple(joints), times, start + np.outer(times, step), stamp=stamp),
            shadow=shadow)))
        return verdicts.wait_for(lambda v: v.sequence == seq, 10.0, start=n)

    # The gate needs its model, fresh joint_states and the deadman before it accepts: the
    # first chunks may meet a gate still starting (the verdict says which check).
    seq = 0
    armer = GateArmer(node)
    armed = [False]

    def accepted() -> GateVerdict | None:
        nonlocal seq
        seq += 1
        if not armed[0]:      # the gate starts disarmed: a preflight, then safety/arm
            pre = send(seq, shadow=True)
            if not pre.accepted or not armer.arm(seq, 'ab' * 32).success:
                return None
            armed[0] = True
            seq += 1
        v = send(seq)
        if not v.accepted:
            assert {x.check for x in v.violations} <= NOT_READY, v.summary
            reset = node.create_client(Trigger, 'safety/reset')   # the latched hold
            assert reset.wait_for_service(timeout_sec=10.0)
            future = reset.call_async(Trigger.Request())
            wait_until(future.done, 10.0, 'safety/reset reply')
            node.destroy_client(reset)
            armed[0] = False
        return v if v.accepted and v.forwarded else None

    wait_until(accepted, 30.0, 'an accepted bimanual chunk', interval=0.2)
    start = np.array(states.snapshot()[-1].position)
    # Chunks keep coming, as from a policy (the executor holds after command_timeout without).
    wait_until(lambda: accepted() and all(
        np.array(states.snapshot()[-1].position)[joints.index(j)] > start[joints.index(j)] + 0.02
        for j in ('left_shoulder_pan', 'right_shoulder_pan')), 15.0, 'both arms move',
        interval=0.1)


def test_policy_launch_autostart_false_leaves_policy_node_to_a_lifecycle_manager(ros_graph,
                                                                                 launcher):
    """policy_launch.py autostart:=false: policy_node comes up unconfigured (no rollout
    services, nothing loaded), and the lifecycle services configure and activate it."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    (spec,) = describe('policy', {'namespace': NS.strip('/'), 'autostart': 'false'}, SHARE)
    assert spec.lifecycle and spec.overrides['autoconfigure'] is False
    launcher.start_graph([spec])
    node = ros_graph.node('lifecycle_manager')
    base = f'{NS}/policy_node'
    assert _call(node, GetState, f'{base}/get_state').current_state.label == 'unconfigured'
    names = {n for n, _ in node.get_service_names_and_types()}
    assert f'{NS}/policy/preflight' not in names
    for tid, label in ((Transition.TRANSITION_CONFIGURE, 'inactive'),
                       (Transition.TRANSITION_ACTIVATE, 'active')):
        assert _call(node, ChangeState, f'{base}/change_state',
                     ChangeState.Request(transition=Transition(id=tid)), timeout=120).success
        assert _call(node, GetState, f'{base}/get_state').current_state.label == label
    res = _call(node, Trigger, f'{NS}/policy/start')   # served: refused for want of a preflight
    assert not res.success and 'preflight' in res.message, res.message
