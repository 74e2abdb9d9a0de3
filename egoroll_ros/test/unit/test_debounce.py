"""Quest button debouncing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from egoroll_ros.core.debounce import ButtonDebouncer

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun


def _edges(samples: list[tuple[float, bool]], stable: float = 0.05) -> int:
    d = ButtonDebouncer(stable)
    return sum(d.update(v, t) for t, v in samples)


def test_bouncing_press_gives_exactly_one_toggle():
    samples = [(0.00, False), (0.01, False), (0.06, False),
               (0.10, True), (0.102, False), (0.104, True), (0.107, False), (0.109, True),
               (0.12, True), (0.14, True), (0.16, True), (0.20, True),
               (0.30, False), (0.302, True), (0.305, False), (0.33, False), (0.40, False)]
    assert _edges(samples) == 1


def test_two_clean_presses_give_two_toggles():
    s = [(0.0, False), (0.1, False), (0.2, True), (0.3, True), (0.4, False), (0.5, False),
         (0.6, True), (0.7, True)]
    assert _edges(s) == 2


def test_button_held_at_start_does_not_toggle():
    assert _edges([(0.0, True), (0.1, True), (0.2, True)]) == 0


def test_glitch_shorter_than_stable_time_is_ignored():
    assert _edges([(0.0, False), (0.1, False), (0.12, True), (0.13, False), (0.3, False)]) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 0.045), st.booleans()), min_size=1, max_size=40))
def test_bounces_within_stable_time_then_steady_give_at_most_one_edge(bounces):
    # every bounce happens within one stable_time window, then the button stays pressed
    samples = [(0.0, False), (0.5, False)] + sorted((1.0 + dt, v) for dt, v in bounces)
    t = 1.045
    samples += [(t + 0.01, True), (t + 0.2, True), (t + 0.5, True)]
    d = ButtonDebouncer(0.05)
    edges = sum(d.update(v, ts) for ts, v in samples)
    assert edges <= 1
    assert d.pressed is True


def test_press_edge_comes_at_its_deadline_without_another_sample():
    # A joy stream that publishes only on change sends one sample per press: the edge must not
    # wait for the next one. ``deadline`` says when to poll; poll there gives the edge.
    d = ButtonDebouncer(0.05)
    assert d.deadline is None
    assert not d.update(False, 0.0)
    assert d.deadline == 0.05            # the first stable value (no edge) is pending
    assert not d.poll(0.05) and d.deadline is None and d.pressed is False
    assert not d.update(True, 1.0)
    assert d.deadline == 1.05
    assert not d.poll(1.049) and d.deadline == 1.05    # not yet stable
    assert d.poll(1.05) and d.pressed is True and d.deadline is None
    assert not d.poll(2.0)               # one edge per press


def test_deadline_moves_with_each_bounce():
    d = ButtonDebouncer(0.05)
    d.update(False, 0.0)
    d.poll(0.1)
    d.update(True, 1.0)
    d.update(False, 1.01)
    assert d.deadline is None            # back to the debounced state: nothing pending
    d.update(True, 1.02)
    assert d.deadline == 1.07
    assert not d.poll(1.06) and d.poll(1.07)


def test_changed_at_is_when_the_press_began_not_its_debounced_edge():
    d = ButtonDebouncer(0.05)
    assert d.changed_at is None
    d.update(False, 0.0)
    d.poll(0.1)
    d.update(True, 1.0)
    d.update(False, 1.01)                  # a bounce restarts the press
    d.update(True, 1.02)
    assert d.poll(1.08) and d.changed_at == 1.02


def test_a_poll_at_the_deadline_always_decides_whatever_the_rounding():
    for since in (0.2, 0.7, 1.1, 3.3, 1e5 + 0.1):
        d = ButtonDebouncer(0.05)
        d.update(False, since - 1.0)
        d.poll(since - 0.5)
        d.update(True, since)
        assert d.poll(d.deadline) and d.deadline is None
