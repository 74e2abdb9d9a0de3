"""policy/markers: the predicted end-effector path and a status text, checked structurally."""

import numpy as np
import pytest
from visualization_msgs.msg import Marker, MarkerArray

from egoroll_interfaces.msg import GateVerdict
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.ros.markers import NAMESPACE_PATH, NAMESPACE_TEXT, VERDICT_COLORS, ChunkMarkers
from egoroll_ros.sim.demo_task import DEMO_JOINTS, HOME, demo_urdf_path
from egoroll_ros.testing import wait_until

pytestmark = pytest.mark.integration


def _chunk() -> np.ndarray:
    q0 = np.asarray(HOME)
    return q0 + np.outer(np.linspace(0.01, 0.2, 20), np.r_[np.ones(7) * 0.5, 0.0])


def test_markers_draw_the_predicted_path_in_urdf_frames_and_colour_the_gate_state(ros_graph):
    node = ros_graph.node('markers_owner')
    markers = ChunkMarkers(node, ['tool0'], urdf_path=str(demo_urdf_path()))
    probe = ros_graph.node('markers_probe')
    got = ros_graph.collect(probe, MarkerArray, 'policy/markers')
    verdicts = probe.create_publisher(GateVerdict, 'safety/verdict', 10)
    ros_graph.wait_for_subscribers(verdicts)
    ros_graph.wait_for_publishers(got.subscription)

    markers.publish(DEMO_JOINTS, np.asarray(HOME), _chunk(), 'RUNNING, chunk 7')
    first = got.wait_for(timeout=10.0)
    model = RobotModel.from_file(demo_urdf_path())
    paths = [m for m in first.markers if m.ns == NAMESPACE_PATH]
    texts = [m for m in first.markers if m.ns == NAMESPACE_TEXT]
    assert len(paths) == 1 and len(texts) == 1
    path = paths[0]
    assert path.type == Marker.LINE_STRIP and model.has_frame(path.header.frame_id)
    pts = np.array([[p.x, p.y, p.z] for p in path.points])
    assert pts.shape == (21, 3) and np.all(np.isfinite(pts)), 'measured pose + 20 points'
    trans, _ = model.fk(['tool0'], DEMO_JOINTS, _chunk())
    np.testing.assert_allclose(pts[1:], trans[0], atol=1e-9)
    assert 'RUNNING' in texts[0].text and 'no verdict' in texts[0].text
    assert model.has_frame(texts[0].header.frame_id)

    for accepted, state in ((True, 'accepted'), (False, 'rejected')):
        verdicts.publish(GateVerdict(sequence=7, accepted=accepted))
        wait_until(lambda a=accepted: markers._verdict is not None
                   and markers._verdict.accepted == a, 5.0, 'verdict seen')
        count = len(got.snapshot())
        markers.publish(DEMO_JOINTS, np.asarray(HOME), _chunk(), 'RUNNING')
        msg = got.wait_for(lambda m: True, timeout=5.0, start=count)
        text = [m for m in msg.markers if m.ns == NAMESPACE_TEXT][0]
        assert state in text.text
        assert (text.color.r, text.color.g, text.color.b) == pytest.approx(VERDICT_COLORS[state])


def test_without_frames_only_the_text_is_drawn(ros_graph):
    node = ros_graph.node('markers_text_only')
    markers = ChunkMarkers(node, [])
    got = ros_graph.collect(ros_graph.node('markers_probe2'), MarkerArray, 'policy/markers')
    ros_graph.wait_for_publishers(got.subscription)
    markers.publish(DEMO_JOINTS, None, _chunk(), 'READY')
    msg = got.wait_for(timeout=10.0)
    assert [m.ns for m in msg.markers] == [NAMESPACE_TEXT]
