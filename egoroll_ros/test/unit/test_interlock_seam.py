"""The interlock when the executor refuses a goal at the seam (seam blend) and keeps running
the previous one: that one is again the running goal the watchdog protects."""

import pytest
from test_interlock import armed, good

from egoroll_ros.core.interlock import Kind

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun


def test_a_goal_refused_at_the_seam_leaves_the_previous_one_running():
    il = armed()
    good(il, 1)
    good(il, 2)
    il.goal_ended(2)              # refused at the seam: sequence 1 continues in the executor
    assert il.goal_active and il.goal_sequence == 1
    # so a stale joint_states still cancels it
    assert Kind.CANCEL in [d.kind for d in il.timer(10.0, joint_state_received=0.0)]


def test_a_preempted_goal_ending_leaves_the_newest_running():
    il = armed()
    good(il, 1)
    good(il, 2)
    il.goal_ended(1)              # preempted by 2
    assert il.goal_sequence == 2
    il.goal_ended(2)
    assert not il.goal_active


def test_a_cancel_forgets_every_goal():
    il = armed()
    good(il, 1)
    good(il, 2)
    il.cancel('test')
    il.goal_ended(2)
    assert not il.goal_active
