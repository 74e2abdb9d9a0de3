"""egoroll evaluate with a Cartesian policy on a tiny synthetic bag: Cartesian errors per
horizon step (hand-checked by FK), joint errors from the gate's IK, omitted without IK."""

from __future__ import annotations

from pathlib import Path
import sys

import numpy as np
import pytest

from egoroll_ros.bag.evaluate import EvaluateOptions, evaluate
from egoroll_ros.bag.synth import write_episode
from egoroll_ros.core.gate import rotation_angles
from egoroll_ros.core.policy import CartesianArm, CartesianSpec
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME, demo_urdf_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cartesian_fakes import BACKEND, write_checkpoint  # noqa: E402, I001

H, DT, VEL = 4, 0.05, 0.1
SPEC = CartesianSpec((CartesianArm('arm', 'tool0', 'quat_xyzw', True),), state='ee_pose')


def policy_yaml(path: Path, urdf_path: str | None = None) -> Path:
    urdf = str(demo_urdf_path()) if urdf_path is None else urdf_path
    path.write_text(
        'policy_node:\n  ros__parameters:\n'
        f'    joints: [{", ".join(DEMO_JOINTS)}]\n'
        f"    policy.backend: '{BACKEND}'\n"
        '    query_frequency: 10.0\n'
        '    cartesian.arms: [arm]\n    cartesian.ee_frames: [tool0]\n'
        '    cartesian.gripper_joints: [gripper]\n'
        f"    urdf_path: '{urdf}'\n")
    return path


def _run(tmp_path, **ck):
    ep = write_episode(tmp_path / 'bag', duration=1.0, camera=None)
    cfg = policy_yaml(tmp_path / 'policy.yaml')
    ckpt = write_checkpoint(tmp_path / 'ck', SPEC, chunk_length=H, **ck)
    rep = evaluate(EvaluateOptions(bag=ep.path, config=cfg, checkpoint=ckpt,
                                   out_dir=tmp_path / 'out', urdf=demo_urdf_path(),
                                   plots=False), log=lambda s: None)
    return ep, rep


def test_cartesian_errors_per_step_match_fk_of_the_recording(tmp_path):
    ep, rep = _run(tmp_path)
    assert rep['action_space'] == 'cartesian'
    assert rep['gate_config'].endswith('safety_gate_cartesian.yaml')
    d = rep['decisions']
    assert d['chunks'] == 11 and d['accepted'] == 11, rep['chunk_list'][0]['summary']
    # The hold policy commands the pose measured at t0 for every point; the recording moves
    # on: the error of step k is the FK pose change between t0 and t0 + (k+1) DT.
    model = RobotModel.from_file(demo_urdf_path())
    q0 = np.array(HOME)
    vel = ep.velocity

    def pose(s):
        t, r = model.fk(['tool0'], DEMO_JOINTS, (q0 + vel * s)[None])
        return t[0, 0], r[0, 0]

    ce = rep['cartesian_error']
    for k in range(H):
        pos, rot = [], []
        for t0 in np.arange(11) * 0.1:
            if t0 + (k + 1) * DT > 1.0 + 1e-9:
                continue
            (pa, ra), (pb, rb) = pose(t0), pose(t0 + (k + 1) * DT)
            pos.append(np.linalg.norm(pa - pb))
            rot.append(float(rotation_angles(ra, rb)))
        step = ce['per_step'][k]
        # rel 1e-5: bag times are epoch seconds (float64 resolution ~0.2 us)
        assert step['points'] == len(pos)
        assert step['position_mae'] == pytest.approx(np.mean(pos), rel=1e-5, abs=1e-8)
        assert step['rotation_mae'] == pytest.approx(np.mean(rot), rel=1e-5, abs=1e-8)
    assert ce['per_step'][-1]['position_mae'] > ce['per_step'][0]['position_mae'] > 1e-3
    assert set(ce['per_arm']) == {'arm'}
    # Joint errors come from the gate's IK solution (the held measured joints).
    e = rep['action_error']
    assert e['chunks_without_joint_positions'] == 0 and 'IK' in e['note']
    for k, step in enumerate(e['per_step']):
        assert step['mae'] == pytest.approx(7 / 8 * VEL * (k + 1) * DT, abs=1e-5)


def test_joint_errors_are_omitted_for_chunks_that_fail_before_ik(tmp_path):
    far = [[2.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0, 0.02]] * H      # out of the workspace box
    _, rep = _run(tmp_path, mode='fixed', values=far)
    d = rep['decisions']
    assert d['accepted'] == 0 and d['chunks'] == 11
    assert 'ee_workspace' in d['rejections_by_check']
    e = rep['action_error']
    assert e['chunks_without_joint_positions'] == 11 and e['points_compared'] == 0
    assert e['mae'] is None
    assert rep['cartesian_error']['position']['mae'] > 1.0


def test_without_urdf_path_the_policy_takes_the_recorded_robot_description(tmp_path):
    """As the node does live: the bag's /robot_description serves the policy's FK too."""
    text = Path(demo_urdf_path()).read_text()
    ep = write_episode(tmp_path / 'bag', duration=1.0, camera=None, robot_description=text)
    ckpt = write_checkpoint(tmp_path / 'ck', SPEC, chunk_length=H)
    lines: list[str] = []
    rep = evaluate(EvaluateOptions(bag=ep.path, config=policy_yaml(tmp_path / 'p.yaml', ''),
                                   checkpoint=ckpt, out_dir=tmp_path / 'out', plots=False),
                   log=lines.append)
    assert any('policy URDF: /robot_description in the bag' in line for line in lines), lines
    d = rep['decisions']
    assert d['chunks'] == 11 and d['accepted'] == 11, rep['chunk_list'][0]['summary']
    # The same FK as with the file: the same errors as the urdf_path run.
    _, by_file = _run(tmp_path / 'file')
    assert rep['cartesian_error'] == by_file['cartesian_error']
