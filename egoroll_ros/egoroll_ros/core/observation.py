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
import hashlib
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
    """The latest message of one input, with what :meth:`LatestInputs.put` learnt about it.

    Attributes:
        value: the converted message.
        stamp: its header stamp (s, the sender's clock).
        received: steady time of its receipt (s).
        advanced: steady time of the latest message whose stamp was later than the one
            before it (the first message counts).
        changed: steady time since which the content (``digest``) has been what it is now
            (``received`` when no digest is kept).
        went_back: seconds by which a stamp went back (earlier than the one before it),
            0 when none did since the stamps last advanced.
        offset: our clock at receipt minus ``stamp`` (s); None when not measured.
        digest: content digest (:func:`frame_digest`) or None.
    """

    value: Any
    stamp: float
    received: float
    advanced: float | None = None
    changed: float | None = None
    went_back: float = 0.0
    offset: float | None = None
    digest: bytes | None = None


#: Why an input is stale (:attr:`StaleInput.reason`).
NEVER_RECEIVED = 'never received'
NO_MESSAGE = 'no message'
STAMP_NOT_ADVANCING = 'stamp not advancing'
STAMP_WENT_BACK = 'stamp went back'
FRAME_UNCHANGED = 'frame unchanged'
CLOCK_OFFSET = 'clock offset'


@dataclass(frozen=True)
class StaleInput:
    """One input that cannot be used.

    Attributes:
        name: the input (``joint_states``, ``camera/<name>``...).
        age: seconds the reason has lasted (None: never received; for ``clock offset`` and
            ``stamp went back``: the offset or the step back, s).
        max_age: the limit it broke (max age, or the max clock offset).
        reason: one of ``never received``, ``no message``, ``stamp not advancing``,
            ``stamp went back``, ``frame unchanged``, ``clock offset``.
        since: steady time from which the input has been stale for this reason (None:
            never received).
    """

    name: str
    age: float | None
    max_age: float
    reason: str = NO_MESSAGE
    since: float | None = None

    def describe(self) -> str:
        """E.g. ``camera/scene is 0.52 s old (max 0.20 s)``."""
        if self.age is None or self.reason == NEVER_RECEIVED:
            return f'{self.name} never received'
        if self.reason == STAMP_NOT_ADVANCING:
            return (f'{self.name}: header stamp has not advanced for {self.age:.3f} s '
                    f'(max {self.max_age:.3f} s)')
        if self.reason == FRAME_UNCHANGED:
            return (f'{self.name}: frame identical to the previous ones for {self.age:.3f} s '
                    f'(max {self.max_age:.3f} s)')
        if self.reason == STAMP_WENT_BACK:
            return f'{self.name}: header stamp went back by {self.age:.3f} s'
        if self.reason == CLOCK_OFFSET:
            return (f'{self.name}: clock offset {self.age:+.3f} s between its header stamps '
                    f"and this node's clock (max {self.max_age:.3f} s)")
        return f'{self.name} is {self.age:.3f} s old (max {self.max_age:.3f} s)'


class StaleInputError(InputError):
    """Some required inputs are missing or too old; ``stale`` lists them."""

    def __init__(self, stale: list[StaleInput]) -> None:
        super().__init__('stale input: ' + '; '.join(s.describe() for s in stale))
        self.stale = stale


