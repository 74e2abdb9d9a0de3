"""A robot's kinematics and joint limits from its URDF, with batched forward kinematics.

Pinocchio (``pin``) parses the URDF and owns the kinematic tree; joint limits are read from the
URDF's ``<limit>`` elements (continuous joints have none). Forward kinematics of a few named
frames over a whole chunk is vectorised with numpy from Pinocchio's joint placements and axes
(:class:`FkPlan`), so validating a 50-point chunk costs a few dozen numpy calls instead of 50
Pinocchio calls; the tests check it against Pinocchio called directly.

No rclpy import: the safety gate's node and the offline tools share this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
from pathlib import Path
import xml.etree.ElementTree as ET

import numpy as np

from egoroll_ros.errors import RobotModelError

REVOLUTE = 'revolute'
CONTINUOUS = 'continuous'
PRISMATIC = 'prismatic'
_MOVABLE = (REVOLUTE, CONTINUOUS, PRISMATIC)


@dataclass(frozen=True)
class JointInfo:
    """One movable joint of the URDF.

    Attributes:
        name: joint name.
        kind: ``'revolute'``, ``'continuous'`` or ``'prismatic'``.
        lower, upper: position limits (rad or m); ``-inf``/``inf`` for continuous joints.
        velocity: velocity limit from the URDF (rad/s or m/s).
    """

    name: str
    kind: str
    lower: float
    upper: float
    velocity: float

    @property
    def continuous(self) -> bool:
        """Whether the joint has no position limit."""
        return self.kind == CONTINUOUS


def _skew(axis: np.ndarray) -> np.ndarray:
    x, y, z = axis
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


@dataclass(frozen=True)
class FkPlan:
    """Precomputed, vectorised forward kinematics of named frames for one joint ordering.

    Built by :meth:`RobotModel.fk_plan`. Each frame's chain of joints from the root is padded
    (with identity steps) to the longest chain so all frames are computed together.

    Attributes:
        frames: the frame names, in output order.
        joint_names: the column order of the positions passed to :meth:`compute`.
    """

    frames: tuple[str, ...]
    joint_names: tuple[str, ...]
    _cols: np.ndarray       # (F, L) column of the joint at each step, -1 for none
    _rev: np.ndarray        # (F, L) 1.0 where the step's joint is revolute/continuous
    _pri: np.ndarray        # (F, L) 1.0 where prismatic
    _k: np.ndarray          # (F, L, 3, 3) skew(axis)
    _k2: np.ndarray         # (F, L, 3, 3) skew(axis)^2
    _axis: np.ndarray       # (F, L, 3)
    _pl_r: np.ndarray       # (F, L, 3, 3) joint placement in its parent joint
    _pl_p: np.ndarray       # (F, L, 3)
    _fr_r: np.ndarray       # (F, 3, 3) frame placement in its parent joint
    _fr_p: np.ndarray       # (F, 3)

    def compute(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Poses of every frame at every configuration, in the URDF root frame.

        Args:
            positions: shape (N, J), columns in :attr:`joint_names` order.

        Returns:
            ``(translations, rotations)`` of shapes (F, N, 3) and (F, N, 3, 3).
        """
        q = np.asarray(positions, dtype=float)
        n = q.shape[0]
        nf, nl = self._cols.shape
        if nl == 0:
            trans = np.broadcast_to(self._fr_p[:, None, :], (nf, n, 3)).copy()
            rots = np.broadcast_to(self._fr_r[:, None], (nf, n, 3, 3)).copy()
            return trans, rots
        qpad = np.concatenate([q, np.zeros((n, 1))], axis=1)   # column -1 reads 0.0
        qs = qpad[:, self._cols]                                  # (N, F, L)
        qs = np.moveaxis(qs, 0, 2)                                # (F, L, N)
        theta = qs * self._rev[..., None]
        s = np.sin(theta)[..., None, None]
        c1 = (1.0 - np.cos(theta))[..., None, None]
        rj = np.eye(3) + s * self._k[:, :, None] + c1 * self._k2[:, :, None]  # (F, L, N, 3, 3)
        step_r = self._pl_r[:, :, None] @ rj                     # (F, L, N, 3, 3)
        disp = (qs * self._pri[..., None])[..., None] * self._axis[:, :, None, :]  # (F,L,N,3)
        step_p = self._pl_p[:, :, None, :] + np.einsum('flij,flnj->flni', self._pl_r, disp)
        rot = step_r[:, 0]
        pos = step_p[:, 0]
        for k in range(1, nl):
            pos = pos + (rot @ step_p[:, k, :, :, None])[..., 0]
            rot = rot @ step_r[:, k]
        pos = pos + (rot @ self._fr_p[:, None, :, None])[..., 0]
        rot = rot @ self._fr_r[:, None]
        return pos, rot


