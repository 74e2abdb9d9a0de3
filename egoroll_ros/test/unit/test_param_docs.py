"""docs/parameters.md is generated from the nodes' declarations and must not drift from them."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _generator():
    spec = importlib.util.spec_from_file_location('gen_param_docs',
                                                  ROOT / 'tools' / 'gen_param_docs.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parameter_reference_is_up_to_date():
    gen = _generator()
    assert (ROOT / 'docs' / 'parameters.md').read_text() == gen.render(), \
        'docs/parameters.md is stale: run tools/in_env.sh python tools/gen_param_docs.py'


def test_every_node_documents_its_parameters():
    gen = _generator()
    for node in gen.NODES:
        specs = gen.specs_of(node)
        assert specs, f'{node} declares no Param specs'
        assert all(s.description.strip() for s in specs), \
            f'{node}: a parameter lacks a description'
