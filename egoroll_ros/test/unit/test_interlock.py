"""The interlock core (core/interlock.py) by behaviour: every decision, every latch."""

from __future__ import annotations

import random

import pytest

from egoroll_ros.core.interlock import (
    EXECUTOR_HALTS,
    STATE_DEADMAN,
    STATE_ESTOP,
    STATE_FAULT,
    STATE_OK,
    STATE_STOPPED,
    Interlock,
    InterlockConfig,
    Kind,
)
from egoroll_ros.errors import ConfigError

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun


def kinds(decisions):
    return [d.kind for d in decisions]


POLICY = 'p' * 64


def armed(**kw) -> Interlock:
    """An interlock with the deadman held, armed by an accepted preflight 0."""
    il = Interlock(InterlockConfig(**kw))
    il.joy(0.0, estop_down=False, deadman_held=True, confirm_down=False)
    arm(il, 0)
    return il


def arm(il, seq, policy=POLICY):
    """A preflight ``seq`` accepted, then the start's arm request naming it."""
    good(il, seq, shadow=True, policy_id=policy)
    ok, why = il.arm(seq, policy)
    assert ok, why


def good(il, seq, now=0.0, **kw):
    args = dict(shadow=False, rejected=False, real_rejection=False, needs_confirmation=False,
                executor_ready=True, policy_id=POLICY)
    args.update(kw)
    return il.chunk(now, f'chunk{seq}', seq, **args)


def test_accepted_chunk_is_forwarded_with_its_chunk():
    il = armed()
    out = good(il, 1)
    assert out.forwarded and out.decisions[0].chunk == 'chunk1'
    assert il.goal_active and il.last_forwarded == 1


def test_shadow_chunk_is_never_forwarded():
    il = armed()
    assert not good(il, 1, shadow=True).decisions


def test_deadman_not_held_blocks_and_releasing_it_cancels():
    il = Interlock(InterlockConfig())
    arm(il, 0)
    out = good(il, 1)
    assert not out.forwarded and [b.check for b in out.blocks] == ['deadman']
    il.joy(0.0, False, True, False)
    assert good(il, 2).forwarded
    decisions, _ = il.joy(0.1, False, False, False)
    assert Kind.CANCEL in kinds(decisions) and not il.goal_active
    assert il.state() == STATE_DEADMAN


def test_estop_cancels_latches_and_reset_needs_release():
    il = armed()
    good(il, 1)
    decisions, _ = il.joy(0.1, True, True, False)
    assert kinds(decisions) == [Kind.CANCEL, Kind.LATCH]
    assert il.state() == STATE_ESTOP and not il.motion_allowed()
    assert [b.check for b in good(il, 2).blocks] == ['estop', 'rollout_stopped']
    ok, why = il.reset()
    assert not ok and 'still pressed' in why
    il.joy(0.2, False, True, False)
    assert il.reset()[0]
    # the e-stop disarmed the gate: a new preflight and start, not the reset, arm it again
    assert [b.check for b in good(il, 3).blocks] == ['rollout_stopped']
    arm(il, 4)
    assert good(il, 5).forwarded


def test_rejection_under_hold_cancels_and_latches_a_fault():
    il = armed()
    good(il, 1)
    out = good(il, 2, rejected=True, real_rejection=True)
    assert kinds(out.decisions) == [Kind.CANCEL, Kind.LATCH]
    assert il.state() == STATE_FAULT
    assert [b.check for b in good(il, 3).blocks] == ['latched_fault', 'rollout_stopped']
    assert il.reset()[0]
    assert [b.check for b in good(il, 4).blocks] == ['rollout_stopped']
    arm(il, 5)
    assert good(il, 6).forwarded


def test_not_ready_rejection_cancels_without_a_fault():
    il = armed()
    out = good(il, 1, rejected=True, real_rejection=False)
    assert kinds(out.decisions) == [Kind.CANCEL] and il.fault is None


def test_skip_drops_a_rejected_chunk_and_lets_the_goal_run():
    il = armed(on_reject='skip')
    good(il, 1)
    out = good(il, 2, rejected=True, real_rejection=True)
    assert not out.decisions and il.goal_active and il.fault is None


