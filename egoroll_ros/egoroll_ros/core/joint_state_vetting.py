"""Which joint_states a safety node may believe (issue 24.5).

The gate and the executor judge every chunk and every setpoint against the measured state, so
``joint_states`` is a safety input, and any node on the domain can publish it: a
joint_state_publisher left running beside the driver (zeros, or the slider GUI), a replayed
bag, a late duplicate. :class:`JointStateVetter` decides for each message whether it is the
robot's own, newest word about the controlled joints:

- a message naming none of the controlled joints is not about this arm: ignored (another
  robot's joints, a tool's);
- one naming only some of them is refused (the gate and the executor need every controlled
  joint from one sample);
- a **second publisher** of the controlled joints (another writer's id within
  ``writer_window`` of the first's last message) refuses every message, from both, until one
  of them has been silent for ``writer_window``: with two sources nobody can tell which is the
  robot, so the state goes stale and the arm holds (the nodes' staleness timeouts, and the
  gate's fault);
- a **stamp going backwards** (older than the last accepted one) is refused, unless it lies
  within ``clock_window`` of the node's own ROS clock: then the clock itself jumped back (a
  ``use_sim_time`` clock restarted) and the stream follows it. An old message (a replay, a
  duplicate delivered late) lies far behind the clock and is refused.

:class:`JointStateHistory` keeps the accepted states of the last ``seconds`` (any rate: 1 kHz
joint_state_broadcasters included) for finding the state an observation saw.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, replace

from egoroll_ros.core.types import JointStateData

ACCEPTED, IGNORED, REFUSED = 'accepted', 'ignored', 'refused'


@dataclass(frozen=True)
class Vetting:
    """What :meth:`JointStateVetter.vet` decided: ``status`` one of ACCEPTED, IGNORED,
    REFUSED; ``reason`` in words (empty when accepted); ``second_publisher`` when the
    refusal is two writers of the controlled joints; ``clock_jump`` when an accepted stamp
    went back with the node's own clock."""

    status: str
    reason: str = ''
    second_publisher: bool = False
    clock_jump: bool = False


class JointStateVetter:
    """Vets joint_states for one node.

    Args:
        joints: the controlled joints.
        writer_window: s (steady clock): a second writer heard within this of another
            refuses both (2 s: a joint_state_publisher at its default 10 Hz, or any tool at
            1 Hz, is seen at once).
        clock_window: s: a stamp going backwards is followed when it lies this close to the
            node's ROS clock (the clock jumped back), refused otherwise.
    """

    def __init__(self, joints: Sequence[str], writer_window: float = 2.0,
                 clock_window: float = 0.5) -> None:
        for name, value in (('writer_window', writer_window), ('clock_window', clock_window)):
            if not value > 0.0:
                raise ValueError(f'{name} must be > 0, got {value}')
        self.joints = tuple(joints)
        self._wanted = frozenset(self.joints)
        self.window = float(writer_window)
        self.clock_window = float(clock_window)
        self._writers: dict[Hashable, float] = {}     # writer id -> steady time last heard
        self._last_stamp: float | None = None
        self.refused = 0
        self.last_refusal = ''
        self.clock_jumps = 0
        self.conflict_since: float | None = None   # steady time two writers were first seen

    def vet(self, js: JointStateData, writer: Hashable | None, ros_now: float) -> Vetting:
        """Decide about ``js`` (received at ``js.received``, steady), sent by ``writer``
        (the publisher's id; None where the middleware cannot say, then only the stamps
        are checked), with the node's ROS clock at ``ros_now``."""
        now = js.received
        names = set(js.names)
        if not names & self._wanted:
            return Vetting(IGNORED)
        if writer is not None:
            self._writers = {w: t for w, t in self._writers.items()
                             if now - t < self.window and w != writer}
            others = len(self._writers)
            self._writers[writer] = now
            if others:
                if self.conflict_since is None:
                    self.conflict_since = now
                return self._refuse(
                    f'{others + 1} publishers of the controlled joints on joint_states within '
                    f'{self.window:g} s: every message is refused until only one is left (is a '
                    'joint_state_publisher or a replay running beside the driver?)',
                    second_publisher=True)
            self.conflict_since = None
        missing = [j for j in self.joints if j not in names]
        if missing:
            return self._refuse(f"names only some of the controlled joints (lacks "
                                f"{', '.join(missing)}): every controlled joint must come in "
                                'one message')
        jump = False
        if self._last_stamp is not None and js.stamp < self._last_stamp:
            back = self._last_stamp - js.stamp
            if abs(ros_now - js.stamp) > self.clock_window:
                return self._refuse(
                    f'stamp went backwards by {back:.3f} s and lies {ros_now - js.stamp:.3f} s '
                    "behind this node's clock (an old or replayed message)")
            jump = True                   # the clock itself went back: follow it
            self.clock_jumps += 1
        self._last_stamp = js.stamp
        return Vetting(ACCEPTED, clock_jump=jump)

    def _refuse(self, why: str, second_publisher: bool = False) -> Vetting:
        self.refused += 1
        self.last_refusal = why
        return Vetting(REFUSED, why, second_publisher=second_publisher)


class JointStateHistory:
    """The accepted states of the last ``seconds`` (by stamp), oldest first; lookups by
    stamp in O(log n), at any publishing rate."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self._items: list[JointStateData] = []
        self._stamps: list[float] = []

    def append(self, js: JointStateData) -> None:
        """Add ``js``; a stamp below the newest (a clock that jumped back) starts afresh."""
        if self._stamps and js.stamp < self._stamps[-1]:
            self._items.clear()
            self._stamps.clear()
        self._items.append(js)
        self._stamps.append(js.stamp)
        cut = bisect_left(self._stamps, js.stamp - self.seconds)
        if cut and (cut >= 64 or cut * 2 >= len(self._stamps)):
            del self._items[:cut], self._stamps[:cut]

    def measured_at(self, stamp: float) -> JointStateData | None:
        """The newest state stamped at or before ``stamp`` (the oldest when ``stamp`` predates
        them all), carrying the newest entry's receipt time (staleness is about the stream,
        not about that sample); None when empty.

        The policy predicted a chunk from the state its observation saw, and
        ``time_from_start`` counts from that stamp: comparing point 0 with a NEWER measurement
        would count the arm's motion during inference and transport as the chunk's own
        velocity (a moving arm's chunks would look as if they stepped backwards)."""
        if not self._items:
            return None
        newest = self._items[-1]
        i = bisect_right(self._stamps, stamp) - 1
        chosen = self._items[max(i, 0)]
        if chosen is newest:
            return newest
        return replace(chosen, received=newest.received)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[JointStateData]:
        return iter(self._items)

    def __getitem__(self, i: int) -> JointStateData:
        return self._items[i]

    def __reversed__(self) -> Iterator[JointStateData]:
        return reversed(self._items)
