"""The robot half's shared secret: only the safety gate's goals and heartbeats move the arm.

The gate and trajectory_server always run on one computer (the robot half). They share a key
that no other process needs: a file only the user can read, generated per launch
(:func:`launch_key_file`, the launch files and ``egoroll demo``) or given by path
(``auth_key_file``); a node started without one uses the user's own default key
(:func:`default_key_path`, created on first use). The key never goes on the wire.

The gate tags every heartbeat and every goal with an HMAC-SHA256 (Python's :mod:`hmac`) under
the key; trajectory_server executes only goals and honours only heartbeats whose tag verifies,
and refuses replays (:class:`HeartbeatAuthenticator`):

- a heartbeat's tag covers its boot id (random per gate start), counter, stamp, state,
  motion_allowed, fence_sequence, detail and the robot model's hash; within one boot the
  counter must rise (an old heartbeat sent again is refused), and a boot that was replaced
  never comes back;
- a goal's tag covers its sequence, source, boot id and heartbeat counter (the "heartbeat
  epoch" it was sent in), the trajectory's stamp and a digest of the whole trajectory (joint
  names, every point's time, positions, velocities, accelerations and efforts, bit for bit);
  it must belong to the current boot and name a recent heartbeat of it (not one from before
  this executor first heard the boot), so a goal recorded earlier and sent again after a
  restart of the executor (which forgets the sequences it saw) is refused; within one run of
  the executor a goal sent again is refused by its sequence (OLD_SEQUENCE) and after a stop by
  the motion fence (FENCED).

Pure (no rclpy): the nodes convert their messages to the plain values these functions take.
What this does not cover (docs/executor.md): a process of the same user can read the key file;
DDS traffic is not encrypted or hidden (SROS2 is the network-level layer).
"""

from __future__ import annotations

import atexit
from collections import deque
from collections.abc import Iterable, Sequence
import contextlib
from dataclasses import dataclass
import hashlib
import hmac
import os
from pathlib import Path
import secrets
import stat
import struct
import tempfile

from egoroll_ros.errors import ConfigError

#: Bytes of key material in a key file (written as hex, one line).
KEY_BYTES = 32
#: Fewest bytes a key file given by path must hold.
MIN_KEY_BYTES = 16
TAG_BYTES = 32          # HMAC-SHA256
_GOAL = b'egoroll-goal-v1\0'
_HEARTBEAT = b'egoroll-heartbeat-v1\0'
#: A goal naming a heartbeat more than this many before the newest received is refused (5 s
#: of heartbeats at the gate's 20 ms watchdog period: a goal held back, or recorded and sent
#: again). A goal naming a heartbeat not received yet is authentic (the gate sends heartbeats
#: and goals on different DDS writers: they cross); the executor bounds what that claim buys
#: (core/executor.py HEARTBEAT_LEAD).
GOAL_EPOCH_WINDOW = 250
#: Replaced boots remembered (never accepted again).
RETIRED_BOOTS = 256


def key_dir() -> Path:
    """The user's directory for egoroll keys: ``$XDG_RUNTIME_DIR/egoroll`` (a per-user tmpfs
    that only the user can enter), else ``<tmp>/egoroll-<uid>``; created mode 0700, and
    refused when it exists but belongs to another user or others can enter it.

    Raises:
        ConfigError: the directory cannot be made safe.
    """
    runtime = os.environ.get('XDG_RUNTIME_DIR', '')
    base = Path(runtime) / 'egoroll' if runtime and Path(runtime).is_dir() else \
        Path(tempfile.gettempdir()) / f'egoroll-{os.getuid()}'
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(base)
    except OSError as exc:
        raise ConfigError(f'auth key directory {base}: {exc}') from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise ConfigError(f'auth key directory {base} is not a directory owned by this user '
                          f'(uid {os.getuid()}): refusing to keep a key there')
    if st.st_mode & 0o077:
        raise ConfigError(f'auth key directory {base} has mode {st.st_mode & 0o777:o}: other '
                          'users can enter it (chmod 700, or remove it)')
    return base


def default_key_path() -> Path:
    """The key a node uses when ``auth_key_file`` is empty: the user's own (one per user)."""
    return key_dir() / 'auth.key'


def _write_new_key(path: Path) -> None:
    """Create ``path`` (it must not exist: FileExistsError) mode 0600 holding a fresh random
    key. Written to a private temporary file first and linked into place, so no reader ever
    sees the file empty or half written (two nodes creating the default key at once)."""
    fd, tmp = tempfile.mkstemp(prefix='.key-', dir=path.parent)   # mode 0600
    try:
        with os.fdopen(fd, 'w') as fh:
            fh.write(secrets.token_hex(KEY_BYTES) + '\n')
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)          # atomic; FileExistsError when another process won
    finally:
        os.unlink(tmp)


