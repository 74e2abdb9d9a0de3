"""The action space of a loaded policy: the one object that knows joint vs Cartesian.

``policy_node`` and ``egoroll evaluate`` hold an :class:`ActionSpace` and call it; neither
branches on the action space. Each space turns a policy output into what is published
(:meth:`ActionSpace.predict`, :meth:`ActionSpace.make_chunk`), judges a chunk as the safety
gate would (:meth:`ActionSpace.check`) and says what to draw or report (:meth:`joint_path`,
:meth:`ee_targets`). Pure: no rclpy, no messages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from egoroll_ros.core.cartesian import CartesianChunk, CartesianConfig, check_cartesian
from egoroll_ros.core.frames import quat_to_matrix
from egoroll_ros.core.gate import GateConfig, Verdict, check
from egoroll_ros.core.inference import (
    CartesianRuntime,
    make_cartesian_chunk,
    make_chunk,
    predict_cartesian,
    predict_positions,
)
from egoroll_ros.core.policy import Observation, Policy
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.core.types import Chunk, JointStateData


@dataclass(frozen=True)
class GateOutcome:
    """What the gate makes of a chunk.

    Attributes:
        verdict: the gate's verdict.
        joint_positions: (H, J) joint positions that would execute (the chunk's own for a
            joint chunk, the IK solution for a Cartesian one; None when IK failed).
        joint_chunk: the joint chunk the gate would forward (or hold for confirmation): the
            chunk itself, or the IK solution of a Cartesian chunk that passed IK; else None.
    """

    verdict: Verdict
    joint_positions: np.ndarray | None
    joint_chunk: Chunk | None = None


class ActionSpace(ABC):
    """How one kind of policy output becomes a chunk; see the module docstring."""

    #: ``'joint'`` or ``'cartesian'`` (as :attr:`PolicyMetadata.action_space`).
    name: str = ''
    #: What a report adds to the note on its joint errors (where the joints come from).
    joint_error_note: str = ''

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.meta = policy.metadata

    @abstractmethod
    def predict(self, obs: Observation) -> Any:
        """Run the policy on ``obs``: the checked, decoded output.

        Raises:
            PolicyError: inference failed, wrong shape, non-finite or undecodable output.
        """

    @abstractmethod
    def make_chunk(self, output: Any, stamp: float, latency: float, shadow: bool = False,
                   sequence: int = 0) -> Chunk | CartesianChunk:
        """The chunk published for ``output`` predicted from the observation at ``stamp``."""

    @abstractmethod
    def check(self, chunk: Any, measured: JointStateData | None, model: RobotModel | None,
              gate: GateConfig, cartesian: CartesianConfig, now: float,
              steady_now: float | None = None) -> GateOutcome:
        """Judge ``chunk`` as the safety gate does (``egoroll evaluate``)."""

    def joint_path(self, output: Any) -> np.ndarray | None:
        """(H, J) joint positions of ``output`` to draw (None: not joint positions)."""
        return None

    def ee_targets(self, output: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """End-effector targets of ``output``: translations (A, H, 3), rotations (A, H, 3, 3)
        per arm, or None for a joint output."""
        return None

    def ee_reference(self, model: RobotModel, joints: Sequence[str]
                     ) -> tuple[tuple[str, ...], Callable[[np.ndarray], Any]] | None:
        """What :meth:`ee_targets` are compared with in a report: the arm names and the
        forward kinematics of recorded joints ((M, J) in ``joints`` order -> translations
        (A, M, 3), rotations (A, M, 3, 3)); None when the output has no end-effector targets.

        Raises:
            RobotModelError: an end-effector frame the model lacks.
        """
        return None


class JointActionSpace(ActionSpace):
    """Absolute joint targets in the configured order; continuous joints unwrapped.

    Args:
        policy: the loaded policy.
        joints: configured joints (columns).
        continuous_columns: columns of continuous joints.
    """

    name = 'joint'

    def __init__(self, policy: Policy, joints: Sequence[str],
                 continuous_columns: Sequence[int]) -> None:
        super().__init__(policy)
        self.joints = tuple(joints)
        self.continuous_columns = tuple(continuous_columns)

    def predict(self, obs: Observation) -> np.ndarray:  # noqa: D102 - see ActionSpace
        return predict_positions(self.policy, obs, self.continuous_columns)

    def make_chunk(self, output: np.ndarray, stamp: float, latency: float,  # noqa: D102
                   shadow: bool = False, sequence: int = 0) -> Chunk:
        return make_chunk(self.meta, self.joints, output, stamp, latency, shadow=shadow,
                          sequence=sequence)

    def check(self, chunk: Chunk, measured: JointStateData | None,  # noqa: D102
              model: RobotModel | None, gate: GateConfig, cartesian: CartesianConfig,
              now: float, steady_now: float | None = None) -> GateOutcome:
        verdict = check(chunk, measured, model, gate, now=now, steady_now=steady_now)
        return GateOutcome(verdict, np.asarray(chunk.trajectory.positions), chunk)

    def joint_path(self, output: np.ndarray) -> np.ndarray:  # noqa: D102
        return output


class CartesianActionSpace(ActionSpace):
    """End-effector poses per arm, decoded through the policy's ONE codec into base-frame
    targets; the gate solves IK.

    Args:
        policy: the loaded policy.
        runtime: its Cartesian runtime (codec, arms, base frame).
    """

    name = 'cartesian'
    joint_error_note = ("; Cartesian policy: joint positions are the gate's IK solution, "
                        'omitted for chunks that did not pass IK '
                        '(chunks_without_joint_positions)')

    def __init__(self, policy: Policy, runtime: CartesianRuntime) -> None:
        super().__init__(policy)
        self.runtime = runtime

    def predict(self, obs: Observation) -> tuple[Any, ...]:  # noqa: D102
        return predict_cartesian(self.policy, obs, self.runtime)

    def make_chunk(self, output: tuple[Any, ...], stamp: float, latency: float,  # noqa: D102
                   shadow: bool = False, sequence: int = 0) -> CartesianChunk:
        return make_cartesian_chunk(self.meta, output, stamp, latency, shadow=shadow,
                                    sequence=sequence)

    def check(self, chunk: CartesianChunk, measured: JointStateData | None,  # noqa: D102
              model: RobotModel | None, gate: GateConfig, cartesian: CartesianConfig,
              now: float, steady_now: float | None = None) -> GateOutcome:
        outcome = check_cartesian(chunk, measured, model, gate, cartesian, now, steady_now)
        return GateOutcome(outcome.verdict, None if outcome.ik_chunk is None else
                           np.asarray(outcome.ik_chunk.trajectory.positions),
                           outcome.joint_chunk)

    def ee_targets(self, output: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:  # noqa
        return (np.stack([np.asarray(a.positions, float) for a in output]),
                np.stack([quat_to_matrix(np.asarray(a.quaternions, float)) for a in output]))

    def ee_reference(self, model: RobotModel, joints: Sequence[str]  # noqa: D102
                     ) -> tuple[tuple[str, ...], Callable[[np.ndarray], Any]]:
        plan = model.fk_plan(self.runtime.ee_frames, joints)
        return tuple(self.runtime.arm_names), plan.compute


def action_space_for(policy: Policy, joints: Sequence[str], continuous_columns: Sequence[int],
                     runtime: CartesianRuntime | None) -> ActionSpace:
    """The action space of a loaded policy (``runtime``: its Cartesian runtime, None for a
    joint policy)."""
    if runtime is not None:
        return CartesianActionSpace(policy, runtime)
    return JointActionSpace(policy, joints, continuous_columns)