def test_soft_violation_holds_for_confirmation_then_forwards():
    il = armed()
    out = good(il, 1, needs_confirmation=True)
    assert out.held and il.pending_sequence == 1
    chunk, _ = il.take_pending(1.0)
    assert chunk == 'chunk1'
    assert il.confirmed(chunk, 1, rejected=False, executor_ready=True).forwarded


def test_confirmation_expires_on_the_timer():
    il = armed(confirm_timeout=1.0, joy_timeout=100.0)
    good(il, 1, needs_confirmation=True)
    assert kinds(il.timer(2.0, 2.0)) == [Kind.EXPIRE]
    chunk, why = il.take_pending(2.0)
    assert chunk is None and 'expired' in why


def test_stale_joy_releases_the_deadman_and_cancels():
    il = armed(joy_timeout=0.5)
    good(il, 1)
    assert Kind.CANCEL in kinds(il.timer(0.6, 0.6))
    assert not il.deadman_held and not il.goal_active


def test_without_the_deadman_a_stale_quest_link_still_stops_the_rollout():
    """Issue 24.2 (hazards S18): require_deadman off, require_quest on (an e-stop button):
    no quest/joy yet blocks (quest_link) and forbids motion; a fresh one allows it; stale
    during a live rollout it stops the rollout (a new preflight and start), before any live
    chunk it only cancels. require_quest off: quest/joy is not watched at all."""
    il = Interlock(InterlockConfig(require_deadman=False, require_quest=True, joy_timeout=0.5))
    arm(il, 0)
    out = good(il, 1)
    assert not out.forwarded and [b.check for b in out.blocks] == ['quest_link']
    assert il.state() == STATE_DEADMAN and not il.motion_allowed()
    il.joy(1.0, estop_down=False, deadman_held=False, confirm_down=False)
    assert il.motion_allowed() and good(il, 2, now=1.0).forwarded
    out = il.timer(1.6, 1.6)
    assert Kind.CANCEL in kinds(out) and il.stopped is not None and 'e-stop' in il.stopped
    il.joy(2.0, estop_down=False, deadman_held=False, confirm_down=False)
    assert [b.check for b in good(il, 3, now=2.0).blocks] == ['rollout_stopped']
    free = Interlock(InterlockConfig(require_deadman=False, require_quest=False))
    arm(free, 0)
    assert good(free, 1).forwarded and free.timer(100.0, 100.0) == []


@pytest.mark.parametrize(('deadman', 'estop_button', 'watched'), [
    (True, 1, True), (True, -1, True), (False, 1, True), (False, -1, False)])
def test_the_gate_watches_quest_joy_unless_neither_deadman_nor_estop_uses_it(
        deadman, estop_button, watched):
    from egoroll_ros.core.interlock import interlock_config_from_params
    p = dict(require_deadman=deadman, estop_button=estop_button, deadman_threshold=0.5,
             joy_timeout=0.5, max_joint_state_age=0.2, on_reject='hold', confirm_timeout=10.0,
             stall_timeout=1.0)
    assert interlock_config_from_params(p).require_quest is watched


def test_stale_joint_states_cancel_a_running_goal_only():
    il = armed(max_joint_state_age=0.2, joy_timeout=100.0)
    assert il.timer(1.0, 0.0) == []            # nothing running: nothing to cancel
    good(il, 1)
    assert kinds(il.timer(1.0, 0.5)) == [Kind.CANCEL]
    good(il, 2)
    assert kinds(il.timer(1.0, None)) == [Kind.CANCEL]


def test_stop_cancels_and_blocks_until_a_preflight_accepted_after_it_and_an_arm():
    il = armed()
    good(il, 5)
    decisions = il.stop('policy/stop')
    assert kinds(decisions) == [Kind.CANCEL, Kind.LATCH] and il.state() == STATE_STOPPED
    assert [b.check for b in good(il, 6).blocks] == ['rollout_stopped']
    # an accepted shadow chunk changes nothing by itself; a rejected one cannot be armed by
    good(il, 7, shadow=True)
    assert il.state() == STATE_STOPPED
    good(il, 8, shadow=True, rejected=True, real_rejection=True)
    assert not il.arm(8, POLICY)[0]
    il.reset()
    assert il.state() == STATE_STOPPED          # reset does not clear a stop
    ok, why = il.arm(7, POLICY)
    assert ok and il.state() == STATE_OK, why
    assert [b.check for b in good(il, 7).blocks] == ['rollout_stopped']  # not past preflight
    assert good(il, 9).forwarded