def launch_key_file() -> Path:
    """A fresh key for one launch (a new file in :func:`key_dir`, mode 0600), removed when
    this process exits.

    Raises:
        ConfigError: the key directory cannot be made safe, or the file cannot be written.
    """
    base = key_dir()
    path = base / f'launch-{os.getpid()}-{secrets.token_hex(6)}.key'
    try:
        _write_new_key(path)
    except OSError as exc:
        raise ConfigError(f'auth key file {path}: cannot create it ({exc})') from None
    atexit.register(_remove, path)
    return path


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def load_key(path: str | Path = '') -> tuple[bytes, Path]:
    """The key in ``path`` (empty: :func:`default_key_path`, created when absent) and the path.

    The file must be a regular file (not a link) owned by this user that no one else can read
    or write, holding at least :data:`MIN_KEY_BYTES` bytes as hex.

    Raises:
        ConfigError: naming the file and what is wrong with it.
    """
    p = Path(path) if str(path) else default_key_path()
    if not str(path):
        try:
            _write_new_key(p)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ConfigError(f'auth key file {p}: cannot create it ({exc})') from None
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0))
    except OSError as exc:
        raise ConfigError(f'auth key file {p}: cannot open it ({exc.strerror}); a symbolic '
                          'link is refused') from None
    with os.fdopen(fd) as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f'auth key file {p} is not a regular file')
        if st.st_uid != os.getuid():
            raise ConfigError(f'auth key file {p} belongs to uid {st.st_uid}, not this user '
                              f'({os.getuid()})')
        if st.st_mode & 0o077:
            raise ConfigError(f'auth key file {p} has mode {st.st_mode & 0o777:o}: others can '
                              'read or write it (chmod 600)')
        text = fh.read(4096).strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ConfigError(f'auth key file {p} does not hold a hex key') from None
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f'auth key file {p} holds {len(key)} bytes of key, fewer than '
                          f'{MIN_KEY_BYTES}')
    return key, p


def key_id(key: bytes) -> str:
    """A short name of a key for logs and diagnostics (not the key: a hash of it)."""
    return hashlib.sha256(b'egoroll-key-id\0' + key).hexdigest()[:12]


@dataclass(frozen=True)
class Point:
    """One trajectory point as plain values (time in sec/nanosec, as on the wire)."""

    sec: int
    nanosec: int
    positions: Sequence[float]
    velocities: Sequence[float] = ()
    accelerations: Sequence[float] = ()
    effort: Sequence[float] = ()


def _floats(values: Sequence[float]) -> bytes:
    return struct.pack(f'<I{len(values)}d', len(values), *values)


def _text(s: str) -> bytes:
    b = s.encode()
    return struct.pack('<I', len(b)) + b


def trajectory_digest(joint_names: Sequence[str], points: Iterable[Point],
                      stamp: tuple[int, int], frame_id: str = '') -> bytes:
    """SHA-256 over a trajectory, exactly (every float bit for bit, lengths included)."""
    h = hashlib.sha256()
    h.update(struct.pack('<qI', int(stamp[0]), int(stamp[1])) + _text(frame_id))
    h.update(struct.pack('<I', len(joint_names)))
    for name in joint_names:
        h.update(_text(name))
    n = 0
    for pt in points:
        n += 1
        h.update(struct.pack('<qI', int(pt.sec), int(pt.nanosec)))
        for values in (pt.positions, pt.velocities, pt.accelerations, pt.effort):
            h.update(_floats(values))
    h.update(struct.pack('<I', n))
    return h.digest()


def goal_tag(key: bytes, *, sequence: int, source: str, boot_id: int, counter: int,
             digest: bytes) -> bytes:
    """The HMAC of a goal (see the module docstring for what it covers)."""
    msg = _GOAL + struct.pack('<QQQ', sequence, boot_id, counter) + _text(source) + digest
    return hmac.new(key, msg, hashlib.sha256).digest()


def heartbeat_tag(key: bytes, *, boot_id: int, counter: int, stamp: tuple[int, int],
                  state: str, motion_allowed: bool, fence: int, detail: str = '',
                  robot_model: str = '') -> bytes:
    """The HMAC of a heartbeat (see the module docstring for what it covers)."""
    msg = _HEARTBEAT + struct.pack('<QQqIQ?', boot_id, counter, int(stamp[0]), int(stamp[1]),
                                   fence, bool(motion_allowed)) + _text(state) + _text(detail) \
        + _text(robot_model)
    return hmac.new(key, msg, hashlib.sha256).digest()


