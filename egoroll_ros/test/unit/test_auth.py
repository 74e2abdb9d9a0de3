"""The robot half's shared key and the HMAC of goals and heartbeats (core/auth.py, issue 23.4)."""

from __future__ import annotations

import os
from pathlib import Path
import stat

import numpy as np
import pytest

from egoroll_ros.core import auth
from egoroll_ros.core.auth import (
    GOAL_EPOCH_WINDOW,
    HeartbeatAuthenticator,
    Point,
    goal_tag,
    heartbeat_tag,
    load_key,
    trajectory_digest,
)
from egoroll_ros.errors import ConfigError

pytestmark = pytest.mark.safety  # who may move the arm: never rerun

KEY = bytes(range(32))


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """XDG_RUNTIME_DIR in a fresh directory of the test's."""
    d = tmp_path / 'run'
    d.mkdir(mode=0o700)
    monkeypatch.setenv('XDG_RUNTIME_DIR', str(d))
    return d


# ----- the key file ---------------------------------------------------------------------------
def test_the_default_key_is_created_once_mode_0600_in_a_private_directory(runtime):
    key, path = load_key('')
    assert path == runtime / 'egoroll' / 'auth.key'
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert len(key) == auth.KEY_BYTES
    assert load_key('') == (key, path)          # the same key for every node of this user


def test_a_launch_key_is_fresh_and_private(runtime):
    a, b = auth.launch_key_file(), auth.launch_key_file()
    assert a != b and load_key(a)[0] != load_key(b)[0]
    assert stat.S_IMODE(os.stat(a).st_mode) == 0o600


@pytest.mark.parametrize('mode', [0o640, 0o604, 0o660, 0o606])
def test_a_key_file_others_can_read_or_write_is_refused(tmp_path, mode):
    f = tmp_path / 'k'
    f.write_text(KEY.hex())
    f.chmod(mode)
    with pytest.raises(ConfigError, match=f'mode {mode:o}.*chmod 600'):
        load_key(f)


def test_a_symbolic_link_a_missing_file_a_short_or_non_hex_key_are_refused(tmp_path):
    good = tmp_path / 'good'
    good.write_text(KEY.hex())
    good.chmod(0o600)
    link = tmp_path / 'link'
    link.symlink_to(good)
    with pytest.raises(ConfigError, match='symbolic link is refused'):
        load_key(link)
    with pytest.raises(ConfigError, match='cannot open'):
        load_key(tmp_path / 'missing')
    short = tmp_path / 'short'
    short.write_text('ab' * 8)
    short.chmod(0o600)
    with pytest.raises(ConfigError, match='fewer than 16'):
        load_key(short)
    text = tmp_path / 'text'
    text.write_text('not a key at all')
    text.chmod(0o600)
    with pytest.raises(ConfigError, match='hex key'):
        load_key(text)
    assert load_key(good)[0] == KEY


def test_a_key_directory_others_can_enter_is_refused(runtime):
    (runtime / 'egoroll').mkdir(mode=0o755)
    os.chmod(runtime / 'egoroll', 0o755)
    with pytest.raises(ConfigError, match='other users can enter it'):
        load_key('')


# ----- tags -----------------------------------------------------------------------------------
def _points(pos: np.ndarray) -> list[Point]:
    return [Point(0, 50_000_000 * (i + 1), row.tolist(), [0.1] * len(row))
            for i, row in enumerate(pos)]


def _digest(pos: np.ndarray, names=('a', 'b'), stamp=(10, 5)) -> bytes:
    return trajectory_digest(list(names), _points(pos), stamp)


def test_the_trajectory_digest_covers_every_bit_of_the_trajectory():
    pos = np.array([[0.1, 0.2], [0.3, 0.4]])
    d = _digest(pos)
    nudged = pos.copy()
    nudged[1, 0] = np.nextafter(nudged[1, 0], 1.0)       # one ulp
    assert _digest(nudged) != d
    assert _digest(pos, names=('b', 'a')) != d
    assert _digest(pos, stamp=(10, 6)) != d
    assert _digest(pos[:1]) != d
    assert trajectory_digest(['a', 'b'], _points(pos), (10, 5), frame_id='x') != d
    moved = _points(pos)
    moved[0] = Point(0, 50_000_001, moved[0].positions, moved[0].velocities)
    assert trajectory_digest(['a', 'b'], moved, (10, 5)) != d
    assert _digest(pos.copy()) == d


def _hb(a: HeartbeatAuthenticator, now: float, boot: int, counter: int, allowed: bool = True,
        key: bytes = KEY, change: dict | None = None) -> str | None:
    fields = dict(boot_id=boot, counter=counter, stamp=(int(now), 0), state='ok' if allowed
                  else 'estop', motion_allowed=allowed, fence=3, detail='')
    tag = heartbeat_tag(key, **fields)
    fields.update(change or {})
    return a.heartbeat(now, tag=tag, **fields)


def _goal(a: HeartbeatAuthenticator, now: float, boot: int, counter: int, seq: int = 7,
          key: bytes = KEY, change: dict | None = None) -> str | None:
    fields = dict(sequence=seq, source='/safety_gate', boot_id=boot, counter=counter,
                  digest=_digest(np.zeros((2, 2))))
    tag = goal_tag(key, **fields)
    fields.update(change or {})
    return a.goal(now, tag=tag, **fields)


