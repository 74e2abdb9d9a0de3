"""policy_node's parameter spec (``PARAMS``): one :class:`~egoroll_ros.ros.params.Param` each,
from which the node's descriptors, ``docs/parameters.md`` and ``config/defaults/policy_node.yaml``
come (``tools/gen_param_docs.py``). Here rather than in the node file because ``egoroll
evaluate``, ``export`` and ``record`` read a policy_node YAML with it too, without the node.
"""

from __future__ import annotations

import re

from egoroll_ros.core.aggregation import AGGREGATIONS
from egoroll_ros.ros.params import Param
from egoroll_ros.ros.takeover import PARAMS as TAKEOVER_PARAMS

_HEX64 = re.compile(r'^[0-9a-f]{64}$')


def _fp_ok(v: str) -> str | None:
    return None if v == '' or _HEX64.match(v) else 'must be empty or 64 lowercase hex digits'


def _device_ok(v: str) -> str | None:
    return None if re.match(r'^(cpu|mps|cuda(:\d+)?)$', v) else \
        'must be cpu, cuda, cuda:N or mps'


def _pairs_ok(v: list[str]) -> str | None:
    bad = [x for x in v if x.count('=') != 1 or not all(x.split('='))]
    return f"entries must be 'key=camera', not {bad}" if bad else None