def new_boot_id() -> int:
    """A random, non-zero 63-bit id for one start of the gate."""
    return secrets.randbits(63) | 1


def tags_equal(a: bytes, b: bytes) -> bool:
    """Constant-time comparison (:func:`hmac.compare_digest`)."""
    return len(a) == TAG_BYTES and hmac.compare_digest(bytes(a), bytes(b))


class HeartbeatAuthenticator:
    """The executor's memory of authentic heartbeats, for refusing replays.

    Args:
        key: the shared key.
        heartbeat_timeout: s (steady clock): another boot of the gate is accepted only once
            the current one has been silent this long (a restarted gate is; two gates at once
            are not). A goal must belong to the current boot and name a heartbeat of it no
            older than the first this executor heard and at most :data:`GOAL_EPOCH_WINDOW`
            before the newest. 0 (an
            executor not supervised by a gate's heartbeat, logged as such): a goal's tag is
            verified, its heartbeat epoch is not (nothing to bind it to; replays are then
            refused only by their sequence, OLD_SEQUENCE).
    """

    def __init__(self, key: bytes, heartbeat_timeout: float) -> None:
        self._key = key
        self.timeout = float(heartbeat_timeout)
        self.boot: int | None = None
        self.counter = 0
        self.last_received = float('-inf')
        self.first_counter = 0     # the first heartbeat of the current boot heard here
        self._retired: deque[int] = deque(maxlen=RETIRED_BOOTS)
        self.refused_heartbeats = 0
        self.refused_goals = 0
        self.last_refusal = ''

    def heartbeat(self, now: float, *, tag: bytes, boot_id: int, counter: int,
                  stamp: tuple[int, int], state: str, motion_allowed: bool, fence: int,
                  detail: str = '', robot_model: str = '') -> str | None:
        """Verify a heartbeat received at steady time ``now``; None when it is to be honoured,
        else why not (it is then ignored: it neither feeds the heartbeat watchdog nor changes
        anything)."""
        why = None
        expect = heartbeat_tag(self._key, boot_id=boot_id, counter=counter, stamp=stamp,
                               state=state, motion_allowed=motion_allowed, fence=fence,
                               detail=detail, robot_model=robot_model)
        if not tags_equal(tag, expect):
            why = 'its auth tag does not verify (no tag, another key, or altered)'
        elif boot_id in self._retired:
            why = f'boot {boot_id:x} of the gate was replaced by a newer one (a replay)'
        elif boot_id == self.boot and counter <= self.counter:
            why = f'counter {counter} is not newer than {self.counter} (a replay)'
        elif self.boot is not None and boot_id != self.boot and \
                now - self.last_received < self.timeout:
            why = (f'another gate (boot {boot_id:x}) while boot {self.boot:x} is alive '
                   f'(heard {now - self.last_received:.3f} s ago)')
        if why is not None:
            self.refused_heartbeats += 1
            self.last_refusal = f'heartbeat refused: {why}'
            return why
        if boot_id != self.boot:
            if self.boot is not None:
                self._retired.append(self.boot)
            self.boot = boot_id
            self.first_counter = counter
        self.counter = counter
        self.last_received = now
        return None

    def goal(self, now: float, *, tag: bytes, sequence: int, source: str, boot_id: int,
             counter: int, digest: bytes) -> str | None:
        """Verify a goal received at steady time ``now``; None when it may be executed, else
        why not (refused AUTH_FAILED)."""
        why = None
        expect = goal_tag(self._key, sequence=sequence, source=source, boot_id=boot_id,
                          counter=counter, digest=digest)
        if not tags_equal(tag, expect):
            why = 'its auth tag does not verify (no tag, another key, or an altered goal)'
        elif self.timeout <= 0.0:
            pass
        elif self.boot is None or boot_id != self.boot:
            why = (f'it belongs to gate boot {boot_id:x}, not the current one '
                   f'({"none yet" if self.boot is None else f"{self.boot:x}"})')
        elif counter + 1 < self.first_counter:
            why = (f'it names heartbeat {counter}, sent before this executor heard boot '
                   f'{boot_id:x} (from heartbeat {self.first_counter} on): a replay')
        elif counter + GOAL_EPOCH_WINDOW < self.counter:
            why = (f'it names heartbeat {counter}, {self.counter - counter} heartbeats before '
                   f'the newest ({self.counter}): a replay or a goal held back')
        if why is not None:
            self.refused_goals += 1
            self.last_refusal = f'goal {sequence} refused: {why}'
        return why
