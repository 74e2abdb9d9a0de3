"""The one description of egoroll's node graphs: which nodes run for each configuration.

Pure (no rclpy, no launch; its one side effect: the robot graphs' per-launch key file,
:func:`egoroll_ros.core.auth.launch_key_file`): the launch files turn it into ``launch_ros``
Node actions (:mod:`egoroll_ros.launch_actions`), ``egoroll demo`` and the tests start the
same description as processes with the command line launch_ros gives a node
(:func:`command_line`), so what the tests run is what ``ros2 launch`` runs.

Graphs:
- ``robot``: the robot-computer half, safety_gate + trajectory_server.
- ``policy``: the policy half, policy_node (for a GPU host).
- ``rollout``: both halves on one computer (+ RViz on request).
- ``sim``: the rollout graph on the simulated robot (sim_robot, sim_camera), + optionally
  robot_state_publisher.

Every graph takes the launch arguments of :func:`arguments` (strings, as ``ros2 launch`` passes
them); ``bimanual:=true`` switches the default parameter files to
``config/bimanual_example.yaml`` and the robot description to ``urdf/demo_bimanual.urdf``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from egoroll_ros.core.auth import launch_key_file
from egoroll_ros.errors import ConfigError

PACKAGE = 'egoroll_ros'
GRAPHS = ('robot', 'policy', 'rollout', 'sim')
#: Launch file of each graph (installed under share/egoroll_ros/launch).
LAUNCH_FILES = {'robot': 'robot_launch.py', 'policy': 'policy_launch.py',
                'rollout': 'rollout_launch.py', 'sim': 'sim_launch.py'}
COMMAND_INTERFACES = ('joint_state', 'float64_multi_array', 'joint_trajectory')
#: Topic a ros2_control controller named C listens on, per command interface:
#: forward_command_controller ``C/commands``, joint_trajectory_controller ``C/joint_trajectory``.
CONTROLLER_TOPICS = {'float64_multi_array': 'commands', 'joint_trajectory': 'joint_trajectory'}
LOG_LEVELS = ('debug', 'info', 'warn', 'error', 'fatal')
BOOLEANS = ('true', 'false')


@dataclass(frozen=True)
class Argument:
    """A launch argument: name, default (a string), description and allowed values."""

    name: str
    default: str
    description: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ready:
    """What a started node offers once it is up (names relative to its namespace): what a
    process starter waits for before it starts the next node."""

    publishers: tuple[str, ...] = ()
    subscriptions: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    timeout: float = 30.0


@dataclass(frozen=True)
class NodeSpec:
    """One node of a graph, as launch_ros's ``Node`` action takes it."""

    package: str
    executable: str
    name: str
    namespace: str = ''
    params_files: tuple[str, ...] = ()
    overrides: Mapping[str, Any] = field(default_factory=dict)
    remaps: tuple[tuple[str, str], ...] = ()
    arguments: tuple[str, ...] = ()
    log_level: str = 'info'
    ready: Ready = Ready()
    #: A managed (lifecycle) node: launch starts it as a launch_ros ``LifecycleNode``.
    lifecycle: bool = False

    @property
    def fqn(self) -> str:
        """Fully qualified node name."""
        return f'{self.namespace}/{self.name}' if self.namespace else f'/{self.name}'


def _common() -> list[Argument]:
    return [
        Argument('namespace', '', 'Namespace of every node and topic (one per robot); empty: '
                 'the root namespace.'),
        Argument('use_sim_time', 'false', 'Use the /clock topic (simulation or bag replay).',
                 BOOLEANS),
        Argument('log_level', 'info', 'Logging level of every node.', LOG_LEVELS),
        Argument('bimanual', 'false', 'Default parameter files and URDF of the bimanual example '
                 '(config/bimanual_example.yaml, urdf/demo_bimanual.urdf).', BOOLEANS),
        Argument('joint_states_topic', 'joint_states', 'Where the measured joint states come '
                 'from (joint_state_broadcaster publishes joint_states in its namespace).'),
    ]