class RobotModel:
    """Kinematic model and limits of a robot, built from URDF text.

    Args:
        urdf: the URDF XML text.
        source: where it came from, for error messages.

    Raises:
        RobotModelError: the URDF is empty, not XML, not a valid URDF, or a movable joint lacks
            usable limits.
    """

    def __init__(self, urdf: str, source: str = 'robot_description') -> None:
        import pinocchio as pin  # local: keeps importing the module cheap

        self.source = source
        if not urdf or not urdf.strip():
            raise RobotModelError(f'{source}: the URDF is empty')
        try:
            root = ET.fromstring(urdf)
        except ET.ParseError as exc:
            raise RobotModelError(f'{source}: not well-formed XML ({exc})') from None
        if root.tag != 'robot':
            raise RobotModelError(f'{source}: root element is <{root.tag}>, expected <robot>')
        self.joints: dict[str, JointInfo] = {}
        for j in root.findall('joint'):
            info = self._joint_info(j)
            if info is not None:
                self.joints[info.name] = info
        try:
            self._model = pin.buildModelFromXML(urdf)
        except (ValueError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise RobotModelError(f'{source}: Pinocchio cannot build a model ({first})') \
                from None
        self._pin = pin
        model = self._model
        self._jid: dict[str, int] = {}
        for jid in range(1, model.njoints):
            name = model.names[jid]
            short = model.joints[jid].shortname()
            if model.joints[jid].nv != 1 or name not in self.joints:
                raise RobotModelError(f"{source}: joint '{name}' ({short}) is not a revolute, "
                                      'continuous or prismatic URDF joint')
            self._jid[name] = jid
        missing = set(self.joints) - set(self._jid)
        if missing:
            raise RobotModelError(f'{source}: joints not in the kinematic tree: '
                                  f'{", ".join(sorted(missing))}')
        links = [link.get('name') for link in root.findall('link')]
        children = {j.find('child').get('link') for j in root.findall('joint')
                    if j.find('child') is not None}
        roots = [n for n in links if n not in children]
        self.base_frame: str = roots[0] if roots else ''
        self.name: str = root.get('name', '')
        self._axes: dict[str, np.ndarray] = {}
        for name, jid in self._jid.items():
            self._axes[name] = self._joint_axis(jid)

    @classmethod
    def from_file(cls, path: str | Path) -> RobotModel:
        """Load a URDF file.

        Raises:
            RobotModelError: the file is missing or unreadable, or the URDF is malformed.
        """
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise RobotModelError(f'{path}: cannot read the URDF ({exc.strerror})') from None
        return cls(text, source=str(path))

    def _joint_info(self, j: ET.Element) -> JointInfo | None:
        name = j.get('name')
        kind = j.get('type')
        if not name:
            raise RobotModelError(f'{self.source}: a <joint> has no name')
        if kind not in _MOVABLE:
            if kind in ('fixed',):
                return None
            raise RobotModelError(f"{self.source}: joint '{name}' has unsupported type "
                                  f"'{kind}' (revolute, continuous, prismatic or fixed)")
        lim = j.find('limit')
        if lim is None and kind != CONTINUOUS:
            raise RobotModelError(f"{self.source}: {kind} joint '{name}' has no <limit>")

        def num(attr: str, default: float | None) -> float:
            raw = lim.get(attr) if lim is not None else None
            if raw is None:
                if default is None:
                    raise RobotModelError(f"{self.source}: joint '{name}': <limit> lacks "
                                          f"'{attr}'")
                return default
            try:
                v = float(raw)
            except ValueError:
                raise RobotModelError(f"{self.source}: joint '{name}': limit {attr}="
                                      f"{raw!r} is not a number") from None
            if not math.isfinite(v):
                raise RobotModelError(f"{self.source}: joint '{name}': limit {attr}={raw!r} "
                                      'is not finite')
            return v

        velocity = num('velocity', None)
        if velocity <= 0.0:
            raise RobotModelError(f"{self.source}: joint '{name}': velocity limit {velocity} "
                                  'must be positive')
        if kind == CONTINUOUS:
            return JointInfo(name, kind, -math.inf, math.inf, velocity)
        lower, upper = num('lower', 0.0), num('upper', 0.0)
        if not lower < upper:
            raise RobotModelError(f"{self.source}: joint '{name}': lower limit {lower} is not "
                                  f'below upper limit {upper}')
        return JointInfo(name, kind, lower, upper, velocity)

    def _joint_axis(self, jid: int) -> np.ndarray:
        """Unit axis of a 1-dof joint, in the joint frame, found by evaluating the joint."""
        pin = self._pin
        jmodel = self._model.joints[jid]
        jdata = jmodel.createData()
        q = pin.neutral(self._model)
        if jmodel.nq == 2:
            q[jmodel.idx_q:jmodel.idx_q + 2] = [math.cos(1.0), math.sin(1.0)]
        else:
            q[jmodel.idx_q] = 1.0
        jmodel.calc(jdata, q)
        if self.joints[self._model.names[jid]].kind == PRISMATIC:
            axis = np.array(jdata.M.translation, dtype=float)
        else:
            axis = np.array(pin.log3(jdata.M.rotation), dtype=float)
        norm = float(np.linalg.norm(axis))
        if not abs(norm - 1.0) < 1e-9:
            raise RobotModelError(f"{self.source}: joint '{self._model.names[jid]}': cannot "
                                  'determine its axis')
        return axis / norm

    @property
    def pin_model(self):  # noqa: ANN201 - pinocchio.Model
        """The Pinocchio model (for reference computations and tools)."""
        return self._model

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Every movable joint, in Pinocchio's (depth-first) order."""
        return tuple(self._jid)

    def has_frame(self, name: str) -> bool:
        """Whether a link or joint frame of this name exists."""
        return bool(name) and self._model.existFrame(name)

    def chain(self, frame: str) -> tuple[str, ...]:
        """Names of the movable joints between the root and ``frame``, root first.

        Raises:
            RobotModelError: no such frame.
        """
        if not self.has_frame(frame):
            raise RobotModelError(f"{self.source}: no frame named '{frame}'")
        jid = self._model.frames[self._model.getFrameId(frame)].parentJoint
        out = []
        while jid > 0:
            out.append(self._model.names[jid])
            jid = self._model.parents[jid]
        return tuple(reversed(out))

    def fk_plan(self, frames: Sequence[str], joint_names: Sequence[str]) -> FkPlan:
        """Prepare batched forward kinematics of ``frames`` for positions in ``joint_names``.

        Raises:
            RobotModelError: an unknown frame or joint, or a frame whose chain contains a joint
                not in ``joint_names`` (its position would have to be guessed).
        """
        model = self._model
        col = {n: i for i, n in enumerate(joint_names)}
        for n in joint_names:
            if n not in self._jid:
                raise RobotModelError(f"{self.source}: no movable joint named '{n}'")
        chains = []
        for frame in frames:
            chain = self.chain(frame)
            unknown = [j for j in chain if j not in col]
            if unknown:
                raise RobotModelError(f"frame '{frame}' depends on joints not controlled: "
                                      f'{", ".join(unknown)}')
            chains.append(chain)
        nf = len(frames)
        nl = max((len(c) for c in chains), default=0)
        cols = np.full((nf, nl), -1, dtype=int)
        rev = np.zeros((nf, nl))
        pri = np.zeros((nf, nl))
        axis = np.zeros((nf, nl, 3))
        pl_r = np.tile(np.eye(3), (nf, nl, 1, 1))
        pl_p = np.zeros((nf, nl, 3))
        fr_r = np.zeros((nf, 3, 3))
        fr_p = np.zeros((nf, 3))
        for f, (frame, chain) in enumerate(zip(frames, chains, strict=True)):
            pad = nl - len(chain)
            for k, jname in enumerate(chain):
                step = pad + k
                jid = self._jid[jname]
                cols[f, step] = col[jname]
                if self.joints[jname].kind == PRISMATIC:
                    pri[f, step] = 1.0
                else:
                    rev[f, step] = 1.0
                axis[f, step] = self._axes[jname]
                placement = model.jointPlacements[jid]
                pl_r[f, step] = placement.rotation
                pl_p[f, step] = placement.translation
            fplace = model.frames[model.getFrameId(frame)].placement
            fr_r[f] = fplace.rotation
            fr_p[f] = fplace.translation
        k = np.zeros((nf, nl, 3, 3))
        for f in range(nf):
            for s in range(nl):
                k[f, s] = _skew(axis[f, s])
        return FkPlan(frames=tuple(frames), joint_names=tuple(joint_names), _cols=cols,
                      _rev=rev, _pri=pri, _k=k, _k2=k @ k, _axis=axis, _pl_r=pl_r, _pl_p=pl_p,
                      _fr_r=fr_r, _fr_p=fr_p)

    def fk(self, frames: Sequence[str], joint_names: Sequence[str],
           positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Batched forward kinematics (see :meth:`fk_plan` and :meth:`FkPlan.compute`).

        Returns:
            ``(translations (F, N, 3), rotations (F, N, 3, 3))`` in the root frame.
        """
        return self.fk_plan(frames, joint_names).compute(np.atleast_2d(positions))

    def fk_reference(self, frame: str, joint_names: Sequence[str],
                     positions: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """One configuration through Pinocchio itself (reference for tests and benchmarks).

        Joints not in ``joint_names`` are at zero.
        """
        pin = self._pin
        model = self._model
        q = pin.neutral(model)
        for name, value in zip(joint_names, positions, strict=True):
            jmodel = model.joints[self._jid[name]]
            if jmodel.nq == 2:
                q[jmodel.idx_q:jmodel.idx_q + 2] = [math.cos(value), math.sin(value)]
            else:
                q[jmodel.idx_q] = value
        data = model.createData()
        pin.forwardKinematics(model, data, q)
        fid = model.getFrameId(frame)
        placement = pin.updateFramePlacement(model, data, fid)
        return np.array(placement.translation), np.array(placement.rotation)
