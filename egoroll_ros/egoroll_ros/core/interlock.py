"""The safety gate's interlock: its decisions as a pure state machine (no rclpy, no messages).

The ``safety_gate`` node feeds events (a chunk's verdict, a quest/joy sample, the watchdog
timer with the joint_states receipt time, reset, confirm, stop, a goal's end) and executes the
decisions that come back:

- ``FORWARD``: send the decision's chunk to the executor as a goal.
- ``CANCEL``: cancel every goal of the executor (it holds); goals still in flight must not run.
- ``HOLD``: keep the chunk waiting for an operator confirmation (nothing moves meanwhile).
- ``LATCH``: a latch was set (e-stop, fault, rollout stopped); the reason says which.
- ``EXPIRE``: the chunk waiting for confirmation was dropped (timeout or a stop).

Latches and what clears them:

- **e-stop**: pressed on quest/joy; cleared by :meth:`Interlock.reset` once released.
- **fault**: a rejected chunk under ``on_reject='hold'``; cleared by :meth:`Interlock.reset`.
- **rollout stopped** (the gate is *disarmed*): at start-up, and after every stop of any
  kind: :meth:`Interlock.stop` (``policy/stop``, lifecycle deactivate, a policy fault,
  ``safety/stop``), :meth:`Interlock.toggle` (the gate's own view of the Quest toggle), the
  e-stop, a latched fault, quest/joy going stale during a live rollout, an outage
  (:meth:`Interlock.outage`), an executor halt (:meth:`Interlock.goal_halted`). Cleared ONLY
  by :meth:`Interlock.arm`, the explicit request of ``policy/start`` naming a preflight (a
  shadow chunk the gate accepted after the stop: its sequence and policy id). A shadow chunk
  never changes the interlock's state; every stop forgets the preflights accepted before it,
  so a late or duplicated arm request after a newer stop arms nothing. Once armed, live chunks
  must come from the armed policy (or the operator's takeover) and be newer than the
  preflight, at most :data:`MAX_SEQUENCE_LEAD` beyond it (a chunk far beyond is refused and
  moves nothing: one chunk with sequence 2**64-1 cannot poison the sequence floor). Reset
  does not clear it.

Sequences: the last forwarded sequence survives :meth:`Interlock.reset`, because the executor
refuses any goal not newer than the last one it accepted (``OLD_SEQUENCE``); forwarding one it
will refuse would be a lie in the verdict.

The motion fence (:attr:`Interlock.fence`, carried by every heartbeat as ``fence_sequence``):
every CANCEL (a stop, the Quest toggle, an e-stop, a fault, a deadman release, stale inputs)
raises it to the last forwarded sequence, i.e. the highest the executor may have received or
may still receive, and it never falls. The executor lets no goal at or below it move. It
backs the cancel-all up for a goal the gate sent just before the stop, which may reach the
executor after that cancel-all (DDS orders no two topics): the fence stops it when it arrives,
not when a second cancel-all does. Every sequence forwarded later is newer than the last
forwarded one (``old_sequence``), so above the fence: a fence crossing a newer goal on the
wire never stops it. :attr:`Interlock.fence_changed` tells the node to send a heartbeat now.

Every time given is a steady-clock time in seconds (``time.monotonic()``). Not thread-safe:
the node calls it under one lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
import math
from typing import Any

from egoroll_ros.errors import ConfigError

ON_REJECT = ('hold', 'skip')
#: The policy id of the operator's teleop chunks (policy_node's takeover): accepted from the
#: armed rollout besides the armed policy's own.
OPERATOR_ID = 'operator'
#: How far beyond the arming preflight a live chunk's sequence may be (policy_node counts
#: one per chunk: 10**6 is more than a day at 10 Hz). Beyond it: refused ``sequence``.
MAX_SEQUENCE_LEAD = 10**6
#: Why the gate is disarmed when it starts.
NOT_ARMED = 'the gate started disarmed: run a preflight and start (safety/arm)'
#: Accepted preflights remembered for an arm request (the newest).
PREFLIGHTS_KEPT = 16
#: Violations that mean "the gate is not ready" or "the chunk came too late", not "the
#: policy asked for something bad": they reject and stop, but do not latch a fault under
#: ``on_reject='hold'``. A chunk that arrives too old (``chunk_age``, ``chunk_in_past``: a
#: loaded machine, a late frame) is never executed, and the next fresh one may run.
NOT_READY_CHECKS = frozenset({'robot_model', 'joint_state', 'chunk_age', 'chunk_in_past'})
#: Executor result codes (ExecuteTrajectory.Result names) by which the executor stopped a goal
#: on its own for a fault of the motion itself: the rollout stops (:meth:`Interlock.goal_halted`)
#: and needs a new preflight and start. Not here: the ends the gate or the policy caused or
#: that leave the running motion as it was (SUCCESSFUL, PREEMPTED, CANCELED, FENCED,
#: INTERLOCK, OLD_SEQUENCE, a goal refused before it ran, and LIMIT_VIOLATED, which includes
#: "refused at the seam, the running goal continues"); and, for now, the gaps a loaded
#: machine or a slow policy makes by themselves: COMMAND_TIMEOUT (no newer chunk within
#: command_timeout: a CPU LeRobot policy between chunks), STALE_STATE / NO_STATE (a
#: joint_states gap), HEARTBEAT_LOST (the gate descheduled past heartbeat_timeout) and
#: DEADLINE_MISSED (the control loop descheduled for max_late_ticks periods). On a
#: shared 2-core machine each happens during normal rollouts, and stopping the rollout for
#: each made rollouts there unusable (the fresh-clone data-loop, demo and LeRobot tests
#: failed). The executor holds for them; the next chunk is predicted from and checked
#: against the fresh state (docs/hazards.md S6, C12). AUTH_FAILED of the gate's own goal means
#: the executor does not share the gate's key (or saw another boot of it): nothing the gate
#: sends will run, so the rollout stops with that reason.
EXECUTOR_HALTS = frozenset({'PATH_TOLERANCE_VIOLATED', 'NO_ROBOT_MODEL', 'SHUTDOWN', 'STALLED',
                            'AUTH_FAILED'})


class Kind(str, Enum):
    """What the node must do."""

    FORWARD = 'forward'
    CANCEL = 'cancel'
    HOLD = 'hold'
    LATCH = 'latch'
    EXPIRE = 'expire'


@dataclass(frozen=True)
class Decision:
    """One decision: ``kind``, a human ``reason`` and, for FORWARD and HOLD, the chunk."""

    kind: Kind
    reason: str
    chunk: Any = None


@dataclass(frozen=True)
class Block:
    """Why a chunk that passed the checks is not forwarded (a node-stage violation)."""

    check: str
    value: float
    limit: float
    message: str


@dataclass
class ChunkOutcome:
    """What the interlock made of one chunk: decisions and, when not forwarded, why."""

    decisions: list[Decision] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)

    @property
    def forwarded(self) -> bool:
        """Whether a FORWARD decision was made."""
        return any(d.kind is Kind.FORWARD for d in self.decisions)

    @property
    def held(self) -> bool:
        """Whether the chunk now waits for confirmation."""
        return any(d.kind is Kind.HOLD for d in self.decisions)


def _no_executor() -> Block:
    return Block('executor_unavailable', math.nan, math.nan,
                 'executor_unavailable: the execute_trajectory server is not available')


@dataclass(frozen=True)
class InterlockConfig:
    """Switches of the interlock (names are the safety_gate parameter names).

    Args:
        require_deadman: motion needs the deadman held.
        require_quest: motion needs fresh quest/joy (within ``joy_timeout``), deadman or not:
            it carries the e-stop (issue 24.2); the gate sets it unless no e-stop button is
            configured on quest/joy and the deadman is not required. With ``require_deadman``
            the deadman's own staleness rule covers it.
        deadman_threshold: shown as the limit of a ``deadman`` block.
        joy_timeout: s after which quest/joy is stale (the deadman counts as released).
        max_joint_state_age: s; older joint_states cancel the running goal.
        on_reject: ``hold`` (cancel and latch a fault) or ``skip`` (drop the chunk).
        confirm_timeout: s a chunk waits for confirmation.
        stall_timeout: s; an outage this long of joint_states, or of the gate's own
            scheduling (:meth:`Interlock.outage`), stops a live rollout: motion resumes only
            after a new preflight and start (a driver or a gate that hung and came back must
            not move the arm by itself). 0: off.
    """

    require_deadman: bool = True
    require_quest: bool = True
    deadman_threshold: float = 0.5
    joy_timeout: float = 0.5
    max_joint_state_age: float = 0.2
    on_reject: str = 'hold'
    confirm_timeout: float = 10.0
    stall_timeout: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.stall_timeout) and self.stall_timeout >= 0.0):
            raise ConfigError(f"parameter 'stall_timeout': must be >= 0 (0 = off), got "
                              f'{self.stall_timeout}')
        if self.on_reject not in ON_REJECT:
            raise ConfigError(f"parameter 'on_reject': must be one of {ON_REJECT}, got "
                              f'{self.on_reject!r}')
        for name in ('joy_timeout', 'max_joint_state_age', 'confirm_timeout'):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0.0):
                raise ConfigError(f"parameter '{name}': must be > 0, got {v}")


def interlock_config_from_params(p: dict[str, Any]) -> InterlockConfig:
    """The :class:`InterlockConfig` of the safety_gate parameters ``p`` (names as declared).

    Raises:
        ConfigError: naming the parameter.
    """
    return InterlockConfig(
        require_deadman=p['require_deadman'],
        require_quest=bool(p['require_deadman']) or int(p['estop_button']) >= 0,
        deadman_threshold=p['deadman_threshold'],
        joy_timeout=p['joy_timeout'], max_joint_state_age=p['max_joint_state_age'],
        on_reject=p['on_reject'], confirm_timeout=p['confirm_timeout'],
        stall_timeout=p['stall_timeout'])


@dataclass(frozen=True)
class JoyMapping:
    """Which quest/joy axis and buttons are the deadman, the e-stop and the confirm button.

    Args:
        deadman_axis: axis index of the deadman (grip); held above ``deadman_threshold``.
        deadman_threshold: axis value above which the deadman is held.
        estop_button: button index of the e-stop; -1: none.
        confirm_button: button index that confirms a waiting chunk; -1: none.
        toggle_button: button index of the Quest start/stop toggle (policy_node's
            ``quest.toggle_button``); -1: the gate does not watch it.

    Raises:
        ConfigError: the toggle button is also the e-stop or the confirm button.
    """

    deadman_axis: int = 3
    deadman_threshold: float = 0.5
    estop_button: int = 1
    confirm_button: int = 0
    toggle_button: int = -1

    def __post_init__(self) -> None:
        for name in ('estop_button', 'confirm_button'):
            if self.toggle_button >= 0 and self.toggle_button == getattr(self, name):
                raise ConfigError(f"parameter 'toggle_button': {self.toggle_button} is also "
                                  f"'{name}'; one button cannot be both")

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> JoyMapping:
        """The mapping of the safety_gate parameters ``p``."""
        return cls(deadman_axis=p['deadman_axis'], deadman_threshold=p['deadman_threshold'],
                   estop_button=p['estop_button'], confirm_button=p['confirm_button'],
                   toggle_button=p['toggle_button'])

    def toggle_down(self, buttons: Sequence[int]) -> bool | None:
        """The raw toggle button of one sample; None when no toggle button is configured or
        the sample does not have it (ignored, as policy_node ignores it: the gate then sees no
        press)."""
        if not 0 <= self.toggle_button < len(buttons):
            return None
        return bool(buttons[self.toggle_button])

    def read(self, axes: Sequence[float], buttons: Sequence[int]) -> tuple[bool, bool, bool]:
        """One quest/joy sample as ``(estop_down, deadman_held, confirm_down)``.

        Fail closed: a configured e-stop button the sample does not have counts as pressed;
        a missing or non-finite deadman axis counts as released; a missing confirm button
        as not pressed.
        """
        estop = self.estop_button >= 0 and (
            self.estop_button >= len(buttons) or bool(buttons[self.estop_button]))
        held = 0 <= self.deadman_axis < len(axes) and \
            math.isfinite(axes[self.deadman_axis]) and \
            axes[self.deadman_axis] > self.deadman_threshold
        confirm = 0 <= self.confirm_button < len(buttons) and \
            bool(buttons[self.confirm_button])
        return bool(estop), bool(held), bool(confirm)


#: Heartbeat states, most severe first (the first that applies is reported).
STATE_ESTOP = 'estop'
STATE_FAULT = 'fault'
STATE_STOPPED = 'stopped'
STATE_DEADMAN = 'deadman_released'
STATE_OK = 'ok'


class Interlock:
    """The gate's latches, deadman, pending confirmation and sequence bookkeeping."""

    def __init__(self, config: InterlockConfig) -> None:
        self.config = config
        self.estop = False
        self.estop_down = False
        self.fault: str | None = None
        self.deadman_held = False
        self.joy_time: float | None = None
        #: quest/joy arrived within joy_timeout (the e-stop channel is alive).
        self.quest_fresh = False
        self._prev_confirm = False
        #: The rollout-stopped latch (its reason; None: armed). Disarmed at start-up.
        self.stopped: str | None = NOT_ARMED
        self._start_floor = -1            # live chunks must be newer than this
        #: Live sequences may be at most MAX_SEQUENCE_LEAD beyond this (the arming preflight;
        #: None: the first live chunk forwarded sets it, offline).
        self._lead_base: int | None = None
        #: Preflights accepted since the last stop (sequence -> policy id), newest last.
        self._preflights: dict[int, str] = {}
        #: The preflight that armed the gate (sequence, policy id), None while disarmed.
        self.armed_by: tuple[int, str] | None = None
        self.last_forwarded: int | None = None
        self.goal_sequence: int | None = None
        # Forwarded goals whose end has not been reported: an executor with seam blend may
        # refuse the newest at the seam and keep running the one before it.
        self._live: set[int] = set()
        self.epoch = 0                    # increments on every CANCEL
        #: The motion fence: no goal with a sequence <= fence may move (0: none forwarded
        #: before a cancel yet). Raised by every CANCEL, never lowered.
        self.fence = 0
        self._fence_sent = 0
        # Steady time of the first live chunk forwarded since the last stop (or start-up): the
        # rollout is live from then on, and a Quest toggle press begun later stops it.
        self._live_at: float | None = None
        self._pending: tuple[Any, int, float] | None = None  # chunk, sequence, expiry
        self._expired: int | None = None  # sequence whose confirmation expired last
        self.stats = {'chunks': 0, 'accepted': 0, 'rejected': 0, 'needs_confirmation': 0,
                      'forwarded': 0, 'stops': 0}

    # ---- queries ---------------------------------------------------------------------------
    @property
    def goal_active(self) -> bool:
        """Whether a forwarded goal may still be running."""
        return self.goal_sequence is not None

    @property
    def pending_sequence(self) -> int | None:
        """Sequence of the chunk waiting for confirmation, else None."""
        return None if self._pending is None else self._pending[1]

    @property
    def pending_expires(self) -> float | None:
        """Steady-clock time the waiting chunk's confirmation expires, else None."""
        return None if self._pending is None else self._pending[2]

    @property
    def fence_changed(self) -> bool:
        """Whether the fence rose since :meth:`fence_published` was last called (the node
        then publishes a heartbeat at once, not only on its timer)."""
        return self.fence != self._fence_sent

    def fence_published(self) -> int:
        """The node is sending a heartbeat: returns the fence it carries."""
        self._fence_sent = self.fence
        return self.fence

    def state(self) -> str:
        """The heartbeat state: estop, fault, stopped, deadman_released or ok."""
        if self.estop:
            return STATE_ESTOP
        if self.fault is not None:
            return STATE_FAULT
        if self.stopped is not None:
            return STATE_STOPPED
        if self.config.require_deadman and not self.deadman_held:
            return STATE_DEADMAN
        if self.quest_link_lost():
            return STATE_DEADMAN
        return STATE_OK

    def quest_link_lost(self) -> bool:
        """No fresh quest/joy, and the e-stop channel is required without the deadman (with
        the deadman required, it reads as the deadman released)."""
        cfg = self.config
        return cfg.require_quest and not cfg.require_deadman and not self.quest_fresh

    def motion_allowed(self) -> bool:
        """Whether the interlock would forward a good chunk now (the heartbeat carries it)."""
        return self.state() == STATE_OK

    def blocks(self, sequence: int, executor_ready: bool,
               policy_id: str | None = None) -> list[Block]:
        """Reasons not to forward a chunk with ``sequence`` (from ``policy_id``; None: not
        checked) that passed every check."""
        out = []
        if self.estop:
            out.append(Block('estop', math.nan, math.nan,
                             'estop: e-stop latched; call safety/reset'))
        if self.fault is not None:
            out.append(Block('latched_fault', math.nan, math.nan,
                             f'latched_fault: {self.fault}; call safety/reset'))
        if self.stopped is not None:
            out.append(Block('rollout_stopped', float(sequence), math.nan,
                             f'rollout_stopped: {self.stopped}; run a new preflight and start'))
        elif sequence <= self._start_floor:
            out.append(Block('rollout_stopped', float(sequence), float(self._start_floor),
                             f'rollout_stopped: sequence {sequence} is not newer than the '
                             f'preflight {self._start_floor} that armed the gate'))
        elif self._lead_base is not None and sequence > self._lead_base + MAX_SEQUENCE_LEAD:
            out.append(Block('sequence', float(sequence),
                             float(self._lead_base + MAX_SEQUENCE_LEAD),
                             f'sequence: {sequence} is implausibly far beyond the preflight '
                             f'{self._lead_base} that armed the gate (more than '
                             f'{MAX_SEQUENCE_LEAD}): refused, the sequence floor unchanged'))
        if self.armed_by is not None and policy_id is not None and \
                policy_id not in (self.armed_by[1], OPERATOR_ID):
            out.append(Block('policy_id', math.nan, math.nan,
                             f'policy_id: the gate is armed for policy {self.armed_by[1][:16]}; '
                             f'this chunk is from {policy_id[:16] or "(empty)"}'))
        if self.config.require_deadman and not self.deadman_held:
            out.append(Block('deadman', math.nan, self.config.deadman_threshold,
                             'deadman: the Quest deadman is not held'))
        if self.quest_link_lost():
            out.append(Block('quest_link', math.nan, self.config.joy_timeout,
                             'quest_link: no quest/joy within joy_timeout: the e-stop channel '
                             'is not known to work'))
        if self.last_forwarded is not None and sequence <= self.last_forwarded:
            out.append(Block('old_sequence', float(sequence), float(self.last_forwarded),
                             f'old_sequence: {sequence} is not newer than the last forwarded '
                             f'{self.last_forwarded}'))
        if not executor_ready:
            out.append(_no_executor())
        return out

    # ---- events ----------------------------------------------------------------------------
    def _cancel(self, reason: str) -> list[Decision]:
        """CANCEL (after EXPIRE of a chunk waiting for confirmation, if any)."""
        out = self._drop_pending(reason)
        self.epoch += 1
        if self.last_forwarded is not None:
            # Goals sent before now (those in flight included) may not move from now on.
            self.fence = max(self.fence, self.last_forwarded)
        if self.goal_sequence is not None:
            self.stats['stops'] += 1
        self.goal_sequence = None
        self._live.clear()
        return out + [Decision(Kind.CANCEL, reason)]

    def _drop_pending(self, reason: str) -> list[Decision]:
        if self._pending is None:
            return []
        seq = self._pending[1]
        self._pending = None
        return [Decision(Kind.EXPIRE, f'chunk {seq} no longer waits for confirmation: '
                                      f'{reason}')]

    def joy(self, now: float, estop_down: bool, deadman_held: bool,
            confirm_down: bool) -> tuple[list[Decision], bool]:
        """A quest/joy sample. Returns the decisions and whether confirm was just pressed."""
        out: list[Decision] = []
        self.joy_time = now
        self.quest_fresh = True
        self.estop_down = estop_down
        if estop_down and not self.estop:
            self.estop = True
            out += self._cancel('e-stop pressed')
            out.append(Decision(Kind.LATCH, 'e-stop latched until safety/reset'))
            self._disarm('e-stop pressed')
        was = self.deadman_held
        self.deadman_held = deadman_held
        if self.config.require_deadman and was and not deadman_held:
            out += self._cancel('deadman released')
        rising = confirm_down and not self._prev_confirm
        self._prev_confirm = confirm_down
        return out, rising

    def timer(self, now: float, joint_state_received: float | None) -> list[Decision]:
        """The watchdog: stale quest/joy, stale joint_states, expired confirmation."""
        out: list[Decision] = []
        cfg = self.config
        stale = self.joy_time is None or now - self.joy_time > cfg.joy_timeout
        if cfg.require_deadman and self.deadman_held and stale:
            self.deadman_held = False
            self.quest_fresh = False
            if self.stopped is None and self._live_at is not None:
                out += self.stop('quest/joy stale (deadman released): the Quest link is lost')
            else:
                out += self._cancel('quest/joy stale (deadman released)')
        elif self.quest_fresh and stale:
            self.quest_fresh = False
            if cfg.require_quest and not cfg.require_deadman:
                if self.stopped is None and self._live_at is not None:
                    out += self.stop('quest/joy stale: the Quest link, and with it the '
                                     'e-stop, is lost')
                else:
                    out += self._cancel('quest/joy stale: the e-stop channel is lost')
        if self.goal_active and (joint_state_received is None
                                 or now - joint_state_received > cfg.max_joint_state_age):
            out += self._cancel('joint_states stale')
        if cfg.stall_timeout > 0.0 and joint_state_received is not None and \
                now - joint_state_received >= cfg.stall_timeout:
            out += self.outage(f'no joint_states for {now - joint_state_received:.2f} s '
                               f'(stall_timeout {cfg.stall_timeout:g} s: the driver stopped '
                               'or hung)')
        if self._pending is not None and now > self._pending[2]:
            self._expired = self._pending[1]
            out += self._drop_pending(f'not confirmed within {cfg.confirm_timeout:g} s')
        return out

    def chunk(self, now: float, chunk: Any, sequence: int, *, shadow: bool, rejected: bool,
              real_rejection: bool, needs_confirmation: bool,
              executor_ready: bool, policy_id: str | None = None) -> ChunkOutcome:
        """A checked chunk: forward, hold for confirmation, block, or cancel and latch.

        Args:
            now: steady-clock time.
            chunk: the caller's chunk object, returned in FORWARD/HOLD decisions.
            sequence: the chunk's sequence.
            shadow: a shadow (preflight) chunk: never forwarded; accepted, it may be named
                by the next :meth:`arm` (it changes no state by itself).
            rejected: a hard check failed.
            real_rejection: the rejection is about the chunk (not "the gate is not ready":
                no robot model, no joint_states), so it may latch a fault.
            needs_confirmation: only soft limits were crossed.
            executor_ready: whether the executor's action server is available.
            policy_id: the chunk's policy id (None: not checked; the offline interlock).
        """
        out = ChunkOutcome()
        self.stats['chunks'] += 1
        if shadow:
            # A shadow chunk is never forwarded, so the interlock's latches do not apply to it
            # (a dry run with the e-stop pressed stays a dry run); but the gate's word on it is
            # what allows a start, so a gate that could not forward the live chunk that follows
            # (no execute_trajectory server discovered yet) does not accept it.
            if not rejected and not executor_ready:
                out.blocks = [_no_executor()]
            accepted = not rejected and not needs_confirmation and not out.blocks
            if accepted and policy_id is not None:
                self._preflights.pop(sequence, None)
                self._preflights[sequence] = policy_id
                while len(self._preflights) > PREFLIGHTS_KEPT:
                    del self._preflights[next(iter(self._preflights))]
            return out
        if rejected:
            self.stats['rejected'] += 1
            hold = self.config.on_reject == 'hold'
            if hold or not real_rejection:
                out.decisions += self._cancel(f'chunk {sequence} rejected')
            if hold and real_rejection:
                if self.fault is None:
                    self.fault = f'chunk {sequence} rejected'
                    out.decisions.append(Decision(Kind.LATCH, f'fault latched: {self.fault}'))
                self._disarm(f'fault latched: {self.fault}')   # forgets every preflight
            return out
        out.blocks = self.blocks(sequence, executor_ready, policy_id)
        if out.blocks:
            return out
        if needs_confirmation:
            self.stats['needs_confirmation'] += 1
            self._pending = (chunk, sequence, now + self.config.confirm_timeout)
            self._expired = None
            out.decisions.append(Decision(Kind.HOLD, f'chunk {sequence} waits for '
                                                     'confirmation', chunk))
            return out
        self.stats['accepted'] += 1
        out.decisions.append(self._forward(chunk, sequence, now))
        return out

    def _forward(self, chunk: Any, sequence: int, now: float | None) -> Decision:
        if self._live_at is None and now is not None:
            self._live_at = now
        if self._lead_base is None:
            self._lead_base = sequence - 1
        self.last_forwarded = sequence
        self.goal_sequence = sequence
        self._live.add(sequence)
        self._pending = None
        self.stats['forwarded'] += 1
        return Decision(Kind.FORWARD, f'chunk {sequence} forwarded', chunk)

    def take_pending(self, now: float) -> tuple[Any, str]:
        """An operator confirmed: returns (the waiting chunk or None, why not)."""
        pending, self._pending = self._pending, None
        expired, self._expired = self._expired, None
        if pending is None:
            if expired is not None:
                return None, f'the confirmation of chunk {expired} expired'
            return None, 'no chunk is waiting for confirmation'
        chunk, seq, expires = pending
        if now > expires:
            return None, f'the confirmation of chunk {seq} expired'
        return chunk, ''

    def confirmed(self, chunk: Any, sequence: int, *, rejected: bool,
                  executor_ready: bool, now: float | None = None) -> ChunkOutcome:
        """The confirmed chunk after its re-check (at steady time ``now``): forward unless
        rejected or blocked."""
        out = ChunkOutcome()
        if rejected:
            return out
        out.blocks = self.blocks(sequence, executor_ready)
        if not out.blocks:
            out.decisions.append(self._forward(chunk, sequence, now))
        return out

    def arm(self, sequence: int, policy_id: str) -> tuple[bool, str]:
        """``safety/arm``: policy_node's start names its preflight (``sequence``, the shadow
        chunk's ``policy_id``). Arms the gate when that shadow chunk was accepted after the
        last stop and nothing is latched; live chunks must then be newer than ``sequence``.
        A duplicate of the request that armed it answers success and changes nothing; any
        request after a newer stop fails (the stop forgot the preflights before it).

        Returns:
            (armed, why): a sentence for the operator either way.
        """
        sequence = int(sequence)
        if self.estop:
            return False, 'e-stop latched: release it and call safety/reset, then preflight'
        if self.fault is not None:
            return False, f'fault latched ({self.fault}): call safety/reset, then preflight'
        if self.stopped is None and self.armed_by == (sequence, policy_id):
            return True, f'already armed by preflight {sequence}'
        known = self._preflights.get(sequence)
        if known is None:
            since = f' (disarmed: {self.stopped})' if self.stopped is not None else ''
            return False, (f'preflight {sequence} was not accepted by the gate since the last '
                           f'stop{since}: run a preflight again')
        if known != policy_id:
            return False, (f'preflight {sequence} came from policy {known[:16]}, not '
                           f'{policy_id[:16] or "(empty)"}')
        if self.last_forwarded is not None and sequence <= self.last_forwarded:
            return False, (f'preflight {sequence} is older than the last forwarded chunk '
                           f'{self.last_forwarded}: run a preflight again')
        self._arm(sequence, policy_id)
        return True, f'armed by preflight {sequence} of policy {policy_id[:16]}'

    def _arm(self, sequence: int | None, policy_id: str) -> None:
        self.stopped = None
        if sequence is not None:
            self._start_floor = max(self._start_floor, sequence)
        self._lead_base = sequence
        self.armed_by = None if sequence is None else (sequence, policy_id)
        self._preflights.clear()
        self._live_at = None

    def assume_armed(self, sequence: int | None = None, policy_id: str = '') -> None:
        """Offline only (bag evaluation, which holds no arm request): arm as a start with a
        preflight ``sequence`` of ``policy_id`` would (None: before the bag's first chunk,
        whose sequence then bounds the later ones)."""
        self._arm(None if sequence is None else int(sequence), policy_id)

    def _disarm(self, reason: str) -> None:
        """Latch "rollout stopped" (keep the first reason) and forget every preflight."""
        if self.stopped is None:
            self.stopped = reason
        self.armed_by = None
        self._preflights.clear()
        self._live_at = None

    def toggle(self, pressed_at: float) -> list[Decision]:
        """A debounced press of the Quest toggle button whose press began at steady time
        ``pressed_at`` (the raw sample that changed to pressed, not the debounced edge).

        The gate acts on it without waiting for policy_node, which receives the same press
        and also stops (its ``safety/stop`` then finds the gate stopped already). It stops the
        rollout exactly as :meth:`stop` (cancel, raise the fence, latch "rollout stopped")
        only when the press began after the rollout went live, i.e. after the first live chunk
        forwarded since the last stop. Otherwise it is a start press and is ignored, because
        starting is policy_node's: while stopped; while no live chunk has been forwarded since
        the stop (a preflight, then the press that starts: the gate must not stop the
        rollout the press starts); and a press begun before that first live chunk (the start
        press, whose debounced edge reached the gate only after the rollout went live).
        """
        if self.stopped is not None or self._live_at is None or pressed_at <= self._live_at:
            return []
        return self.stop('Quest toggle pressed (seen by the gate)')

    def stop(self, reason: str) -> list[Decision]:
        """The rollout stopped: cancel, and forward nothing until a new preflight."""
        out = self._cancel(f'rollout stopped: {reason}')
        if self.stopped is None:
            out.append(Decision(Kind.LATCH, f'rollout stopped: {reason}'))
        self.stopped = reason
        self._disarm(reason)
        return out

    def outage(self, what: str) -> list[Decision]:
        """Something the gate supervises failed for ``stall_timeout`` or longer (``what``:
        joint_states not received, the gate itself not scheduled): a live rollout stops as
        by :meth:`stop`, so a driver or gate that hung and resumed never moves the arm by
        itself. Nothing happens while stopped or before the rollout went live."""
        if self.stopped is not None or self._live_at is None:
            return []
        return self.stop(what)

    def latch_fault(self, reason: str) -> list[Decision]:
        """Something the gate must not act past (a different robot model offered during a
        rollout): cancel, latch the fault until ``safety/reset`` and disarm (a new preflight
        and start after the reset)."""
        out = self._cancel(f'fault: {reason}')
        if self.fault is None:
            self.fault = reason
            out.append(Decision(Kind.LATCH, f'fault latched: {reason}'))
        self._disarm(f'fault latched: {reason}')
        return out

    def cancel(self, reason: str) -> list[Decision]:
        """Cancel without latching (invalid robot model, shutdown)."""
        return self._cancel(reason)

    def goal_ended(self, sequence: int) -> None:
        """The executor reported the end of goal ``sequence``.

        When it was the newest, the running goal is the newest one still not ended (the
        previous one, when the executor refused this one at the seam), else none."""
        self._live.discard(sequence)
        if self.goal_sequence == sequence:
            self.goal_sequence = max(self._live, default=None)

    def goal_refused(self, sequence: int) -> None:
        """The executor refused goal ``sequence`` (it never ran)."""
        self.goal_ended(sequence)

    def goal_halted(self, sequence: int, code: str) -> list[Decision]:
        """The executor ended goal ``sequence`` with ``code``. A code of
        :data:`EXECUTOR_HALTS` (the executor held on its own: its supervision saw the gate,
        the joint states, the command stream or the control loop fail) stops the rollout
        as :meth:`stop` does, so that nothing moves again until a new preflight and start,
        however the failure ended (a gate that was SIGSTOPped and continued, a driver that
        came back). Any other code only ends the goal."""
        self.goal_ended(sequence)
        if code not in EXECUTOR_HALTS or self.stopped is not None:
            return []
        return self.stop(f'the executor held on its own ({code}, goal {sequence})')

    def reset(self) -> tuple[bool, str]:
        """``safety/reset``: clear the e-stop (once released) and the fault latch.

        The rollout-stopped latch stays: a new preflight and start arm the gate again.
        """
        if self.estop and self.estop_down:
            return False, 'e-stop still pressed'
        was = [x for x in (('e-stop' if self.estop else ''), self.fault or '') if x]
        self.estop = False
        self.fault = None
        msg = 'cleared: ' + ('; '.join(was) if was else 'nothing latched')
        if self.stopped is not None:
            msg += f' (the rollout stays stopped: {self.stopped}; preflight and start again)'
        return True, msg
