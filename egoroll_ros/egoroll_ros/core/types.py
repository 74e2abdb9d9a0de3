"""Plain-data types passed between the ROS shells and the pure cores.

Times are float seconds. ``stamp`` values are on the ROS clock of the graph (the observation
time of a chunk); ``times`` are offsets from that stamp (``time_from_start``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from egoroll_ros.errors import InputError


@dataclass(frozen=True)
class JointTrajectoryData:
    """A joint trajectory as arrays.

    Attributes:
        joint_names: names of the J joints, in column order.
        times: shape (N,), seconds from ``stamp`` of each point.
        positions: shape (N, J).
        velocities: shape (N, J) or None when the points carry no velocities.
        accelerations: shape (N, J) or None.
        stamp: time zero of ``times`` in seconds (0.0 means "on receipt").
    """

    joint_names: tuple[str, ...]
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None
    stamp: float = 0.0

    @property
    def num_points(self) -> int:
        """Number of points N."""
        return int(self.positions.shape[0])

    @property
    def num_joints(self) -> int:
        """Number of joints J."""
        return len(self.joint_names)


@dataclass(frozen=True)
class Chunk:
    """An action chunk as plain data (see ``egoroll_interfaces/msg/ActionChunk``).

    Attributes:
        sequence: strictly increasing per rollout.
        policy_id: the policy fingerprint.
        stamp: observation time in seconds; ``trajectory.times`` count from it.
        trajectory: the predicted joint trajectory (``trajectory.stamp == stamp``).
        shadow: validate and report only, never execute.
        inference_latency: seconds.
    """

    sequence: int
    policy_id: str
    stamp: float
    trajectory: JointTrajectoryData
    shadow: bool = False
    inference_latency: float = 0.0

    def restamped(self, stamp: float) -> Chunk:
        """The same chunk with its points counted from ``stamp`` (``time_from_start`` kept)."""
        return replace(self, stamp=stamp, trajectory=replace(self.trajectory, stamp=stamp))


@dataclass(frozen=True)
class JointStateData:
    """A measured joint state.

    Attributes:
        names: joint names.
        positions: shape (J,).
        velocities: shape (J,) or None.
        stamp: header stamp in seconds (ROS clock).
        received: steady-clock (``time.monotonic()``) receipt time in seconds.
    """

    names: tuple[str, ...]
    positions: np.ndarray
    velocities: np.ndarray | None = None
    stamp: float = 0.0
    received: float = 0.0
    extra: dict = field(default_factory=dict)

    def ordered(self, joint_names: tuple[str, ...] | list[str]) -> np.ndarray | None:
        """Positions reordered to ``joint_names``; None when a joint is missing."""
        index = {n: i for i, n in enumerate(self.names)}
        try:
            return np.array([self.positions[index[n]] for n in joint_names], dtype=float)
        except KeyError:
            return None

    def select(self, joint_names: tuple[str, ...] | list[str],
               source: str = 'joint_states') -> tuple[np.ndarray, np.ndarray | None]:
        """Positions (and velocities, when every joint has one) in ``joint_names`` order.

        Raises:
            InputError: a joint is missing or a selected position is not finite (naming
                them and ``source``).
        """
        index = {n: i for i, n in enumerate(self.names)}
        missing = [j for j in joint_names if j not in index]
        if missing:
            raise InputError(f"{source} lacks configured joints: {', '.join(missing)}")
        order = [index[j] for j in joint_names]
        pos = np.asarray(self.positions, dtype=float)[order]
        if not np.all(np.isfinite(pos)):
            bad = [j for j, v in zip(joint_names, pos, strict=True) if not np.isfinite(v)]
            raise InputError(f"{source} has non-finite positions for: {', '.join(bad)}")
        vel = None if self.velocities is None else \
            np.asarray(self.velocities, dtype=float)[order]
        return pos, vel