def _params_arg(node: str) -> Argument:
    bimanual = '' if node == 'sim_camera' else \
        ' (config/bimanual_example.yaml with bimanual:=true)'
    return Argument(f'{node}_params', '', f'Parameter file of {node}; empty: '
                    f'config/{node}.yaml{bimanual}.')


def _robot_args() -> list[Argument]:
    return [
        _params_arg('safety_gate'), _params_arg('trajectory_server'),
        Argument('command_interface', '', 'Type trajectory_server sends: joint_state, '
                 'float64_multi_array (forward_command_controller) or joint_trajectory '
                 '(joint_trajectory_controller); empty: the parameter file decides.',
                 ('',) + COMMAND_INTERFACES),
        Argument('controller', '', 'Name of the ros2_control controller to drive: the command '
                 'goes to <controller>/commands (float64_multi_array) or '
                 '<controller>/joint_trajectory (joint_trajectory); empty: the topic `command`.'),
        Argument('command_joints', '', "Comma-separated joint order of the controller's "
                 '`joints` parameter (float64_multi_array); empty: the parameter file decides.'),
        Argument('urdf_path', '', 'URDF file the safety gate and trajectory_server read (its '
                 'limits bound both); empty: the parameter files decide (their default: the '
                 'robot_description topic).'),
        Argument('auth_key_file', '', "The robot half's shared key (mode 0600, this user's): "
                 'the gate signs every goal and heartbeat with it and trajectory_server acts '
                 'only on what verifies (docs/executor.md); empty: a fresh key for this launch, '
                 'removed when the launch exits.'),
    ]


def _policy_args() -> list[Argument]:
    return [
        _params_arg('policy_node'),
        Argument('policy_path', '', 'Policy checkpoint directory (the policy.path parameter); '
                 'empty: the parameter file decides.'),
        Argument('policy_fingerprint', '', 'sha256 fingerprint the checkpoint must have (the '
                 'policy.expected_fingerprint parameter); empty: the parameter file decides.'),
        Argument('autostart', 'true', 'policy_node is a lifecycle node. true: it configures '
                 '(loads and checks the checkpoint) and activates itself at start-up (its '
                 'autoconfigure parameter); false: it stays unconfigured for a lifecycle '
                 'manager or `ros2 lifecycle set <node> configure` and then `activate`.',
                 BOOLEANS),
    ]


def _rviz_args() -> list[Argument]:
    return [
        Argument('rviz', 'false', 'Start rviz2 with the RViz configuration.', BOOLEANS),
        Argument('rviz_config', '', 'RViz configuration file; empty: config/egoroll.rviz.'),
    ]


def _sim_args() -> list[Argument]:
    return [
        _params_arg('sim_robot'), _params_arg('sim_camera'),
        Argument('sim_camera', 'true', 'Start sim_camera (the demo policy needs its images; a '
                 'Cartesian scripted policy does not).', BOOLEANS),
        Argument('description_file', '', 'URDF of the simulated robot; empty: '
                 'urdf/demo_arm.urdf (urdf/demo_bimanual.urdf with bimanual:=true).'),
        Argument('robot_state_publisher', 'false', 'Start robot_state_publisher (TF for RViz; '
                 'it then publishes robot_description instead of sim_robot). Off: sim_robot '
                 'publishes robot_description and the gate reads description_file.', BOOLEANS),
    ]


def arguments(graph: str) -> list[Argument]:
    """The launch arguments of ``graph``, in declaration order.

    Raises:
        ConfigError: unknown graph.
    """
    _check_graph(graph)
    out = _common()
    if graph in ('robot', 'rollout', 'sim'):
        out += _robot_args()
    if graph in ('policy', 'rollout', 'sim'):
        out += _policy_args()
    if graph in ('rollout', 'sim'):
        out += _rviz_args()
    if graph == 'sim':
        out += _sim_args()
    return out


def _check_graph(graph: str) -> None:
    if graph not in GRAPHS:
        raise ConfigError(f'unknown graph {graph!r}; one of {", ".join(GRAPHS)}')


