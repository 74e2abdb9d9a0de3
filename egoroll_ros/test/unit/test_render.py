"""The simulated camera's renderer: the image shows the arm's state and the target."""

import numpy as np
import pytest

from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.errors import ConfigError
from egoroll_ros.sim.demo_task import HOME, demo_urdf_path
from egoroll_ros.sim.render import BACKGROUND, TARGET_COLOR, Intrinsics, SceneRenderer

TARGET = (0.4, 0.15, 0.15)


@pytest.fixture(scope='module')
def renderer():
    return SceneRenderer(RobotModel.from_file(demo_urdf_path()),
                         Intrinsics.from_fov(224, 224, 50.0))


def is_target(pixel) -> bool:
    return tuple(int(c) for c in pixel) == TARGET_COLOR


def test_image_is_rgb8_of_the_configured_size():
    r = SceneRenderer(RobotModel.from_file(demo_urdf_path()), Intrinsics.from_fov(160, 120, 60))
    img = r.render(HOME, TARGET)
    assert img.shape == (120, 160, 3) and img.dtype == np.uint8


def test_image_changes_when_the_joints_change(renderer):
    a = renderer.render(HOME, TARGET)
    moved = np.array(HOME)
    moved[0] += 0.3  # shoulder_pan
    b = renderer.render(moved, TARGET)
    assert np.count_nonzero(np.any(a != b, axis=2)) > 200
    assert np.array_equal(a, renderer.render(HOME, TARGET))  # deterministic


def test_wrist_roll_and_gripper_are_visible(renderer):
    a = renderer.render(HOME, TARGET)
    for j, delta in ((6, 1.2), (7, 0.02)):  # wrist_roll, gripper
        q = np.array(HOME)
        q[j] += delta
        assert np.count_nonzero(np.any(renderer.render(q, TARGET) != a, axis=2)) > 5, j


def test_target_disc_is_drawn_where_the_target_projects(renderer):
    img = renderer.render(HOME, TARGET)
    u, v = renderer.target_pixel(TARGET)
    assert is_target(img[v, u])
    mask = np.all(img == TARGET_COLOR, axis=2)
    ys, xs = np.nonzero(mask)
    assert abs(xs.mean() - u) < 1.5 and abs(ys.mean() - v) < 1.5
    assert not np.any(np.all(renderer.render(HOME, None) == TARGET_COLOR, axis=2))


def test_image_changes_when_the_target_moves(renderer):
    other = (0.3, -0.2, 0.3)
    img = renderer.render(HOME, other)
    u0, v0 = renderer.target_pixel(TARGET)
    u1, v1 = renderer.target_pixel(other)
    assert (abs(u0 - u1) + abs(v0 - v1)) > 20
    assert is_target(img[v1, u1]) and not is_target(img[v0, u0])


def test_nearer_targets_look_bigger(renderer):
    near, far = (0.5, 0.2, 0.2), (0.25, -0.2, 0.2)
    area = [np.count_nonzero(np.all(renderer.render(HOME, t) == TARGET_COLOR, axis=2))
            for t in (near, far)]
    assert area[0] > area[1] > 0


def test_the_arm_hides_a_target_behind_it(renderer):
    # A point on the upper arm, pushed 10 cm away from the camera: hidden by the arm.
    trans, _ = renderer.model.fk(['elbow'], renderer.joint_names, np.array([HOME]))
    elbow = trans[0, 0]
    behind = elbow + 0.10 * (elbow - renderer.camera_position) / np.linalg.norm(
        elbow - renderer.camera_position)
    u, v = renderer.target_pixel(behind)
    img = renderer.render(HOME, behind)
    assert not is_target(img[v, u]) and tuple(img[v, u]) != BACKGROUND


def test_bimanual_robot_renders_both_arms():
    model = RobotModel.from_file(demo_urdf_path().with_name('demo_bimanual.urdf'))
    r = SceneRenderer(model, Intrinsics.from_fov(224, 224, 50.0))
    q = np.array(HOME * 2)
    base = r.render(q, None)
    for arm in (0, 8):
        moved = q.copy()
        moved[arm] += 0.5
        assert np.count_nonzero(np.any(r.render(moved, None) != base, axis=2)) > 100


def test_bad_inputs_are_refused(renderer):
    with pytest.raises(ValueError, match='8 joint positions'):
        renderer.render(HOME[:7], TARGET)
    with pytest.raises(ValueError, match='finite'):
        renderer.render((float('nan'),) + HOME[1:], TARGET)
    with pytest.raises(ValueError, match='target'):
        renderer.render(HOME, (0.1, 0.2))
    with pytest.raises(ConfigError, match='nope'):
        SceneRenderer(renderer.model, renderer.intrinsics, camera_frame='nope')
    with pytest.raises(ConfigError, match='fixed'):
        SceneRenderer(renderer.model, renderer.intrinsics, camera_frame='tool0')
    with pytest.raises(ConfigError, match='field of view'):
        Intrinsics.from_fov(224, 224, 0.0)
