"""Executor core, seam 'blend' joined off the control tick (ExecutorCore.join_request /
JoinRequest.compute / offer_join): the prepared motion takes over at its predicted tick,
continuous in position, velocity and acceleration; a join computed for a tick that passed, or
for a motion that changed meanwhile, is never used."""

import numpy as np
import pytest
from test_executor_blend import BLEND, VMAX, _assert_within_limits, _chunk
from test_executor_core import DT, Rig

from egoroll_ros.core.executor import EXECUTING, HOLDING

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun


def _tick_after(rig, k):
    """The time of the k-th tick from now, accumulated as Rig.run does."""
    t = rig.t
    for _ in range(k):
        t += DT
    return t


def _running(rig, seed=0, n=40):
    rng = np.random.default_rng(seed)
    times, pos = _chunk(rig.t, rig.q, rng.uniform(-0.5, 0.5, 2), n=n)
    rig.goal(times, pos, seq=1)
    rig.run(0.3)
    assert rig.core.state == EXECUTING and rig.core.active_sequence == 1
    return rng


def _next_chunk(rig, rng, seq=2):
    times, pos = _chunk(rig.t, rig.q + rng.uniform(-0.01, 0.01, 2), rng.uniform(-0.5, 0.5, 2))
    return rig.goal(times, pos, seq=seq)


