"""Inverse kinematics of one arm's end-effector frame along a chunk of poses (Pinocchio).

Damped least squares (Levenberg-Marquardt style) in the world-aligned frame of the end
effector, with the joint limits enforced by projection after every step (a target that needs
a joint past its limit does not converge and is reported, never approximated). Point 0 is
seeded from the measured joints, every later point from the previous point's solution, so a
chunk follows one IK branch; a solution that still moves a joint more than
``max_joint_jump`` from its seed is a branch flip (typically near a singularity) and is
reported as such.

The arm's chain is solved on a Pinocchio model reduced to the arm's joints, so bimanual
robots cost two 7-joint problems, not one 16-joint one. No rclpy import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math

import numpy as np

from egoroll_ros.core.robot_model import CONTINUOUS, RobotModel
from egoroll_ros.errors import ConfigError


@dataclass(frozen=True)
class IkParams:
    """Tolerances and limits of the solver.

    Attributes:
        position_tolerance: m, converged when the position error is at most this ...
        rotation_tolerance: rad, ... and the rotation error at most this.
        max_iterations: damped least-squares steps allowed per point.
        damping: lambda^2 added to J J^T (regularises near singularities).
        max_iteration_step: rad (m), largest joint change in one iteration (larger steps
            are scaled down, keeping the direction).
        max_joint_jump: rad (m), largest change of any joint between a point's seed and its
            solution; more is a branch flip.
    """

    position_tolerance: float = 1e-4
    rotation_tolerance: float = 1e-4
    max_iterations: int = 50
    damping: float = 1e-6
    max_iteration_step: float = 0.3
    max_joint_jump: float = 0.35

    def __post_init__(self) -> None:
        """Validate; ConfigError names the parameter."""
        for name in ('position_tolerance', 'rotation_tolerance', 'damping',
                     'max_iteration_step', 'max_joint_jump'):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0.0):
                raise ConfigError(f"parameter 'ik_{name}': must be a positive number, got {v}")
        if self.max_iterations < 1:
            raise ConfigError("parameter 'ik_max_iterations': must be >= 1")


@dataclass
class IkResult:
    """Outcome of :meth:`ArmIk.solve_path`.

    Attributes:
        positions: (N, J) solutions in :attr:`ArmIk.joints` order (rows after a failure are
            the last good solution repeated; never used: the chunk is rejected).
        position_errors, rotation_errors: (N,) residuals (m, rad); NaN after a failure.
        iterations: (N,) iterations used per point.
        failed_point: index of the first point that failed, or -1.
        failure: ``'ik_not_converged'`` or ``'ik_branch_flip'`` (empty on success).
        failure_joint: the joint that jumped (branch flip), else ''.
        failure_value: the residual or jump that failed, NaN on success.
        failure_limit: the tolerance or jump limit it was compared with.
    """

    positions: np.ndarray
    position_errors: np.ndarray
    rotation_errors: np.ndarray
    iterations: np.ndarray
    failed_point: int = -1
    failure: str = ''
    failure_joint: str = ''
    failure_value: float = math.nan
    failure_limit: float = math.nan

    @property
    def ok(self) -> bool:
        """Every point converged without a branch flip."""
        return self.failed_point < 0


class ArmIk:
    """IK of ``ee_frame`` over the movable joints of its chain.

    Args:
        robot_model: the robot.
        ee_frame: end-effector frame.
        lower, upper: joint limits per chain joint (rad/m), e.g. the gate's limits with the
            margins applied; ``None`` uses the URDF's. Continuous joints: +-inf.
        params: solver parameters.

    Raises:
        ConfigError: unknown frame, or a frame with no movable joint in its chain.
    """

    def __init__(self, robot_model: RobotModel, ee_frame: str,
                 lower: Sequence[float] | None = None, upper: Sequence[float] | None = None,
                 params: IkParams | None = None) -> None:
        import pinocchio as pin

        self._pin = pin
        if not robot_model.has_frame(ee_frame):
            raise ConfigError(f"parameter 'cartesian_ee_frames': '{ee_frame}' is not a frame "
                              f'of {robot_model.source}')
        self.joints: tuple[str, ...] = robot_model.chain(ee_frame)
        if not self.joints:
            raise ConfigError(f"parameter 'cartesian_ee_frames': '{ee_frame}' moves with no "
                              'joint')
        self.ee_frame = ee_frame
        self.params = params or IkParams()
        full = robot_model.pin_model
        keep = set(self.joints)
        lock = [jid for jid in range(1, full.njoints) if full.names[jid] not in keep]
        model = pin.buildReducedModel(full, lock, pin.neutral(full)) if lock else full
        self._model = model
        self._data = model.createData()
        self._fid = model.getFrameId(ee_frame)
        infos = [robot_model.joints[j] for j in self.joints]
        self.lower = np.array([i.lower for i in infos] if lower is None else lower, dtype=float)
        self.upper = np.array([i.upper for i in infos] if upper is None else upper, dtype=float)
        # Column of each chain joint in Pinocchio's v vector (tangent space, 1 per joint) and
        # where its value goes in q (continuous joints are (cos, sin) pairs in q).
        self._vcol = np.array([model.joints[model.getJointId(j)].idx_v for j in self.joints])
        qidx = np.array([model.joints[model.getJointId(j)].idx_q for j in self.joints])
        cont = np.array([i.kind == CONTINUOUS for i in infos])
        self._lin_q, self._lin_c = qidx[~cont], np.nonzero(~cont)[0]
        self._cont_q, self._cont_c = qidx[cont], np.nonzero(cont)[0]
        self._q = pin.neutral(model)
        self._eye6 = np.eye(6) * self.params.damping

    def _config(self, theta: np.ndarray) -> np.ndarray:
        q = self._q
        q[self._lin_q] = theta[self._lin_c]
        if self._cont_c.size:
            ang = theta[self._cont_c]
            q[self._cont_q] = np.cos(ang)
            q[self._cont_q + 1] = np.sin(ang)
        return q

    def _evaluate(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Jacobian (6, J; world-aligned at the frame) and the frame's pose at ``theta``."""
        pin = self._pin
        jac = pin.computeFrameJacobian(self._model, self._data, self._config(theta), self._fid,
                                       pin.LOCAL_WORLD_ALIGNED)
        placement = self._data.oMf[self._fid]
        return jac[:, self._vcol], placement.translation.copy(), placement.rotation.copy()

    def fk(self, theta: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """Pose ``(position, rotation)`` of the frame at chain joint values ``theta``."""
        _, p, r = self._evaluate(np.asarray(theta, dtype=float))
        return p, r

    def solve_path(self, positions: np.ndarray, rotations: np.ndarray,
                   seed: Sequence[float]) -> IkResult:
        """Solve every target in order, stopping at the first failure.

        Args:
            positions: (N, 3) target positions in the robot's root frame.
            rotations: (N, 3, 3) target orientations.
            seed: (J,) measured joint values in :attr:`joints` order (seed of point 0).

        Returns:
            The solutions and residuals; ``failed_point >= 0`` when a point did not converge
            within tolerance or jumped (branch flip).
        """
        par = self.params
        log3 = self._pin.log3
        n, nj = len(positions), len(self.joints)
        sol = np.empty((n, nj))
        perr = np.full(n, np.nan)
        rerr = np.full(n, np.nan)
        iters = np.zeros(n, dtype=int)
        theta = np.clip(np.asarray(seed, dtype=float), self.lower, self.upper)
        jac, p, r = self._evaluate(theta)
        result = IkResult(sol, perr, rerr, iters)
        err = np.empty(6)
        for k in range(n):
            start = theta.copy()
            pt, rt = positions[k], rotations[k]
            it = 0
            while True:
                err[:3] = pt - p
                err[3:] = log3(rt @ r.T)
                ep = math.sqrt(err[0] ** 2 + err[1] ** 2 + err[2] ** 2)
                er = math.sqrt(err[3] ** 2 + err[4] ** 2 + err[5] ** 2)
                if ep <= par.position_tolerance and er <= par.rotation_tolerance:
                    break
                if it >= par.max_iterations:
                    sol[k:] = theta
                    result.failed_point = k
                    result.failure = 'ik_not_converged'
                    bad_pos = ep / par.position_tolerance >= er / par.rotation_tolerance
                    result.failure_value = ep if bad_pos else er
                    result.failure_limit = par.position_tolerance if bad_pos else \
                        par.rotation_tolerance
                    result.failure_joint = 'position' if bad_pos else 'rotation'
                    perr[k], rerr[k], iters[k] = ep, er, it
                    return result
                dq = jac.T @ np.linalg.solve(jac @ jac.T + self._eye6, err)
                big = float(np.max(np.abs(dq)))
                if big > par.max_iteration_step:
                    dq *= par.max_iteration_step / big
                theta = np.clip(theta + dq, self.lower, self.upper)
                jac, p, r = self._evaluate(theta)
                it += 1
            sol[k], perr[k], rerr[k], iters[k] = theta, ep, er, it
            jump = np.abs(theta - start)
            worst = int(np.argmax(jump))
            if jump[worst] > par.max_joint_jump:
                sol[k + 1:] = theta
                result.failed_point = k
                result.failure = 'ik_branch_flip'
                result.failure_joint = self.joints[worst]
                result.failure_value = float(jump[worst])
                result.failure_limit = par.max_joint_jump
                return result
        return result
