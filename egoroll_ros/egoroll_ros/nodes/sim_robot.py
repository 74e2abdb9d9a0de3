"""sim_robot: a simulated arm that follows `command` and publishes `joint_states`.

A thin shell around :class:`egoroll_ros.sim.robot.SimArm`. Faults for tests are parameters that
can be changed at run time with set_parameters: ``fault.freeze``, ``fault.drop_fraction``,
``fault.extra_lag``.
"""

from __future__ import annotations

from pathlib import Path
import threading
import time

import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from egoroll_ros.core.trajectory import splice
from egoroll_ros.errors import ConfigError, EgorollError
from egoroll_ros.ros.convert import sec_to_time, trajectory_from_msg
from egoroll_ros.ros.params import Param, declare_params, per_joint, watch_live
from egoroll_ros.ros.runner import run_node
from egoroll_ros.sim.robot import DelayLine, SimArm

COMMAND_INTERFACES = ('joint_state', 'float64_multi_array', 'joint_trajectory')

FAULTS = [
    Param('fault.freeze', bool, False, 'Fault: stop following commands (joints stay put).'),
    Param('fault.drop_fraction', float, 0.0, 'Fault: fraction of joint_states not published.',
          min=0.0, max=1.0),
    Param('fault.extra_lag', float, 0.0, 'Fault: seconds added to time_constant.', min=0.0,
          max=10.0),
]

PARAMS = [
    Param('joints', 'str[]', None, 'Simulated joints, in command order.', read_only=True),
    Param('initial_positions', 'float[]', [], 'Start positions, one per joint (default 0).',
          read_only=True),
    Param('rate', float, 100.0, 'joint_states publish and integration rate (Hz).', min=1.0,
          max=2000.0, read_only=True),
    Param('time_constant', float, 0.02, 'First-order lag of each joint (s).', min=1e-4,
          max=10.0, read_only=True),
    Param('max_velocity', 'float[]', None, 'Per-joint speed limit (rad/s or m/s).', min=1e-6,
          read_only=True),
    Param('noise_std', float, 0.0, 'Std-dev of Gaussian noise on published positions.',
          min=0.0, max=1.0, read_only=True),
    Param('latency', float, 0.0, 'Published joint_states show the state this many seconds '
          'ago.', min=0.0, max=5.0, read_only=True),
    Param('command_interface', str, 'joint_state', 'Type on `command`: joint_state, '
          'float64_multi_array or joint_trajectory.', choices=COMMAND_INTERFACES,
          read_only=True),
    Param('urdf_path', str, '', 'URDF file published on robot_description (transient '
          'local); empty = none.', read_only=True),
    Param('seed', int, 0, 'Random seed for noise and drops.', min=0, read_only=True),
] + FAULTS


