"""The rollout state machine: transitions, preflight validity, stop/publish race."""

from __future__ import annotations

import threading

import pytest

from egoroll_ros.core.rollout import RolloutStateMachine, State, TransitionError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _ready(clock: Clock | None = None, validity: float = 5.0) -> RolloutStateMachine:
    sm = RolloutStateMachine(validity, clock or Clock())
    sm.begin_preflight()
    sm.end_preflight(True, 'ok')
    return sm


def test_states_match_the_rollout_status_constants():
    from egoroll_interfaces.msg import RolloutStatus
    for s in State:
        assert getattr(RolloutStatus, f'STATE_{s.name}') == s.value


def test_configured_or_not_is_the_lifecycle_state_only():
    # one state model: the node's lifecycle says unconfigured / shutting down, not this machine
    assert not {'UNCONFIGURED', 'SHUTDOWN'} & set(State.__members__)


def test_start_needs_a_passing_preflight():
    sm = RolloutStateMachine(5.0, Clock())
    assert sm.state is State.IDLE   # it exists only while the node is configured
    with pytest.raises(TransitionError, match='needs a passing preflight'):
        sm.start()
    sm.begin_preflight()
    sm.end_preflight(False, 'stale input: joint_states never received')
    assert sm.state is State.IDLE and 'joint_states' in sm.detail
    with pytest.raises(TransitionError):
        sm.start()


def test_preflight_expires_after_the_validity_window():
    clock = Clock()
    sm = _ready(clock, validity=5.0)
    clock.t += 5.01
    assert sm.state is State.IDLE and 'expired' in sm.detail
    with pytest.raises(TransitionError):
        sm.start()
    sm = _ready(clock, validity=5.0)
    clock.t += 4.9
    sm.start()
    assert sm.state is State.RUNNING


def test_sequence_is_one_increasing_stream_across_rollouts_and_shadow_chunks():
    sm = RolloutStateMachine(5.0, Clock(), first_sequence=100)
    sm.begin_preflight()
    assert sm.next_sequence() == 100  # the preflight's shadow chunk
    sm.end_preflight(True, 'ok')
    gen = sm.start()
    assert [sm.publish_if_current(gen, lambda s: s) for _ in range(3)] == [101, 102, 103]
    sm.stop()
    assert sm.publish_if_current(gen, lambda s: s) is None
    sm.begin_preflight()
    assert sm.next_sequence() == 104
    sm.end_preflight(True, 'ok')
    gen2 = sm.start()
    # A new rollout continues the stream: the gate and the executor drop non-newer sequences.
    assert gen2 != gen and sm.publish_if_current(gen2, lambda s: s) == 105
    assert sm.chunks_published == 4


def test_fault_blocks_publishing_and_stop_or_preflight_clears_it():
    sm = _ready()
    gen = sm.start()
    assert sm.fault('non-finite output', gen)
    assert sm.state is State.FAULT and sm.publish_if_current(gen, lambda s: s) is None
    with pytest.raises(TransitionError):
        sm.start()
    sm.stop()
    assert sm.state is State.IDLE
    sm.fault('x')
    sm.begin_preflight()
    assert sm.state is State.PREFLIGHT
    # a fault reported for an old generation does nothing
    sm.end_preflight(True, 'ok')
    assert not sm.fault('late', gen) and sm.state is State.READY


def test_preflight_refused_while_running():
    sm = _ready()
    sm.start()
    with pytest.raises(TransitionError, match='stop first'):
        sm.begin_preflight()


def _one_rollout_with_racing_publisher() -> list[int]:
    sm = _ready()
    gen = sm.start()
    stopped = threading.Event()
    late: list[int] = []

    def publish(seq: int) -> int:
        if stopped.is_set():
            late.append(seq)
        return seq

    def hammer() -> None:
        while not stopped.is_set():
            sm.publish_if_current(gen, publish)
        for _ in range(20):
            sm.publish_if_current(gen, publish)

    t = threading.Thread(target=hammer)
    t.start()
    sm.stop()
    stopped.set()
    t.join()
    return late


def test_no_publish_after_stop_returns_under_contention():
    """200 rollouts; a publisher thread hammers publish_if_current while stop lands."""
    for _ in range(200):
        assert _one_rollout_with_racing_publisher() == []
