"""Observation assembly: the latest input store, staleness, state ordering, unwrapping.

The node's subscription callbacks only :meth:`LatestInputs.put` the latest message of each
input with its header stamp and steady receipt time (cheap); the inference worker calls
:meth:`ObservationBuilder.build`, which checks every required input's age on the steady clock,
decodes and resizes the images, orders the state by the configured joints, and returns a
:class:`~egoroll_ros.core.policy.Observation`. Images reach the builder as the ROS layer
stored them; its ``prepare`` function (:func:`egoroll_ros.ros.images.prepare_image` in the
node) decodes them, the default :func:`~egoroll_ros.core.images.fit_image` takes decoded
arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import math
import threading
from typing import Any

import numpy as np

from egoroll_ros.core.images import fit_image
from egoroll_ros.core.policy import Observation, PolicyMetadata
from egoroll_ros.core.types import JointStateData
from egoroll_ros.errors import InputError

JOINT_STATES = 'joint_states'
QUEST_JOY = 'quest/joy'
QUEST_LEFT = 'quest/left_pose'
QUEST_RIGHT = 'quest/right_pose'


def camera_input(name: str) -> str:
    """Input name of a camera (as reported in status)."""
    return f'camera/{name}'


@dataclass(frozen=True)
class CameraConfig:
    """A configured camera: name, expected frame size, raw or compressed."""

    name: str
    height: int
    width: int
    compressed: bool = False


@dataclass(frozen=True)
class Record:
    """The latest message of one input."""

    value: Any
    stamp: float
    received: float


@dataclass(frozen=True)
class StaleInput:
    """One input that is too old (``age`` None: never received)."""

    name: str
    age: float | None
    max_age: float

    def describe(self) -> str:
        """E.g. ``camera/scene is 0.52 s old (max 0.20 s)``."""
        if self.age is None:
            return f'{self.name} never received'
        return f'{self.name} is {self.age:.3f} s old (max {self.max_age:.3f} s)'


class StaleInputError(InputError):
    """Some required inputs are missing or too old; ``stale`` lists them."""

    def __init__(self, stale: list[StaleInput]) -> None:
        super().__init__('stale input: ' + '; '.join(s.describe() for s in stale))
        self.stale = stale


class LatestInputs:
    """Thread-safe store of the latest message of each input."""

    def __init__(self, names: Sequence[str]) -> None:
        self._lock = threading.Lock()
        self.names = tuple(names)
        self._records: dict[str, Record] = {}

    def put(self, name: str, value: Any, stamp: float, received: float) -> None:
        """Keep ``value`` as the latest of ``name`` (stamp: header, received: steady)."""
        with self._lock:
            self._records[name] = Record(value, stamp, received)

    def get(self, name: str) -> Record | None:
        """The latest record of ``name`` or None."""
        with self._lock:
            return self._records.get(name)

    def snapshot(self) -> dict[str, Record]:
        """A consistent copy of every record."""
        with self._lock:
            return dict(self._records)

    def ages(self, now: float) -> dict[str, float | None]:
        """Steady-clock age of every input name (None when never received)."""
        snap = self.snapshot()
        return {n: (now - snap[n].received) if n in snap else None for n in self.names}


def stale_inputs(snapshot: dict[str, Record], max_ages: dict[str, float],
                 now: float) -> list[StaleInput]:
    """Required inputs (the keys of ``max_ages``) that are missing or older than allowed."""
    out = []
    for name, max_age in max_ages.items():
        rec = snapshot.get(name)
        if rec is None:
            out.append(StaleInput(name, None, max_age))
        elif now - rec.received > max_age:
            out.append(StaleInput(name, now - rec.received, max_age))
    return out


def wrap_angle(x: np.ndarray | float) -> np.ndarray:
    """Angles wrapped to [-pi, pi)."""
    return (np.asarray(x, dtype=float) + math.pi) % (2 * math.pi) - math.pi


def unwrap_continuous(positions: np.ndarray, reference: np.ndarray,
                      columns: Sequence[int]) -> np.ndarray:
    """Unwrap continuous-joint columns of an (H, J) chunk relative to the measured state.

    The first point of each listed column moves to the equivalent angle (modulo 2 pi) nearest
    the measured ``reference`` value, and each later point to the one nearest its predecessor,
    so the chunk moves the short way. Other columns are unchanged. Returns a new array.
    """
    out = np.array(positions, dtype=float, copy=True)
    for j in columns:
        col = np.asarray(positions[:, j], dtype=float)
        # point k = reference + sum of the wrapped steps up to k
        steps = wrap_angle(col - np.concatenate(([reference[j]], col[:-1])))
        out[:, j] = reference[j] + np.cumsum(steps)
    return out


@dataclass(frozen=True)
class Quest:
    """Which Joy axes carry the grip and trigger values (left, right)."""

    grip_axes: tuple[int, int] = (-1, -1)
    trigger_axes: tuple[int, int] = (-1, -1)


class ObservationBuilder:
    """Builds policy observations from :class:`LatestInputs`.

    Args:
        joints: configured joints (state order).
        cameras: configured cameras.
        meta: the policy's metadata (image features and sizes, extra features).
        max_age_camera, max_age_joint_states, max_age_quest: seconds (steady clock).
        quest: Joy axis indices of grip and trigger.
        prepare: image preparation ``(value, expected (h, w), size (h, w), source=)`` -> RGB
            array (default :func:`~egoroll_ros.core.images.fit_image`: decoded arrays).
        state_transform: maps the measured joint vector (configured order) to the policy's
            state vector (a Cartesian policy with end-effector pose state: FK + the
            policy's codec); None: the joints are the state.
    """

    def __init__(self, joints: Sequence[str], cameras: Sequence[CameraConfig],
                 meta: PolicyMetadata, max_age_camera: float, max_age_joint_states: float,
                 max_age_quest: float, quest: Quest = Quest(),
                 prepare: Callable[..., np.ndarray] = fit_image,
                 state_transform: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        self.joints = tuple(joints)
        self.state_transform = state_transform
        self.cameras = {c.name: c for c in cameras}
        self.meta = meta
        self.quest = quest
        self._prepare = prepare
        self.max_ages: dict[str, float] = {JOINT_STATES: max_age_joint_states}
        for f in meta.image_features:
            self.max_ages[camera_input(f.camera)] = max_age_camera
        for e in meta.extra_features:
            name = {'quest.grip': QUEST_JOY, 'quest.trigger': QUEST_JOY,
                    'quest.left_pose': QUEST_LEFT, 'quest.right_pose': QUEST_RIGHT}[e]
            self.max_ages[name] = max_age_quest

    def state(self, js: JointStateData) -> np.ndarray:
        """The state vector in configured joint order.

        Raises:
            InputError: a configured joint is missing or a position is not finite.
        """
        return js.select(self.joints)[0]

    def _extra(self, name: str, snap: dict[str, Record]) -> np.ndarray:
        if name in ('quest.grip', 'quest.trigger'):
            _, axes = snap[QUEST_JOY].value
            idx = self.quest.grip_axes if name == 'quest.grip' else self.quest.trigger_axes
            vals = []
            for i in idx:
                if not 0 <= i < len(axes):
                    raise InputError(f'quest/joy has {len(axes)} axes; {name} needs axis {i}')
                vals.append(float(axes[i]))
            return np.asarray(vals)
        rec = snap[QUEST_LEFT if name == 'quest.left_pose' else QUEST_RIGHT]
        return np.asarray(rec.value, dtype=float)

    def build(self, store: LatestInputs, now: float, stamp: float) -> Observation:
        """Assemble an observation at steady time ``now``, stamped ``stamp`` (ROS clock).

        Raises:
            StaleInputError: a required input is missing or too old (lists every one).
            InputError: malformed input (missing joint, wrong image size, bad encoding).
        """
        snap = store.snapshot()
        stale = stale_inputs(snap, self.max_ages, now)
        if stale:
            raise StaleInputError(stale)
        state = self.state(snap[JOINT_STATES].value)
        images = {}
        for f in self.meta.image_features:
            cam = self.cameras[f.camera]
            images[f.camera] = self._prepare(snap[camera_input(f.camera)].value,
                                             (cam.height, cam.width), (f.height, f.width),
                                             source=camera_input(f.camera))
        extras = {e: self._extra(e, snap) for e in self.meta.extra_features}
        for name, v in extras.items():
            if not np.all(np.isfinite(v)):
                raise InputError(f'{name} is not finite')
        joints = state
        if self.state_transform is not None:
            state = np.asarray(self.state_transform(joints), dtype=float)
            if not np.all(np.isfinite(state)):
                raise InputError('the end-effector pose state is not finite')
        return Observation(images=images, state=state, extras=extras, stamp=stamp,
                           joints=joints)