class SimRobot(Node):
    """The simulated robot node (see the module docstring)."""

    def __init__(self, node_name: str = 'sim_robot', **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        p = declare_params(self, PARAMS)
        self.joints = tuple(p['joints'])
        if not self.joints or len(set(self.joints)) != len(self.joints):
            raise ConfigError("parameter 'joints': needs unique joint names")
        vmax = per_joint(p['max_velocity'], self.joints, 'max_velocity')
        init = per_joint(p['initial_positions'], self.joints, 'initial_positions') \
            if p['initial_positions'] else [0.0] * len(self.joints)
        self.arm = SimArm(np.array(init), p['time_constant'], np.array(vmax))
        self._apply_faults(p)
        self._noise = p['noise_std']
        self._latency = p['latency']
        self._rng = np.random.default_rng(p['seed'])
        self._delay = DelayLine(horizon=p['latency'] + 1.0)
        self._lock = threading.Lock()
        self.interface = p['command_interface']

        self._state_pub = self.create_publisher(JointState, 'joint_states', 10)
        if p['urdf_path']:
            path = Path(p['urdf_path'])
            if not path.is_file():
                raise ConfigError(f"parameter 'urdf_path': no such file {path}")
            qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self._desc_pub = self.create_publisher(String, 'robot_description', qos)
            self._desc_pub.publish(String(data=path.read_text()))
        handler = {'joint_state': (JointState, self._on_joint_command),
                   'float64_multi_array': (Float64MultiArray, self._on_array_command),
                   'joint_trajectory': (JointTrajectory, self._on_trajectory_command)}
        msg_type, cb = handler[self.interface]
        self._cmd_sub = self.create_subscription(msg_type, 'command', cb, 10)
        watch_live(self, FAULTS, p, self._on_faults)
        self._timer = self.create_timer(1.0 / p['rate'], self._step)
        self.get_logger().info(f'simulating {len(self.joints)} joints, command interface '
                               f'{self.interface}')

    def _apply_faults(self, values: dict) -> None:
        if 'fault.freeze' in values:
            self.arm.frozen = bool(values['fault.freeze'])
        if 'fault.extra_lag' in values:
            self.arm.extra_lag = float(values['fault.extra_lag'])
        if 'fault.drop_fraction' in values:
            self._drop = float(values['fault.drop_fraction'])

    def _on_faults(self, values: dict) -> None:
        with self._lock:
            self._apply_faults(values)

    def _on_joint_command(self, msg: JointState) -> None:
        if len(msg.position) != len(msg.name):
            self.get_logger().warning(
                'command: names and positions differ in size; ignored', once=True)
            return
        index = {n: i for i, n in enumerate(msg.name)}
        if any(j not in index for j in self.joints):
            self.get_logger().warning('command lacks some joints; ignored', once=True)
            return
        target = np.array([msg.position[index[j]] for j in self.joints])
        self._set_target(target)

    def _on_array_command(self, msg: Float64MultiArray) -> None:
        if len(msg.data) != len(self.joints):
            self.get_logger().warning(f'command has {len(msg.data)} values for '
                            f'{len(self.joints)} joints; ignored', once=True)
            return
        self._set_target(np.asarray(msg.data, dtype=float))

    def _set_target(self, target: np.ndarray) -> None:
        if not np.all(np.isfinite(target)):
            self.get_logger().warning('command has non-finite values; ignored', once=True)
            return
        with self._lock:
            self.arm.set_target(target)

    def _on_trajectory_command(self, msg: JointTrajectory) -> None:
        now = time.monotonic()
        ros_now = self.get_clock().now().nanoseconds * 1e-9
        try:
            traj = trajectory_from_msg(msg)
            order = [list(traj.joint_names).index(j) for j in self.joints]
        except (EgorollError, ValueError) as exc:
            self.get_logger().warning(f'command trajectory ignored: {exc}', once=True)
            return
        stamp = ros_now if traj.stamp == 0.0 else traj.stamp
        times = now - (ros_now - stamp) + traj.times
        if times[-1] <= now:
            # Like a trajectory controller sampling past the end: go to the last point.
            self.get_logger().warning('command trajectory entirely in the past: going to its '
                            'last point', once=True)
            with self._lock:
                self.arm.set_target(traj.positions[-1, order])
            return

        def cols(a):  # noqa: ANN001, ANN202
            return None if a is None else a[:, order]

        with self._lock:
            q, v = self.arm.q.copy(), self.arm.v.copy()
            try:
                spliced, _ = splice(now, q, v, np.zeros_like(q), times, cols(traj.positions),
                                    cols(traj.velocities), cols(traj.accelerations))
            except EgorollError as exc:
                self.get_logger().warning(f'command trajectory ignored: {exc}', once=True)
                return
            self.arm.set_trajectory(spliced)

    def _step(self) -> None:
        now = time.monotonic()
        with self._lock:
            q, v = self.arm.step(now)
            drop = self._drop > 0.0 and self._rng.random() < self._drop
        self._delay.push(now, (q, v))
        if drop:
            return
        state = self._delay.at(now - self._latency)
        if state is None:
            return
        q, v = state
        if self._noise > 0.0:
            q = q + self._rng.normal(0.0, self._noise, q.shape)
        msg = JointState(name=list(self.joints), position=q.tolist(), velocity=v.tolist())
        msg.header.stamp = sec_to_time(self.get_clock().now().nanoseconds * 1e-9
                                       - self._latency)
        self._state_pub.publish(msg)


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``sim_robot`` console script."""
    return run_node(lambda: SimRobot(), args, num_threads=1)


if __name__ == '__main__':
    import sys

    sys.exit(main())