def test_the_gate_starts_disarmed_and_a_shadow_chunk_never_arms_it():
    il = Interlock(InterlockConfig())
    il.joy(0.0, False, True, False)
    assert il.state() == STATE_STOPPED and 'started disarmed' in il.stopped
    for seq in (1, 2, 3):
        good(il, seq, shadow=True)
    assert il.state() == STATE_STOPPED
    assert [b.check for b in good(il, 4).blocks] == ['rollout_stopped']


def test_a_stop_during_a_takeover_holds_against_the_shadow_chunks_that_follow():
    """Issue 23 reproduction 1: forward 1..10, stop, a shadow 11 (the policy in shadow during a
    takeover) used to re-arm and let live 12 through."""
    il = armed()
    for seq in range(1, 11):
        assert good(il, seq).forwarded
    il.stop('safety/stop')
    good(il, 11, shadow=True)
    assert il.state() == STATE_STOPPED
    out = good(il, 12)
    assert not out.forwarded and 'rollout_stopped' in [b.check for b in out.blocks]


def test_an_arm_request_naming_a_preflight_from_before_the_stop_or_a_duplicate_after_it_fails():
    il = Interlock(InterlockConfig())
    il.joy(0.0, False, True, False)
    good(il, 10, shadow=True)
    assert il.arm(10, POLICY)[0]
    assert il.arm(10, POLICY) == (True, 'already armed by preflight 10')   # duplicate: no-op
    assert good(il, 11).forwarded
    il.stop('policy/stop')
    ok, why = il.arm(10, POLICY)          # the duplicate arriving after a newer stop
    assert not ok and 'not accepted by the gate since the last stop' in why
    good(il, 12, shadow=True)             # a preflight after the stop, but another policy's
    ok, why = il.arm(12, 'q' * 64)
    assert not ok and 'came from policy' in why
    assert il.state() == STATE_STOPPED


def test_arming_is_refused_while_the_estop_or_a_fault_is_latched():
    il = Interlock(InterlockConfig())
    il.joy(0.0, True, True, False)
    good(il, 1, shadow=True)
    ok, why = il.arm(1, POLICY)
    assert not ok and 'e-stop' in why
    il.joy(0.1, False, True, False)
    il.reset()
    good(il, 2, shadow=True)
    assert il.arm(2, POLICY)[0]


def test_a_chunk_far_beyond_the_preflight_is_refused_and_moves_no_floor():
    """Issue 23 reproduction 3b: one chunk with sequence 2**64-1 poisoned the floor."""
    from egoroll_ros.core.interlock import MAX_SEQUENCE_LEAD

    il = armed()
    out = good(il, 2**64 - 1)
    assert not out.forwarded and [b.check for b in out.blocks] == ['sequence']
    out = good(il, MAX_SEQUENCE_LEAD + 1)
    assert [b.check for b in out.blocks] == ['sequence']
    assert good(il, MAX_SEQUENCE_LEAD).forwarded
    il.stop('x')
    good(il, MAX_SEQUENCE_LEAD + 5, shadow=True)
    assert il.arm(MAX_SEQUENCE_LEAD + 5, POLICY)[0]    # the stop floor was never poisoned
    assert good(il, MAX_SEQUENCE_LEAD + 6).forwarded


def test_live_chunks_must_come_from_the_armed_policy_or_the_operator():
    from egoroll_ros.core.interlock import OPERATOR_ID

    il = armed()
    out = good(il, 1, policy_id='q' * 64)
    assert [b.check for b in out.blocks] == ['policy_id']
    assert good(il, 2, policy_id=OPERATOR_ID).forwarded
    assert good(il, 3).forwarded


