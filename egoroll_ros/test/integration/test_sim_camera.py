"""The installed sim_camera process: renders joint states into stamped rgb8 images."""

from geometry_msgs.msg import PointStamped
import numpy as np
import pytest
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from visualization_msgs.msg import Marker

from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME
from egoroll_ros.testing import wait_until

pytestmark = pytest.mark.integration
TOPIC = 'camera/scene/image_raw'
TARGET_RGB = (230, 20, 20)


def joint_state(stamp_sec: int, positions=HOME) -> JointState:
    msg = JointState()
    msg.header.stamp.sec = stamp_sec
    msg.header.stamp.nanosec = 250_000_000
    msg.name = list(DEMO_JOINTS)
    msg.position = [float(v) for v in positions]
    return msg


def pixels(img: Image) -> np.ndarray:
    return np.frombuffer(bytes(img.data), dtype=np.uint8).reshape(img.height, img.width, 3)


def target_centroid(img: Image) -> np.ndarray:
    ys, xs = np.nonzero(np.all(pixels(img) == TARGET_RGB, axis=2))
    assert xs.size > 0, 'no target disc in the image'
    return np.array([xs.mean(), ys.mean()])


@pytest.fixture
def camera(ros_graph, launcher):
    # noise 0: exact colours (the target disc); test_sensor_noise_... covers the noise
    launcher.start('sim_camera', 'sim_camera', params={'width': 128, 'height': 96,
                                                       'rate': 30.0, 'noise': 0.0},
                   wait_publishers=[TOPIC, 'sim/target_marker'],
                   wait_subscriptions=['joint_states', 'sim/target'])
    node = ros_graph.node('camera_tester')
    images = ros_graph.collect(node, Image, TOPIC)
    pub = node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
    ros_graph.wait_for_subscribers(pub)
    ros_graph.wait_for_publishers(images.subscription)
    return node, pub, images


def publish_until_image(pub, images, msg, timeout=10.0) -> Image:
    """Publish ``msg`` (best effort QoS) until an image with its stamp comes back."""
    want = (msg.header.stamp.sec, msg.header.stamp.nanosec)

    def got() -> bool:
        pub.publish(msg)
        return any((m.header.stamp.sec, m.header.stamp.nanosec) == want
                   for m in images.snapshot())

    wait_until(got, timeout, f'an image stamped {want}')
    return images.wait_for(lambda m: (m.header.stamp.sec, m.header.stamp.nanosec) == want,
                           timeout=1.0)


def test_joint_state_becomes_an_rgb8_image_with_its_stamp(camera):
    _, pub, images = camera
    img = publish_until_image(pub, images, joint_state(41))
    assert (img.width, img.height, img.encoding, img.step) == (128, 96, 'rgb8', 128 * 3)
    assert len(img.data) == 128 * 96 * 3
    assert img.header.frame_id == 'camera_optical_frame'
    assert np.any(np.all(pixels(img) == TARGET_RGB, axis=2))


def test_no_images_without_joint_states_and_images_follow_the_arm(camera):
    _, pub, images = camera
    assert images.snapshot() == []  # nothing rendered before a joint state came
    first = publish_until_image(pub, images, joint_state(50))
    moved = np.array(HOME)
    moved[0] += 0.4
    second = publish_until_image(pub, images, joint_state(51, moved))
    assert np.count_nonzero(np.any(pixels(first) != pixels(second), axis=2)) > 50


def test_target_moves_by_topic_and_by_parameter(camera, ros_graph):
    node, pub, images = camera
    markers = ros_graph.collect(node, Marker, 'sim/target_marker')
    before = target_centroid(publish_until_image(pub, images, joint_state(60)))

    target_pub = node.create_publisher(PointStamped, 'sim/target', 10)
    ros_graph.wait_for_subscribers(target_pub)
    point = PointStamped()
    point.header.frame_id = 'base_link'
    point.point.x, point.point.y, point.point.z = 0.3, -0.2, 0.35
    target_pub.publish(point)
    markers.wait_for(lambda m: abs(m.pose.position.y + 0.2) < 1e-9, timeout=10.0)
    by_topic = target_centroid(publish_until_image(pub, images, joint_state(61)))
    assert np.linalg.norm(by_topic - before) > 10

    client = node.create_client(SetParameters, '/sim_camera/set_parameters')
    assert client.wait_for_service(timeout_sec=10.0)
    value = ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY,
                           double_array_value=[0.45, 0.2, 0.15])
    future = client.call_async(SetParameters.Request(
        parameters=[Parameter(name='target', value=value)]))
    wait_until(future.done, 10.0, 'set_parameters reply')
    assert future.result().results[0].successful
    by_param = target_centroid(publish_until_image(pub, images, joint_state(62)))
    assert np.linalg.norm(by_param - by_topic) > 10

    bad = ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY,
                         double_array_value=[0.45, 0.2])
    future = client.call_async(SetParameters.Request(
        parameters=[Parameter(name='target', value=bad)]))
    wait_until(future.done, 10.0, 'set_parameters reply')
    assert not future.result().results[0].successful
    assert 'target' in future.result().results[0].reason


def test_sensor_noise_makes_frames_of_an_arm_at_rest_differ(ros_graph, launcher):
    # A real camera's frames differ by sensor noise; identical frames mean a frozen camera.
    launcher.start('sim_camera', 'sim_camera_noisy', params={'width': 64, 'height': 48,
                                                             'rate': 30.0, 'noise': 2.0},
                   wait_publishers=[TOPIC], wait_subscriptions=['joint_states'])
    node = ros_graph.node('noise_tester')
    images = ros_graph.collect(node, Image, TOPIC)
    pub = node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
    ros_graph.wait_for_subscribers(pub)
    ros_graph.wait_for_publishers(images.subscription)
    first = pixels(publish_until_image(pub, images, joint_state(70))).astype(int)
    second = pixels(publish_until_image(pub, images, joint_state(71))).astype(int)
    diff = np.abs(first - second)
    assert np.count_nonzero(diff) > diff.size // 2       # noise on most pixels
    assert diff.mean() < 5.0                              # and only noise: same scene


def test_missing_urdf_fails_at_start_naming_the_parameter(launcher, tmp_path):
    with pytest.raises(AssertionError, match="parameter 'urdf_path'") as info:
        launcher.start('sim_camera', 'sim_camera_bad',
                       params={'urdf_path': str(tmp_path / 'missing.urdf')},
                       wait_publishers=[TOPIC], timeout=20.0)
    assert 'exited with status 2' in str(info.value)