def test_a_heartbeat_is_honoured_only_with_its_own_tag():
    a = HeartbeatAuthenticator(KEY, 0.25)
    assert _hb(a, 1.0, boot=5, counter=1) is None
    for change in ({'motion_allowed': False}, {'state': 'ok!'}, {'fence': 4},
                   {'counter': 3}, {'stamp': (2, 0)}, {'detail': 'x'}, {'boot_id': 6},
                   {'robot_model': 'ab' * 32}):
        assert 'does not verify' in _hb(a, 1.0, boot=5, counter=2, change=change), change
    assert 'does not verify' in _hb(a, 1.0, boot=5, counter=2, key=b'x' * 32)
    assert 'does not verify' in a.heartbeat(1.0, tag=b'', boot_id=5, counter=2, stamp=(1, 0),
                                            state='ok', motion_allowed=True, fence=3)
    assert a.refused_heartbeats == 10 and a.counter == 1


def test_a_heartbeat_sent_again_or_an_older_one_is_a_replay():
    a = HeartbeatAuthenticator(KEY, 0.25)
    assert _hb(a, 1.0, boot=5, counter=1, allowed=True) is None
    assert _hb(a, 1.02, boot=5, counter=2, allowed=False) is None     # the e-stop
    assert 'replay' in _hb(a, 1.04, boot=5, counter=1, allowed=True)  # "allowed" again
    assert 'replay' in _hb(a, 1.04, boot=5, counter=2, allowed=False)
    assert _hb(a, 1.06, boot=5, counter=3, allowed=False) is None


def test_another_gate_is_refused_while_one_lives_and_a_replaced_one_never_returns():
    a = HeartbeatAuthenticator(KEY, 0.25)
    assert _hb(a, 1.0, boot=5, counter=100) is None
    assert 'while boot 5 is alive' in _hb(a, 1.1, boot=9, counter=1)
    assert _hb(a, 1.2, boot=5, counter=101) is None
    # boot 5 silent for heartbeat_timeout: a restarted gate takes over, counters from 1
    assert _hb(a, 1.46, boot=9, counter=1) is None
    assert a.boot == 9
    # boot 5's heartbeats recorded and sent again, even after boot 9 went silent
    assert 'replaced' in _hb(a, 1.47, boot=5, counter=102)
    assert 'replaced' in _hb(a, 5.0, boot=5, counter=103)
    assert _hb(a, 5.0, boot=9, counter=2) is None


def test_a_goal_must_carry_its_own_tag_and_the_current_boot():
    a = HeartbeatAuthenticator(KEY, 0.25)
    assert 'none yet' in _goal(a, 1.0, boot=5, counter=0)      # no heartbeat heard yet
    assert _hb(a, 1.0, boot=5, counter=1) is None
    assert _goal(a, 1.0, boot=5, counter=1) is None
    for change in ({'sequence': 8}, {'source': '/other'}, {'counter': 2}, {'boot_id': 6},
                   {'digest': _digest(np.ones((2, 2)))}):
        assert 'does not verify' in _goal(a, 1.0, boot=5, counter=1, change=change), change
    assert 'does not verify' in _goal(a, 1.0, boot=5, counter=1, key=b'y' * 32)
    assert 'not the current one' in _goal(a, 1.0, boot=6, counter=1)
    assert a.refused_goals == 8


def test_a_goal_from_before_the_executor_heard_the_boot_or_held_back_is_a_replay():
    a = HeartbeatAuthenticator(KEY, 0.25)
    # an executor (re)started while gate boot 5 is at heartbeat 1000
    assert _hb(a, 1.0, boot=5, counter=1000) is None
    assert 'replay' in _goal(a, 1.0, boot=5, counter=900)     # recorded before the restart
    assert _goal(a, 1.0, boot=5, counter=999) is None         # sent as heartbeat 1000 left
    assert _goal(a, 1.0, boot=5, counter=1003) is None        # its heartbeat not here yet
    for c in range(1001, 1001 + GOAL_EPOCH_WINDOW + 1):
        assert _hb(a, 1.0 + 0.02 * (c - 1000), boot=5, counter=c) is None
    assert 'held back' in _goal(a, 7.0, boot=5, counter=1000)
    assert _goal(a, 7.0, boot=5, counter=1001) is None


def test_without_heartbeat_supervision_only_the_tag_is_checked():
    a = HeartbeatAuthenticator(KEY, 0.0)
    assert _goal(a, 1.0, boot=5, counter=0) is None
    assert 'does not verify' in _goal(a, 1.0, boot=5, counter=0, change={'sequence': 9})


def test_nodes_creating_the_default_key_at_once_all_read_one_whole_key(runtime):
    """The default key is linked into place whole: processes racing to create it never read
    it empty or half written, and all end up with the same key."""
    import multiprocessing as mp

    ctx = mp.get_context('spawn')
    with ctx.Pool(6) as pool:
        keys = pool.map(_load_default_hex, range(12))
    assert len(set(keys)) == 1 and len(bytes.fromhex(keys[0])) == auth.KEY_BYTES
    assert [p.name for p in (runtime / 'egoroll').iterdir()] == ['auth.key']


def _load_default_hex(_i: int) -> str:
    return load_key('')[0].hex()