@pytest.mark.parametrize('stop', [
    pytest.param(lambda il: il.stop('safety/stop'), id='stop'),
    pytest.param(lambda il: il.toggle(5.0), id='toggle'),
    pytest.param(lambda il: il.joy(5.0, True, True, False), id='estop'),
    pytest.param(lambda il: good(il, 99, now=5.0, rejected=True, real_rejection=True),
                 id='fault'),
    pytest.param(lambda il: il.timer(5.0 + 1.0, 6.0), id='quest_joy_lost'),
    pytest.param(lambda il: il.outage('the gate was not scheduled for 2 s'), id='outage'),
    pytest.param(lambda il: il.goal_halted(1, 'STALLED'), id='executor_halt'),
])
def test_every_stop_of_any_kind_disarms_and_only_a_new_preflight_and_arm_rearm(stop):
    il = armed(joy_timeout=0.5)
    il.joy(4.9, False, True, False)
    assert good(il, 1, now=4.9).forwarded
    stop(il)
    assert il.stopped is not None and il.armed_by is None
    il.joy(6.0, False, True, False)
    il.reset()
    assert not good(il, 2, now=6.0).forwarded
    arm(il, 3)
    assert good(il, 4, now=6.0).forwarded


def test_executor_unavailable_is_the_reason_in_the_verdict():
    il = armed()
    out = good(il, 1, executor_ready=False)
    assert not out.forwarded and [b.check for b in out.blocks] == ['executor_unavailable']
    assert good(il, 2).forwarded


def test_a_shadow_chunk_is_not_accepted_while_no_executor_could_take_the_live_one():
    il = armed()
    il.stop('stopped by request')
    out = good(il, 1, shadow=True, executor_ready=False)
    assert [b.check for b in out.blocks] == ['executor_unavailable'] and not out.forwarded
    assert not il.arm(1, POLICY)[0]                 # a blocked preflight cannot be armed by
    assert not good(il, 2, shadow=True).blocks      # the executor discovered: it can
    assert il.arm(2, POLICY)[0] and il.state() == STATE_OK


def test_latches_do_not_block_a_shadow_chunk_a_dry_run_is_checked_with_the_estop_pressed():
    il = armed()
    il.estop = True
    out = good(il, 1, shadow=True)
    assert not out.blocks and not out.forwarded and not out.decisions


def test_reset_keeps_the_sequence_floor_the_executor_enforces():
    il = armed()
    good(il, 10)
    il.joy(0.1, True, True, False)
    il.joy(0.2, False, True, False)
    assert il.reset()[0]
    arm(il, 11)
    good(il, 12)
    out = good(il, 12)
    assert not out.forwarded and [b.check for b in out.blocks] == ['old_sequence']


def test_confirm_edge_is_reported_once_per_press():
    il = armed()
    edges = [il.joy(0.0, False, True, c)[1] for c in (True, True, False, True)]
    assert edges == [True, False, False, True]


def test_every_cancel_bumps_the_epoch():
    il = armed()
    e = il.epoch
    il.stop('x')
    il.cancel('y')
    assert il.epoch == e + 2


# ---- the motion fence (carried by the heartbeat; the executor lets nothing at or below it move)
def test_the_fence_starts_at_zero_and_a_cancel_with_nothing_forwarded_leaves_it():
    il = armed()
    assert il.fence == 0 and not il.fence_changed
    il.stop('nothing ran')
    assert il.fence == 0 and not il.fence_changed


@pytest.mark.parametrize('stop', [
    pytest.param(lambda il: il.stop('safety/stop'), id='safety_stop'),
    pytest.param(lambda il: il.joy(1.0, True, True, False), id='estop'),
    pytest.param(lambda il: il.joy(1.0, False, False, False), id='deadman_release'),
    pytest.param(lambda il: good(il, 99, now=1.0, rejected=True, real_rejection=True),
                 id='fault_latch'),
    pytest.param(lambda il: il.timer(1.0, None), id='stale_joint_states'),
    pytest.param(lambda il: il.timer(9.0, 9.0), id='stale_joy'),
    pytest.param(lambda il: il.cancel('shutdown'), id='cancel'),
])
def test_every_stop_of_motion_raises_the_fence_to_the_last_forwarded_sequence(stop):
    il = armed()
    assert good(il, 5).forwarded and good(il, 7).forwarded   # 7 may still be in flight
    il.goal_ended(5)
    assert il.fence == 0
    stop(il)
    assert il.fence == 7 and il.fence_changed
    assert il.fence_published() == 7 and not il.fence_changed


