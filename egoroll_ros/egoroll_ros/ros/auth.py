"""Message-level signing and verification of the gate's goals and heartbeats
(:mod:`egoroll_ros.core.auth` over ExecuteTrajectory goals and InterlockHeartbeat messages).

The safety gate signs with :func:`sign_goal` / :func:`sign_heartbeat`; trajectory_server checks
with a :class:`~egoroll_ros.core.auth.HeartbeatAuthenticator` through :func:`verify_goal` /
:func:`verify_heartbeat`. Tests that play the gate sign the same way with the same key file
(:class:`GateSigner`), as a gate of this user would.
"""

from __future__ import annotations

from typing import Any

from egoroll_ros.core.auth import (
    HeartbeatAuthenticator,
    Point,
    goal_tag,
    heartbeat_tag,
    load_key,
    new_boot_id,
    trajectory_digest,
)


def _stamp(header: Any) -> tuple[int, int]:
    return int(header.stamp.sec), int(header.stamp.nanosec)


def goal_digest(trajectory: Any) -> bytes:
    """The digest of a trajectory_msgs/JointTrajectory (every field the executor reads)."""
    points = (Point(int(p.time_from_start.sec), int(p.time_from_start.nanosec), p.positions,
                    p.velocities, p.accelerations, p.effort) for p in trajectory.points)
    return trajectory_digest(list(trajectory.joint_names), points, _stamp(trajectory.header),
                             trajectory.header.frame_id)


def sign_goal(key: bytes, goal: Any, boot_id: int) -> None:
    """Set ``goal.boot_id`` and ``goal.auth_tag`` (an ExecuteTrajectory.Goal, all other fields
    final)."""
    goal.boot_id = int(boot_id)
    goal.auth_tag = list(goal_tag(key, sequence=int(goal.sequence), source=goal.source,
                                  boot_id=int(boot_id), counter=int(goal.heartbeat_counter),
                                  digest=goal_digest(goal.trajectory)))


def sign_heartbeat(key: bytes, hb: Any, boot_id: int) -> None:
    """Set ``hb.boot_id`` and ``hb.auth_tag`` (an InterlockHeartbeat, all other fields
    final)."""
    hb.boot_id = int(boot_id)
    hb.auth_tag = list(heartbeat_tag(key, boot_id=int(boot_id), counter=int(hb.counter),
                                     stamp=_stamp(hb.header), state=hb.state,
                                     motion_allowed=bool(hb.motion_allowed),
                                     fence=int(hb.fence_sequence), detail=hb.detail,
                                     robot_model=hb.robot_model_sha256))


def verify_heartbeat(auth: HeartbeatAuthenticator, now: float, hb: Any) -> str | None:
    """None when ``hb`` is to be honoured, else why not."""
    return auth.heartbeat(now, tag=bytes(hb.auth_tag), boot_id=int(hb.boot_id),
                          counter=int(hb.counter), stamp=_stamp(hb.header), state=hb.state,
                          motion_allowed=bool(hb.motion_allowed), fence=int(hb.fence_sequence),
                          detail=hb.detail, robot_model=hb.robot_model_sha256)


def verify_goal(auth: HeartbeatAuthenticator, now: float, goal: Any) -> str | None:
    """None when ``goal`` may be executed, else why not."""
    return auth.goal(now, tag=bytes(goal.auth_tag), sequence=int(goal.sequence),
                     source=goal.source, boot_id=int(goal.boot_id),
                     counter=int(goal.heartbeat_counter), digest=goal_digest(goal.trajectory))


class GateSigner:
    """Signs like one start of a safety gate: a boot id and the key of ``key_file`` (empty:
    the user's default key). For tests and tools that play the gate towards a real
    trajectory_server."""

    def __init__(self, key_file: str = '', robot_model_sha256: str = '') -> None:
        self.key, self.path = load_key(key_file)
        self.boot_id = new_boot_id()
        self.counter = 0
        self.robot_model_sha256 = robot_model_sha256   # what the gate's heartbeats name

    def heartbeat(self, hb: Any) -> Any:
        """Sign ``hb`` (its counter set to this signer's next unless given) and return it."""
        if not hb.counter:
            self.counter += 1
            hb.counter = self.counter
        else:
            self.counter = max(self.counter, int(hb.counter))
        if not hb.robot_model_sha256:
            hb.robot_model_sha256 = self.robot_model_sha256
        sign_heartbeat(self.key, hb, self.boot_id)
        return hb

    def goal(self, goal: Any) -> Any:
        """Sign ``goal`` (naming this signer's latest heartbeat unless it names one)."""
        if not goal.heartbeat_counter:
            goal.heartbeat_counter = self.counter
        sign_goal(self.key, goal, self.boot_id)
        return goal
