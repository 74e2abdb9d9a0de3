"""Loading the configured policy: the ``policy.*`` parameters -> a checked, loaded backend.

Shared by ``policy_node`` and ``egoroll evaluate``. Depends on the policy contract and the
configuration cores (:mod:`egoroll_ros.core.policy`, :mod:`egoroll_ros.core.inference`) and the
backend registry; no rclpy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from egoroll_ros.core.action_space import ActionSpace, action_space_for
from egoroll_ros.core.inference import CartesianRuntime, PolicySetup
from egoroll_ros.core.observation import ObservationBuilder
from egoroll_ros.core.policy import CartesianSupply, Policy, validate_metadata
from egoroll_ros.errors import CheckpointError, ConfigError
from egoroll_ros.policies.registry import load_backend
from egoroll_ros.runtimes import backend_runtime


def _supply(setup: PolicySetup) -> CartesianSupply | None:
    cp = setup.cartesian
    if cp is None:
        return None
    frames = set(cp.camera_poses)
    if cp.urdf_path or cp.urdf_text:
        model = cp.robot_model()
        frames |= {f.name for f in model.pin_model.frames if not model.chain(f.name)}
    return CartesianSupply(dict(zip(cp.arms, cp.ee_frames, strict=True)),
                           dict(zip(cp.arms, cp.gripper_joints, strict=True)),
                           frozenset(frames), cp.convention is not None)


@dataclass(frozen=True)
class LoadedPolicy:
    """A loaded, validated policy with its observation builder, its action space and, for a
    Cartesian policy, its :class:`CartesianRuntime` (None for joint policies)."""

    policy: Policy
    builder: ObservationBuilder
    cartesian: CartesianRuntime | None = None
    space: ActionSpace | None = None

    def summary(self) -> list[str]:
        """What was loaded, in words (one log line each)."""
        meta = self.policy.metadata
        lines = [f'policy {meta.backend} loaded: fingerprint {meta.fingerprint}, chunk '
                 f'{meta.chunk_length}x{meta.action_size} every {meta.step_period:g} s, images '
                 f'{[(f.camera, f.height, f.width) for f in meta.image_features]}']
        rt = self.cartesian
        if rt is not None:
            lines.append(
                f"Cartesian policy: arms {list(rt.arm_names)} ({list(rt.ee_frames)}), poses in "
                f"'{rt.spec.frame}', state {rt.spec.state}, convention from "
                f"{'the policy' if rt.spec.convention is not None else 'the configuration'}; "
                f"chunks in '{rt.base_frame}', IK by the safety gate")
        return lines


def backend_options(p: Mapping[str, Any], setup: PolicySetup) -> dict[str, Any]:
    """The options the configured backend's ``load`` gets from the ``policy.*`` parameters.

    Every backend gets ``device`` (and ``num_threads`` when set); a backend with a managed
    runtime (lerobot) also gets the input mapping, task, step period and query period.

    Raises:
        ConfigError: a parameter only the lerobot backend reads is set for another backend,
            or ``policy.camera_map`` is malformed.
    """
    options: dict[str, Any] = {'device': p.get('policy.device') or 'cpu'}
    if p['policy.num_threads']:
        options['num_threads'] = p['policy.num_threads']
    camera_map: dict[str, str] = {}
    for pair in p.get('policy.camera_map') or ():
        key, sep, cam = str(pair).partition('=')
        if not sep or not key or not cam or key in camera_map:
            raise ConfigError(f"parameter 'policy.camera_map': entry {pair!r} is not a new "
                              "'key=camera' pair")
        camera_map[key] = cam
    lerobot_only = {'policy.camera_map': camera_map,
                    'policy.environment_state': list(p.get('policy.environment_state') or ()),
                    'policy.task': p.get('policy.task') or '',
                    'policy.rtc_execution_horizon': p.get('policy.rtc_execution_horizon') or 0}
    if backend_runtime(p['policy.backend']) is None:
        for name, value in lerobot_only.items():
            if value:
                raise ConfigError(f"parameter '{name}' is read by the lerobot backend only "
                                  f"(policy.backend is '{p['policy.backend']}')")
        return options
    options.update(camera_map=camera_map, cameras=[c.name for c in setup.cameras],
                   environment_state=lerobot_only['policy.environment_state'],
                   task=lerobot_only['policy.task'],
                   step_period=p.get('policy.step_period') or 0.0,
                   query_period=1.0 / float(p['query_frequency']))
    if p.get('policy.rtc'):
        options.update(rtc=True,
                       rtc_execution_horizon=lerobot_only['policy.rtc_execution_horizon'])
    return options


def load_policy(p: Mapping[str, Any], setup: PolicySetup, path: str,
                python_executable: str, warn: Callable[[str], None],
                prepare: Callable[..., np.ndarray] | None = None) -> LoadedPolicy:
    """Load the checkpoint the ``policy.*`` parameters name and check it fits ``setup``.

    Args:
        p: the node's parameters (``policy.*``, ``max_age.*``).
        setup: from :func:`~egoroll_ros.core.inference.setup_from_params`.
        path: the checkpoint directory (``policy.path`` or the installed default).
        python_executable: interpreter of an isolated backend when none is configured.
        warn: called once with a warning (e.g. the fingerprint is not checked).
        prepare: image preparation of the builder (default: decoded arrays,
            :func:`~egoroll_ros.core.images.fit_image`); the node passes
            :func:`egoroll_ros.ros.images.prepare_image`, evaluate wraps it to decode stored
            payloads first.

    Returns:
        The loaded policy, the observation builder for it and its Cartesian runtime.

    Raises:
        CheckpointError: load failure, fingerprint mismatch, or a policy the configuration
            cannot feed. ConfigError: bad parameters.
    """
    options = backend_options(p, setup)
    # A backend with a managed runtime (lerobot) always runs in its own worker process; an
    # empty policy.python_executable then means that runtime, not this interpreter.
    managed = backend_runtime(p['policy.backend']) is not None
    if p['policy.isolated'] or managed:
        cls = load_backend('isolated')
        policy = cls.load(path, backend=p['policy.backend'],
                          python_executable=p['policy.python_executable']
                          or (None if managed else python_executable),
                          request_timeout=p['policy.request_timeout'],
                          load_timeout=p['policy.load_timeout'], backend_options=options)
    else:
        policy = load_backend(p['policy.backend']).load(path, **options)
    try:
        meta = policy.metadata
        given = p.get('policy.step_period') or 0.0
        if given and abs(meta.step_period - given) > 1e-9 * max(1.0, given):
            raise CheckpointError(f"parameter 'policy.step_period' is {given:g} s but the "
                                  f'checkpoint {path} steps every {meta.step_period:g} s')
        want = p['policy.expected_fingerprint']
        if want and meta.fingerprint != want:
            raise CheckpointError(f"fingerprint mismatch: checkpoint {path} has "
                                  f"{meta.fingerprint}, parameter "
                                  f"'policy.expected_fingerprint' is {want}")
        if not want:
            warn("'policy.expected_fingerprint' is empty: the checkpoint fingerprint is not "
                 'checked')
        if p.get('policy.rtc') and not meta.rtc:
            raise ConfigError(f"parameter 'policy.rtc' is true but the policy at {path} "
                              f"(backend '{p['policy.backend']}') does not do real-time "
                              'chunking (metadata rtc false); set it false')
        validate_metadata(meta, setup.joints,
                          {c.name: (c.height, c.width) for c in setup.cameras},
                          cartesian=_supply(setup) if meta.action_space == 'cartesian'
                          else None)
        if not p['max_clock_offset']:
            warn("'max_clock_offset' is 0: the clock offset between the inputs' header "
                 'stamps and this clock is measured but not checked')
        runtime = CartesianRuntime(meta, setup) if meta.action_space == 'cartesian' else None
        kw: dict[str, Any] = {'prepare': prepare} if prepare is not None else {}
        if runtime is not None and meta.cartesian.state == 'ee_pose':
            kw['state_transform'] = runtime.encode_state
        builder = ObservationBuilder(
            setup.joints, setup.cameras, meta, p['max_age.camera'], p['max_age.joint_states'],
            p['max_age.quest'], setup.quest, max_clock_offset=p['max_clock_offset'] or None,
            **kw)
    except Exception:
        policy.close()
        raise
    return LoadedPolicy(policy, builder, runtime,
                        action_space_for(policy, setup.joints, setup.continuous_columns,
                                         runtime))
