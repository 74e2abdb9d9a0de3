"""One parameter spec per node: docs/parameters.md and config/defaults/*.yaml are generated from
it and must not drift; every shipped config YAML is valid under it (every key declared, every
value of the declared type and range, every required parameter given)."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from egoroll_ros.ros.params import params_from_yaml

ROOT = Path(__file__).resolve().parents[3]


def _generator():
    spec = importlib.util.spec_from_file_location('gen_param_docs',
                                                  ROOT / 'tools' / 'gen_param_docs.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parameter_reference_and_defaults_are_up_to_date():
    gen = _generator()
    for path, text in gen.outputs().items():
        assert path.exists() and path.read_text() == text, \
            f'{path} is stale: run tools/in_env.sh python tools/gen_param_docs.py'


def test_the_defaults_files_load_with_the_specs_defaults():
    gen = _generator()
    for node in gen.NODES:
        path = gen.DEFAULTS / f'{node}.yaml'
        required = {s.name: s for s in gen.specs_of(node) if s.default is None}
        section = yaml.safe_load(path.read_text())[f'/**/{node}']['ros__parameters'] or {}
        assert set(section).isdisjoint(required)
        values = params_from_yaml(path, node, gen.specs_of(node),
                                  {n: _example(s) for n, s in required.items()})
        for spec in gen.specs_of(node):
            if spec.default is not None:
                assert values[spec.name] == spec.default, (node, spec.name)


def _example(spec):
    """A valid value for a required parameter (the defaults file leaves them out)."""
    return {'str[]': ['a'], 'float[]': [1.0], str: '/tmp/x'}[spec.type]


def _shipped():
    gen = _generator()
    out = []
    for path in sorted((ROOT / 'egoroll_ros' / 'config').glob('*.yaml')):
        for key in yaml.safe_load(path.read_text()) or {}:
            node = key.removeprefix('/**/')
            out.append(pytest.param(path, node, id=f'{path.name}:{node}'))
    assert out and all(p.values[1] in gen.NODES for p in out)
    return out


@pytest.mark.parametrize(('path', 'node'), _shipped())
def test_every_shipped_config_agrees_with_the_spec(path, node):
    params_from_yaml(path, node, _generator().specs_of(node))


def test_every_node_documents_its_parameters():
    gen = _generator()
    for node in gen.NODES:
        specs = gen.specs_of(node)
        assert specs, f'{node} declares no Param specs'
        assert all(s.description.strip() for s in specs), \
            f'{node}: a parameter lacks a description'
