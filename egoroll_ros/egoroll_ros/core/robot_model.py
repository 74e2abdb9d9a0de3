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

    Built by :meth:`RobotModel.fk_plan`. Each frame's chain from the root is a sequence of
    steps (joint placement then joint motion, and last the frame's own placement), padded at
    the front with identity steps to a power of two so every frame and every configuration is
    computed together. Everything that depends only on the model is precomputed: a step's
    rotation is ``A0 + sin(q) A1 + (1 - cos(q)) A2`` (placement times Rodrigues' formula) and
    its translation ``p0 + q pa`` (prismatic), so a call costs a few elementwise numpy
    operations plus ``log2(steps)`` batched compositions (a tree product, not a loop over
    joints). Arrays are laid out batch-last (``(..., F, N)``), which keeps numpy's inner loops
    long.

    Attributes:
        frames: the frame names, in output order.
        joint_names: the column order of the positions passed to :meth:`compute`.
    """

    frames: tuple[str, ...]
    joint_names: tuple[str, ...]
    _cols: np.ndarray       # (S, F) column of the joint at each step (0 where none: masked)
    _rev: np.ndarray        # (S, F, 1) 1.0 where the step's joint is revolute/continuous
    _pri: np.ndarray        # (S, F, 1) 1.0 where prismatic
    _a0: np.ndarray         # (S, 3, 3, F, 1) placement rotation
    _a1: np.ndarray         # (S, 3, 3, F, 1) placement rotation @ skew(axis)
    _a2: np.ndarray         # (S, 3, 3, F, 1) placement rotation @ skew(axis)^2
    _p0: np.ndarray         # (S, 3, F, 1) placement translation
    _pa: np.ndarray         # (S, 3, F, 1) placement rotation @ axis (prismatic steps)

    def compute_batch_last(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Like :meth:`compute`, laid out batch-last (no copy into the other layout).

        Args:
            positions: shape (N, J), columns in :attr:`joint_names` order.

        Returns:
            ``(translations, rotations)`` of shapes (3, F, N) and (3, 3, F, N).
        """
        q = np.asarray(positions, dtype=float)
        n = q.shape[0]
        ns, nf = self._cols.shape
        if q.shape[1] == 0:                                  # no joints: frames are fixed
            q = np.zeros((n, 1))
        qs = q.T[self._cols]                                 # (S, F, N)
        theta = qs * self._rev
        s = np.sin(theta)[:, None, None]                     # (S, 1, 1, F, N)
        c1 = (1.0 - np.cos(theta))[:, None, None]
        rot = self._a0 + s * self._a1 + c1 * self._a2        # (S, 3, 3, F, N)
        pos = self._p0 + (qs * self._pri)[:, None] * self._pa   # (S, 3, F, N)
        b = nf * n
        rot = rot.reshape(ns, 3, 3, b)
        pos = pos.reshape(ns, 3, b)
        while rot.shape[0] > 1:                              # T[2k] o T[2k+1], in order
            ra, rb = rot[0::2], rot[1::2]
            pos = pos[0::2] + np.einsum('sijb,sjb->sib', ra, pos[1::2])
            rot = np.einsum('sijb,sjkb->sikb', ra, rb)
        return pos[0].reshape(3, nf, n), rot[0].reshape(3, 3, nf, n)

    def compute(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Poses of every frame at every configuration, in the URDF root frame.

        Args:
            positions: shape (N, J), columns in :attr:`joint_names` order.

        Returns:
            ``(translations, rotations)`` of shapes (F, N, 3) and (F, N, 3, 3).
        """
        pos, rot = self.compute_batch_last(positions)
        return (np.ascontiguousarray(pos.transpose(1, 2, 0)),
                np.ascontiguousarray(rot.transpose(2, 3, 0, 1)))


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
        #: The URDF text the model was built from.
        self.urdf = urdf
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
        model = self._model
        jmodel = model.joints[jid]
        q = pin.neutral(model)
        if jmodel.nq == 2:
            q[jmodel.idx_q:jmodel.idx_q + 2] = [math.cos(1.0), math.sin(1.0)]
        else:
            q[jmodel.idx_q] = 1.0
        # The joint's own motion: its placement in its parent after moving it, relative to the
        # fixed placement (model-level calls only: JointModel.createData is Pinocchio 3 only,
        # and the distros' Pinocchio 2.6/2.7 must work too).
        data = model.createData()
        pin.forwardKinematics(model, data, q)
        parent = model.parents[jid]
        motion = (data.oMi[parent] * model.jointPlacements[jid]).inverse() * data.oMi[jid]
        if self.joints[model.names[jid]].kind == PRISMATIC:
            axis = np.array(motion.translation, dtype=float)
        else:
            axis = np.array(pin.log3(motion.rotation), dtype=float)
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

    def frame_parent_joint(self, frame: str) -> int:
        """Pinocchio index of the joint that moves ``frame`` (0: the universe)."""
        pin_frame = self._model.frames[self._model.getFrameId(frame)]
        # Pinocchio 3 names it parentJoint; 2.x (beside the distros' numpy 1.x) only parent.
        return int(pin_frame.parentJoint if hasattr(pin_frame, 'parentJoint')
                   else pin_frame.parent)

    def chain(self, frame: str) -> tuple[str, ...]:
        """Names of the movable joints between the root and ``frame``, root first.

        Raises:
            RobotModelError: no such frame.
        """
        if not self.has_frame(frame):
            raise RobotModelError(f"{self.source}: no frame named '{frame}'")
        jid = self.frame_parent_joint(frame)
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
        nl = max((len(c) for c in chains), default=0) + 1      # + the frame placement
        ns = 1 << (nl - 1).bit_length()                         # power of two: a tree product
        cols = np.zeros((ns, nf), dtype=int)
        rev = np.zeros((ns, nf, 1))
        pri = np.zeros((ns, nf, 1))
        a0 = np.zeros((ns, 3, 3, nf, 1))
        a1 = np.zeros((ns, 3, 3, nf, 1))
        a2 = np.zeros((ns, 3, 3, nf, 1))
        p0 = np.zeros((ns, 3, nf, 1))
        pa = np.zeros((ns, 3, nf, 1))
        a0[..., 0] = np.eye(3)[None, :, :, None]
        for f, (frame, chain) in enumerate(zip(frames, chains, strict=True)):
            first = ns - len(chain) - 1
            for k, jname in enumerate(chain):
                step = first + k
                jid = self._jid[jname]
                cols[step, f] = col[jname]
                placement = model.jointPlacements[jid]
                pl_r = np.array(placement.rotation, dtype=float)
                axis = self._axes[jname]
                a0[step, :, :, f, 0] = pl_r
                p0[step, :, f, 0] = placement.translation
                if self.joints[jname].kind == PRISMATIC:
                    pri[step, f] = 1.0
                    pa[step, :, f, 0] = pl_r @ axis
                else:
                    rev[step, f] = 1.0
                    k1 = _skew(axis)
                    a1[step, :, :, f, 0] = pl_r @ k1
                    a2[step, :, :, f, 0] = pl_r @ k1 @ k1
            fplace = model.frames[model.getFrameId(frame)].placement
            a0[ns - 1, :, :, f, 0] = fplace.rotation
            p0[ns - 1, :, f, 0] = fplace.translation
        return FkPlan(frames=tuple(frames), joint_names=tuple(joint_names), _cols=cols,
                      _rev=rev, _pri=pri, _a0=a0, _a1=a1, _a2=a2, _p0=p0, _pa=pa)

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