def resolve_arguments(graph: str, given: Mapping[str, str]) -> dict[str, str]:
    """Defaults filled in and every value checked.

    Raises:
        ConfigError: an argument ``graph`` does not declare, or a value outside its choices.
    """
    args = {a.name: a for a in arguments(graph)}
    unknown = sorted(set(given) - set(args))
    if unknown:
        raise ConfigError(f'{graph}: unknown launch argument(s) {", ".join(unknown)}; '
                          f'declared: {", ".join(args)}')
    out = {name: str(given.get(name, a.default)) for name, a in args.items()}
    for name, a in args.items():
        if a.choices and out[name] not in a.choices:
            raise ConfigError(f'launch argument {name}:={out[name]!r} is not one of '
                              f'{", ".join(repr(c) for c in a.choices)}')
    return out


def normalize_namespace(ns: str) -> str:
    """``arm1``, ``/arm1`` and ``/arm1/`` -> ``/arm1``; empty -> ``''`` (the root).

    Raises:
        ConfigError: a name ROS would refuse (empty tokens, characters outside [A-Za-z0-9_/],
            a token starting with a digit).
    """
    ns = ns.strip()
    if ns in ('', '/'):
        return ''
    tokens = ns.strip('/').split('/')
    for tok in tokens:
        if not tok or not tok.replace('_', 'a').isalnum() or not tok.isascii() or \
                tok[0].isdigit():
            raise ConfigError(f'namespace {ns!r} is not a valid ROS namespace')
    return '/' + '/'.join(tokens)


def _flag(args: Mapping[str, str], name: str) -> bool:
    return args[name] == 'true'


