"""Bad bags give one clear BagError each (both storage formats), never a traceback."""

from pathlib import Path
import shutil
import subprocess

import pytest
from std_msgs.msg import String

from egoroll_ros.bag.reader import BagReader, absolute
from egoroll_ros.bag.synth import T0_NS, write_episode, write_messages
from egoroll_ros.errors import BagError
from egoroll_ros.testing import executable_path

STORAGES = ['mcap', 'sqlite3']


def _data_file(bag: Path) -> Path:
    return next(p for p in bag.iterdir() if p.suffix in ('.mcap', '.db3'))


@pytest.mark.parametrize('storage', STORAGES)
def test_a_good_bag_lists_topics_and_yields_every_message_in_time_order(tmp_path, storage):
    ep = write_episode(tmp_path / 'ep', storage, duration=0.5, joy_rate=20.0)
    with BagReader(ep.path) as bag:
        assert bag.info.storage == storage
        assert set(bag.info.topics) == {'/joint_states', '/camera/scene/image_raw',
                                        '/quest/joy'}
        assert bag.info.topics['/joint_states'].count == 51
        assert bag.info.duration == pytest.approx(0.5)
        msgs = list(bag.messages())
        times = [t for _, _, t, _ in msgs]
        assert times == sorted(times) and len(msgs) == 51 + 6 + 11
        only = list(bag.messages(['/quest/joy'], T0_NS, T0_NS + 100_000_000))
        assert {m[0] for m in only} == {'/quest/joy'} and len(only) == 2


def test_a_single_data_file_opens_too(tmp_path):
    ep = write_episode(tmp_path / 'ep', 'mcap', duration=0.1)
    with BagReader(_data_file(ep.path)) as bag:
        assert bag.info.storage == 'mcap'


def test_missing_bag(tmp_path):
    with pytest.raises(BagError, match='bag not found'):
        BagReader(tmp_path / 'nope')


def test_directory_without_metadata(tmp_path):
    (tmp_path / 'x').mkdir()
    with pytest.raises(BagError, match='no metadata.yaml'):
        BagReader(tmp_path / 'x')


@pytest.mark.parametrize('storage', STORAGES)
def test_unknown_storage_format(tmp_path, storage):
    ep = write_episode(tmp_path / 'ep', storage, duration=0.1)
    meta = ep.path / 'metadata.yaml'
    meta.write_text(meta.read_text().replace(f'storage_identifier: {storage}',
                                             'storage_identifier: bagfs'))
    with pytest.raises(BagError, match="unknown storage format 'bagfs'"):
        BagReader(ep.path)
    weird = tmp_path / 'episode.bag'
    weird.write_bytes(b'#ROSBAG V2.0')
    with pytest.raises(BagError, match="unknown storage format '.bag'"):
        BagReader(weird)


@pytest.mark.parametrize('storage', STORAGES)
def test_truncated_bag(tmp_path, storage):
    ep = write_episode(tmp_path / 'ep', storage, duration=0.5)
    f = _data_file(ep.path)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(BagError, match='truncated or corrupt'), BagReader(ep.path) as bag:
        list(bag.messages())


@pytest.mark.parametrize('storage', STORAGES)
def test_corrupt_bag(tmp_path, storage):
    ep = write_episode(tmp_path / 'ep', storage, duration=0.5)
    f = _data_file(ep.path)
    data = bytearray(f.read_bytes())
    for k in range(64, len(data), 61):
        data[k] ^= 0xA5
    f.write_bytes(bytes(data))
    with pytest.raises(BagError, match='truncated or corrupt'), BagReader(ep.path) as bag:
        list(bag.messages())


@pytest.mark.parametrize('storage', STORAGES)
def test_zero_length_data_file(tmp_path, storage):
    ep = write_episode(tmp_path / 'ep', storage, duration=0.1)
    _data_file(ep.path).write_bytes(b'')
    with pytest.raises(BagError, match='truncated or corrupt'):
        BagReader(ep.path)


@pytest.mark.parametrize('storage', STORAGES)
def test_empty_bag(tmp_path, storage):
    write_messages(tmp_path / 'empty', [], storage)
    with pytest.raises(BagError, match='the bag is empty'):
        BagReader(tmp_path / 'empty')


@pytest.mark.parametrize('storage', STORAGES)
def test_missing_topic_lists_what_the_bag_has(tmp_path, storage):
    ep = write_episode(tmp_path / 'ep', storage, duration=0.1, camera=None)
    with BagReader(ep.path) as bag, pytest.raises(BagError) as err:
        bag.require({'/joint_states': ['sensor_msgs/msg/JointState'],
                     '/camera/scene/image_raw': ['sensor_msgs/msg/Image']})
    text = str(err.value)
    assert 'topic /camera/scene/image_raw (sensor_msgs/msg/Image) is missing' in text
    assert 'The bag has: /joint_states (sensor_msgs/msg/JointState, 11)' in text


@pytest.mark.parametrize('storage', STORAGES)
def test_wrong_message_type(tmp_path, storage):
    write_messages(tmp_path / 'b', [('/joint_states', 'std_msgs/msg/String', T0_NS,
                                     String(data='not a joint state'))], storage)
    with BagReader(tmp_path / 'b') as bag, pytest.raises(BagError) as err:
        bag.require({'/joint_states': ['sensor_msgs/msg/JointState']})
    assert ('topic /joint_states has type std_msgs/msg/String, expected '
            'sensor_msgs/msg/JointState') in str(err.value)


def test_absolute_names():
    assert absolute('joint_states') == '/joint_states'
    assert absolute('/x/y', 'robot') == '/x/y'
    assert absolute('joint_states', '/robot/') == '/robot/joint_states'


def test_cli_prints_one_line_and_exits_2_for_a_bad_bag(tmp_path):
    ep = write_episode(tmp_path / 'ep', 'sqlite3', duration=0.2)
    shutil.copytree(ep.path, tmp_path / 'trunc')
    f = _data_file(tmp_path / 'trunc')
    f.write_bytes(f.read_bytes()[:300])
    egoroll = executable_path('egoroll')
    for cmd in (['replay', str(tmp_path / 'trunc')],
                ['evaluate', str(tmp_path / 'nope'), '--config', str(tmp_path / 'none.yaml')],
                ['evaluate', str(tmp_path / 'trunc'), '--config', str(tmp_path / 'none.yaml')],
                ['replay', str(ep.path), '--topics', '/camera/wrist/image_raw']):
        res = subprocess.run([egoroll, *cmd], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res
        assert 'Traceback' not in res.stderr
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and 'BagError' in lines[0], lines
    assert '/camera/wrist/image_raw' in lines[0] and '/joint_states' in lines[0]
