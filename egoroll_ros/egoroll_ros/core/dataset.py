"""Frames of a LeRobot dataset from the streams of a recorded episode (pure numpy).

A LeRobot dataset stores one row per frame at a fixed ``fps`` (its timestamps ARE
``frame_index / fps``), so an episode is exported only when its reference camera really ran at
one integer rate: :func:`measure_fps` measures it from the camera's header stamps and refuses
an irregular one (a dropped frame, jitter beyond half a period, a rate that drifts off an
integer) instead of guessing. :func:`latest_at` and :func:`nearest_at` pick, for each frame, the
sample of another stream it goes with; :func:`fresh_window` finds the frames where every
stream is fresh and refuses a gap inside them. :func:`lerobot_features` names the features
as LeRobot policies expect them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from egoroll_ros.errors import EgorollError


class ExportError(EgorollError):
    """An episode that cannot be exported as it is; the message says what is wrong."""


#: Fewest camera frames an episode must have to measure its rate.
MIN_FRAMES = 3
#: Extra per-frame features (bool, shape (1,)) besides state, images and action.
FLAG_FEATURES = ('intervention', 'next.done', 'next.success')


def measure_fps(stamps: Sequence[float], what: str = 'camera') -> int:
    """The integer frame rate of ``stamps`` (seconds, increasing).

    The period is the median interval; the rate must be within 1 % of an integer, and every
    stamp within half a period of the regular grid ``phase + i / fps``, its phase the median
    over the frames (so a dropped or doubled frame, or a rate that drifts over the episode, is
    refused; one late first frame is jitter like any other).

    Args:
        stamps: header stamps of the reference stream, in seconds.
        what: the stream's name, for the messages.

    Returns:
        The rate in Hz.

    Raises:
        ExportError: too few stamps, stamps not increasing, or an irregular rate.
    """
    t = np.asarray(stamps, dtype=float)
    if t.size < MIN_FRAMES:
        raise ExportError(f'{what}: {t.size} frames, at least {MIN_FRAMES} are needed to '
                          'measure the frame rate')
    dt = np.diff(t)
    if np.any(dt <= 0):
        i = int(np.argmax(dt <= 0))
        raise ExportError(f'{what}: header stamps do not increase (frame {i + 1} at '
                          f'{t[i + 1]:.6f} s after {t[i]:.6f} s); no frame rate')
    rate = 1.0 / float(np.median(dt))
    fps = int(round(rate))
    if fps < 1 or abs(rate - fps) > 0.01 * fps:
        raise ExportError(f'{what}: measured rate {rate:.3f} Hz is not an integer rate '
                          '(LeRobot stores an integer fps); refusing to guess one')
    # The grid's phase is the median over every frame, not the first frame's stamp: one late
    # first frame (a camera starting up) would put every later one off a grid anchored on it.
    off = t - np.arange(t.size) / fps
    off -= np.median(off)
    bad = np.flatnonzero(np.abs(off) > 0.5 / fps)
    if bad.size:
        steps = np.abs(np.diff(off))
        # a dropped or doubled frame is a step of a period: name the frame where it is
        i = int(np.argmax(steps)) + 1 if steps.max() > 0.5 / fps else int(bad[0])
        raise ExportError(f'{what}: irregular at {fps} Hz: frame {i} is {off[i]:+.4f} s off '
                          'the regular grid (more than half a period: a dropped frame or a '
                          'drifting clock)')
    return fps


def latest_at(times: np.ndarray, stamps: np.ndarray, max_age: float) -> np.ndarray:
    """For each of ``times``, the index of the last of ``stamps`` at or before it, or -1 when
    there is none or it is older than ``max_age`` seconds (both arrays in seconds, ``stamps``
    sorted)."""
    times = np.asarray(times, dtype=float)
    stamps = np.asarray(stamps, dtype=float)
    idx = np.searchsorted(stamps, times, side='right') - 1
    ok = idx >= 0
    ok[ok] = times[ok] - stamps[idx[ok]] <= max_age
    return np.where(ok, idx, -1)


def nearest_at(times: np.ndarray, stamps: np.ndarray, tolerance: float) -> np.ndarray:
    """For each of ``times``, the index of the nearest of ``stamps`` (sorted), or -1 when it is
    more than ``tolerance`` seconds away."""
    times = np.asarray(times, dtype=float)
    stamps = np.asarray(stamps, dtype=float)
    if stamps.size == 0:
        return np.full(times.shape, -1)
    right = np.clip(np.searchsorted(stamps, times), 0, stamps.size - 1)
    left = np.clip(right - 1, 0, stamps.size - 1)
    pick = np.where(np.abs(stamps[left] - times) <= np.abs(stamps[right] - times), left, right)
    return np.where(np.abs(stamps[pick] - times) <= tolerance, pick, -1)


def fresh_window(times: np.ndarray, picks: Mapping[str, np.ndarray]) -> tuple[int, int]:
    """The frames ``[first, last]`` from the first one where every stream has a sample
    (``picks[name][i] >= 0``) to the last such one.

    Returns:
        ``(first, last)`` frame indices (inclusive).

    Raises:
        ExportError: no frame has every stream, or a stream lacks a sample inside the window
            (naming the stream and the frames' times).
    """
    have = np.ones(len(times), dtype=bool)
    for p in picks.values():
        have &= np.asarray(p) >= 0
    if not have.any():
        missing = [n for n, p in picks.items() if not (np.asarray(p) >= 0).any()]
        raise ExportError('no frame has every input fresh'
                          + (f" ({', '.join(missing)} never)" if missing else
                             ' at the same time'))
    first = int(np.argmax(have))
    last = len(have) - 1 - int(np.argmax(have[::-1]))
    for name, p in picks.items():
        gap = np.flatnonzero(np.asarray(p)[first:last + 1] < 0)
        if gap.size:
            a, b = first + int(gap[0]), first + int(gap[-1])
            raise ExportError(f'{name} is missing or stale at {gap.size} frames inside the '
                              f'episode (from {times[a]:.3f} s to {times[b]:.3f} s); refusing '
                              'to fill the gap')
    return first, last


def lerobot_features(joints: Sequence[str], cameras: Mapping[str, tuple[int, int]],
                     video: bool = False) -> dict[str, dict]:
    """LeRobot feature specs: ``observation.state`` and ``action`` (float32, one per joint,
    named), ``observation.images.<camera>`` (HxWx3, ``image`` or ``video``) and the
    :data:`FLAG_FEATURES` (bool, shape (1,))."""
    n = len(joints)
    out: dict[str, dict] = {
        'observation.state': {'dtype': 'float32', 'shape': [n], 'names': list(joints)},
        'action': {'dtype': 'float32', 'shape': [n], 'names': list(joints)},
    }
    for cam, (h, w) in cameras.items():
        out[f'observation.images.{cam}'] = {
            'dtype': 'video' if video else 'image', 'shape': [int(h), int(w), 3],
            'names': ['height', 'width', 'channels']}
    for flag in FLAG_FEATURES:
        out[flag] = {'dtype': 'bool', 'shape': [1], 'names': None}
    return out
