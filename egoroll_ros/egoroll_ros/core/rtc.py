"""Real-time chunking guidance (policy_node's ``policy.rtc``): which of the rollout's chunks
the executor is running, how much of it is left, and the inference delay, as the
:class:`~egoroll_ros.core.policy.RtcRequest` a policy that does RTC receives with each
inference (docs/policy.md, "Real-time chunking").

Pure: the node feeds the chunks it publishes and the executor's ``executor/state`` as plain
values, with steady receipt times.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
import math

from egoroll_ros.core.policy import PolicyMetadata, RtcRequest
from egoroll_ros.errors import ConfigError

#: executor/state older than this (s, steady) is not used; the node's own clock is.
EXECUTOR_STATE_MAX_AGE = 0.5
#: How many of the inference latencies (the latest) the delay is taken from (LeRobot's RTC
#: engine takes the longest of its recent ones).
DELAY_WINDOW = 10


def check_rtc_config(rtc: bool, aggregation_active: bool, cartesian: bool) -> None:
    """Refuse ``policy.rtc`` beside what would rewrite or cannot carry its chunks.

    Raises:
        ConfigError: RTC with an active aggregation stage, or with a Cartesian configuration.
    """
    if not rtc:
        return
    if aggregation_active:
        raise ConfigError("parameters 'policy.rtc' and 'aggregation.*': real-time "
                          'chunking inpaints the seam in the policy; aggregation '
                          '(mode, pin_latency) would rewrite its chunk: choose one')
    if cartesian:
        raise ConfigError("parameter 'policy.rtc': joint policies only (this "
                          'configuration is Cartesian)')


def check_rtc_policy(rtc: bool, metadata: PolicyMetadata) -> None:
    """Refuse ``policy.rtc`` for a policy that times its own points.

    Raises:
        ConfigError: the policy gives its own ``time_from_start`` (RTC aligns chunks by the
            step period only).
    """
    if rtc and metadata.time_from_start is not None:
        raise ConfigError("parameter 'policy.rtc': the policy gives its own "
                          'time_from_start; RTC aligns chunks by the step period only')


class RunningChunk:
    """The running chunk of one rollout, from the chunks published and the executor's state.

    Attributes:
        chunks: the latest live chunks published in this rollout, ``(sequence, observation
            stamp, points)``, oldest first.
        executor_state: the executor's last state, ``(steady receipt time, active sequence,
            state)``, or None.
        last: what the last :meth:`request` decided, in words (for diagnostics).
    """

    def __init__(self, keep: int = 8, max_age: float = EXECUTOR_STATE_MAX_AGE) -> None:
        self.chunks: collections.deque[tuple[int, float, int]] = collections.deque(maxlen=keep)
        self.executor_state: tuple[float, int, str] | None = None
        self.max_age = max_age
        self.last = 'off'

    def clear(self) -> None:
        """A new rollout: no chunk of it is published yet."""
        self.chunks.clear()

    def published(self, sequence: int, stamp: float, points: int) -> None:
        """A live joint chunk went out (its observation stamp, its number of points)."""
        self.chunks.append((int(sequence), float(stamp), int(points)))

    def executor(self, now: float, active_sequence: int, state: str) -> None:
        """An ``executor/state`` arrived at steady time ``now``."""
        self.executor_state = (now, int(active_sequence), str(state))

    def request(self, stamp: float, period: float, now: float,
                latencies: Sequence[float]) -> RtcRequest | None:
        """The guidance for an observation stamped ``stamp``, or None (and :attr:`last` says
        why).

        The running chunk is the one the executor's state names (fresh within ``max_age`` of
        steady ``now`` and executing one of this rollout's chunks; executing another goal or
        holding: none); without a fresh state, by this node's own clock, the last chunk
        published. Its points due at or before ``stamp`` (it steps every ``period`` from its
        own stamp) are executed; the inference delay is the longest of the last
        :data:`DELAY_WINDOW` ``latencies`` (s, oldest first) in steps, rounded up.
        """
        if not self.chunks:
            self.last = 'no chunk published yet in this rollout'
            return None
        ex = self.executor_state
        if ex is not None and now - ex[0] < self.max_age:
            running = next((c for c in self.chunks if ex[2] == 'executing' and c[0] == ex[1]),
                           None)
            source = 'executor/state'
        else:
            running, source = self.chunks[-1], 'own clock'
        if running is None:
            self.last = f'no chunk of this rollout running ({source}: {ex[2]}, ' \
                f'sequence {ex[1]})'
            return None
        seq, prefix_stamp, points = running
        executed = max(0, round((stamp - prefix_stamp) / period))
        if executed >= points:
            self.last = f'chunk {seq} ({source}) is fully executed'
            return None
        recent = list(latencies)[-DELAY_WINDOW:]
        delay = math.ceil(max(recent) / period - 1e-9) if recent else 0
        self.last = (f'chunk {seq} ({source}): {points - executed} points left, '
                     f'inference delay {delay} steps')
        return RtcRequest(prefix_stamp, executed, delay)