def describe(graph: str, given: Mapping[str, str], share: str | Path,
             overrides: Mapping[str, Mapping[str, Any]] | None = None) -> list[NodeSpec]:
    """The nodes of ``graph`` for the launch arguments ``given``, in start order.

    Args:
        graph: one of :data:`GRAPHS`.
        given: launch arguments (unset ones take their defaults).
        share: the installed share directory of egoroll_ros.
        overrides: extra parameters per node name (callers such as ``egoroll demo``), applied
            after the launch arguments' own.

    Raises:
        ConfigError: an unknown argument or value, a missing parameter file, a controller
            without a ros2_control command interface.
    """
    args = resolve_arguments(graph, given)
    share = Path(share)
    ns = normalize_namespace(args['namespace'])
    bimanual = _flag(args, 'bimanual')
    cfg = share / 'config'
    extra = {k: dict(v) for k, v in (overrides or {}).items()}

    def params_files(node: str) -> list[str]:
        """The shipped file of ``node``, or the user's layered over the node's generated
        defaults (config/defaults/: the safe values, issue 24.3; launch_ros applies params
        files in order, so the user's file changes only what it names)."""
        user = args.get(f'{node}_params', '')
        path = user or str(
            cfg / ('bimanual_example.yaml' if bimanual and node in
                   ('safety_gate', 'trajectory_server', 'policy_node', 'sim_robot')
                   else f'{node}.yaml'))
        if not Path(path).is_file():
            raise ConfigError(f'launch argument {node}_params: no file {path}')
        defaults = cfg / 'defaults' / f'{node}.yaml'
        return [str(defaults), path] if user and defaults.is_file() else [path]

    def spec(executable: str, *, overrides: Mapping[str, Any] | None = None,
             remaps: Sequence[tuple[str, str]] = (), ready: Ready = Ready(),
             package: str = PACKAGE, files: Sequence[str] | None = None,
             arguments: Sequence[str] = ()) -> NodeSpec:
        params = {'use_sim_time': _flag(args, 'use_sim_time')}
        params.update(overrides or {})
        params.update(extra.pop(executable, {}))
        return NodeSpec(package=package, executable=executable, name=executable, namespace=ns,
                        params_files=tuple(files if files is not None
                                           else params_files(executable)),
                        overrides=params, remaps=tuple(remaps), arguments=tuple(arguments),
                        log_level=args['log_level'], ready=ready)

    nodes: list[NodeSpec] = []
    description = ''
    if graph == 'sim':
        description = args['description_file'] or str(
            share / 'urdf' / ('demo_bimanual.urdf' if bimanual else 'demo_arm.urdf'))
        if not Path(description).is_file():
            raise ConfigError(f'launch argument description_file: no file {description}')
        rsp = _flag(args, 'robot_state_publisher')
        sim_over: dict[str, Any] = {'urdf_path': '' if rsp else description}
        if args['command_interface']:
            sim_over['command_interface'] = args['command_interface']
        nodes.append(spec('sim_robot', overrides=sim_over,
                          remaps=_state_remap(args) + _command_remap(args),
                          ready=Ready(publishers=('joint_states',)
                                      + (() if rsp else ('robot_description',)))))
        if rsp:
            nodes.append(NodeSpec(
                package='robot_state_publisher', executable='robot_state_publisher',
                name='robot_state_publisher', namespace=ns, log_level=args['log_level'],
                overrides={'robot_description': Path(description).read_text(),
                           'use_sim_time': _flag(args, 'use_sim_time')},
                remaps=_state_remap(args), ready=Ready(publishers=('robot_description',))))
    if graph in ('robot', 'rollout', 'sim'):
        ts_over: dict[str, Any] = {}
        if args['command_interface']:
            ts_over['command_interface'] = args['command_interface']
        if args['command_joints']:
            ts_over['command_joints'] = [j.strip() for j in args['command_joints'].split(',')]
        controller = args.get('controller', '').strip().strip('/')
        if controller and graph != 'sim':
            # The executor reads the command order from the controller's own `joints`
            # parameter (in the sim graph sim_robot plays the controller: no such node).
            ts_over['controller_node'] = controller
        # The executor checks its setpoints against the same URDF as the gate.
        urdf = args['urdf_path'] or (description if graph == 'sim' else '')
        if urdf:
            ts_over['urdf_path'] = urdf
        # One key per launch unless given: the gate and the executor share it, nobody else.
        ts_over['auth_key_file'] = args['auth_key_file'] or str(launch_key_file())
        nodes.append(spec('trajectory_server', overrides=ts_over,
                          remaps=_state_remap(args) + _command_remap(args),
                          ready=Ready(actions=('execute_trajectory',))))
        gate_over: dict[str, Any] = {'urdf_path': urdf} if urdf else {}
        gate_over['auth_key_file'] = ts_over['auth_key_file']
        nodes.append(spec('safety_gate', overrides=gate_over, remaps=_state_remap(args),
                          ready=Ready(subscriptions=('policy/chunk',),
                                      publishers=('safety/verdict',))))
    if graph == 'sim' and _flag(args, 'sim_camera'):
        cam_over = {'urdf_path': description} if bimanual or args['description_file'] else {}
        nodes.append(spec('sim_camera', overrides=cam_over, remaps=_state_remap(args),
                          ready=Ready(publishers=('camera/scene/image_raw',),
                                      subscriptions=('sim/target',))))
    if graph in ('policy', 'rollout', 'sim'):
        pol_over: dict[str, Any] = {}
        if args['policy_path']:
            pol_over['policy.path'] = args['policy_path']
        if args['policy_fingerprint']:
            pol_over['policy.expected_fingerprint'] = args['policy_fingerprint']
        autostart = _flag(args, 'autostart')
        pol_over['autoconfigure'] = autostart
        # Configured, it offers the rollout services; unconfigured, only the lifecycle's.
        ready = Ready(services=('policy/preflight', 'policy/start', 'policy/stop'),
                      timeout=120.0) if autostart else \
            Ready(services=('policy_node/change_state',))
        nodes.append(dataclasses.replace(
            spec('policy_node', overrides=pol_over, remaps=_state_remap(args), ready=ready),
            lifecycle=True))
    if graph in ('rollout', 'sim') and _flag(args, 'rviz'):
        rviz_config = args['rviz_config'] or str(cfg / 'egoroll.rviz')
        nodes.append(NodeSpec(package='rviz2', executable='rviz2', name='rviz2', namespace=ns,
                              arguments=('-d', rviz_config), log_level=args['log_level'],
                              overrides={'use_sim_time': _flag(args, 'use_sim_time')}))
    if extra:
        raise ConfigError(f'overrides for nodes not in the {graph} graph: '
                          f'{", ".join(sorted(extra))}')
    return nodes


