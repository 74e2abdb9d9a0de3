"""The recorder writes what the graph published, readable by rosbags, our types included."""

import numpy as np
import pytest
from rclpy.serialization import deserialize_message
from rosbags.rosbag2 import Reader
from sensor_msgs.msg import JointState

from egoroll_interfaces.msg import ActionChunk
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.errors import BagError
from egoroll_ros.ros.bagio import BagRecorder, message_class, typestore
from egoroll_ros.ros.convert import chunk_from_msg, chunk_to_msg
from egoroll_ros.testing import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_recorded_bag_holds_every_message_in_order(ros_graph, tmp_path, storage):
    node = ros_graph.node('recorder_test')
    bag = tmp_path / 'episode'
    rec = BagRecorder(node, bag, [('joint_states', 'sensor_msgs/msg/JointState'),
                                  ('policy/chunk', 'egoroll_interfaces/msg/ActionChunk')],
                      storage=storage)
    js_pub = node.create_publisher(JointState, 'joint_states', 10)
    chunk_pub = node.create_publisher(ActionChunk, 'policy/chunk', 10)
    ros_graph.wait_for_subscribers(js_pub)
    ros_graph.wait_for_subscribers(chunk_pub)
    for i in range(20):
        js_pub.publish(JointState(name=['a', 'b'], position=[float(i), -float(i)]))
    traj = JointTrajectoryData(('a', 'b'), np.array([0.1, 0.2]), np.array([[1.0, 2.0],
                                                                            [3.0, 4.0]]),
                               stamp=12.5)
    chunk_pub.publish(chunk_to_msg(Chunk(7, 'f' * 64, 12.5, traj)))
    wait_until(lambda: rec.counts['joint_states'] == 20 and rec.counts['policy/chunk'] == 1,
               10.0, 'every message recorded')
    rec.close()

    with Reader(bag) as reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        assert topics == {'/joint_states': 'sensor_msgs/msg/JointState',
                          '/policy/chunk': 'egoroll_interfaces/msg/ActionChunk'}
        positions, chunks = [], []
        for conn, _, raw in reader.messages():
            msg = deserialize_message(raw, message_class(conn.msgtype))
            if conn.topic == '/joint_states':
                positions.append(msg.position[0])
            else:
                chunks.append(chunk_from_msg(msg))
    assert positions == [float(i) for i in range(20)]
    assert chunks[0].sequence == 7 and chunks[0].policy_id == 'f' * 64
    np.testing.assert_array_equal(chunks[0].trajectory.positions, traj.positions)


def test_typestore_knows_egoroll_interfaces():
    store = typestore()
    assert 'egoroll_interfaces/msg/ActionChunk' in store.fielddefs
    assert 'egoroll_interfaces/msg/GateVerdict' in store.fielddefs


def test_recorder_refuses_to_overwrite_a_bag(ros_graph, tmp_path):
    node = ros_graph.node('recorder_refuse')
    (tmp_path / 'exists').mkdir()
    with pytest.raises(BagError, match='already exists'):
        BagRecorder(node, tmp_path / 'exists', [])