def frame_digest(data: Any, samples: int = 4096) -> bytes:
    """A cheap content digest of an image payload: BLAKE2b of about ``samples`` evenly
    spaced bytes plus the length.

    Two frames with equal digests are taken as identical (a frozen camera that republishes
    its last frame); any sensor noise changes the sampled bytes.

    Args:
        data: the payload (bytes, bytearray, array.array('B'), memoryview, numpy array).
        samples: bytes sampled.
    """
    mv = memoryview(data).cast('B')
    n = len(mv)
    step = max(1, n // max(1, samples))
    h = hashlib.blake2b(digest_size=16)
    h.update(n.to_bytes(8, 'little'))
    h.update(bytes(mv[::step]))
    return h.digest()


@dataclass
class OffsetStats:
    """Clock offsets (our clock at receipt minus the header stamp, s) of one input."""

    count: int = 0
    minimum: float = math.inf
    maximum: float = -math.inf
    total: float = 0.0
    last: float = math.nan

    def add(self, offset: float) -> None:
        """Count one measurement."""
        self.count += 1
        self.minimum = min(self.minimum, offset)
        self.maximum = max(self.maximum, offset)
        self.total += offset
        self.last = offset

    def as_dict(self) -> dict[str, float | int | None]:
        """``count``, ``min``, ``mean``, ``max``, ``last`` (None when nothing was measured)."""
        if not self.count:
            return {'count': 0, 'min': None, 'mean': None, 'max': None, 'last': None}
        return {'count': self.count, 'min': self.minimum, 'mean': self.total / self.count,
                'max': self.maximum, 'last': self.last}


class LatestInputs:
    """Thread-safe store of the latest message of each input, tracking whether its header
    stamps advance, whether its content changes and its clock offset."""

    def __init__(self, names: Sequence[str]) -> None:
        self._lock = threading.Lock()
        self.names = tuple(names)
        self._records: dict[str, Record] = {}
        self._offsets: dict[str, OffsetStats] = {}

    def put(self, name: str, value: Any, stamp: float, received: float, *,
            clock: float | None = None, digest: bytes | None = None) -> None:
        """Keep ``value`` as the latest of ``name``.

        Args:
            stamp: the message's header stamp (sender's clock, s).
            received: steady time of receipt (s).
            clock: our clock (the clock stamps are compared with: ROS time live, the bag's
                receive time offline) at receipt; None: the clock offset is not measured.
            digest: content digest (:func:`frame_digest`) for inputs whose content must
                change (cameras); None: not checked.
        """
        offset = None if clock is None else clock - stamp
        with self._lock:
            prev = self._records.get(name)
            if prev is None or stamp > prev.stamp:
                advanced, back = received, 0.0
            else:
                advanced = prev.advanced
                back = prev.stamp - stamp if stamp < prev.stamp else prev.went_back
            changed = received if (digest is None or prev is None or prev.digest != digest) \
                else prev.changed
            self._records[name] = Record(value, stamp, received, advanced, changed, back,
                                         offset, digest)
            if offset is not None:
                self._offsets.setdefault(name, OffsetStats()).add(offset)

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

    def clock_offsets(self) -> dict[str, dict[str, float | int | None]]:
        """Per input with measured offsets: :meth:`OffsetStats.as_dict`."""
        with self._lock:
            return {n: s.as_dict() for n, s in self._offsets.items()}


def stale_inputs(snapshot: dict[str, Record], max_ages: dict[str, float],
                 now: float, max_clock_offset: float | None = None) -> list[StaleInput]:
    """Required inputs (the keys of ``max_ages``) that cannot be used at steady time ``now``.

    An input is stale when it was never received; when its last message is older than its
    max age; when its header stamp went back, or has not advanced for longer than its max age
    (a driver republishing its last message); when its content has stayed identical for
    longer than its max age (a frozen camera with fresh stamps); or when its clock offset
    exceeds ``max_clock_offset`` (None: not checked). One entry per input, the first reason
    in that order.
    """
    out = []
    for name, max_age in max_ages.items():
        rec = snapshot.get(name)
        if rec is None:
            out.append(StaleInput(name, None, max_age, NEVER_RECEIVED))
            continue
        advanced = rec.received if rec.advanced is None else rec.advanced
        changed = rec.received if rec.changed is None else rec.changed
        if now - rec.received > max_age:
            out.append(StaleInput(name, now - rec.received, max_age, NO_MESSAGE,
                                  rec.received + max_age))
        elif rec.went_back:
            out.append(StaleInput(name, rec.went_back, max_age, STAMP_WENT_BACK,
                                  rec.received))
        elif now - advanced > max_age:
            out.append(StaleInput(name, now - advanced, max_age, STAMP_NOT_ADVANCING,
                                  advanced + max_age))
        elif now - changed > max_age:
            out.append(StaleInput(name, now - changed, max_age, FRAME_UNCHANGED,
                                  changed + max_age))
        elif (max_clock_offset is not None and rec.offset is not None
              and abs(rec.offset) > max_clock_offset):
            out.append(StaleInput(name, rec.offset, max_clock_offset, CLOCK_OFFSET,
                                  rec.received))
    return out


def put_camera(store: LatestInputs, name: str, msg: Any, stamp: float, received: float,
               clock: float | None) -> None:
    """Store a camera message (rclpy Image or CompressedImage, duck-typed) with the digest
    of its pixel payload, so that a frozen frame is caught (the node and evaluate both call
    this)."""
    store.put(name, msg, stamp, received, clock=clock, digest=frame_digest(msg.data))


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
        max_age_camera, max_age_joint_states, max_age_quest: seconds (steady clock): how
            long an input may go without a message, without its header stamp advancing, and
            (cameras) without its frame changing.
        quest: Joy axis indices of grip and trigger.
        prepare: image preparation ``(value, expected (h, w), size (h, w), source=)`` -> RGB
            array (default :func:`~egoroll_ros.core.images.fit_image`: decoded arrays).
        state_transform: maps the measured joint vector (configured order) to the policy's
            state vector (a Cartesian policy with end-effector pose state: FK + the
            policy's codec); None: the joints are the state.
        max_clock_offset: largest allowed difference (s) between our clock at receipt and
            an input's header stamp; None: not checked.
    """

    def __init__(self, joints: Sequence[str], cameras: Sequence[CameraConfig],
                 meta: PolicyMetadata, max_age_camera: float, max_age_joint_states: float,
                 max_age_quest: float, quest: Quest = Quest(),
                 prepare: Callable[..., np.ndarray] = fit_image,
                 state_transform: Callable[[np.ndarray], np.ndarray] | None = None,
                 max_clock_offset: float | None = None) -> None:
        self.joints = tuple(joints)
        self.state_transform = state_transform
        self.cameras = {c.name: c for c in cameras}
        self.meta = meta
        self.quest = quest
        self._prepare = prepare
        self.max_ages: dict[str, float] = {}
        self.max_clock_offset: float | None = None
        self.set_limits(max_age_camera, max_age_joint_states, max_age_quest, max_clock_offset)

    def set_limits(self, max_age_camera: float, max_age_joint_states: float,
                   max_age_quest: float, max_clock_offset: float | None) -> None:
        """Set how stale each required input may be (see the class docstring); the next
        observation is judged with the new limits (the node's live ``max_age.*``)."""
        max_ages = {JOINT_STATES: max_age_joint_states}
        for f in self.meta.image_features:
            max_ages[camera_input(f.camera)] = max_age_camera
        for e in self.meta.extra_features:
            name = {'quest.grip': QUEST_JOY, 'quest.trigger': QUEST_JOY,
                    'quest.left_pose': QUEST_LEFT, 'quest.right_pose': QUEST_RIGHT}[e]
            max_ages[name] = max_age_quest
        # One assignment each: a worker building an observation sees old or new limits.
        self.max_ages = max_ages
        self.max_clock_offset = max_clock_offset

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
        stale = stale_inputs(snap, self.max_ages, now, self.max_clock_offset)
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
