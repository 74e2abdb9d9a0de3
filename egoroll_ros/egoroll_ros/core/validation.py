"""Structure checks of a joint trajectory, shared by the safety gate and the executor.

One function, :func:`check_structure`, decides whether a trajectory names the configured joints
exactly once each, has N >= 1 points with arrays of matching shape, holds only finite numbers
and has strictly increasing ``time_from_start``. The gate reports every problem as a violation
(``check`` names its check); the executor raises the first failed stage as a
:class:`~egoroll_ros.errors.TrajectoryError` (``code``). Each adds its own checks on top (the
gate: point count, negative start time, spacing, limits; the executor: sequence, state, time).
Pure: numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
import math

import numpy as np

from egoroll_ros.core.types import JointTrajectoryData
from egoroll_ros.errors import TrajectoryError

#: ``StructureProblem.index`` of a problem about the whole trajectory.
WHOLE = -1
#: Stages in the order they are checked; a failed stage ends the check, except the last one.
STAGES = ('joint_names', 'structure', 'finite', 'time_increasing')
_CODES = {'joint_names': 'INVALID_JOINTS', 'structure': 'SIZE_MISMATCH', 'finite': 'NON_FINITE',
          'time_increasing': 'TIME_NOT_INCREASING'}


@dataclass(frozen=True)
class StructureProblem:
    """One structural problem of a trajectory.

    Attributes:
        check: the stage (:data:`STAGES`), as the gate names its check.
        code: the executor's error code (``INVALID_JOINTS``, ``SIZE_MISMATCH``,
            ``EMPTY_TRAJECTORY``, ``NON_FINITE``, ``TIME_NOT_INCREASING``).
        subject: joint name, or '' for the whole trajectory.
        index: point index, or :data:`WHOLE`.
        value: the offending value (nan when there is none).
        message: human-readable, starting with ``check``.
        kind: for ``joint_names``: ``'duplicate'``, ``'unknown'`` or ``'missing'``.
    """

    check: str
    code: str
    subject: str
    index: int
    value: float
    message: str
    kind: str = ''


@dataclass
class TrajectoryStructure:
    """The result of :func:`check_structure`.

    Attributes:
        problems: every problem found, in check order.
        times: ``time_from_start`` as float64 (N,).
        positions, velocities, accelerations: (N, J) float64 in the configured joint order
            (None when absent, or when the structure is unusable).
    """

    problems: list[StructureProblem] = field(default_factory=list)
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    positions: np.ndarray | None = None
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None

    @property
    def usable(self) -> bool:
        """Names, shapes and values are fine (times may still not increase)."""
        return all(p.check == 'time_increasing' for p in self.problems)

    def error(self) -> TrajectoryError | None:
        """The first failed stage as one :class:`TrajectoryError` (None when none failed)."""
        if not self.problems:
            return None
        first = self.problems[0]
        same = [p for p in self.problems if p.check == first.check]
        if first.check == 'joint_names':
            parts = []
            for kind in ('duplicate', 'unknown', 'missing'):
                names = [p.subject for p in same if p.kind == kind]
                if names:
                    parts.append(f'{kind}: ' + ', '.join(sorted(set(names)) if kind ==
                                                         'duplicate' else names))
            return TrajectoryError(first.code, 'joint names do not match the configured '
                                   'joints (' + '; '.join(parts) + ')')
        return TrajectoryError(first.code, first.message)


def _names(names: tuple[str, ...], joints: tuple[str, ...]) -> list[StructureProblem]:
    out, seen = [], set()
    for i, name in enumerate(names):
        if name in seen:
            out.append(StructureProblem('joint_names', 'INVALID_JOINTS', name, WHOLE, i,
                                        f"joint_names: '{name}' appears more than once",
                                        'duplicate'))
        elif name not in joints:
            out.append(StructureProblem('joint_names', 'INVALID_JOINTS', name, WHOLE, i,
                                        f"joint_names: '{name}' is not a configured joint",
                                        'unknown'))
        seen.add(name)
    out += [StructureProblem('joint_names', 'INVALID_JOINTS', name, WHOLE, math.nan,
                             f"joint_names: configured joint '{name}' is missing", 'missing')
            for name in joints if name not in seen]
    return out


def check_structure(traj: JointTrajectoryData, joints: Sequence[str]) -> TrajectoryStructure:
    """Check the structure of ``traj`` against the configured ``joints``.

    Stages, in order (a failed stage ends the check, except the last): ``joint_names`` (each
    configured joint exactly once, nothing else), ``structure`` (N >= 1 points; positions
    (N, J), velocities and accelerations absent or the same shape, N times), ``finite`` (every
    position, velocity, acceleration and time), ``time_increasing`` (strictly increasing
    ``time_from_start``).

    Args:
        traj: the trajectory as received.
        joints: the configured joints, in the order the result's arrays use.

    Returns:
        The problems and, when usable, the arrays in configured joint order.
    """
    joints = tuple(joints)
    names = tuple(traj.joint_names)
    out = TrajectoryStructure(times=np.asarray(traj.times, dtype=float).reshape(-1))
    if names != joints:
        out.problems = _names(names, joints)
        if out.problems:
            return out
    pos = np.asarray(traj.positions, dtype=float)
    times = out.times
    n = pos.shape[0] if pos.ndim == 2 else 0
    if pos.ndim == 2 and pos.shape[0] == 0:
        out.problems.append(StructureProblem('structure', 'EMPTY_TRAJECTORY', '', WHOLE, 0,
                                             'structure: trajectory has no points'))
        return out
    shape_ok = pos.ndim == 2 and pos.shape[1] == len(joints) and n >= 1 and \
        np.shape(traj.times) == (n,)
    for fname in ('velocities', 'accelerations'):
        arr = getattr(traj, fname)
        if arr is not None and np.shape(arr) != pos.shape:
            shape_ok = False
            out.problems.append(StructureProblem(
                'structure', 'SIZE_MISMATCH', '', WHOLE, math.nan,
                f'structure: {fname} have shape {np.shape(arr)}, positions {pos.shape}'))
    if not shape_ok:
        out.problems.append(StructureProblem(
            'structure', 'SIZE_MISMATCH', '', WHOLE, n,
            f'structure: positions shape {pos.shape} and times shape {np.shape(traj.times)} '
            f'do not describe N >= 1 points of {len(joints)} joints'))
        return out
    perm = [names.index(j) for j in joints]
    arrays = {'positions': pos[:, perm]}
    for fname in ('velocities', 'accelerations'):
        arr = getattr(traj, fname)
        arrays[fname] = None if arr is None else np.asarray(arr, dtype=float)[:, perm]
    for label, arr in arrays.items():
        if arr is not None and not np.isfinite(arr).all():
            for r, c in np.argwhere(~np.isfinite(arr)).tolist():
                out.problems.append(StructureProblem(
                    'finite', 'NON_FINITE', joints[c], r, float(arr[r, c]),
                    f"finite: '{joints[c]}' at point {r}: {label} value {float(arr[r, c])} "
                    'is not finite'))
    for i in np.nonzero(~np.isfinite(times))[0].tolist():
        out.problems.append(StructureProblem('finite', 'NON_FINITE', '', i, times[i],
                                             f'finite: time_from_start of point {i} is '
                                             f'{times[i]}'))
    if out.problems:
        return out
    out.positions, out.velocities = arrays['positions'], arrays['velocities']
    out.accelerations = arrays['accelerations']
    dts = np.diff(times)
    for i in np.nonzero(dts <= 0.0)[0].tolist():
        out.problems.append(StructureProblem(
            'time_increasing', 'TIME_NOT_INCREASING', '', i + 1, dts[i],
            f'time_increasing: point {i + 1} is {dts[i]:.6g} s after point {i}'))
    return out
