"""Chunk aggregation and latency-aware pinning (core/aggregation.py)."""

import numpy as np
import pytest

from egoroll_ros.core.aggregation import AggregationConfig, ChunkAggregator, config_from_params
from egoroll_ros.core.types import Chunk, JointTrajectoryData
from egoroll_ros.errors import ConfigError

STEP = 0.05
T = STEP * (np.arange(20) + 1)          # time_from_start of the demo policy's 20 points


def _agg(**kw):
    return ChunkAggregator(AggregationConfig(**kw))


def _const(value, j=2):
    return np.full((len(T), j), float(value))


def test_none_publishes_the_prediction_unchanged():
    agg = _agg()
    agg.aggregate(0.0, T, _const(1.0), 0.05)
    out = agg.aggregate(0.1, T, _const(2.0), 0.15)
    np.testing.assert_array_equal(out.positions, _const(2.0))
    assert out.pinned == 0 and out.underrun is None


def test_temporal_ensemble_weights_are_exp_minus_m_i_oldest_first():
    m = 0.5
    agg = _agg(mode='temporal_ensemble', ensemble_coefficient=m)
    agg.aggregate(0.0, T, _const(1.0), 0.0)
    agg.aggregate(0.1, T, _const(2.0), 0.1)
    out = agg.aggregate(0.2, T, _const(4.0), 0.2).positions
    w = np.exp(-m * np.arange(3))
    # a point all three cover: weighted mean, the oldest weighted most
    covered3 = np.nonzero(0.2 + T <= 1.0)[0]
    np.testing.assert_allclose(out[covered3], (w @ [1.0, 2.0, 4.0]) / w.sum())
    # a point only the last two cover
    two = np.nonzero((0.2 + T > 1.0) & (0.2 + T <= 1.1))[0]
    np.testing.assert_allclose(out[two], (w[:2] @ [2.0, 4.0]) / w[:2].sum())
    # beyond every earlier chunk: the new prediction alone
    np.testing.assert_allclose(out[0.2 + T > 1.1], 4.0)


def test_temporal_ensemble_averages_raw_predictions_not_its_own_output():
    agg = _agg(mode='temporal_ensemble', ensemble_coefficient=0.0)
    agg.aggregate(0.0, T, _const(0.0), 0.0)
    agg.aggregate(0.1, T, _const(3.0), 0.1)      # published 1.5 where they overlap
    out = agg.aggregate(0.2, T, _const(6.0), 0.2).positions
    assert out[0, 0] == pytest.approx(3.0)        # (0 + 3 + 6) / 3, not (1.5 + ... )


def test_weighted_average_is_lerobots_0_3_old_0_7_new_on_the_overlap():
    agg = _agg(mode='weighted_average')
    agg.aggregate(0.0, T, _const(1.0), 0.0)
    out = agg.aggregate(0.1, T, _const(2.0), 0.1).positions
    overlap = 0.1 + T <= 1.0
    np.testing.assert_allclose(out[overlap], 0.3 * 1.0 + 0.7 * 2.0)
    np.testing.assert_allclose(out[~overlap], 2.0)


def test_blend_points_fade_an_older_chunk_out_before_its_end_instead_of_a_step():
    # The exact formulas step where the previous chunk ends; with blend_points k its weight
    # falls linearly over its last k + 1 covered points, to zero one spacing after its end.
    k = 3
    for mode in ('weighted_average', 'temporal_ensemble'):
        exact, faded = _agg(mode=mode), _agg(mode=mode, blend_points=k)
        for agg in (exact, faded):
            agg.aggregate(0.0, T, _const(1.0), 0.0)
        a = exact.aggregate(0.1, T, _const(2.0), 0.1).positions[:, 0]
        b = faded.aggregate(0.1, T, _const(2.0), 0.1).positions[:, 0]
        last = int(np.nonzero(0.1 + T <= 1.0 + 1e-9)[0][-1])   # the old chunk's last point
        assert np.max(np.abs(np.diff(a))) == pytest.approx(abs(a[last] - 2.0))  # one step
        np.testing.assert_allclose(b[:last - k], a[:last - k])   # untouched before the fade
        np.testing.assert_allclose(b[last + 1:], 2.0)            # the new chunk after it
        share = (b[last - k:last + 2] - 2.0) / (1.0 - 2.0)       # the old chunk's share
        fade = np.arange(k + 1, -1, -1) / (k + 1)
        if mode == 'weighted_average':                          # share = old_weight x fade
            np.testing.assert_allclose(share, 0.3 * fade, atol=1e-12)
        else:     # the ensemble normalises: share / (1 - share) = fade x (its weight ratio)
            odds = share / (1.0 - share)
            np.testing.assert_allclose(odds, fade * odds[0], atol=1e-12)


def test_keep_n_keeps_the_running_chunks_points_and_replaces_the_rest():
    agg = _agg(mode='keep', keep_points=3)
    ramp = np.stack([T, -T], axis=1)
    agg.aggregate(0.0, T, ramp, 0.0)
    out = agg.aggregate(0.1, T, _const(5.0), 0.1)
    assert out.pinned == 3
    np.testing.assert_allclose(out.positions[:3], np.stack([0.1 + T[:3], -(0.1 + T[:3])], 1))
    np.testing.assert_allclose(out.positions[3:], 5.0)