def _state_remap(args: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    topic = args['joint_states_topic']
    return () if topic == 'joint_states' else (('joint_states', topic),)


def _command_remap(args: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``command`` -> the controller's input topic, when a controller is named.

    Raises:
        ConfigError: a controller with no command interface, or with ``joint_state`` (not an
            input of any ros2_control controller).
    """
    controller = args.get('controller', '').strip().strip('/')
    if not controller:
        return ()
    interface = args['command_interface']
    if interface not in CONTROLLER_TOPICS:
        raise ConfigError(
            f'controller:={controller} needs command_interface:=float64_multi_array '
            f'(forward_command_controller, {controller}/commands) or joint_trajectory '
            f'(joint_trajectory_controller, {controller}/joint_trajectory), not '
            f'{interface or "(unset)"!r}')
    return (('command', f'{controller}/{CONTROLLER_TOPICS[interface]}'),)


def _param_value(value: Any) -> str:
    """A parameter value as ``-p name:=value`` takes it (YAML, one line)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30).strip()
    if text.endswith('\n...'):
        text = text[:-4].strip()
    elif text.endswith('...'):
        text = text[:-3].strip()
    return text


def ros_arguments(spec: NodeSpec) -> list[str]:
    """Everything after ``--ros-args`` that launch_ros gives ``spec``: log level, node name,
    namespace, parameter files, parameter overrides (``-p``), remaps."""
    out = ['--log-level', spec.log_level, '-r', f'__node:={spec.name}']
    if spec.namespace:
        out += ['-r', f'__ns:={spec.namespace}']
    for f in spec.params_files:
        out += ['--params-file', str(f)]
    for key, value in spec.overrides.items():
        out += ['-p', f'{key}:={_param_value(value)}']
    for src, dst in spec.remaps:
        out += ['-r', f'{src}:={dst}']
    return out


def command_line(spec: NodeSpec, executable: str) -> list[str]:
    """``EXECUTABLE [arguments] --ros-args ...``: the process launch_ros starts for ``spec``."""
    return [executable, *spec.arguments, '--ros-args', *ros_arguments(spec)]


def _name_matches(pattern: str, fqn: str) -> bool:
    """rcl's node-name match of a parameter file key: ``*`` one token, ``**`` any number."""
    # A relative key (``safety_gate:``) is resolved against the root namespace.
    pat = [t for t in pattern.strip('/').split('/') if t] if pattern.startswith('/') else \
        [pattern]
    name = [t for t in fqn.strip('/').split('/') if t]

    def match(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(name)
        if pat[i] == '**':
            return any(match(i + 1, k) for k in range(j, len(name) + 1))
        return j < len(name) and (pat[i] == '*' or pat[i] == name[j]) and match(i + 1, j + 1)

    return match(0, 0)


def node_parameters(data: Any, name: str, namespace: str = '') -> dict[str, Any] | None:
    """The ``ros__parameters`` a parameter file gives node ``namespace/name``, as rcl applies
    them: every top-level key matching the node (``/**``, ``/**/name``, ``name``,
    ``/ns/name``...) in file order, later keys overriding earlier ones; None when no key
    matches."""
    if not isinstance(data, dict):
        return None
    fqn = f'{normalize_namespace(namespace)}/{name}'
    out: dict[str, Any] | None = None
    for key, body in data.items():
        if not isinstance(key, str) or not isinstance(body, dict) or \
                not _name_matches(key, fqn):
            continue
        section = body.get('ros__parameters')
        if isinstance(section, dict):
            out = {**(out or {}), **section}
    return out
