"""The gate's parameter spec and its core validation agree at every numeric lower bound: a
value the declared spec accepts is one the core accepts, so a node never starts with a
descriptor that allows what configure refuses (e.g. max_chunk_age = 0)."""

from __future__ import annotations

import pytest

from egoroll_ros.core.cartesian import cartesian_config_from_params
from egoroll_ros.core.gate import config_from_params
from egoroll_ros.core.interlock import interlock_config_from_params
from egoroll_ros.errors import ConfigError
from egoroll_ros.ros.gate_params import PARAMS
from egoroll_ros.ros.params import params_from_yaml

JOINTS = {'joints': ['a', 'b']}
BOUNDED = [s for s in PARAMS if s.type is float and s.min is not None]


@pytest.mark.parametrize('spec', BOUNDED, ids=[s.name for s in BOUNDED])
def test_the_spec_and_the_core_agree_at_the_lower_bound(spec):
    try:
        values = params_from_yaml(None, 'safety_gate', PARAMS, {**JOINTS, spec.name: spec.min})
    except ConfigError as exc:
        assert f"'{spec.name}'" in str(exc)
        return
    for core in (config_from_params, cartesian_config_from_params,
                 interlock_config_from_params):
        try:
            core(values)
        except ConfigError as exc:
            assert f"'{spec.name}'" not in str(exc), f'spec allows {spec.min}, core: {exc}'


@pytest.mark.parametrize('spec', [s for s in BOUNDED if s.min_exclusive],
                         ids=[s.name for s in BOUNDED if s.min_exclusive])
def test_an_exclusive_minimum_is_refused_by_the_descriptor_too(spec):
    import math

    (rng,) = spec.descriptor().floating_point_range
    assert rng.from_value > spec.min and rng.from_value == math.nextafter(spec.min, math.inf)


@pytest.mark.parametrize('name', ['max_chunk_age', 'joy_timeout', 'confirm_timeout'])
def test_zero_is_refused_naming_the_parameter(name):
    with pytest.raises(ConfigError, match=f"'{name}': must be > 0"):
        params_from_yaml(None, 'safety_gate', PARAMS, {**JOINTS, name: 0.0})