@pytest.mark.parametrize('seed', range(12))
@pytest.mark.parametrize('lead', [1, 3, 9])
def test_a_prepared_join_takes_over_at_its_tick_continuous_in_q_v_a(seed, lead):
    rig = Rig(**BLEND)
    rng = _running(rig, seed)
    old = rig.core.motion
    _next_chunk(rig, rng)
    takeover = _tick_after(rig, lead)
    req = rig.core.join_request(takeover)
    assert req is not None and req.takeover == takeover
    expected = old.sample(takeover)
    for q_req, q_old in zip((req.position, req.velocity, req.acceleration), expected,
                            strict=True):
        np.testing.assert_array_equal(q_req, q_old)   # sampled from the running motion
    assert rig.core.offer_join(req.compute())
    rig.run(DT * (lead - 1))
    # before its tick the running goal continues on its own motion
    assert rig.core.active_sequence == 2 and rig.codes() == []
    assert rig.core.motion is old
    for s in rig.setpoints[-(lead - 1):] if lead > 1 else []:
        np.testing.assert_array_equal(s.positions, old.sample(s.time)[0])
    rig.run(DT)
    assert rig.codes() == [(1, 'PREEMPTED')] and rig.core.motion is not old
    sp = rig.setpoints[-1]
    assert sp.time == takeover
    np.testing.assert_allclose(sp.positions, expected[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(sp.velocities, expected[1], rtol=0, atol=1e-9)
    np.testing.assert_allclose(sp.accelerations, expected[2], rtol=0, atol=1e-7)
    assert rig.core.joins == {'prepared': 1, 'stale': 0, 'in_tick': 1}   # in_tick: goal 1
    rig.run(0.5)
    _assert_within_limits(rig)


def test_the_prepared_join_is_the_join_the_tick_would_compute():
    a, b = Rig(**BLEND), Rig(**BLEND)
    rng_a, _ = _running(a, 5), _running(b, 5)
    times, pos = _chunk(a.t, a.q + rng_a.uniform(-0.01, 0.01, 2), rng_a.uniform(-0.5, 0.5, 2))
    stamp = a.t      # the same chunk, stamped, for both (a stamp of 0 means "on receipt")
    a.goal(times, pos, seq=2, stamp=stamp)
    takeover = _tick_after(a, 2)
    assert a.core.offer_join(a.core.join_request(takeover).compute())
    a.run(3 * DT)
    b.run(DT)                       # b's goal (the same chunk) arrives one tick before its
    b.goal(times, pos, seq=2, stamp=stamp)   # takeover: joined in the tick
    b.run(2 * DT)
    assert b.core.joins['prepared'] == 0
    for sa, sb in zip(a.setpoints, b.setpoints, strict=True):
        np.testing.assert_allclose(sa.positions, sb.positions, rtol=0, atol=1e-12)


def test_a_join_offered_after_its_tick_passed_is_not_used_and_is_asked_again():
    rig = Rig(**BLEND)
    rng = _running(rig, 2)
    old = rig.core.motion
    _next_chunk(rig, rng)
    takeover = _tick_after(rig, 2)
    req = rig.core.join_request(takeover)
    rig.run(2 * DT)                          # the takeover tick runs before the join is ready
    assert rig.core.join_wanted and rig.core.joins['stale'] == 1
    assert rig.core.motion is old and rig.codes() == []
    np.testing.assert_array_equal(rig.setpoints[-1].positions, old.sample(takeover)[0])
    assert not rig.core.offer_join(req.compute())   # stale: dropped
    rig.run(3 * DT)
    assert rig.core.motion is old, 'the goal waits for a new request, the old motion runs'
    again = _tick_after(rig, 2)
    req2 = rig.core.join_request(again)
    assert not rig.core.join_wanted
    assert rig.core.offer_join(req2.compute())
    rig.run(2 * DT)
    assert rig.codes() == [(1, 'PREEMPTED')] and rig.setpoints[-1].time == again
    np.testing.assert_allclose(rig.setpoints[-1].positions, old.sample(again)[0], atol=1e-12)
    rig.run(0.5)
    _assert_within_limits(rig)


def test_a_join_for_an_older_pending_goal_is_not_used():
    rig = Rig(**BLEND)
    rng = _running(rig, 3)
    _next_chunk(rig, rng, seq=2)
    req = rig.core.join_request(_tick_after(rig, 3))
    _next_chunk(rig, rng, seq=3)             # replaces the pending goal 2
    assert not rig.core.offer_join(req.compute())
    rig.run(DT)                               # no request for 3: joined in the tick
    assert rig.codes() == [(2, 'PREEMPTED'), (1, 'PREEMPTED')]
    assert rig.core.active_sequence == 3 and rig.core.joins['prepared'] == 0


def test_a_stop_before_the_takeover_makes_the_prepared_join_unusable():
    rig = Rig(**BLEND)
    rng = _running(rig, 4)
    _next_chunk(rig, rng)
    req = rig.core.join_request(_tick_after(rig, 3))
    prepared = req.compute()
    assert rig.core.cancel(1, rig.t)            # the running goal is canceled: hold
    assert rig.core.state == HOLDING
    assert not rig.core.offer_join(prepared)
    hold = rig.setpoints[-1].positions.copy()
    start = len(rig.setpoints)
    rig.run(DT)
    # the pending goal starts after the halt from the measured state (the held position)
    assert rig.core.active_sequence == 2 and rig.core.joins['prepared'] == 0
    np.testing.assert_allclose(rig.setpoints[-1].positions, hold, atol=VMAX * DT)
    rig.run(0.5)
    _assert_within_limits(rig, start)     # (the hold itself is a dead stop, by design)


def test_a_stop_after_the_offer_makes_the_prepared_join_unusable():
    rig = Rig(**BLEND)
    rng = _running(rig, 6)
    _next_chunk(rig, rng)
    assert rig.core.offer_join(rig.core.join_request(_tick_after(rig, 3)).compute())
    assert rig.core.cancel(1, rig.t)
    rig.run(3 * DT)
    assert rig.core.active_sequence == 2
    assert rig.core.joins['prepared'] == 0 and rig.core.joins['stale'] == 1


def test_a_prepared_refusal_ends_the_new_goal_and_the_running_one_continues():
    rig = Rig(**BLEND)
    times, pos = _chunk(rig.t, rig.q, [0.8, 0.0], n=40)
    rig.goal(times, pos, seq=1)
    rig.run(0.6)
    old = rig.core.motion
    times2, pos2 = _chunk(rig.t, rig.q, [-0.8, 0.0])    # reversing needs > AMAX
    rig.goal(times2, pos2, seq=2)
    assert rig.core.offer_join(rig.core.join_request(_tick_after(rig, 2)).compute())
    rig.run(DT)
    assert rig.codes() == []
    rig.run(DT)
    assert rig.codes() == [(2, 'LIMIT_VIOLATED')]
    assert 'refused at the seam, sequence 1 continues' in rig.outcomes[0].message
    assert rig.core.motion is old and rig.core.active_sequence == 1
    rig.run(0.3)
    _assert_within_limits(rig)


def test_no_off_tick_join_from_rest_for_splice_or_for_a_past_tick():
    rest = Rig(**BLEND)
    times, pos = _chunk(rest.t, rest.q, [0.2, 0.2])
    rest.goal(times, pos, seq=1)
    assert rest.core.join_request(_tick_after(rest, 2)) is None    # from the measured state
    splice = Rig(seam='splice')
    _running(splice)
    _next_chunk(splice, np.random.default_rng(0))
    assert splice.core.join_request(_tick_after(splice, 2)) is None
    rig = Rig(**BLEND)
    rng = _running(rig)
    _next_chunk(rig, rng)
    assert rig.core.join_request(rig.t) is None                     # that tick ran


def test_a_goal_waiting_for_its_takeover_tick_keeps_the_command_timeout_fed():
    # command_timeout counts from the newest goal: one pending for its off-tick join has
    # arrived, so the running goal is not aborted COMMAND_TIMEOUT while it waits.
    rig = Rig(**BLEND, command_timeout=0.35)
    rng = _running(rig, 7, n=60)             # goal 1 received 0.3 s ago
    _next_chunk(rig, rng)
    takeover = _tick_after(rig, 10)          # 0.1 s away: goal 1 is then 0.4 s old
    assert rig.core.offer_join(rig.core.join_request(takeover).compute())
    rig.run(10 * DT)
    assert rig.codes() == [(1, 'PREEMPTED')], rig.outcomes
