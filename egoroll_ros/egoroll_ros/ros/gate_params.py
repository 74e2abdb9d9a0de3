"""safety_gate's parameter spec (``PARAMS``): one :class:`~egoroll_ros.ros.params.Param` each,
from which the node's descriptors, ``docs/parameters.md`` and ``config/defaults/safety_gate.yaml``
come (``tools/gen_param_docs.py``). Here rather than in the node file because ``egoroll
evaluate`` and ``egoroll record`` read a safety_gate YAML with it too, without the node.
"""

from __future__ import annotations

from egoroll_ros.core.gate import OPTIONAL_CHECKS, GateConfig
from egoroll_ros.core.ik import IkParams
from egoroll_ros.ros.params import Param

_D = GateConfig(joints=('_',))   # defaults of the core, shown in the parameter specs
_IK = IkParams()

PARAMS = [
    Param('joints', 'str[]', None, 'the controlled joints, in order', read_only=True),
    Param('urdf_path', str, '', 'URDF file of the robot; empty: use the robot_description '
          'topic (transient local)', read_only=True),
    Param('ee_frames', 'str[]', [], 'end-effector frames checked by forward kinematics',
          read_only=True),
    Param('gripper_joints', 'str[]', [], 'gripper joints checked against gripper_min/max',
          read_only=True),
    Param('gripper_min', 'float[]', [], 'lowest allowed gripper position per gripper joint',
          read_only=True),
    Param('gripper_max', 'float[]', [], 'highest allowed gripper position per gripper joint',
          read_only=True),
    Param('min_point_spacing', float, _D.min_point_spacing, 's, least time between points',
          min=0.0, read_only=True, min_exclusive=True),
    Param('max_point_spacing', float, _D.max_point_spacing, 's, most time between points',
          min=0.0, read_only=True, min_exclusive=True),
    Param('max_points', int, _D.max_points, 'most points in a chunk', min=1, read_only=True),
    Param('max_chunk_age', float, _D.max_chunk_age, 's, oldest observation stamp accepted',
          min=0.0, read_only=True, min_exclusive=True),
    Param('max_future_stamp', float, _D.max_future_stamp, 's, most a stamp may be ahead of '
          'the clock', min=0.0, read_only=True),
    Param('max_joint_state_age', float, _D.max_joint_state_age, 's (steady clock), oldest '
          'joint_states accepted; older: reject chunks and cancel the running goal',
          min=0.0, read_only=True, min_exclusive=True),
    Param('position_margin', float, _D.position_margin, 'rad kept from revolute URDF limits',
          min=0.0, read_only=True),
    Param('prismatic_position_margin', float, _D.prismatic_position_margin,
          'm kept from prismatic URDF limits', min=0.0, read_only=True),
    Param('position_limit_joints', 'str[]', [], 'joints whose position limits are overridden '
          '(within the URDF limits; no margin applied)', read_only=True),
    Param('position_limit_lower', 'float[]', [], 'override lower limits, one per '
          'position_limit_joints', read_only=True),
    Param('position_limit_upper', 'float[]', [], 'override upper limits, one per '
          'position_limit_joints', read_only=True),
    Param('max_step', 'float[]', list(_D.max_step), 'rad (m) largest change between '
          'consecutive points: one value or one per joint', min=0.0, read_only=True),
    Param('velocity_scale', float, _D.velocity_scale, 'fraction of the URDF velocity limits',
          min=0.0, max=1.0, read_only=True, min_exclusive=True),
    Param('acceleration_limits', 'float[]', list(_D.acceleration_limits), 'rad/s^2 (m/s^2): '
          'one value or one per joint', min=0.0, read_only=True),
    Param('jerk_limits', 'float[]', list(_D.jerk_limits), 'rad/s^3 (m/s^3), finite '
          'differences of the accelerations: one value or one per joint', min=0.0,
          read_only=True),
    Param('max_start_deviation', 'float[]', list(_D.max_start_deviation), 'rad (m) first '
          'point vs measured: one value or one per joint', min=0.0, read_only=True),
    Param('ee_max_rotation_step', float, _D.ee_max_rotation_step, 'rad between consecutive '
          'end-effector poses', min=0.0, read_only=True, min_exclusive=True),
    Param('ee_max_translation_step', float, _D.ee_max_translation_step, 'm between '
          'consecutive end-effector positions', min=0.0, read_only=True, min_exclusive=True),
    Param('ee_workspace_min', 'float[]', [], 'x, y, z (m, base frame) of the workspace box; '
          'empty: no box', read_only=True),
    Param('ee_workspace_max', 'float[]', [], 'x, y, z (m, base frame) of the workspace box',
          read_only=True),
    Param('ee_soft_translation', float, _D.ee_soft_translation, 'm from the measured pose '
          'beyond which a chunk needs confirmation', min=0.0, read_only=True, min_exclusive=True),
    Param('ee_hard_translation', float, _D.ee_hard_translation, 'm from the measured pose '
          'beyond which a chunk is rejected', min=0.0, read_only=True, min_exclusive=True),
    Param('disabled_checks', 'str[]', [], 'checks turned OFF (logged as a warning, shown in '
          'diagnostics); one of: ' + ', '.join(OPTIONAL_CHECKS), read_only=True),
    Param('cartesian_arms', 'str[]', [], 'arms that accept Cartesian chunks (end-effector '
          'poses, solved by IK here); empty: Cartesian chunks are rejected', read_only=True),
    Param('cartesian_ee_frames', 'str[]', [], 'end-effector frame of each cartesian_arms entry',
          read_only=True),
    Param('cartesian_gripper_joints', 'str[]', [], "gripper joint of each arm ('' for none), "
          'or empty for none at all', read_only=True),
    Param('ik_position_tolerance', float, _IK.position_tolerance, 'm, IK converged when the '
          'position error is at most this', min=0.0, read_only=True, min_exclusive=True),
    Param('ik_rotation_tolerance', float, _IK.rotation_tolerance, 'rad, IK converged when the '
          'rotation error is at most this', min=0.0, read_only=True, min_exclusive=True),
    Param('ik_max_iterations', int, _IK.max_iterations, 'IK iterations per point', min=1,
          read_only=True),
    Param('ik_damping', float, _IK.damping, 'damped least squares lambda^2', min=0.0,
          read_only=True, min_exclusive=True),
    Param('ik_max_iteration_step', float, _IK.max_iteration_step, 'rad (m), largest joint '
          'change in one IK iteration', min=0.0, read_only=True, min_exclusive=True),
    Param('ik_max_joint_jump', float, _IK.max_joint_jump, 'rad (m), largest joint change '
          'between consecutive IK solutions; more is a branch flip (rejected)', min=0.0,
          read_only=True, min_exclusive=True),
    Param('on_reject', str, 'hold', 'hold: cancel the running goal and latch a fault until '
          'safety/reset; skip: drop the chunk and let the running goal finish',
          choices=('hold', 'skip'), read_only=True),
    Param('confirm_timeout', float, 10.0, 's a chunk waits for confirmation (live, at most '
          '60 s, never while a rollout is armed: for chunks held from then on)', min=0.0,
          max=60.0, read_only=False, min_exclusive=True),
    Param('require_deadman', bool, True, 'motion needs the quest/joy deadman axis held',
          read_only=True),
    Param('deadman_axis', int, 3, 'quest/joy axis index of the deadman (grip)', min=0,
          read_only=True),
    Param('deadman_threshold', float, 0.5, 'deadman axis value above which it is held',
          min=-1.0, max=1.0, read_only=True),
    Param('estop_button', int, 1, 'quest/joy button index of the e-stop; -1: none', min=-1,
          read_only=True),
    Param('confirm_button', int, 0, 'quest/joy button index that confirms; -1: none', min=-1,
          read_only=True),
    Param('toggle_button', int, -1, "quest/joy button index of the Quest start/stop toggle: "
          "set it to policy_node's quest.toggle_button, and a debounced press while the "
          'rollout is live stops it here at once (as safety/stop); -1: off; not the e-stop or '
          'confirm button', min=-1, read_only=True),
    Param('toggle_debounce_time', float, 0.05, "s the toggle button must be stable (policy_node's "
          'quest.debounce_time)', min=0.0, max=2.0, read_only=True),
    Param('joy_timeout', float, 0.5, 's (steady) after which quest/joy is stale (deadman '
          'released); live within (0, 1] s, never while a rollout is armed (a longer one would '
          'trust a dead Quest link with the grip held)', min=0.0, max=1.0, read_only=False,
          min_exclusive=True),
    Param('watchdog_period', float, 0.02, 's between safety watchdog checks', min=0.001,
          max=1.0, read_only=True),
    Param('diagnostics_period', float, 1.0, 's between /diagnostics messages', min=0.05,
          read_only=True),
    Param('stall_timeout', float, 1.0, 's (steady clock): the gate not scheduled this long '
          '(its watchdog did not run: a stopped or starved process), or no joint_states this '
          'long, stops a live rollout (a new preflight and start are needed); 0: off (a '
          'warning is logged)', min=0.0, max=10.0, read_only=True),
    Param('stop_timeout', float, 1.0, 's safety/stop waits for the executor to confirm the '
          'hold (a goal in flight, then the cancel); longer: it reports failure', min=0.01,
          max=60.0, read_only=True),
    Param('auth_key_file', str, '', "the robot half's shared key (core/auth.py): every goal and "
          "heartbeat is signed with it and trajectory_server's must be the same file; mode "
          "0600, owned by this user. Empty: the user's default key "
          '($XDG_RUNTIME_DIR/egoroll/auth.key, created on first use); the launch files give a '
          'fresh key per launch', read_only=True),
]
