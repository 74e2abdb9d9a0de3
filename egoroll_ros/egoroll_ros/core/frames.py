"""Rotation representations, the dataset<->hardware frame convention, and pose errors.

Everything is vectorised over leading axes and pure numpy (no rclpy, no Pinocchio).

Rotation representations (``rotation`` names):

- ``quat_xyzw`` / ``quat_wxyz``: unit quaternion, 4 values. Decoding refuses a norm that is
  not 1 within :data:`QUAT_NORM_TOLERANCE` (a policy output is never renormalised silently);
  encoding returns the canonical sign (w >= 0).
- ``rot6d``: the first two ROWS of the rotation matrix, 6 values (pytorch3d's
  ``matrix_to_rotation_6d``, which robomimic/EgoMimic use); decoding orthonormalises them by
  Gram-Schmidt (Zhou et al. 2019), as the training code does.
- ``rpy:<axes>``: three Tait-Bryan angles (rad). Lower-case axes are EXTRINSIC (fixed axes,
  ``rpy:xyz`` is ROS/URDF roll-pitch-yaw: ``R = Rz(yaw) Ry(pitch) Rx(roll)``); upper-case axes
  are INTRINSIC (``rpy:XYZ``: ``R = Rx(a) Ry(b) Rz(c)``). Any order of x, y, z.

:class:`FrameConvention` is the ONE object that maps poses between the dataset's convention
and the hardware's, both ways (actions: dataset -> hardware, observations: hardware ->
dataset); :class:`CartesianCodec` adds the per-arm layout of a policy's vectors and the frame
they are expressed in, so a policy's observation and its action go through the same object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
import functools

import numpy as np

from egoroll_ros.errors import ConfigError

#: A decoded quaternion's norm must be 1 within this.
QUAT_NORM_TOLERANCE = 1e-3

_AXIS = {'x': 0, 'y': 1, 'z': 2}


def rotation_size(rotation: str) -> int:
    """Number of values of rotation representation ``rotation``.

    Raises:
        ConfigError: unknown representation.
    """
    if rotation in ('quat_xyzw', 'quat_wxyz'):
        return 4
    if rotation == 'rot6d':
        return 6
    _euler_axes(rotation)
    return 3


@functools.lru_cache(maxsize=64)
def _euler_axes(rotation: str) -> tuple[tuple[int, int, int], bool]:
    """``(axes in application order of an intrinsic product, extrinsic?)`` of ``rpy:...``."""
    prefix, _, axes = rotation.partition(':')
    ok = prefix == 'rpy' and len(axes) == 3 and (axes.islower() or axes.isupper()) and \
        sorted(axes.lower()) == ['x', 'y', 'z']
    if not ok:
        raise ConfigError(f"rotation representation '{rotation}' is unknown (quat_xyzw, "
                          "quat_wxyz, rot6d, or rpy:<order> with x, y, z each once: lower case "
                          "extrinsic, e.g. 'rpy:xyz' = URDF roll-pitch-yaw, upper case "
                          'intrinsic)')
    return tuple(_AXIS[a] for a in axes.lower()), axes.islower()


def _elementary(axis: int, angle: np.ndarray) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    out = np.zeros(angle.shape + (3, 3))
    i, j = (axis + 1) % 3, (axis + 2) % 3
    out[..., axis, axis] = 1.0
    out[..., i, i] = c
    out[..., j, j] = c
    out[..., i, j] = -s
    out[..., j, i] = s
    return out


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` as x, y, z, w -> rotation matrices ``(..., 3, 3)``."""
    x, y, z, w = (q[..., k] for k in range(4))
    out = np.empty(q.shape[:-1] + (3, 3))
    out[..., 0, 0] = 1 - 2 * (y * y + z * z)
    out[..., 0, 1] = 2 * (x * y - z * w)
    out[..., 0, 2] = 2 * (x * z + y * w)
    out[..., 1, 0] = 2 * (x * y + z * w)
    out[..., 1, 1] = 1 - 2 * (x * x + z * z)
    out[..., 1, 2] = 2 * (y * z - x * w)
    out[..., 2, 0] = 2 * (x * z - y * w)
    out[..., 2, 1] = 2 * (y * z + x * w)
    out[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return out


def matrix_to_quat(r: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` -> unit quaternions x, y, z, w with w >= 0."""
    r = np.asarray(r, dtype=float)
    m00, m11, m22 = r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]
    # Four candidate formulas; take the numerically best (largest pivot) per rotation.
    piv = np.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22,
                    1 - m00 - m11 + m22], axis=-1)
    best = np.argmax(piv, axis=-1)
    s = np.sqrt(np.maximum(np.take_along_axis(piv, best[..., None], -1)[..., 0], 1e-300)) * 2
    a = r[..., 2, 1] - r[..., 1, 2]
    b = r[..., 0, 2] - r[..., 2, 0]
    c = r[..., 1, 0] - r[..., 0, 1]
    d = r[..., 0, 1] + r[..., 1, 0]
    e = r[..., 0, 2] + r[..., 2, 0]
    f = r[..., 1, 2] + r[..., 2, 1]
    cand = np.stack([
        np.stack([a / s, b / s, c / s, s / 4], -1),
        np.stack([s / 4, d / s, e / s, a / s], -1),
        np.stack([d / s, s / 4, f / s, b / s], -1),
        np.stack([e / s, f / s, s / 4, c / s], -1)], -2)
    q = np.take_along_axis(cand, best[..., None, None], -2)[..., 0, :]
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., 3:4] < 0.0, -q, q)


def _gram_schmidt(d6: np.ndarray) -> np.ndarray:
    a1, a2 = d6[..., 0:3], d6[..., 3:6]
    b1 = a1 / np.linalg.norm(a1, axis=-1, keepdims=True)
    b2 = a2 - np.sum(b1 * a2, axis=-1, keepdims=True) * b1
    b2 = b2 / np.linalg.norm(b2, axis=-1, keepdims=True)
    b3 = np.cross(b1, b2)
    return np.stack([b1, b2, b3], axis=-2)


def to_matrix(values: np.ndarray, rotation: str) -> np.ndarray:
    """Decode ``(..., k)`` values of representation ``rotation`` to ``(..., 3, 3)``.

    Raises:
        ValueError: a quaternion whose norm is not 1 within :data:`QUAT_NORM_TOLERANCE`, or a
            degenerate 6D rotation (zero or parallel vectors).
        ConfigError: unknown representation.
    """
    v = np.asarray(values, dtype=float)
    size = rotation_size(rotation)
    if v.shape[-1] != size:
        raise ValueError(f"'{rotation}' needs {size} values, got {v.shape[-1]}")
    if rotation.startswith('quat'):
        q = v if rotation == 'quat_xyzw' else v[..., [1, 2, 3, 0]]
        norm = np.linalg.norm(q, axis=-1)
        if np.any(np.abs(norm - 1.0) > QUAT_NORM_TOLERANCE):
            worst = float(norm.flat[int(np.argmax(np.abs(norm - 1.0)))])
            raise ValueError(f'quaternion norm {worst:.6g} is not 1 (tolerance '
                             f'{QUAT_NORM_TOLERANCE})')
        return quat_to_matrix(q / norm[..., None])
    if rotation == 'rot6d':
        a1, a2 = v[..., 0:3], v[..., 3:6]
        n1 = np.linalg.norm(a1, axis=-1)
        cross = np.linalg.norm(np.cross(a1, a2), axis=-1)
        if np.any(n1 < 1e-6) or np.any(cross < 1e-6 * np.maximum(n1, 1e-12)):
            raise ValueError('degenerate 6D rotation (a zero or parallel vector)')
        return _gram_schmidt(v)
    axes, extrinsic = _euler_axes(rotation)
    angles = v[..., ::-1] if extrinsic else v
    order = axes[::-1] if extrinsic else axes
    return _elementary(order[0], angles[..., 0]) @ _elementary(order[1], angles[..., 1]) @ \
        _elementary(order[2], angles[..., 2])


def from_matrix(r: np.ndarray, rotation: str) -> np.ndarray:
    """Encode rotation matrices ``(..., 3, 3)`` in representation ``rotation``.

    Euler angles come out with the middle angle in [-pi/2, pi/2] and the others in
    (-pi, pi]; at the middle angle's +-pi/2 (gimbal lock) the split between the outer two is
    arbitrary (the rotation is still exact).
    """
    r = np.asarray(r, dtype=float)
    if rotation in ('quat_xyzw', 'quat_wxyz'):
        q = matrix_to_quat(r)
        return q if rotation == 'quat_xyzw' else q[..., [3, 0, 1, 2]]
    if rotation == 'rot6d':
        return r[..., :2, :].reshape(r.shape[:-2] + (6,))
    axes, extrinsic = _euler_axes(rotation)
    i, j, k = axes[::-1] if extrinsic else axes
    sign = 1.0 if (j - i) % 3 == 1 else -1.0       # cyclic (x->y->z) order or not
    a = np.arctan2(-sign * r[..., j, k], r[..., k, k])
    b = np.arcsin(np.clip(sign * r[..., i, k], -1.0, 1.0))
    c = np.arctan2(-sign * r[..., i, j], r[..., i, i])
    out = np.stack([a, b, c], axis=-1)
    return out[..., ::-1].copy() if extrinsic else out


def rotation_angles(r_a: np.ndarray, r_b: np.ndarray) -> np.ndarray:
    """Geodesic angle (rad) between rotation matrices (the gate's function, re-exported)."""
    from egoroll_ros.core.gate import rotation_angles as _angles
    return _angles(r_a, r_b)


def cartesian_errors(pred_pos: np.ndarray, pred_rot: np.ndarray, rec_pos: np.ndarray,
                     rec_rot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position (m) and rotation (rad) errors between predicted and recorded poses.

    For ``egoroll evaluate``: per horizon step (and per arm), the distance between the
    positions and the geodesic angle between the orientations. Shapes broadcast, e.g.
    ``(A, H, 3)`` and ``(A, H, 3, 3)`` give ``(A, H)`` errors. Both sides must be in the same
    frame (the robot base frame when both come from FK of joints, or from decoded chunks).

    Returns:
        ``(position_error, rotation_error)``.
    """
    pos = np.linalg.norm(np.asarray(pred_pos, float) - np.asarray(rec_pos, float), axis=-1)
    return pos, rotation_angles(np.asarray(pred_rot, float), np.asarray(rec_rot, float))


def _as_rotation(value: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    m = np.asarray(value, dtype=float)
    if m.shape == (9,):
        m = m.reshape(3, 3)
    if m.shape != (3, 3) or not np.all(np.isfinite(m)) or \
            not np.allclose(m @ m.T, np.eye(3), atol=1e-9) or not np.linalg.det(m) > 0.0:
        raise ConfigError(f"parameter '{name}': not a rotation matrix (9 values, row-major, "
                          'orthonormal, det +1)')
    return m


@dataclass(frozen=True)
class FrameConvention:
    """The fixed transform between the dataset's pose convention and the hardware's.

    ``T_hw = L @ T_ds @ R`` where ``L = (reference_rotation, reference_translation)`` re-expresses
    the dataset's reference axes in the hardware frame the poses are expressed in, and
    ``R = (ee_rotation, ee_translation)`` maps the hardware end-effector frame to the dataset's
    (e.g. a permutation/sign matrix between EgoMimic's dataset and hardware roll-pitch-yaw
    axes). The gripper maps as ``g_hw = gripper_offset + gripper_scale * g_ds``.

    Both directions live here, so observations and actions cannot disagree.
    """

    reference_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    reference_translation: np.ndarray = field(default_factory=lambda: np.zeros(3))
    ee_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    ee_translation: np.ndarray = field(default_factory=lambda: np.zeros(3))
    gripper_scale: float = 1.0
    gripper_offset: float = 0.0

    def __post_init__(self) -> None:
        """Validate; ConfigError names the field."""
        set_ = functools.partial(object.__setattr__, self)
        set_('reference_rotation', _as_rotation(self.reference_rotation,
                                                'convention.reference_rotation'))
        set_('ee_rotation', _as_rotation(self.ee_rotation, 'convention.ee_rotation'))
        for name in ('reference_translation', 'ee_translation'):
            v = np.asarray(getattr(self, name), dtype=float)
            if v.shape != (3,) or not np.all(np.isfinite(v)):
                raise ConfigError(f"parameter 'convention.{name}': needs 3 finite values")
            set_(name, v)
        if not np.isfinite(self.gripper_scale) or self.gripper_scale == 0.0 or \
                not np.isfinite(self.gripper_offset):
            raise ConfigError("parameter 'convention.gripper_scale': must be finite and "
                              'non-zero (and gripper_offset finite)')

    def to_hardware(self, rot: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Dataset poses ``(..., 3, 3), (..., 3)`` -> hardware poses (same frame names)."""
        lr, lp, er, ep = (self.reference_rotation, self.reference_translation,
                          self.ee_rotation, self.ee_translation)
        r = lr @ rot @ er
        p = lp + (lr @ (pos[..., None] + rot @ ep[:, None]))[..., 0]
        return r, p

    def to_dataset(self, rot: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hardware poses -> dataset poses (the inverse of :meth:`to_hardware`)."""
        lr, lp, er, ep = (self.reference_rotation, self.reference_translation,
                          self.ee_rotation, self.ee_translation)
        r = lr.T @ rot @ er.T
        p = (lr.T @ (pos - lp)[..., None])[..., 0] - (r @ ep[:, None])[..., 0]
        return r, p

    def gripper_to_hardware(self, g: np.ndarray) -> np.ndarray:
        """Dataset gripper values -> hardware gripper positions."""
        return self.gripper_offset + self.gripper_scale * np.asarray(g, dtype=float)

    def gripper_to_dataset(self, g: np.ndarray) -> np.ndarray:
        """Hardware gripper positions -> dataset gripper values."""
        return (np.asarray(g, dtype=float) - self.gripper_offset) / self.gripper_scale


@dataclass(frozen=True)
class ArmLayout:
    """One arm's columns in a Cartesian policy vector: position (3), rotation, gripper (0/1).

    Attributes:
        name: arm name (matches the configuration's arm names).
        rotation: rotation representation (see the module docstring).
        gripper: whether a gripper value follows the rotation.
    """

    name: str
    rotation: str = 'quat_xyzw'
    gripper: bool = True

    @property
    def width(self) -> int:
        """Columns of this arm."""
        return 3 + rotation_size(self.rotation) + int(self.gripper)


def layout_width(arms: Sequence[ArmLayout]) -> int:
    """Columns of a vector with these arms side by side."""
    return sum(a.width for a in arms)


@dataclass(frozen=True)
class ArmPoses:
    """Poses of one arm's end effector over N points in one frame (hardware convention).

    Attributes:
        name: arm name.
        positions: (N, 3) m.
        rotations: (N, 3, 3).
        gripper: (N,) hardware gripper positions, or None when the arm has none.
    """

    name: str
    positions: np.ndarray
    rotations: np.ndarray
    gripper: np.ndarray | None = None


class CartesianCodec:
    """Policy vectors <-> poses in the robot base frame, through ONE :class:`FrameConvention`.

    Args:
        arms: layout of each arm in the policy's vectors, in column order.
        convention: dataset <-> hardware convention.
        frame_rotation, frame_translation: pose of the frame the policy's poses are expressed
            in (``base``: identity; a camera: its pose in the base frame, from the URDF or
            the configuration).

    :meth:`decode` turns an (H, D) action chunk into base-frame :class:`ArmPoses`;
    :meth:`encode` turns measured base-frame poses into the (D,) observation vector. They are
    exact inverses (tested to 1e-9 for every representation).
    """

    def __init__(self, arms: Sequence[ArmLayout], convention: FrameConvention,
                 frame_rotation: np.ndarray | None = None,
                 frame_translation: np.ndarray | None = None) -> None:
        self.arms = tuple(arms)
        if not self.arms or len({a.name for a in self.arms}) != len(self.arms):
            raise ConfigError('Cartesian layout: needs at least one arm, names unique')
        for a in self.arms:
            rotation_size(a.rotation)
        self.convention = convention
        self.frame_rotation = np.eye(3) if frame_rotation is None else \
            _as_rotation(frame_rotation, 'frame pose')
        self.frame_translation = np.zeros(3) if frame_translation is None else \
            np.asarray(frame_translation, dtype=float).reshape(3)
        self.width = layout_width(self.arms)

    def decode(self, values: np.ndarray) -> list[ArmPoses]:
        """(H, D) policy output -> per-arm poses in the base frame, hardware convention.

        Raises:
            ValueError: wrong width, non-finite values, a non-unit quaternion, a degenerate
                6D rotation.
        """
        v = np.asarray(values, dtype=float)
        if v.ndim != 2 or v.shape[1] != self.width:
            raise ValueError(f'Cartesian chunk has shape {v.shape}, expected (H, {self.width})')
        if not np.all(np.isfinite(v)):
            raise ValueError('Cartesian chunk has non-finite values')
        out, col = [], 0
        fr, fp = self.frame_rotation, self.frame_translation
        for a in self.arms:
            k = rotation_size(a.rotation)
            pos = v[:, col:col + 3]
            rot = to_matrix(v[:, col + 3:col + 3 + k], a.rotation)
            col += 3 + k
            grip = None
            if a.gripper:
                grip = self.convention.gripper_to_hardware(v[:, col])
                col += 1
            rot, pos = self.convention.to_hardware(rot, pos)
            out.append(ArmPoses(a.name, fp + pos @ fr.T, fr @ rot, grip))
        return out

    def encode(self, poses: Sequence[ArmPoses]) -> np.ndarray:
        """Per-arm base-frame poses (N points each) -> (N, D) vectors in the dataset layout.

        Raises:
            ValueError: an arm is missing or lacks the gripper value its layout needs.
        """
        by_name = {p.name: p for p in poses}
        cols = []
        fr, fp = self.frame_rotation, self.frame_translation
        for a in self.arms:
            if a.name not in by_name:
                raise ValueError(f"no measured pose for arm '{a.name}'")
            p = by_name[a.name]
            rot = fr.T @ np.asarray(p.rotations, dtype=float)
            pos = (np.asarray(p.positions, dtype=float) - fp) @ fr
            rot, pos = self.convention.to_dataset(rot, pos)
            cols += [pos, from_matrix(rot, a.rotation)]
            if a.gripper:
                if p.gripper is None:
                    raise ValueError(f"arm '{a.name}': the layout has a gripper value, the "
                                     'measured pose has none')
                cols.append(self.convention.gripper_to_dataset(p.gripper)[:, None])
        return np.concatenate(cols, axis=1)
