"""The rollout state machine of the policy node (pure; thread-safe).

States (values equal ``RolloutStatus.STATE_*``): IDLE -> (preflight) PREFLIGHT -> READY ->
(start, within ``preflight_validity`` s of the passing preflight) RUNNING -> (stop) IDLE. An
inference error or non-finite output moves to FAULT; stop or a new preflight clears it. READY
expires back to IDLE when the preflight gets old.

The machine exists only while the node is configured: the node's lifecycle state is the one
model of configured or not (``RolloutStatus.STATE_UNCONFIGURED`` and ``STATE_SHUTDOWN`` are
lifecycle states the node reports itself), so there is no unconfigured rollout state here.

Stop and publish share :attr:`RolloutStateMachine.lock` and a generation counter: a chunk is
published only through :meth:`RolloutStateMachine.publish_if_current` while the rollout that
computed it is still the current RUNNING one, so once :meth:`stop` has returned no chunk of
that rollout can go out.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
import threading
from typing import TypeVar

T = TypeVar('T')


class State(IntEnum):
    """Rollout states of a configured node (same numbers as the RolloutStatus constants)."""

    IDLE = 1
    PREFLIGHT = 2
    READY = 3
    RUNNING = 4
    FAULT = 5


class TransitionError(Exception):
    """A request not allowed in the current state; the message says why."""


class RolloutStateMachine:
    """Owns the rollout state, its detail string, the generation and chunk sequence.

    The sequence is ONE stream for the life of the state machine: shadow (preflight) and live
    chunks of every rollout draw from it, so the safety gate and the executor, which drop any
    sequence not newer than the last, see it grow across stop/start cycles.

    Args:
        preflight_validity: seconds a passing preflight allows a start.
        clock: steady clock (``time.monotonic`` by default), injectable for tests.
        first_sequence: the first sequence handed out (policy_node passes the wall-clock time
            in microseconds, so a restarted node continues above its predecessor).
    """

    def __init__(self, preflight_validity: float, clock: Callable[[], float],
                 first_sequence: int = 1) -> None:
        self.preflight_validity = float(preflight_validity)
        self._clock = clock
        self.lock = threading.RLock()
        self._state = State.IDLE
        self._detail = 'configured; waiting for preflight'
        self._generation = 0
        self._sequence = int(first_sequence) - 1
        self._preflight_at: float | None = None
        self.chunks_published = 0

    # ----- queries -----
    @property
    def state(self) -> State:
        """Current state (READY expires to IDLE here when the preflight got old)."""
        with self.lock:
            self._expire()
            return self._state

    @property
    def detail(self) -> str:
        """Why the node is in this state."""
        with self.lock:
            self._expire()
            return self._detail

    @property
    def last_sequence(self) -> int:
        """The last sequence handed out (``first_sequence - 1`` before the first)."""
        with self.lock:
            return self._sequence

    @property
    def generation(self) -> int:
        """Increments on every start, stop, fault and reconfiguration."""
        with self.lock:
            return self._generation

    def _expire(self) -> None:
        if self._state is State.READY and self._preflight_at is not None and \
                self._clock() - self._preflight_at > self.preflight_validity:
            self._state = State.IDLE
            self._detail = (f'preflight expired (older than {self.preflight_validity:g} s); '
                            f'run preflight again')
            self._preflight_at = None

    def _set(self, state: State, detail: str, bump: bool = False) -> None:
        self._state = state
        self._detail = detail
        if bump:
            self._generation += 1

    # ----- transitions -----
    def begin_preflight(self) -> None:
        """Enter PREFLIGHT (allowed from IDLE, READY and FAULT).

        Raises:
            TransitionError: running, or a preflight already in progress.
        """
        with self.lock:
            self._expire()
            if self._state not in (State.IDLE, State.READY, State.FAULT):
                raise TransitionError(f'preflight not allowed in state {self._state.name}'
                                      + (' (stop first)' if self._state is State.RUNNING
                                         else ''))
            self._preflight_at = None
            self._set(State.PREFLIGHT, 'running the preflight inference', bump=True)

    def end_preflight(self, passed: bool, detail: str, fault: bool = False) -> None:
        """Finish the preflight: READY when passed, FAULT when the policy failed, else IDLE."""
        with self.lock:
            if self._state is not State.PREFLIGHT:
                return
            if passed:
                self._preflight_at = self._clock()
                self._set(State.READY, detail)
            else:
                self._set(State.FAULT if fault else State.IDLE, detail, bump=True)

    def start(self) -> int:
        """Enter RUNNING; returns the rollout's generation (the sequence continues).

        Raises:
            TransitionError: not READY (with why: no preflight, expired, running, fault).
        """
        with self.lock:
            self._expire()
            if self._state is State.RUNNING:
                raise TransitionError('already running')
            if self._state is not State.READY:
                raise TransitionError(f'start needs a passing preflight within the last '
                                      f'{self.preflight_validity:g} s (state '
                                      f'{self._state.name}: {self._detail})')
            self._preflight_at = None
            self._set(State.RUNNING, 'live rollout', bump=True)
            return self._generation

    def stop(self, reason: str = 'stopped') -> State:
        """Leave RUNNING, FAULT or READY for IDLE; returns the state it left.

        After this returns, :meth:`publish_if_current` refuses every chunk of the old rollout.
        """
        with self.lock:
            old = self._state
            if old in (State.RUNNING, State.FAULT, State.READY, State.PREFLIGHT):
                self._preflight_at = None
                self._set(State.IDLE, reason, bump=True)
            return old

    def fault(self, reason: str, generation: int | None = None) -> bool:
        """Enter FAULT (only if ``generation`` is still current, when given)."""
        with self.lock:
            if generation is not None and generation != self._generation:
                return False
            self._preflight_at = None
            self._set(State.FAULT, reason, bump=True)
            return True

    def is_current(self, generation: int) -> bool:
        """Whether ``generation`` is the current RUNNING rollout."""
        with self.lock:
            return self._state is State.RUNNING and generation == self._generation

    def next_sequence(self) -> int:
        """Take the next sequence number (for a shadow chunk; call with :attr:`lock` held)."""
        with self.lock:
            self._sequence += 1
            return self._sequence

    def publish_if_current(self, generation: int, publish: Callable[[int], T]) -> T | None:
        """Call ``publish(sequence)`` under the lock iff ``generation`` is the current running
        rollout; the sequence increments only when called. Returns publish's result or None.
        """
        with self.lock:
            if not (self._state is State.RUNNING and generation == self._generation):
                return None
            self._sequence += 1
            result = publish(self._sequence)
            self.chunks_published += 1
            return result
