"""Property: whatever the gate accepts satisfies every limit, computed independently."""

from __future__ import annotations

from gate_testlib import STAMP, arm_config, arm_model, make_chunk, reference_check
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from egoroll_ros.core.gate import check
from egoroll_ros.core.types import JointStateData

pytestmark = pytest.mark.safety  # checks motion, limits, stops or supervision: never rerun

MODEL = arm_model()
CFG = arm_config(ee_soft_translation=0.08, ee_hard_translation=0.15)
J = CFG.joints


@st.composite
def scenarios(draw):
    """Chunks near the measured state: mostly small moves, sometimes violations of any kind."""
    n = draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([0.002, 0.01, 0.03, 0.08]))
    rng = np.random.default_rng(seed)
    qm = np.array([rng.uniform(-2.1, 2.1), rng.uniform(-1.6, 1.6), rng.uniform(-7, 7),
                   rng.uniform(-2.1, 2.1), rng.uniform(-0.002, 0.037)])
    steps = rng.normal(0.0, scale, (n, 5)) * np.array([1, 1, 1, 1, 0.05])
    pos = qm + np.cumsum(steps, axis=0)
    dt = draw(st.sampled_from([0.003, 0.02, 0.05, 0.1, 0.6]))
    times = dt * np.arange(1, n + 1) * rng.uniform(0.8, 1.2, n).cumsum() / np.arange(1, n + 1)
    if draw(st.booleans()):
        times = np.concatenate([[0.0], times[1:]]) if n > 1 else np.array([0.0])
    age = draw(st.sampled_from([0.0, 0.01, 0.03, 0.6]))
    return make_chunk(J, times, pos), qm, STAMP + age


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_gate_verdict_matches_an_independent_per_point_reference(scenario):
    chunk, qm, now = scenario
    verdict = check(chunk, JointStateData(J, qm), MODEL, CFG, now=now)
    expected = reference_check(chunk, qm, MODEL, CFG, now)
    got = {(v.check, v.subject, v.point_index) for v in verdict.violations}
    assert got == expected
    if verdict.accepted:
        assert not expected      # every limit holds, by the independent computation
