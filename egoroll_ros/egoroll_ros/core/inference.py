"""Configured policy inference, shared by ``policy_node`` and ``egoroll evaluate``.

One place for: validating the node's policy configuration (:func:`setup_from_params`), loading
and checking the checkpoint against it (:func:`load_configured_policy`), turning a policy
output into the chunk positions that are published (:func:`predict_positions`) and into a
:class:`~egoroll_ros.core.types.Chunk` (:func:`make_chunk`). No rclpy import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
import re
from typing import Any

import numpy as np

from egoroll_ros.core.observation import (
    CameraConfig,
    ObservationBuilder,
    Quest,
    unwrap_continuous,
)
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.errors import CheckpointError, ConfigError
from egoroll_ros.policies.base import (
    Observation,
    Policy,
    PolicyMetadata,
    check_chunk,
    load_backend,
    validate_metadata,
)


@dataclass(frozen=True)
class PolicySetup:
    """The validated joint, camera and Quest configuration of a policy node.

    Attributes:
        joints: controlled joints (state and action columns, in order).
        continuous_columns: columns of the continuous joints (unwrapped).
        cameras: configured cameras.
        quest: Joy axes of grip and trigger.
    """

    joints: tuple[str, ...]
    continuous_columns: tuple[int, ...]
    cameras: tuple[CameraConfig, ...]
    quest: Quest


def _cameras(p: Mapping[str, Any]) -> list[CameraConfig]:
    names = p['cameras.names']
    if len(set(names)) != len(names) or any(not re.match(r'^[A-Za-z_][A-Za-z0-9_]*$', n)
                                             for n in names):
        raise ConfigError("parameter 'cameras.names': names must be unique identifiers")
    for key in ('cameras.heights', 'cameras.widths'):
        if len(p[key]) != len(names):
            raise ConfigError(f"parameter '{key}': needs one value per camera ({len(names)}), "
                              f'got {len(p[key])}')
    comp = p['cameras.compressed'] or [False] * len(names)
    if len(comp) != len(names):
        raise ConfigError(f"parameter 'cameras.compressed': needs one value per camera "
                          f'({len(names)}) or none, got {len(comp)}')
    return [CameraConfig(n, h, w, c) for n, h, w, c in
            zip(names, p['cameras.heights'], p['cameras.widths'], comp, strict=True)]


def setup_from_params(p: Mapping[str, Any]) -> PolicySetup:
    """Validate the joint, camera and Quest parameters of ``policy_node``.

    Args:
        p: parameter name -> value (as :func:`egoroll_ros.ros.params.declare_params` gives).

    Raises:
        ConfigError: naming the parameter.
    """
    joints = tuple(p['joints'])
    if not joints or len(set(joints)) != len(joints):
        raise ConfigError("parameter 'joints': must be a non-empty list of unique names")
    bad = [j for j in p['continuous_joints'] if j not in joints]
    if bad:
        raise ConfigError(f"parameter 'continuous_joints': not in 'joints': {bad}")
    for key in ('quest.grip_axes', 'quest.trigger_axes'):
        if len(p[key]) != 2:
            raise ConfigError(f"parameter '{key}': needs [left, right]")
    return PolicySetup(joints, tuple(joints.index(j) for j in p['continuous_joints']),
                       tuple(_cameras(p)),
                       Quest(tuple(p['quest.grip_axes']), tuple(p['quest.trigger_axes'])))


def load_configured_policy(p: Mapping[str, Any], setup: PolicySetup, path: str,
                           python_executable: str,
                           warn: Callable[[str], None],
                           prepare: Callable[..., np.ndarray] | None = None
                           ) -> tuple[Policy, ObservationBuilder]:
    """Load the checkpoint the ``policy.*`` parameters name and check it fits ``setup``.

    Args:
        p: the node's parameters (``policy.*``, ``max_age.*``).
        setup: from :func:`setup_from_params`.
        path: the checkpoint directory (``policy.path`` or the installed default).
        python_executable: interpreter of an isolated backend when none is configured.
        warn: called once with a warning (e.g. the fingerprint is not checked).
        prepare: image preparation of the builder (default: ``prepare_image``); evaluate
            wraps it to decode stored payloads first.

    Returns:
        The loaded policy and the observation builder for it.

    Raises:
        CheckpointError: load failure, fingerprint mismatch, or a policy the configuration
            cannot feed. ConfigError: bad parameters.
    """
    options: dict[str, Any] = {}
    if p['policy.num_threads']:
        options['num_threads'] = p['policy.num_threads']
    if p['policy.isolated']:
        cls = load_backend('isolated')
        policy = cls.load(path, backend=p['policy.backend'],
                          python_executable=p['policy.python_executable'] or python_executable,
                          request_timeout=p['policy.request_timeout'],
                          load_timeout=p['policy.load_timeout'], backend_options=options)
    else:
        policy = load_backend(p['policy.backend']).load(path, **options)
    try:
        meta = policy.metadata
        want = p['policy.expected_fingerprint']
        if want and meta.fingerprint != want:
            raise CheckpointError(f"fingerprint mismatch: checkpoint {path} has "
                                  f"{meta.fingerprint}, parameter "
                                  f"'policy.expected_fingerprint' is {want}")
        if not want:
            warn("'policy.expected_fingerprint' is empty: the checkpoint fingerprint is not "
                 'checked')
        validate_metadata(meta, setup.joints,
                          {c.name: (c.height, c.width) for c in setup.cameras})
        builder = ObservationBuilder(
            setup.joints, setup.cameras, meta, p['max_age.camera'], p['max_age.joint_states'],
            p['max_age.quest'], setup.quest,
            **({'prepare': prepare} if prepare is not None else {}))
    except Exception:
        policy.close()
        raise
    return policy, builder


def predict_positions(policy: Policy, obs: Observation,
                      continuous_columns: Sequence[int]) -> np.ndarray:
    """Run the policy on ``obs``; the checked (H, J) chunk positions, continuous joints
    unwrapped relative to the measured state.

    Raises:
        PolicyError: inference failed, wrong shape or non-finite output.
    """
    arr = check_chunk(policy.predict_chunk(obs), policy.metadata)
    return unwrap_continuous(arr, obs.state, continuous_columns)


def make_chunk(meta: PolicyMetadata, joints: Sequence[str], positions: np.ndarray,
               stamp: float, latency: float, shadow: bool = False, sequence: int = 0) -> Chunk:
    """The chunk published for ``positions`` predicted from the observation at ``stamp``."""
    traj = JointTrajectoryData(joint_names=tuple(joints), times=meta.point_times(),
                               positions=positions, stamp=stamp)
    return Chunk(sequence=sequence, policy_id=meta.fingerprint, stamp=stamp, trajectory=traj,
                 shadow=shadow, inference_latency=latency)