def test_the_fence_never_falls_and_goals_after_a_rearm_are_above_it():
    il = armed()
    good(il, 5)
    il.stop('first')
    assert il.fence == 5
    arm(il, 6)                               # re-armed by a new preflight and start
    assert il.state() == STATE_OK
    out = good(il, 7)
    assert out.forwarded and 7 > il.fence    # never fenced by the fence of the stop before
    assert not good(il, 5).forwarded         # nothing at or below it is ever forwarded again
    il.reset()
    assert il.fence == 5
    il.stop('second')
    assert il.fence == 7


def test_a_cancel_after_the_goal_ended_still_fences_it_a_late_copy_cannot_run():
    il = armed()
    good(il, 3)
    il.goal_refused(3)                       # answered; a duplicate could still be on the wire
    il.joy(1.0, False, False, False)         # deadman release: nothing running, fence anyway
    assert il.fence == 3


def test_a_held_chunk_is_not_fenced_before_it_is_forwarded():
    il = armed()
    good(il, 4)
    out = good(il, 5, needs_confirmation=True)
    assert out.held
    il.stop('stop while waiting')
    assert il.fence == 4                     # 5 was never sent; it expired with the stop
    assert il.take_pending(0.0)[0] is None


@pytest.mark.race
def test_fence_race_10000_random_interleavings_no_forwarded_goal_below_the_fence_is_good():
    """Random streams of chunks, stops, re-arms and heartbeats: every goal forwarded after a
    heartbeat's fence was taken is above it (a heartbeat crossing it cannot fence it), and
    every goal forwarded before a stop is at or below the fence that stop published."""
    rng = random.Random(23)
    for _ in range(10_000):
        il = armed()
        sent_fence, forwarded_before_stop = 0, []
        for seq in range(1, 26):
            r = rng.random()
            if r < 0.15:
                il.stop('race')
                if il.fence_changed:
                    sent_fence = il.fence_published()
                assert all(s <= sent_fence for s in forwarded_before_stop)
            elif r < 0.25:
                good(il, seq, shadow=True)
            else:
                if good(il, seq).forwarded:
                    assert seq > sent_fence and seq > il.fence
                    forwarded_before_stop.append(seq)
            assert il.fence >= sent_fence


def test_config_refuses_bad_values_naming_the_parameter():
    with pytest.raises(ConfigError, match='on_reject'):
        InterlockConfig(on_reject='maybe')
    with pytest.raises(ConfigError, match='joy_timeout'):
        InterlockConfig(joy_timeout=0.0)


@pytest.mark.race
def test_stop_race_no_forward_after_stop_10000_random_interleavings():
    """A stop at a random point in a stream of chunks: after it, nothing is forwarded until
    a preflight accepted after the stop and an arm naming it; a late arm naming a preflight
    older than the stop arms nothing; 10,000 repetitions."""
    rng = random.Random(13)
    for _ in range(10_000):
        il = armed()
        seq = 0
        stopped_at = rng.randrange(1, 20)
        for i in range(30):
            seq += 1
            if i == stopped_at:
                floor = seq - 1
                il.stop('race')
                assert not il.goal_active
            out = good(il, seq, shadow=rng.random() < 0.05 and i < stopped_at)
            if i >= stopped_at:
                assert not out.forwarded
        late_shadow = rng.randrange(0, floor + 1)    # a delayed preflight of before the stop
        good(il, late_shadow, shadow=True)
        assert il.state() == STATE_STOPPED
        if il.last_forwarded is not None and late_shadow <= il.last_forwarded:
            assert not il.arm(late_shadow, POLICY)[0]
            assert il.state() == STATE_STOPPED
        seq += 1
        assert not good(il, seq).forwarded
        seq += 1
        arm(il, seq)
        assert good(il, seq + 1).forwarded


# ---- the Quest toggle seen by the gate (Interlock.toggle) -------------------------------------
def test_a_toggle_press_begun_after_the_rollout_went_live_stops_it_like_safety_stop():
    il = armed()
    assert good(il, 5, now=1.0).forwarded                 # live from 1.0
    out = il.toggle(pressed_at=2.0)
    assert Kind.CANCEL in kinds(out) and Kind.LATCH in kinds(out)
    assert il.state() == STATE_STOPPED and il.fence == 5 and not il.goal_active
    assert [b.check for b in good(il, 6, now=2.1).blocks] == ['rollout_stopped']