PARAMS = [
    Param('joints', 'str[]', None, 'Controlled joints, in order = state and action columns.',
          read_only=True),
    Param('continuous_joints', 'str[]', [], 'Joints without limits (subset of joints) whose '
          'chunk targets are unwrapped relative to the measured state.', read_only=True),
    Param('policy.backend', str, 'egoroll_act', "Backend: an 'egoroll_ros.policies' entry "
          "point (exported, egoroll_act, lerobot, ...) or 'package.module:Class'.",
          read_only=True),
    Param('policy.path', str, '', 'Checkpoint directory; empty: the installed demo policy '
          '(share/egoroll_ros/policies/demo).', read_only=True),
    Param('policy.expected_fingerprint', str, '', 'sha256 the checkpoint must have; empty: '
          'not checked (a warning is logged).', read_only=True, validate=_fp_ok),
    Param('policy.isolated', bool, False, 'Run the backend in a separate Python process.',
          read_only=True),
    Param('policy.python_executable', str, '', 'Interpreter of the isolated process (another '
          "venv's bin/python); empty: the backend's managed runtime (lerobot: built by "
          "'egoroll runtime lerobot'), else this one.", read_only=True),
    Param('policy.request_timeout', float, 2.0, 'Isolated: seconds allowed per inference.',
          min=0.001, max=600.0, read_only=True),
    Param('policy.load_timeout', float, 120.0, 'Isolated: seconds allowed to load.',
          min=0.1, max=3600.0, read_only=True),
    Param('policy.num_threads', int, 0, 'torch intra-op threads of the backend (in the worker '
          'process when isolated; 0: torch default).', min=0, max=256, read_only=True),
    Param('policy.device', str, 'cpu', 'Inference device: cpu, cuda, cuda:N or mps; one that '
          'is not available is refused (never silently the CPU).', read_only=True,
          validate=_device_ok),
    Param('policy.step_period', float, 0.0, 'Seconds between chunk points; 0: from the '
          'checkpoint (lerobot: train_config.json env.fps; refused when it has none). Set and '
          'different from the checkpoint: refused.', min=0.0, max=60.0, read_only=True),
    Param('policy.task', str, '', 'Language instruction for language-conditioned policies '
          '(lerobot: required when the preprocessor tokenizes a task).', read_only=True),
    Param('policy.camera_map', 'str[]', [], "lerobot: 'key=camera' pairs feeding the "
          "checkpoint's observation.images.<key> from configured camera <camera> (unlisted "
          'keys: the camera of the same name).', read_only=True, validate=_pairs_ok),
    Param('policy.environment_state', 'str[]', [], 'lerobot: inputs (quest.grip, '
          'quest.trigger, quest.left_pose, quest.right_pose) concatenated, in order, into '
          'observation.environment_state.', read_only=True),
    Param('policy.rtc', bool, False, 'Real-time chunking by the policy itself (LeRobot RTC for '
          'flow-matching policies: pi0, pi05, smolvla...): each inference passes the unexecuted '
          'rest of the chunk the executor runs (from executor/state, else the last published) '
          'and the inference delay in steps (max of the last 10 latencies / step period), so '
          'the policy inpaints the seam. A policy without it is refused at configure, and so '
          'is RTC with aggregation.*. Policies that do not do RTC never receive it.',
          read_only=True),
    Param('policy.rtc_execution_horizon', int, 0, "lerobot RTC: execution horizon (steps); 0: "
          "LeRobot's default.", min=0, max=10000, read_only=True),
    Param('cameras.names', 'str[]', [], 'Camera names; camera <n> is read from '
          'camera/<n>/image_raw (or .../image_raw/compressed).', read_only=True),
    Param('cameras.heights', 'int[]', [], 'Expected frame height of each camera (pixels).',
          min=1, max=16384, read_only=True),
    Param('cameras.widths', 'int[]', [], 'Expected frame width of each camera (pixels).',
          min=1, max=16384, read_only=True),
    Param('cameras.compressed', 'bool[]', [], 'Per camera: subscribe to the compressed topic '
          '(empty: all raw).', read_only=True),
    Param('query_frequency', float, 10.0, 'Inferences per second while running (Hz).',
          min=0.1, max=1000.0, read_only=True),
    Param('max_age.camera', float, 0.2, 'Max steady-clock age of a camera frame (s); also '
          'how long its header stamp may stay put and its frame stay identical. Live within '
          '[0.001, 1] s, never while RUNNING.', min=0.001, max=1.0, read_only=False),
    Param('max_age.joint_states', float, 0.1, 'Max age of joint_states (s); also how long '
          'its header stamp may stay put. Live within [0.001, 1] s, never while RUNNING.',
          min=0.001, max=1.0, read_only=False),
    Param('max_age.quest', float, 0.2, 'Max age of Quest inputs the policy uses (s). Live '
          'within [0.001, 1] s, never while RUNNING.', min=0.001, max=1.0, read_only=False),
    Param('max_clock_offset', float, 0.5, "Largest allowed |this node's clock at receipt - "
          "header stamp| of a required input (s); beyond it the input is stale. 0: measured, "
          'reported in diagnostics, not checked (a warning is logged). Read-only: a live 0 '
          'would turn the check off.', min=0.0, max=3600.0, read_only=True),
    Param('preflight_validity', float, 10.0, 'Seconds a passing preflight allows a start.',
          min=0.1, max=3600.0, read_only=True),
    Param('stall_timeout', float, 1.0, 'Seconds (steady clock) the node may go unscheduled '
          '(a stopped or starved process) before a RUNNING rollout stops: a policy that hung '
          'and resumed publishes nothing more until a new preflight and start. 0: off (a '
          'warning is logged).', min=0.0, max=10.0, read_only=True),
    Param('status_rate', float, 10.0, 'policy/status rate (Hz); diagnostics at 1 Hz.',
          min=5.0, max=100.0, read_only=True),
    Param('gate.stop_service', str, 'safety/stop', 'The safety gate service every stop (policy/'
          'stop, the Quest toggle, deactivate, a fault) calls, so the running chunk is canceled '
          'and the gate forwards nothing until a new preflight; policy/stop answers success, '
          'and a deactivate completes, only once the gate confirmed the hold or it is known '
          'that it did not. Empty: no gate (stop only stops publishing; a warning is logged).',
          read_only=True),
    Param('gate.arm_service', str, 'safety/arm', "The safety gate's arm service (Arm.srv): a "
          'start names its accepted preflight there and the rollout runs only once the gate '
          "armed; while it runs, the gate's safety/heartbeat saying it disarmed (a stop, the "
          'e-stop, a fault) ends it here too. Empty: no gate to arm (a warning is logged).',
          read_only=True),
    Param('gate.stop_timeout', float, 2.0, 'Seconds a stop waits for the gate to confirm the '
          'hold; longer: the stop is reported NOT confirmed (policy/stop fails; deactivate '
          'completes with the error in the log, policy/status and /diagnostics).', min=0.01,
          max=60.0, read_only=True),
    Param('gate.require_preflight_acceptance', bool, True, 'policy/start (and the Quest '
          "toggle) needs the safety gate's ACCEPTED verdict (safety/verdict) on the preflight's "
          'shadow chunk. False: a passing preflight alone allows a start (a warning is '
          'logged).', read_only=True),
    Param('gate.verdict_timeout', float, 3.0, 'Seconds policy/preflight waits for the '
          "safety gate's verdict on its shadow chunk (with gate.require_preflight_acceptance): "
          'the preflight succeeds only once the gate accepted it, and fails (start stays '
          'refused) when it rejects it or does not answer in time.', min=0.01, max=60.0,
          read_only=True),
    Param('autoconfigure', bool, True, 'Configure and activate at start-up (no lifecycle '
          'manager needed).', read_only=True),
    Param('quest.toggle_button', int, -1, 'Joy button index whose debounced press toggles '
          'start/stop; -1 disables.', min=-1, max=255, read_only=True),
    Param('quest.debounce_time', float, 0.05, 'Seconds the button must be stable.', min=0.0,
          max=2.0, read_only=True),
    Param('quest.grip_axes', 'int[]', [-1, -1], 'Joy axes of the left and right grip values '
          '(-1: none).', min=-1, max=255, read_only=True),
    Param('quest.trigger_axes', 'int[]', [-1, -1], 'Joy axes of the left and right trigger '
          'values (-1: none).', min=-1, max=255, read_only=True),
    Param('frame_id', str, '', 'header.frame_id of published chunks.', read_only=True),
    # Chunk aggregation and latency-aware chunking (core/aggregation.py); joint policies only.
    Param('aggregation.mode', str, 'none', 'none | temporal_ensemble (ACT: exp(-m i) weights '
          'over every overlapping prediction, oldest first) | weighted_average (LeRobot async '
          'inference: old_weight x published + (1 - old_weight) x new on the overlap) | keep '
          '(keep keep_points of the running chunk, replace the rest).',
          choices=AGGREGATIONS, read_only=True),
    Param('aggregation.ensemble_coefficient', float, 0.01, "temporal_ensemble: ACT's m "
          '(per inference).', min=0.0, max=100.0, read_only=True),
    Param('aggregation.old_weight', float, 0.3, 'weighted_average: weight of the published '
          'chunk (LeRobot: 0.3).', min=0.0, max=1.0, read_only=True),
    Param('aggregation.keep_points', int, 0, 'keep: points of the running chunk kept.',
          min=0, max=10000, read_only=True),
    Param('aggregation.pin_latency', bool, False, 'Pin the points due before the chunk lands '
          '(inference latency + pin_margin) to the running chunk, as real-time chunking does; '
          'report when inference is slower than the overlap.', read_only=True),
    Param('aggregation.pin_margin', float, 0.0, 'Seconds after publishing that a chunk is '
          'expected to reach the executor (transport and gate).', min=0.0, max=10.0,
          read_only=True),
    Param('aggregation.blend_points', int, 0, 'Points over which each hand-over from older '
          'chunks to the new one ramps linearly: after a pinned or kept prefix, and '
          "(weighted_average, temporal_ensemble) an older chunk's weight fading out over its "
          'last blend_points + 1 covered points; 0: the exact formulas, with a step where an '
          'older chunk ends.', min=0, max=10000, read_only=True),
    Param('markers.frames', 'str[]', [], 'End-effector frames whose predicted path (forward '
          'kinematics of each joint chunk) is drawn on policy/markers; the robot model comes '
          'from urdf_path, else robot_description. Empty: only the status text is drawn.',
          read_only=True),
    # Cartesian policies (docs/cartesian.md); ignored by joint policies.
    Param('cartesian.arms', 'str[]', [], 'Arms a Cartesian policy drives (names as in the '
          "policy's layout and the gate's cartesian_arms); empty: Cartesian policies are "
          'refused.', read_only=True),
    Param('cartesian.ee_frames', 'str[]', [], 'End-effector frame of each arm (URDF frame).',
          read_only=True),
    Param('cartesian.gripper_joints', 'str[]', [], "Gripper joint of each arm ('' for none; "
          'empty list: none), for the measured gripper value in an end-effector pose state.',
          read_only=True),
    Param('urdf_path', str, '', 'URDF file (or package://<pkg>/<path>) for forward kinematics '
          'of end-effector pose state, the base frame name and fixed camera frames. Empty '
          'with cartesian.arms set: the robot_description topic (configure waits for it).',
          read_only=True),
    Param('cartesian.camera_frames', 'str[]', [], 'Camera frames not in the URDF whose pose in '
          'the base frame is given by cartesian.camera_poses.', read_only=True),
    Param('cartesian.camera_poses', 'float[]', [], 'Pose of each camera frame in the base '
          'frame: 7 values per frame (x y z m, qx qy qz qw).', read_only=True),
    Param('cartesian.convention.reference_rotation', 'float[]', [], 'Frame convention '
          '(T_hw = L T_ds R) L rotation, 9 values row-major; empty: identity. Only when the '
          'policy declares no convention.', read_only=True),
    Param('cartesian.convention.reference_translation', 'float[]', [], 'L translation (m, 3 '
          'values); empty: zero.', read_only=True),
    Param('cartesian.convention.ee_rotation', 'float[]', [], 'R rotation (dataset -> hardware '
          'end-effector axes), 9 values row-major; empty: identity.', read_only=True),
    Param('cartesian.convention.ee_translation', 'float[]', [], 'R translation (m, 3 values); '
          'empty: zero.', read_only=True),
    Param('cartesian.convention.gripper_scale', float, 1.0, 'Gripper: hardware = offset + '
          'scale x dataset value.', read_only=True),
    Param('cartesian.convention.gripper_offset', float, 0.0, 'Gripper offset (m or rad).',
          read_only=True),
    # Human takeover from the Quest (ros/takeover.py, docs/takeover.md).
    *TAKEOVER_PARAMS,
]
