"""Conversions between ROS messages and the plain data of :mod:`egoroll_ros.core.types`.

Nodes call these; the pure cores work on the plain data. Two places still hand the core a
message-shaped value: the observation store keeps camera messages until an observation needs
them (decoded by the ``prepare`` function the ROS layer gives it, :mod:`egoroll_ros.ros.images`),
and the gate's verdict is turned into a message here from duck-typed fields.
"""

from __future__ import annotations

from builtin_interfaces.msg import Duration, Time
import numpy as np
from sensor_msgs.msg import JointState, Joy
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from egoroll_interfaces.msg import ActionChunk, GateVerdict
from egoroll_interfaces.msg import Violation as ViolationMsg
from egoroll_ros.core.types import Chunk, JointStateData, JointTrajectoryData
from egoroll_ros.errors import TrajectoryError


def time_to_sec(t: Time | Duration) -> float:
    """A builtin_interfaces Time or Duration as float seconds."""
    return float(t.sec) + float(t.nanosec) * 1e-9


def sec_to_time(s: float) -> Time:
    """Float seconds (>= 0) as a builtin_interfaces Time."""
    ns = int(round(s * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def ns_to_time(ns: int) -> Time:
    """Integer nanoseconds (>= 0) as a builtin_interfaces Time (exact: float seconds of the
    epoch resolve only 2^-22 s, about 240 ns, which differentiated at 500 Hz reads as tens of
    rad/s^3 of jerk)."""
    ns = int(ns)
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def steady_to_ros_ns(offset_ns: int, t: float) -> int:
    """ROS-clock stamp in integer nanoseconds of steady-clock time ``t`` (s) through
    ``offset_ns`` (ROS minus steady, ns): steady seconds of an uptime are exact to far below a
    nanosecond, so stamps one period apart differ by the period to the nanosecond."""
    return int(offset_ns) + int(round(t * 1e9))


def sec_to_duration(s: float) -> Duration:
    """Float seconds as a builtin_interfaces Duration (nanosec always in [0, 1e9))."""
    ns = int(round(s * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _field(points: list[JointTrajectoryPoint], attr: str, n_joints: int,
           required: bool) -> np.ndarray | None:
    rows = [getattr(p, attr) for p in points]
    sizes = {len(r) for r in rows}
    if sizes == {0} and not required:
        return None
    for i, r in enumerate(rows):
        if len(r) != n_joints:
            raise TrajectoryError(
                'SIZE_MISMATCH',
                f'point {i}: {attr} has {len(r)} values for {n_joints} joints')
    return np.array([np.asarray(r, dtype=float) for r in rows], dtype=float).reshape(
        len(rows), n_joints)


def trajectory_from_msg(msg: JointTrajectory, stamp: float | None = None) -> JointTrajectoryData:
    """Convert a JointTrajectory; ``stamp`` overrides ``msg.header.stamp``.

    Raises:
        TrajectoryError: ``EMPTY_TRAJECTORY`` or ``SIZE_MISMATCH`` (checked here because arrays
            cannot hold ragged rows); every other check is the consumer's.
    """
    names = tuple(msg.joint_names)
    if not msg.points:
        raise TrajectoryError('EMPTY_TRAJECTORY', 'trajectory has no points')
    n = len(names)
    positions = _field(msg.points, 'positions', n, required=True)
    velocities = _field(msg.points, 'velocities', n, required=False)
    accelerations = _field(msg.points, 'accelerations', n, required=False)
    times = np.array([time_to_sec(p.time_from_start) for p in msg.points], dtype=float)
    return JointTrajectoryData(
        joint_names=names, times=times, positions=positions, velocities=velocities,
        accelerations=accelerations,
        stamp=time_to_sec(msg.header.stamp) if stamp is None else stamp)


def trajectory_to_msg(traj: JointTrajectoryData) -> JointTrajectory:
    """Convert plain trajectory data to a JointTrajectory (header.stamp = ``traj.stamp``)."""
    msg = JointTrajectory()
    msg.header.stamp = sec_to_time(traj.stamp)
    msg.joint_names = list(traj.joint_names)
    points = []
    for i in range(traj.num_points):
        p = JointTrajectoryPoint()
        p.positions = traj.positions[i].tolist()
        if traj.velocities is not None:
            p.velocities = traj.velocities[i].tolist()
        if traj.accelerations is not None:
            p.accelerations = traj.accelerations[i].tolist()
        p.time_from_start = sec_to_duration(float(traj.times[i]))
        points.append(p)
    msg.points = points
    return msg


def chunk_from_msg(msg: ActionChunk) -> Chunk:
    """Convert an ActionChunk (the header stamp is authoritative for the trajectory)."""
    stamp = time_to_sec(msg.header.stamp)
    return Chunk(sequence=int(msg.sequence), policy_id=msg.policy_id, stamp=stamp,
                 trajectory=trajectory_from_msg(msg.trajectory, stamp=stamp),
                 shadow=bool(msg.shadow), inference_latency=float(msg.inference_latency))


def _chunk_header_msg(chunk: object, frame_id: str) -> ActionChunk:
    """An ActionChunk with the fields every action space shares (stamp, sequence, id...)."""
    msg = ActionChunk()
    msg.header.stamp = sec_to_time(chunk.stamp)
    msg.header.frame_id = frame_id
    msg.sequence = int(chunk.sequence)
    msg.policy_id = chunk.policy_id
    msg.inference_latency = float(chunk.inference_latency)
    msg.shadow = bool(chunk.shadow)
    return msg


def chunk_to_msg(chunk: Chunk, frame_id: str = '') -> ActionChunk:
    """Convert a Chunk to an ActionChunk message."""
    msg = _chunk_header_msg(chunk, frame_id)
    msg.trajectory = trajectory_to_msg(chunk.trajectory)
    return msg


def joint_state_from_msg(msg: JointState, received: float) -> JointStateData:
    """Convert a JointState; ``received`` is the steady-clock receipt time.

    Raises:
        TrajectoryError: ``SIZE_MISMATCH`` when names and positions differ in length.
    """
    if len(msg.position) != len(msg.name):
        raise TrajectoryError('SIZE_MISMATCH', f'joint_states has {len(msg.name)} names and '
                              f'{len(msg.position)} positions')
    vel = np.asarray(msg.velocity, dtype=float) if len(msg.velocity) == len(msg.name) \
        and len(msg.name) else None
    return JointStateData(names=tuple(msg.name), positions=np.asarray(msg.position, dtype=float),
                          velocities=vel, stamp=time_to_sec(msg.header.stamp), received=received)


def joy_from_msg(msg: Joy) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """A Joy message as ``(buttons, axes)`` (what the observation builder stores)."""
    return tuple(msg.buttons), tuple(msg.axes)


def pose_from_msg(msg: object) -> tuple[float, ...]:
    """A PoseStamped as ``(x, y, z, qx, qy, qz, qw)``."""
    p, q = msg.pose.position, msg.pose.orientation
    return (p.x, p.y, p.z, q.x, q.y, q.z, q.w)


def verdict_to_msg(verdict: object, chunk_msg: ActionChunk, stamp: Time, forwarded: bool,
                   note: str = '') -> GateVerdict:
    """The GateVerdict about ``chunk_msg`` for a :class:`~egoroll_ros.core.gate.Verdict`.

    Args:
        verdict: the gate's verdict (duck-typed: accepted, needs_confirmation, violations,
            check_duration, summary).
        chunk_msg: the ActionChunk (or a header-only copy) the verdict is about.
        stamp: when the verdict was made.
        forwarded: whether the chunk was sent to the executor.
        note: prefix of the summary.
    """
    out = GateVerdict()
    out.header.stamp = stamp
    out.sequence = int(chunk_msg.sequence)
    out.policy_id = chunk_msg.policy_id
    out.chunk_stamp = chunk_msg.header.stamp
    out.shadow = bool(chunk_msg.shadow)
    out.accepted = verdict.accepted
    out.needs_confirmation = verdict.needs_confirmation
    out.forwarded = forwarded
    out.violations = [ViolationMsg(check=v.check, subject=v.subject, point_index=v.point_index,
                                   value=v.value, limit=v.limit, message=v.message)
                      for v in verdict.violations]
    out.check_duration = float(verdict.check_duration)
    out.stage = str(getattr(verdict, 'stage', ''))
    out.action_space = int(getattr(chunk_msg, 'action_space', 0))
    out.summary = note + verdict.summary + (' (forwarded)' if forwarded else '') + \
        (' (shadow)' if chunk_msg.shadow else '')
    return out


def is_cartesian(msg: ActionChunk) -> bool:
    """Whether an ActionChunk carries Cartesian targets (``action_space == CARTESIAN``)."""
    return int(msg.action_space) == ActionChunk.ACTION_SPACE_CARTESIAN


def cartesian_chunk_from_msg(msg: ActionChunk) -> object:
    """Convert a Cartesian ActionChunk to :class:`~egoroll_ros.core.cartesian.CartesianChunk`.

    Times come from ``trajectory.points[i].time_from_start``; a point that carries joint
    positions, or named joints, is malformed in a Cartesian chunk.

    Raises:
        TrajectoryError: ``SIZE_MISMATCH`` (joint data in a Cartesian chunk).
    """
    from egoroll_ros.core.cartesian import CartesianArmTarget, CartesianChunk

    if msg.trajectory.joint_names or any(len(p.positions) for p in msg.trajectory.points):
        raise TrajectoryError('SIZE_MISMATCH', 'a Cartesian chunk must carry no joint names '
                              'and no joint positions (times only)')
    stamp = time_to_sec(msg.header.stamp)
    times = np.array([time_to_sec(p.time_from_start) for p in msg.trajectory.points], float)
    arms = []
    for a in msg.cartesian:
        pos = np.array([[p.position.x, p.position.y, p.position.z] for p in a.poses],
                       dtype=float).reshape(-1, 3)
        quat = np.array([[p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w]
                         for p in a.poses], dtype=float).reshape(-1, 4)
        arms.append(CartesianArmTarget(a.arm, a.ee_frame, a.reference_frame, pos, quat,
                                       np.asarray(a.gripper, dtype=float)))
    return CartesianChunk(sequence=int(msg.sequence), policy_id=msg.policy_id, stamp=stamp,
                          times=times, arms=tuple(arms), shadow=bool(msg.shadow),
                          inference_latency=float(msg.inference_latency))


def cartesian_chunk_to_msg(chunk: object, frame_id: str = '') -> ActionChunk:
    """Convert a :class:`~egoroll_ros.core.cartesian.CartesianChunk` to an ActionChunk."""
    from geometry_msgs.msg import Pose

    from egoroll_interfaces.msg import CartesianArmTrajectory

    msg = _chunk_header_msg(chunk, frame_id)
    msg.action_space = ActionChunk.ACTION_SPACE_CARTESIAN
    msg.trajectory.header.stamp = msg.header.stamp
    msg.trajectory.points = [JointTrajectoryPoint(time_from_start=sec_to_duration(float(t)))
                             for t in chunk.times]
    for a in chunk.arms:
        arm = CartesianArmTrajectory(arm=a.arm, ee_frame=a.ee_frame,
                                     reference_frame=a.reference_frame)
        poses = []
        for p, q in zip(np.asarray(a.positions, float), np.asarray(a.quaternions, float),
                        strict=True):
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in p)
            (pose.orientation.x, pose.orientation.y, pose.orientation.z,
             pose.orientation.w) = (float(v) for v in q)
            poses.append(pose)
        arm.poses = poses
        arm.gripper = [float(g) for g in np.asarray(a.gripper, float)]
        msg.cartesian.append(arm)
    return msg


def any_chunk_to_msg(chunk: object, frame_id: str = '') -> ActionChunk:
    """A joint :class:`Chunk` or a Cartesian chunk as the ``ActionChunk`` published."""
    if isinstance(chunk, Chunk):
        return chunk_to_msg(chunk, frame_id)
    return cartesian_chunk_to_msg(chunk, frame_id)
