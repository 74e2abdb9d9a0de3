"""The gate's interlock on bag time (bag/offline_interlock.py): forwarding, deadman and e-stop
stretches, the Quest confirm button, expiry and the re-check, driven directly (no ROS)."""

from __future__ import annotations

import numpy as np
import pytest

from egoroll_ros.bag.offline_interlock import OfflineInterlock
from egoroll_ros.core.interlock import InterlockConfig, JoyMapping
from egoroll_ros.core.types import Chunk, JointTrajectoryData

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

HELD = [0.0, 0.0, 0.0, 1.0]
RELEASED = [0.0, 0.0, 0.0, 0.0]
UP, ESTOP, CONFIRM = [0, 0], [0, 1], [1, 0]


def chunk(seq: int, stamp: float, duration: float = 0.25) -> Chunk:
    times = np.linspace(0.05, duration, 5)
    traj = JointTrajectoryData(('a',), times, np.zeros((5, 1)), stamp=stamp)
    return Chunk(sequence=seq, policy_id='p', stamp=stamp, trajectory=traj)


def make(rejected_on_recheck: bool = False, **cfg: object) -> OfflineInterlock:
    return OfflineInterlock(InterlockConfig(**cfg), JoyMapping(), 0.02, 0.0,
                            lambda c, now: rejected_on_recheck)


def offer(sim: OfflineInterlock, seq: int, now: float, *, rejected: bool = False,
          soft: bool = False, checks: tuple[str, ...] = ()) -> bool:
    return sim.chunk(now, chunk(seq, now), seq, list(checks), rejected, soft).forwarded


def test_a_held_deadman_forwards_and_a_release_blocks_with_a_stretch():
    sim = make()
    sim.joy(0.0, HELD, UP)
    assert offer(sim, 1, 0.1)
    sim.joy(0.2, RELEASED, UP)
    assert not offer(sim, 2, 0.3)
    assert sim.fate(2).blocked_by == ['deadman']
    sim.joy(0.5, HELD, UP)
    assert offer(sim, 3, 0.6)
    sim.finish(1.0)
    rep = sim.report(1.0, 0.0)
    assert rep['stretches'] == [{'condition': 'deadman', 'reason': 'deadman released',
                                 'start': pytest.approx(0.2), 'end': pytest.approx(0.5),
                                 'open': False}]
    assert rep['forwarded'] == 2 and rep['blocked_by_check'] == {'deadman': 1}


def test_joy_going_quiet_is_a_stale_stretch_from_the_watchdog():
    sim = make(joy_timeout=0.1)
    sim.joy(0.0, HELD, UP)
    assert offer(sim, 1, 0.05)
    assert not offer(sim, 2, 0.3)      # no quest/joy since 0.0: stale after 0.1 s
    st, stopped = sim.report(0.3, 0.0)['stretches']
    assert st['condition'] == 'deadman' and st['reason'] == 'quest/joy stale'
    # the watchdog ticks every 0.02 s: the first tick after 0.1 s of silence
    assert 0.1 < st['start'] <= 0.12 + 1e-9 and st['open']
    # the Quest link lost during a live rollout disarms the gate (a new start is needed)
    assert stopped['condition'] == 'stopped' and 'Quest link is lost' in stopped['reason']
    assert stopped['start'] == st['start'] and stopped['open']


def test_an_estop_latches_until_the_end_of_the_bag():
    sim = make()
    sim.joy(0.0, HELD, UP)
    sim.joy(0.4, HELD, ESTOP)
    sim.joy(0.5, HELD, UP)
    assert not offer(sim, 1, 0.6)
    assert 'estop' in sim.fate(1).blocked_by
    sim.finish(1.0)
    rows = [(s['condition'], s['reason'], round(s['start'], 6), round(s['end'], 6), s['open'])
            for s in sim.report(1.0, 0.0)['stretches']]
    assert rows == [('estop', 'e-stop pressed', 0.4, 0.5, False),
                    ('stopped', 'rollout stopped: e-stop pressed', 0.4, 1.0, True),
                    ('estop', 'e-stop latched (released; no safety/reset in a bag)', 0.5, 1.0,
                     True)]


def test_an_estop_button_the_sample_lacks_counts_as_pressed():
    sim = make()
    sim.joy(0.0, HELD, [0])            # estop_button 1 is not in the sample
    assert not offer(sim, 1, 0.1)
    assert 'estop' in sim.fate(1).blocked_by


def test_a_rejection_latches_a_fault_under_hold_but_not_under_skip():
    hold = make()
    hold.joy(0.0, HELD, UP)
    assert not offer(hold, 1, 0.1, rejected=True, checks=('max_step',))
    assert not offer(hold, 2, 0.2)
    assert hold.fate(1).note == 'rejected by the checks'
    assert hold.fate(2).blocked_by == ['latched_fault', 'rollout_stopped']   # disarmed too
    skip = make(on_reject='skip')
    skip.joy(0.0, HELD, UP)
    assert not offer(skip, 1, 0.1, rejected=True, checks=('max_step',))
    assert offer(skip, 2, 0.2)


