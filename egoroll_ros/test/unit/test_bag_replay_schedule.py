"""The pure replay schedule: window, rate, loop, topic selection and remapping."""

from pathlib import Path

import pytest

from egoroll_ros.bag.reader import BagInfo, TopicInfo
from egoroll_ros.bag.replay import ReplayOptions, Schedule, parse_remaps, topic_map
from egoroll_ros.errors import BagError, ConfigError

S = 1_000_000_000
T0 = 50 * S


def info() -> BagInfo:
    topics = {'/joint_states': TopicInfo('/joint_states', 'sensor_msgs/msg/JointState', 11),
              '/camera/scene/image_raw': TopicInfo('/camera/scene/image_raw',
                                                   'sensor_msgs/msg/Image', 3)}
    return BagInfo(Path('b'), 'mcap', topics, T0, T0 + 1 * S, 14)


def test_offsets_keep_the_recorded_spacing_scaled_by_the_rate():
    for rate in (0.5, 1.0, 4.0):
        sch = Schedule(T0, T0 + S, ReplayOptions(rate=rate))
        msgs = [(T0 + k * S // 10, '/joint_states') for k in range(11)]
        plan = sch.plan(msgs, {'/joint_states': '/joint_states'})
        assert [round(o, 9) for o, _, _ in plan] == [round(k * 0.1 / rate, 9)
                                                     for k in range(11)]
        assert sch.length == pytest.approx(1.0 / rate)


def test_start_and_duration_select_a_window():
    sch = Schedule(T0, T0 + S, ReplayOptions(start=0.3, duration=0.4))
    msgs = [(T0 + k * S // 10, '/joint_states') for k in range(11)]
    plan = sch.plan(msgs, {'/joint_states': '/js'})
    assert [t for _, _, t in plan] == [T0 + k * S // 10 for k in (3, 4, 5, 6)]
    assert plan[0][0] == 0.0 and plan[0][1] == '/js'
    with pytest.raises(ConfigError, match='--start 2: the bag lasts only 1.000 s'):
        Schedule(T0, T0 + S, ReplayOptions(start=2.0))


def test_loop_iterations_follow_each_other_with_the_usual_spacing():
    sch = Schedule(T0, T0 + S, ReplayOptions(loop=True), count=11)
    assert sch.offset(T0, 1) == pytest.approx(1.1)      # span 1.0 + mean spacing 0.1
    assert sch.offset(T0 + S, 1) == pytest.approx(2.1)
    assert sch.bag_time(1.15, 1) == T0 + S // 20
    timed = Schedule(T0, T0 + S, ReplayOptions(loop=True, duration=0.5, rate=2.0))
    assert timed.offset(T0, 2) == pytest.approx(0.5)


def test_options_are_validated():
    for kwargs, opt in (({'rate': 0.0}, '--rate'), ({'rate': float('nan')}, '--rate'),
                        ({'start': -1.0}, '--start'), ({'duration': 0.0}, '--duration')):
        with pytest.raises(ConfigError, match=opt):
            ReplayOptions(**kwargs)


def test_topics_and_remaps():
    assert parse_remaps(['joint_states:=/robot/joint_states']) == {
        '/joint_states': '/robot/joint_states'}
    with pytest.raises(ConfigError, match='FROM:=TO'):
        parse_remaps(['/a=/b'])
    m = topic_map(info(), ReplayOptions(topics=('joint_states',),
                                        remap={'/joint_states': '/r/joint_states'}))
    assert m == {'/joint_states': '/r/joint_states'}
    assert set(topic_map(info(), ReplayOptions())) == {'/joint_states',
                                                       '/camera/scene/image_raw'}
    with pytest.raises(BagError, match=r'no topic /quest/joy in the bag\. The bag has: '
                                       r'/camera/scene/image_raw'):
        topic_map(info(), ReplayOptions(topics=('/quest/joy',)))
    with pytest.raises(BagError, match='different types'):
        topic_map(info(), ReplayOptions(remap={'/camera/scene/image_raw':
                                               '/replay/joint_states'}))
    # By default the recorded joint_states is published away from the live name.
    assert topic_map(info(), ReplayOptions())['/joint_states'] == '/replay/joint_states'


def test_only_sensor_topics_are_replayed_by_default():
    from egoroll_ros.bag.replay import is_sensor_topic
    assert is_sensor_topic('/camera/wrist/image_raw', 'sensor_msgs/msg/Image')
    assert is_sensor_topic('/arm1/joint_states', 'sensor_msgs/msg/JointState')
    for topic, msgtype in (('/quest/joy', 'sensor_msgs/msg/Joy'),
                           ('/policy/chunk', 'egoroll_interfaces/msg/ActionChunk'),
                           ('/executor/commanded', 'sensor_msgs/msg/JointState'),
                           ('/safety/verdict', 'egoroll_interfaces/msg/GateVerdict'),
                           ('/robot_description', 'std_msgs/msg/String'),
                           ('/arm1/quest/image', 'sensor_msgs/msg/Image'),
                           ('/clock', 'rosgraph_msgs/msg/Clock')):
        assert not is_sensor_topic(topic, msgtype), topic