def test_a_toggle_press_while_stopped_is_a_start_and_is_ignored():
    il = armed()
    good(il, 5, now=1.0)
    il.stop('policy/stop')
    e = il.epoch
    assert il.toggle(pressed_at=3.0) == [] and il.epoch == e
    assert il.state() == STATE_STOPPED


def test_a_toggle_press_before_any_live_chunk_since_the_rearm_is_a_start_and_is_ignored():
    """A preflight re-arms the gate, then the press that starts the rollout: the gate must not
    stop the rollout the press starts; at start-up (nothing forwarded yet) likewise."""
    il = armed()
    assert il.toggle(pressed_at=0.5) == []                 # start-up: no rollout yet
    good(il, 5, now=1.0)
    il.stop('policy/stop')
    arm(il, 6)                                             # preflight and start re-arm
    assert il.state() == STATE_OK
    assert il.toggle(pressed_at=3.0) == []                 # the start press
    assert il.state() == STATE_OK


def test_the_start_press_whose_edge_comes_after_the_first_live_chunk_is_ignored():
    """The press began before the rollout's first live chunk (policy_node started on its own
    edge and its first chunk was forwarded before the gate's edge fired)."""
    il = armed()
    good(il, 6, now=2.0, shadow=True)
    assert good(il, 7, now=3.10).forwarded                 # first live chunk at 3.10
    assert il.toggle(pressed_at=3.0) == []                 # press began at 3.0
    assert il.toggle(pressed_at=3.10) == []                # not after it
    assert il.toggle(pressed_at=4.0) != []                 # the next press stops


def test_shadow_chunks_while_live_do_not_hide_a_stop_press_takeover():
    """During a takeover the policy's chunks are shadow chunks while teleop chunks are live:
    a press still stops."""
    il = armed()
    good(il, 1, now=1.0)
    for k in range(2, 10):
        good(il, k, now=1.0 + 0.1 * k, shadow=k % 2 == 0)
    assert il.toggle(pressed_at=1.5) != [] and il.state() == STATE_STOPPED


def test_a_confirmed_chunk_makes_the_rollout_live_at_its_confirmation():
    il = armed()
    good(il, 1, now=1.0, needs_confirmation=True)
    chunk, _ = il.take_pending(2.0)
    assert il.confirmed(chunk, 1, rejected=False, executor_ready=True, now=2.0).forwarded
    assert il.toggle(pressed_at=1.9) == []
    assert il.toggle(pressed_at=2.5) != []


def test_joy_mapping_refuses_a_toggle_button_that_is_the_estop_or_confirm_button():
    from egoroll_ros.core.interlock import JoyMapping

    for name, b in (('estop_button', 1), ('confirm_button', 0)):
        with pytest.raises(ConfigError, match=f"'toggle_button': {b} is also '{name}'"):
            JoyMapping(toggle_button=b)
    assert JoyMapping(toggle_button=2).toggle_down([0, 0, 1]) is True
    assert JoyMapping(toggle_button=5).toggle_down([0, 0, 1]) is None
    assert JoyMapping().toggle_down([1, 1, 1]) is None     # -1: off
    assert JoyMapping(estop_button=-1, toggle_button=-1).toggle_button == -1


def test_a_chunk_rejected_only_for_arriving_too_late_pauses_without_a_fault():
    # The node computes real_rejection from NOT_READY_CHECKS: a loaded machine that delivers
    # a chunk too late (chunk_age, chunk_in_past) must not fault the rollout.
    from egoroll_ros.core.interlock import NOT_READY_CHECKS
    for late in ('chunk_age', 'chunk_in_past'):
        il = armed()
        good(il, 1)
        out = good(il, 2, rejected=True, real_rejection=late not in NOT_READY_CHECKS)
        assert Kind.LATCH not in kinds(out.decisions) and il.fault is None, late
        assert good(il, 3).forwarded