def test_a_not_ready_rejection_does_not_latch():
    sim = make()
    sim.joy(0.0, HELD, UP)
    assert not offer(sim, 1, 0.1, rejected=True, checks=('joint_state',))
    assert offer(sim, 2, 0.2)


def test_the_quest_confirm_button_forwards_a_waiting_chunk():
    sim = make()
    sim.joy(0.0, HELD, UP)
    assert not offer(sim, 1, 0.1, soft=True)
    assert sim.fate(1).note.startswith('held for confirmation: not confirmed')
    sim.joy(0.3, HELD, CONFIRM)
    fate = sim.fate(1)
    assert fate.forwarded and fate.forwarded_at == pytest.approx(0.3)
    assert 'confirmed and forwarded' in fate.note


def test_a_confirmation_that_comes_too_late_expires():
    sim = make(confirm_timeout=0.5, joy_timeout=5.0)
    sim.joy(0.0, HELD, UP)
    offer(sim, 1, 0.1, soft=True)
    sim.joy(0.8, HELD, CONFIRM)
    fate = sim.fate(1)
    assert not fate.forwarded and 'dropped: ' in fate.note and 'not confirmed within' in \
        fate.note


def test_a_confirmed_chunk_that_fails_the_recheck_is_not_forwarded():
    sim = make(rejected_on_recheck=True)
    sim.joy(0.0, HELD, UP)
    offer(sim, 1, 0.1, soft=True)
    sim.joy(0.2, HELD, CONFIRM)
    assert not sim.fate(1).forwarded
    assert sim.fate(1).note == 'held for confirmation, confirmed but rejected on the re-check'


def test_stale_joint_states_cancel_a_running_goal():
    sim = make(max_joint_state_age=0.1)
    sim.joy(0.0, HELD, UP)
    sim.joint_state(0.0)
    assert offer(sim, 1, 0.05)
    for k in range(1, 20):             # joy keeps coming, joint_states stop
        sim.joy(0.05 * k, HELD, UP)
    kinds = [(e['kind'], e['reason']) for e in sim.report(1.0, 0.0)['events']]
    assert ('cancel', 'joint_states stale') in kinds


TOGGLE = [0, 0, 1]


def _toggling(**cfg: object) -> OfflineInterlock:
    return OfflineInterlock(InterlockConfig(**cfg), JoyMapping(toggle_button=2), 0.02, 0.0,
                            lambda c, now: False, toggle_debounce=0.05)


def test_the_quest_toggle_stops_a_live_rollout_at_its_debounce_deadline_offline():
    sim = _toggling()
    sim.joy(0.0, HELD, [0, 0, 0])
    assert offer(sim, 1, 0.1)
    sim.joy(0.5, HELD, TOGGLE)             # press begins; no later sample
    assert not offer(sim, 2, 0.6)          # its edge at 0.55 stopped the rollout
    assert sim.fate(2).blocked_by == ['rollout_stopped']
    assert sim.interlock.fence == 1
    sim.finish(1.0)
    rep = sim.report(1.0, 0.0)
    kinds = [(round(e['t'], 6), e['kind']) for e in rep['events']]
    assert (0.55, 'cancel') in kinds and (0.55, 'latch') in kinds
    assert [s['condition'] for s in rep['stretches']] == ['stopped']


def test_a_toggle_press_while_stopped_starts_a_new_rollout_offline():
    sim = _toggling()
    sim.joy(0.0, HELD, [0, 0, 0])
    assert offer(sim, 1, 0.1)
    sim.joy(0.5, HELD, TOGGLE)
    sim.joy(0.7, HELD, [0, 0, 0])
    assert not offer(sim, 2, 0.8)
    sim.joy(1.0, HELD, TOGGLE)             # the start of a new rollout (preflight assumed)
    sim.joy(1.2, HELD, [0, 0, 0])
    assert offer(sim, 3, 1.3)
    assert offer(sim, 4, 1.4)
    assert any(e['kind'] == 'start' for e in sim.report(1.5, 0.0)['events'])
    assert 'a Quest toggle press while the rollout is stopped' in ' '.join(
        sim.report(1.5, 0.0)['assumptions'].split('; '))


def test_a_toggle_press_before_the_first_live_chunk_is_ignored_offline():
    sim = _toggling()
    sim.joy(0.0, HELD, TOGGLE)             # held at the start: no edge
    sim.joy(0.1, HELD, [0, 0, 0])
    sim.joy(0.2, HELD, TOGGLE)             # a press before any chunk went live
    sim.joy(0.4, HELD, [0, 0, 0])
    assert offer(sim, 1, 0.5)
    assert sim.interlock.state() == 'ok'
