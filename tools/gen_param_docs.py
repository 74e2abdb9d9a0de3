#!/usr/bin/env python3
"""Write docs/parameters.md from the nodes' parameter specs (the single source of truth).

Run with `tools/in_env.sh python tools/gen_param_docs.py`; a unit test fails when the committed
file is out of date.
"""

from __future__ import annotations

import importlib
from pathlib import Path
import sys

NODES = ('trajectory_server', 'safety_gate', 'policy_node', 'sim_robot', 'sim_camera')
OUT = Path(__file__).resolve().parent.parent / 'docs' / 'parameters.md'


def _fmt(value: object) -> str:
    if value is None:
        return '**required**'
    if isinstance(value, str):
        return f"`'{value}'`"
    return f'`{value!r}`'


def _range(spec: object) -> str:
    parts = []
    if spec.min is not None or spec.max is not None:
        lo = '' if spec.min is None else f'{spec.min:g}'
        hi = '' if spec.max is None else f'{spec.max:g}'
        parts.append(f'[{lo}, {hi}]')
    if spec.choices:
        parts.append(' \\| '.join(f'`{c}`' for c in spec.choices))
    return ' '.join(parts)


def specs_of(node: str) -> list:
    """Every Param declared in the module of ``node`` (module-level lists/tuples of Param)."""
    from egoroll_ros.ros.params import Param

    module = importlib.import_module(f'egoroll_ros.nodes.{node}')
    found, seen = [], set()
    for value in vars(module).values():
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, Param)
                                                                for v in value):
            for spec in value:
                if spec.name not in seen:
                    seen.add(spec.name)
                    found.append(spec)
    return found


def render() -> str:
    """The markdown text of docs/parameters.md."""
    lines = ['# Parameter reference', '',
             "Generated from the nodes' parameter declarations by `tools/gen_param_docs.py`; "
             'do not edit by hand. Every parameter is declared with a description and range '
             '(`ros2 param describe <node> <name>` shows the same). Read-only parameters can only '
             "be set at start-up (YAML or launch). The demo robot's values are in "
             '`egoroll_ros/config/<node>.yaml`.', '']
    for node in NODES:
        lines += [f'## {node}', '', '| name | type | default | range | read-only | description |',
                  '| --- | --- | --- | --- | --- | --- |']
        for spec in specs_of(node):
            ptype = spec.type if isinstance(spec.type, str) else spec.type.__name__
            desc = spec.description.replace('|', '\\|').replace('\n', ' ')
            lines.append(f'| `{spec.name}` | {ptype} | {_fmt(spec.default)} | {_range(spec)} | '
                         f"{'yes' if spec.read_only else ''} | {desc} |")
        lines.append('')
    return '\n'.join(lines)


def main() -> int:
    """Write the file (or, with --check, exit 1 when it is out of date)."""
    text = render()
    if '--check' in sys.argv:
        return 0 if OUT.exists() and OUT.read_text() == text else 1
    OUT.write_text(text)
    print(f'wrote {OUT}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
