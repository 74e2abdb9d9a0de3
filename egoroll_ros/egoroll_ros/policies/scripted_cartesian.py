"""``scripted_cartesian``: a deterministic Cartesian demo policy (no model, no weights).

It drives one arm's end effector (the demo arm's ``tool0``) around a small horizontal circle
that starts at the pose measured at the first step of a rollout, keeping the orientation and
the gripper as measured. Its state is the measured end-effector pose and its actions are
end-effector poses, both in a NON-trivial dataset convention (an EgoMimic-style
permutation/sign of the end-effector axes, roll-pitch-yaw angles, a gripper opening fraction
0..1), so the policy node's codec round trip (hardware -> dataset for the state, dataset ->
hardware for the actions, through ONE convention object) is exercised end to end: a
conversion applied in one direction only would turn the tool and the gate would reject the
chunk (rotation jump).

Motion: the circle's centre is ``radius`` along -x from the position measured at the first
observation after :meth:`reset`. Each chunk starts at the angle of the MEASURED position about
that centre and advances by ``theta(t + dt_k) - theta(t)``, where
``theta(t) = omega (t - tau (1 - exp(-t / tau)))`` (speed ramps up from 0 with time constant
``tau``) and ``t`` = seconds since that first observation (observation stamps). So the policy
is closed loop in its phase, as a learned one is: when the arm stops (the executor held on a
stale joint state, a chunk was rejected) the next chunk continues from where the arm IS, not
from where an open-loop clock says it should be by now (which would be a jump the gate rejects).
The output is a pure function of the stamps, the first state and the current state.
Defaults: radius 0.03 m, period 6 s (0.031 m/s), 10 points every 0.1 s: per point <= 3.2 mm
(the demo gate allows 0.05 m), a chunk spans <= 0.032 m from the measured pose (soft limit
0.10 m), no rotation.

Checkpoint directory: optional ``scripted_cartesian.json`` overriding :data:`DEFAULTS`; any
other file is ignored (so the installed demo policy directory works as ``policy.path``). The
fingerprint covers the effective configuration.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from egoroll_ros.core.frames import FrameConvention
from egoroll_ros.core.policy import (
    CartesianArm,
    CartesianSpec,
    Observation,
    Policy,
    PolicyError,
    PolicyMetadata,
)
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.device import require_cpu
from egoroll_ros.policies.fingerprint import fingerprint

CONFIG_FILE = 'scripted_cartesian.json'
DEFAULTS: dict[str, Any] = {
    'arm': 'arm', 'ee_frame': 'tool0', 'radius': 0.03, 'period': 6.0, 'ramp': 0.5,
    'chunk_length': 10, 'step_period': 0.1,
}
#: Dataset end-effector axes -> hardware end-effector axes (``FrameConvention.ee_rotation``):
#: a permutation with signs, as between EgoMimic's dataset and hardware rpy axes.
EE_ROTATION = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
#: Dataset gripper value 0..1 (opening fraction) -> hardware metres (the demo gripper: 0.04).
GRIPPER_SCALE = 0.04
CONVENTION = FrameConvention(ee_rotation=EE_ROTATION, gripper_scale=GRIPPER_SCALE)
ROTATION = 'rpy:xyz'


def circle_angle(t: np.ndarray, period: float, ramp: float) -> np.ndarray:
    """Angle (rad) travelled at times ``t`` >= 0 s: speed 2 pi / period, ramped up over
    ``ramp`` s (first-order), so the motion starts at rest."""
    t = np.maximum(np.asarray(t, dtype=float), 0.0)
    omega = 2.0 * math.pi / period
    if ramp <= 0:
        return omega * t
    return omega * (t - ramp * (1.0 - np.exp(-t / ramp)))


def circle_points(start: np.ndarray, theta: np.ndarray, radius: float) -> np.ndarray:
    """(N, 3) points at angles ``theta`` of the circle through ``start`` (centre
    ``start - radius x``) in the x-y plane of the frame ``start`` is in (z of ``start``)."""
    theta = np.asarray(theta, dtype=float)
    centre = np.asarray(start, dtype=float) - np.array([radius, 0.0, 0.0])
    return centre + radius * np.stack([np.cos(theta), np.sin(theta), np.zeros_like(theta)], -1)


def circle_positions(start: np.ndarray, t: np.ndarray, radius: float, period: float,
                     ramp: float) -> np.ndarray:
    """(N, 3) points of the circle through ``start`` at times ``t`` since the start, for an
    arm that follows exactly (the open-loop reference)."""
    return circle_points(start, circle_angle(t, period, ramp), radius)


def measured_angle(start: np.ndarray, position: np.ndarray, radius: float) -> float:
    """Angle (rad) about the circle's centre of the measured ``position`` (x-y plane).

    Raises:
        PolicyError: the position is within radius / 2 of the centre, where the angle would
            be a guess (the arm is nowhere near the circle: a policy refuses, it does not jump).
    """
    d = np.asarray(position, dtype=float)[:2] - (np.asarray(start, dtype=float)[:2]
                                                 - np.array([radius, 0.0]))
    if not np.all(np.isfinite(d)) or float(np.hypot(*d)) < 0.5 * radius:
        raise PolicyError(f'scripted_cartesian: measured end effector {position.tolist()} is '
                          f'within {0.5 * radius} m of the circle centre: no phase to continue')
    return float(np.arctan2(d[1], d[0]))


class ScriptedCartesianPolicy(Policy):
    """See the module docstring."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        spec = CartesianSpec(arms=(CartesianArm(cfg['arm'], cfg['ee_frame'], ROTATION, True),),
                             frame='base', convention=CONVENTION, state='ee_pose')
        blob = json.dumps({**cfg, 'convention': spec.to_json()['convention'],
                           'rotation': ROTATION}, sort_keys=True).encode()
        self._meta = PolicyMetadata(
            backend='scripted_cartesian', fingerprint=fingerprint({'config': blob}),
            image_features=(), state_size=spec.width, action_size=spec.width,
            chunk_length=int(cfg['chunk_length']), step_period=float(cfg['step_period']),
            normalization={'state': {'kind': 'identity'}, 'action': {'kind': 'identity'}},
            action_space='cartesian', cartesian=spec)
        self._start: tuple[np.ndarray, float] | None = None

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> ScriptedCartesianPolicy:
        """Defaults, overridden by ``<path>/scripted_cartesian.json`` when present.

        Raises:
            CheckpointError: the JSON is malformed or a value is out of range.
        """
        require_cpu(options.get('device') or 'cpu', 'scripted_cartesian')
        cfg = dict(DEFAULTS)
        f = Path(path) / CONFIG_FILE
        if f.is_file():
            try:
                data = json.loads(f.read_text())
            except (OSError, ValueError) as exc:
                raise CheckpointError(f'{f}: {exc}') from None
            unknown = set(data) - set(DEFAULTS) if isinstance(data, dict) else {'?'}
            if unknown:
                raise CheckpointError(f'{f}: unknown keys {sorted(unknown)}')
            cfg.update(data)
        for key in ('radius', 'period', 'step_period'):
            if not (isinstance(cfg[key], (int, float)) and 0 < cfg[key] < 1e3):
                raise CheckpointError(f"scripted_cartesian: '{key}' must be a positive number")
        if not (isinstance(cfg['chunk_length'], int) and cfg['chunk_length'] >= 1):
            raise CheckpointError("scripted_cartesian: 'chunk_length' must be an integer >= 1")
        return cls(cfg)

    @property
    def metadata(self) -> PolicyMetadata:
        """Cartesian, one arm, rpy:xyz, end-effector pose state, non-trivial convention."""
        return self._meta

    def reset(self) -> None:
        """The next observation starts a new circle."""
        self._start = None

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """(H, 7) dataset-convention poses: x y z roll pitch yaw gripper."""
        state = np.asarray(observation.state, dtype=float)
        if state.shape != (self._meta.state_size,):
            raise PolicyError(f'scripted_cartesian: state has shape {state.shape}')
        if self._start is None:
            self._start = (state.copy(), float(observation.stamp))
        s0, t0 = self._start
        radius, period, ramp = self.cfg['radius'], self.cfg['period'], self.cfg['ramp']
        t = max(float(observation.stamp) - t0, 0.0)
        advance = circle_angle(t + self._meta.point_times(), period, ramp) - \
            circle_angle(np.array([t]), period, ramp)
        out = np.tile(s0, (len(advance), 1))
        out[:, :3] = circle_points(s0[:3], measured_angle(s0[:3], state[:3], radius) + advance,
                                   radius)
        return out
