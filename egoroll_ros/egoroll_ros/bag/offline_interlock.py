"""The safety gate's interlock run over a bag's ``quest/joy`` (for ``egoroll evaluate``).

The same :class:`~egoroll_ros.core.interlock.Interlock` the ``safety_gate`` node runs, fed
with the events a bag holds, on bag time: quest/joy samples (read with the gate's
:class:`~egoroll_ros.core.interlock.JoyMapping`), joint_states receipts, the watchdog every
``watchdog_period`` s from the bag's first message, and each checked chunk. The decisions are
kept the way the node would carry them out: a forwarded chunk runs until its last point (the
executor reports its end then), a chunk that waits for confirmation is confirmed by a rising
edge of the Quest confirm button (restamped to that moment and re-checked by the caller's
``recheck``, as the node does) or expires. The Quest toggle (the gate's ``toggle_button``) is
debounced as the gate debounces it (its edge at the debounce deadline, on bag time): a press
while the rollout is live stops it (:meth:`Interlock.toggle`); a press while stopped is the
start of a new rollout, which re-arms the interlock from the next chunk on.

What a bag cannot hold is assumed, and the report says so (:data:`ASSUMPTIONS`): nobody calls
``safety/reset``, ``safety/confirm``, ``safety/stop`` or ``policy/stop``; the executor is
available and accepts every forwarded goal.

Pure: no rclpy, no messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from egoroll_ros.bag.report import Stretches
from egoroll_ros.core.debounce import ButtonDebouncer
from egoroll_ros.core.interlock import (
    NOT_READY_CHECKS,
    ChunkOutcome,
    Decision,
    Interlock,
    InterlockConfig,
    JoyMapping,
    Kind,
)
from egoroll_ros.core.types import Chunk

ASSUMPTIONS = ('a bag holds no service calls: nobody calls safety/reset (an e-stop or fault '
               'latch stays until the end), safety/confirm, safety/stop or policy/stop; the '
               'executor is available, accepts every forwarded goal and runs it until its '
               'last point; a Quest toggle press while the rollout is stopped starts a new one '
               '(its preflight, a service call, assumed accepted by the gate)')


def not_simulated(topic: str) -> str:
    """The note that marks every verdict when the bag has no quest/joy."""
    return f'interlock not simulated: no {topic} in the bag'


@dataclass
class ChunkFate:
    """What the interlock made of one chunk.

    Attributes:
        forwarded: whether the gate would have sent it to the executor.
        blocked_by: the interlock's reasons not to forward it (check names: deadman, estop,
            latched_fault, ...), empty when none.
        note: one line: ``forwarded``, ``rejected by the checks``, ``blocked: ...``, ``held for
            confirmation: ...``.
        forwarded_at: bag time it was forwarded (s; the confirmation time for a confirmed
            chunk), None when not forwarded.
    """

    forwarded: bool
    blocked_by: list[str]
    note: str
    forwarded_at: float | None = None


class OfflineInterlock:
    """Feeds a bag's events to the gate's interlock; see the module docstring.

    Args:
        config: the interlock configuration (the gate's parameters).
        mapping: the gate's quest/joy mapping.
        watchdog_period: s between watchdog ticks (the gate's ``watchdog_period``).
        start: bag time of the first tick (s).
        recheck: ``(restamped chunk, now) -> rejected`` for a confirmed chunk (the gate
            re-checks it against the latest measured state before forwarding).
        toggle_debounce: s the toggle button must be stable (the gate's
            ``toggle_debounce_time``; only with ``mapping.toggle_button`` >= 0).
    """

    def __init__(self, config: InterlockConfig, mapping: JoyMapping, watchdog_period: float,
                 start: float, recheck: Callable[[Chunk, float], bool],
                 toggle_debounce: float = 0.05) -> None:
        self.interlock = Interlock(config)
        # The bag is a rollout's: the gate was armed by a start before it (a bag holds no arm
        # request), and again by every toggle start (below).
        self.interlock.assume_armed()
        self._toggle = ButtonDebouncer(toggle_debounce) if mapping.toggle_button >= 0 else None
        self._start_pending = False
        self.mapping = mapping
        self._period = watchdog_period
        self._ticks = 0
        self._start = start
        self._recheck = recheck
        self._js_received: float | None = None
        self._goal_ends: dict[int, float] = {}
        self._fates: dict[int, ChunkFate] = {}
        self._stretches = Stretches(drop_empty=True)
        self._events: list[tuple[float, str, str]] = []
        self._held: int | None = None     # sequence of the chunk waiting for confirmation
        self._now = start

    # ---- events ----------------------------------------------------------------------------
    def advance(self, now: float) -> None:
        """Run every watchdog tick (and goal end) due up to ``now``."""
        while True:
            tick = self._start + self._ticks * self._period
            if tick > now:
                break
            self._poll_toggle(tick)
            self._ticks += 1
            self._end_goals(tick)
            self._apply(tick, self.interlock.timer(tick, self._js_received))
        self._poll_toggle(now)
        self._end_goals(now)
        self._now = max(self._now, now)

    def _poll_toggle(self, upto: float) -> None:
        """The toggle's debounced edge at its deadline (the gate fires it from a timer)."""
        d = self._toggle
        while d is not None and d.deadline is not None and d.deadline <= upto:
            t = d.deadline
            if d.poll(t):
                self._toggle_pressed(t)
            elif d.deadline == t:
                break           # undecided at its own deadline: never spin

    def _toggle_pressed(self, now: float) -> None:
        il = self.interlock
        if il.stopped is not None:
            self._start_pending = True
            self._events.append((now, 'start', 'Quest toggle while stopped: a new rollout '
                                 'starts (its preflight assumed accepted)'))
            return
        self._end_goals(now)
        self._apply(now, il.toggle(self._toggle.changed_at))

    def joint_state(self, now: float) -> None:
        """joint_states received at ``now``."""
        self.advance(now)
        self._js_received = now

    def joy(self, now: float, axes: Sequence[float], buttons: Sequence[int]) -> None:
        """A quest/joy sample received at ``now``."""
        self.advance(now)
        estop, held, confirm = self.mapping.read(axes, buttons)
        decisions, rising = self.interlock.joy(now, estop, held, confirm)
        self._apply(now, decisions)
        toggle = self.mapping.toggle_down(buttons) if self._toggle is not None else None
        if toggle is not None and self._toggle.update(toggle, now):
            self._toggle_pressed(now)
        if rising:
            self._confirm(now)

    def chunk(self, now: float, chunk: Chunk | None, sequence: int,
              violations: Sequence[str], rejected: bool,
              needs_confirmation: bool) -> ChunkOutcome:
        """A chunk checked at ``now`` (``violations``: the check names of its verdict;
        ``chunk``: the joint chunk the gate would forward, None when there is none)."""
        self.advance(now)
        if self._start_pending and self.interlock.stopped is not None:
            # the new rollout's preflight, just before
            self.interlock.assume_armed(sequence - 1, '' if chunk is None else chunk.policy_id)
        self._start_pending = False
        real = any(v not in NOT_READY_CHECKS for v in violations)
        out = self.interlock.chunk(now, chunk, sequence, shadow=False, rejected=rejected,
                                   real_rejection=real, needs_confirmation=needs_confirmation,
                                   executor_ready=True)
        blocked = [b.check for b in out.blocks]
        if out.forwarded:
            fate = ChunkFate(True, [], 'forwarded', now)
        elif rejected:
            fate = ChunkFate(False, [], 'rejected by the checks')
        elif out.held:
            fate = ChunkFate(False, [], 'held for confirmation: not confirmed by the end')
        else:
            fate = ChunkFate(False, blocked, 'blocked: ' + '; '.join(b.message
                                                                     for b in out.blocks))
        self._fates[sequence] = fate
        self._apply(now, out.decisions)
        return out

    def finish(self, end: float) -> None:
        """The bag ended at ``end``."""
        self.advance(end)
        self._track(end)

    # ---- carrying out ----------------------------------------------------------------------
    def _apply(self, now: float, decisions: list[Decision]) -> None:
        for d in decisions:
            if d.kind is Kind.FORWARD:
                chunk = d.chunk
                seq = int(chunk.sequence)
                self._goal_ends[seq] = float(chunk.stamp) + float(chunk.trajectory.times[-1])
                if self._held is not None and self._held != seq:
                    self._settle(f'held for confirmation, dropped: chunk {seq} was forwarded')
                self._held = None
            elif d.kind is Kind.HOLD:
                seq = int(d.chunk.sequence)
                if self._held is not None and self._held != seq:
                    self._settle(f'held for confirmation, dropped: chunk {seq} waits instead')
                self._held = seq
            elif d.kind is Kind.CANCEL:
                self._goal_ends.clear()
            elif d.kind is Kind.EXPIRE:
                self._settle(f'held for confirmation, dropped: {d.reason}')
                self._held = None
            if d.kind is not Kind.FORWARD:
                self._events.append((now, d.kind.value, d.reason))
        self._track(now)

    def _settle(self, note: str) -> None:
        """Say what became of the chunk that waited for confirmation."""
        fate = self._fates.get(self._held) if self._held is not None else None
        if fate is not None and not fate.forwarded:
            fate.note = note

    def _end_goals(self, now: float) -> None:
        for seq, end in sorted(self._goal_ends.items()):
            if end <= now:
                del self._goal_ends[seq]
                self.interlock.goal_ended(seq)

    def _confirm(self, now: float) -> None:
        chunk, why = self.interlock.take_pending(now)
        if chunk is None:
            if self._held is not None:
                self._settle(f'held for confirmation, dropped: {why}')
                self._held = None
            self._events.append((now, 'confirm', f'Quest confirm: {why}'))
            return
        chunk = chunk.restamped(now)
        seq = int(chunk.sequence)
        out = self.interlock.confirmed(chunk, seq, rejected=self._recheck(chunk, now),
                                       executor_ready=True, now=now)
        fate = self._fates.get(seq)
        if fate is not None:
            if out.forwarded:
                fate.forwarded, fate.forwarded_at = True, now
                fate.note = f'held for confirmation, confirmed and forwarded at {now:.3f}'
            elif out.blocks:
                fate.blocked_by = [b.check for b in out.blocks]
                fate.note = 'held for confirmation, confirmed but blocked: ' + '; '.join(
                    b.message for b in out.blocks)
            else:
                fate.note = 'held for confirmation, confirmed but rejected on the re-check'
        self._held = None
        self._events.append((now, 'confirm', f'Quest confirm of chunk {seq}: '
                             + ('forwarded' if out.forwarded else 'not forwarded')))
        self._apply(now, out.decisions)

    def _track(self, now: float) -> None:
        il, cfg = self.interlock, self.interlock.config
        current: dict[tuple[str, str], float] = {}
        if il.estop:
            current[('estop', 'e-stop pressed' if il.estop_down else
                     'e-stop latched (released; no safety/reset in a bag)')] = now
        if il.fault is not None:
            current[('fault', f'fault latched: {il.fault} (no safety/reset in a bag)')] = now
        if il.stopped is not None:
            current[('stopped', f'rollout stopped: {il.stopped}')] = now
        if cfg.require_deadman and not il.deadman_held:
            if il.joy_time is None:
                reason = 'no quest/joy yet'
            elif now - il.joy_time > cfg.joy_timeout:
                reason = 'quest/joy stale'
            else:
                reason = 'deadman released'
            current[('deadman', reason)] = now
        elif il.quest_link_lost():
            current[('quest_link', 'no quest/joy yet' if il.joy_time is None else
                     'quest/joy stale: the e-stop channel is lost')] = now
        self._stretches.update_keys(current, now)

    # ---- results ---------------------------------------------------------------------------
    def fate(self, sequence: int) -> ChunkFate | None:
        """What became of chunk ``sequence`` (None: never seen)."""
        return self._fates.get(sequence)

    def report(self, end: float, origin: float) -> dict[str, Any]:
        """The ``interlock`` section of the report (times in s after ``origin``)."""
        fates = list(self._fates.values())
        blocked: dict[str, int] = {}
        for f in fates:
            for check in set(f.blocked_by):
                blocked[check] = blocked.get(check, 0) + 1
        return {
            'simulated': True,
            'stretches': self._stretches.report(end, origin, label='condition'),
            'forwarded': sum(f.forwarded for f in fates),
            'not_forwarded': sum(not f.forwarded for f in fates),
            'blocked_by_check': dict(sorted(blocked.items())),
            'events': [{'t': t - origin, 'kind': k, 'reason': r} for t, k, r in self._events],
            'final_state': self.interlock.state(),
            'assumptions': ASSUMPTIONS,
        }