def test_latency_pinning_fixes_the_prefix_due_before_landing_and_blends_after_it():
    agg = _agg(pin_latency=True, pin_margin=0.02, blend_points=3)
    agg.aggregate(0.0, T, _const(1.0), 0.0)
    # observation at 0.1 s, published 0.13 s later: lands at 0.25 -> points due by 0.25 pinned
    out = agg.aggregate(0.1, T, _const(2.0), 0.23)
    due = 0.1 + T <= 0.25 + 1e-12
    assert out.pinned == int(due.sum()) == 3
    np.testing.assert_allclose(out.positions[due], 1.0)
    ramp = out.positions[3:6, 0]
    np.testing.assert_allclose(ramp, [1.25, 1.5, 1.75])     # linear from old to new
    np.testing.assert_allclose(out.positions[6:], 2.0)
    assert out.underrun is None


def test_inference_slower_than_the_overlap_reports_an_underrun():
    agg = _agg(pin_latency=True)
    agg.aggregate(0.0, T, _const(1.0), 0.0)                 # covers up to 1.0 s
    out = agg.aggregate(0.1, T, _const(2.0), 1.3)           # published after it ended
    assert out.underrun == pytest.approx(0.3)
    assert agg.underruns == 1


def test_reset_forgets_the_previous_rollout():
    agg = _agg(mode='weighted_average')
    agg.aggregate(0.0, T, _const(1.0), 0.0)
    agg.reset()
    np.testing.assert_array_equal(agg.aggregate(0.1, T, _const(2.0), 0.1).positions, 2.0)


def test_the_prediction_is_never_modified_in_place():
    agg = _agg(mode='weighted_average', pin_latency=True)
    agg.aggregate(0.0, T, _const(1.0), 0.0)
    pred = _const(2.0)
    agg.aggregate(0.1, T, pred, 0.2)
    np.testing.assert_array_equal(pred, 2.0)


@pytest.mark.parametrize('kw,name', [
    (dict(mode='ensemble'), 'aggregation.mode'),
    (dict(mode='keep'), 'aggregation.keep_points'),
    (dict(old_weight=1.5), 'aggregation.old_weight'),
    (dict(ensemble_coefficient=-1.0), 'aggregation.ensemble_coefficient'),
    (dict(pin_margin=float('nan')), 'aggregation.pin_margin'),
    (dict(blend_points=-1), 'aggregation.blend_points'),
])
def test_bad_config_names_the_parameter(kw, name):
    with pytest.raises(ConfigError, match=name):
        AggregationConfig(**kw)


PARAMS = {'aggregation.mode': 'none', 'aggregation.ensemble_coefficient': 0.01,
          'aggregation.old_weight': 0.3, 'aggregation.keep_points': 0,
          'aggregation.pin_latency': False, 'aggregation.pin_margin': 0.0,
          'aggregation.blend_points': 0}


def test_config_from_params_takes_every_aggregation_parameter():
    cfg = config_from_params({**PARAMS, 'aggregation.mode': 'keep', 'aggregation.keep_points': 3,
                              'aggregation.pin_margin': 0.02}, cartesian=False)
    assert (cfg.mode, cfg.keep_points, cfg.pin_margin, cfg.old_weight) == ('keep', 3, 0.02, 0.3)


@pytest.mark.parametrize('change', [{'aggregation.mode': 'temporal_ensemble'},
                                    {'aggregation.pin_latency': True}])
def test_an_active_stage_is_refused_for_a_cartesian_configuration(change):
    assert not config_from_params(PARAMS, cartesian=True).active     # off: nothing refused
    with pytest.raises(ConfigError, match='joint policies only'):
        config_from_params({**PARAMS, **change}, cartesian=True)


def _chunk(stamp, value):
    traj = JointTrajectoryData(('a', 'b'), T.copy(), _const(value), stamp=stamp)
    return Chunk(1, 'f', stamp, traj)


def test_apply_passes_the_chunk_through_when_the_stage_is_off_or_the_chunk_is_not_a_joint_one():
    chunk = _chunk(0.0, 1.0)
    assert _agg().apply(chunk, 0.0) == (chunk, '')
    other = object()                                    # e.g. a Cartesian chunk
    assert _agg(mode='weighted_average').apply(other, 0.0) == (other, '')


def test_apply_aggregates_the_chunks_positions_and_keeps_the_rest():
    agg = _agg(mode='weighted_average')
    agg.apply(_chunk(0.0, 1.0), 0.0)
    new = _chunk(0.1, 2.0)
    out, underrun = agg.apply(new, 0.15)
    assert underrun == '' and out.stamp == new.stamp and out.sequence == new.sequence
    np.testing.assert_allclose(out.trajectory.positions[0], 0.3 * 1.0 + 0.7 * 2.0)
    np.testing.assert_array_equal(new.trajectory.positions, 2.0)     # not modified


def test_apply_reports_an_underrun_in_words():
    agg = _agg(pin_latency=True)
    agg.apply(_chunk(0.0, 1.0), 0.0)
    _, underrun = agg.apply(_chunk(0.1, 2.0), 1.3)
    assert underrun.startswith('inference slower than the chunk overlap: the running chunk '
                               'ended 0.300 s before this one lands')
