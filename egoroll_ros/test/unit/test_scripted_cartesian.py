"""The scripted Cartesian demo policy continues its circle from where the arm IS.

An open-loop clock would run ahead while the arm holds (executor held on a stale joint state,
a chunk rejected), and the next chunk would start centimetres away: a jump the gate rejects,
then a latched fault. These tests hold the arm still and check the chunks never run away.
"""

from __future__ import annotations

import numpy as np
import pytest

from egoroll_ros.core.policy import Observation, PolicyError
from egoroll_ros.policies.scripted_cartesian import (
    DEFAULTS,
    ScriptedCartesianPolicy,
    circle_positions,
)

START = np.array([0.4, 0.05, 0.3, 0.1, -0.2, 0.3, 0.5])  # x y z r p y gripper (dataset)


def _chunk(policy, state, stamp):
    return policy.predict_chunk(Observation(images={}, state=np.asarray(state, float),
                                            stamp=stamp))


@pytest.fixture
def policy(tmp_path):
    p = ScriptedCartesianPolicy.load(tmp_path)
    p.reset()
    return p


def test_first_chunk_follows_the_reference_circle_from_the_start_pose(policy):
    out = _chunk(policy, START, 100.0)
    ref = circle_positions(START[:3], policy.metadata.point_times(), DEFAULTS['radius'],
                           DEFAULTS['period'], DEFAULTS['ramp'])
    assert out.shape == (DEFAULTS['chunk_length'], 7)
    assert np.allclose(out[:, :3], ref, atol=1e-12)
    assert np.allclose(out[:, 3:], START[3:])  # orientation and gripper held


def test_a_held_arm_gets_chunks_that_start_where_it_is_not_where_a_clock_says(policy):
    _chunk(policy, START, 100.0)
    # The arm did not move for 3 s (an open-loop circle would be half way round: 6 cm away).
    out = _chunk(policy, START, 103.0)
    assert np.linalg.norm(out[0, :3] - START[:3]) < 0.004
    steps = np.linalg.norm(np.diff(out[:, :3], axis=0), axis=1)
    assert steps.max() < 0.0035 and steps.min() > 0.002  # at speed, along the circle
    open_loop = circle_positions(START[:3], np.array([3.0 + policy.metadata.point_times()[0]]),
                                 DEFAULTS['radius'], DEFAULTS['period'], DEFAULTS['ramp'])
    assert np.linalg.norm(open_loop[0] - START[:3]) > 0.05


def test_chunks_continue_from_the_measured_position_on_the_circle(policy):
    _chunk(policy, START, 100.0)
    r = DEFAULTS['radius']
    centre = START[:3] - [r, 0, 0]
    at = START.copy()
    at[:3] = centre + r * np.array([0.0, 1.0, 0.0])  # a quarter turn round
    out = _chunk(policy, at, 101.0)
    assert np.linalg.norm(out[0, :3] - at[:3]) < 0.004
    assert np.allclose(np.linalg.norm(out[:, :2] - centre[:2], axis=1), r)
    assert np.allclose(out[:, 2], START[2])
    assert out[-1, 0] < at[0], 'counter-clockwise: past the quarter turn x decreases'


def test_a_position_at_the_circle_centre_is_refused_not_guessed(policy):
    _chunk(policy, START, 100.0)
    at = START.copy()
    at[0] -= DEFAULTS['radius']
    with pytest.raises(PolicyError, match='circle centre'):
        _chunk(policy, at, 100.5)
    at[0] = np.nan
    with pytest.raises(PolicyError, match='circle centre'):
        _chunk(policy, at, 100.5)