@pytest.mark.parametrize('code', sorted(EXECUTOR_HALTS))
def test_a_goal_the_executor_held_on_its_own_stops_the_rollout_until_a_new_preflight(code):
    # A tracking error beyond tolerance (a collision), the robot model gone, a shutdown:
    # the executor held; nothing may move again on the
    # next live chunk, only after a new preflight (a newer accepted shadow chunk).
    il = armed()
    assert good(il, 1).forwarded
    out = il.goal_halted(1, code)
    assert Kind.LATCH in kinds(out) and code in il.stopped
    assert il.state() == STATE_STOPPED and not il.goal_active
    assert not good(il, 2).forwarded
    assert good(il, 3, shadow=True).decisions == []
    assert il.state() == STATE_STOPPED
    arm(il, 3)
    assert il.state() == STATE_OK and good(il, 4).forwarded


@pytest.mark.parametrize('code', ['SUCCESSFUL', 'PREEMPTED', 'CANCELED', 'FENCED',
                                  'LIMIT_VIOLATED', 'OLD_SEQUENCE', 'STALE_STATE', 'NO_STATE',
                                  'HEARTBEAT_LOST', 'COMMAND_TIMEOUT', 'DEADLINE_MISSED',
                                  'INTERLOCK', ''])
def test_a_goal_that_ended_for_another_reason_only_ends(code):
    il = armed()
    assert good(il, 1).forwarded and good(il, 2).forwarded
    assert il.goal_halted(2, code) == []
    assert il.state() == STATE_OK and il.goal_sequence == 1      # the running one continues
    assert good(il, 3).forwarded


def test_a_halt_reported_after_a_stop_changes_nothing():
    il = armed()
    assert good(il, 1).forwarded
    il.stop('stop requested')
    reason = il.stopped
    assert il.goal_halted(1, 'PATH_TOLERANCE_VIOLATED') == [] and il.stopped == reason


# ---- outages: a hung driver or a hung gate that comes back (issue 22.4) ------------------
def test_joint_states_missing_for_the_stall_timeout_stop_a_live_rollout():
    il = armed(stall_timeout=1.0, max_joint_state_age=0.2, joy_timeout=10.0)
    assert good(il, 1, now=0.0).forwarded
    out = il.timer(0.5, joint_state_received=0.0)     # stale: the goal is canceled only
    assert Kind.CANCEL in kinds(out) and il.stopped is None
    out = il.timer(1.0, joint_state_received=0.0)     # the driver is gone for 1 s: stop
    assert il.state() == STATE_STOPPED and 'no joint_states for 1.00 s' in il.stopped
    # the driver comes back: nothing is forwarded until a new preflight and start
    il.timer(1.1, joint_state_received=1.1)
    assert [b.check for b in good(il, 2, now=1.1).blocks] == ['rollout_stopped']


def test_a_joint_states_gap_shorter_than_the_stall_timeout_leaves_the_rollout_armed():
    il = armed(stall_timeout=1.0, max_joint_state_age=0.2, joy_timeout=10.0)
    good(il, 1, now=0.0)
    il.timer(0.9, joint_state_received=0.0)
    assert il.stopped is None
    assert good(il, 2, now=0.95).forwarded


def test_an_outage_before_the_rollout_went_live_or_while_stopped_changes_nothing():
    il = armed(stall_timeout=1.0)
    assert il.outage('the gate was not scheduled for 3 s') == []
    assert il.stopped is None
    good(il, 1)
    assert kinds(il.outage('the gate was not scheduled for 3 s')) == [Kind.CANCEL, Kind.LATCH]
    assert il.outage('again') == [] and il.state() == STATE_STOPPED


def test_the_stall_timeout_off_never_stops_for_a_joint_states_outage():
    il = armed(stall_timeout=0.0, max_joint_state_age=0.2, joy_timeout=1000.0)
    good(il, 1)
    il.timer(100.0, joint_state_received=0.0)
    assert il.stopped is None


def test_an_executor_stall_is_an_executor_halt_that_stops_the_rollout():
    il = armed()
    good(il, 1)
    assert 'STALLED' in EXECUTOR_HALTS
    assert Kind.CANCEL in kinds(il.goal_halted(1, 'STALLED'))
    assert il.state() == STATE_STOPPED


def test_the_stall_timeout_must_be_finite_and_not_negative():
    for bad in (-1.0, float('nan'), float('inf')):
        with pytest.raises(ConfigError, match='stall_timeout'):
            InterlockConfig(stall_timeout=bad)
