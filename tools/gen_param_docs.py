#!/usr/bin/env python3
"""Write docs/parameters.md and config/defaults/<node>.yaml from the nodes' parameter specs
(the single source of truth).

Run with `tools/in_env.sh python tools/gen_param_docs.py`; a unit test fails when a committed
file is out of date.
"""

from __future__ import annotations

import importlib
from pathlib import Path
import sys
import textwrap

NODES = ('trajectory_server', 'safety_gate', 'policy_node', 'sim_robot', 'sim_camera',
         'episode_recorder')
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / 'docs' / 'parameters.md'
DEFAULTS = ROOT / 'egoroll_ros' / 'config' / 'defaults'


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
        parts.append(f"{'(' if spec.min_exclusive else '['}{lo}, {hi}]")
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
             'be set at start-up (YAML or launch); the others apply live (`ros2 param set`; a '
             'bad value is refused with the reason). A range `(a, b]` excludes `a`. Every '
             'parameter with its default, commented: `egoroll_ros/config/defaults/<node>.yaml` '
             "(installed under share/egoroll_ros/config/defaults/). The demo robot's values are "
             'in `egoroll_ros/config/<node>.yaml`.', '']
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


def _yaml_value(value: object) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (list, tuple)):
        return '[' + ', '.join(_yaml_value(v) for v in value) + ']'
    text = repr(value)
    if isinstance(value, float) and 'e' in text and '.' not in text:
        text = text.replace('e', '.0e')   # YAML 1.1 (PyYAML) reads 1e-06 as a string
    return text


def render_defaults(node: str) -> str:
    """The commented YAML of every parameter of ``node`` with its default value."""
    lines = [f"# Every {node} parameter with its default value, generated from the node's",
             '# parameter spec by tools/gen_param_docs.py (do not edit: a unit test compares).',
             '# Copy what you change into your own --params-file; docs/parameters.md has the',
             '# same table. Required parameters have no default: they are commented out.',
             f'/**/{node}:', '  ros__parameters:']
    for spec in specs_of(node):
        notes = []
        rng = _range(spec).replace('\\|', '|').replace('`', '')
        if rng:
            notes.append(f'range {rng}' if spec.min is not None or spec.max is not None
                         else f'one of {rng}')
        notes.append('read-only' if spec.read_only else 'LIVE (ros2 param set applies it)')
        if spec.default is None:
            notes.append('REQUIRED')
        text = f"{spec.description.strip()} [{'; '.join(notes)}]"
        lines += textwrap.wrap(text, width=95, initial_indent='    # ',
                               subsequent_indent='    # ', break_on_hyphens=False)
        if spec.default is None:
            lines.append(f'    # {spec.name}:')
        else:
            lines.append(f'    {spec.name}: {_yaml_value(spec.default)}')
    return '\n'.join(lines) + '\n'


def outputs() -> dict[Path, str]:
    """Every generated file and its text."""
    out = {OUT: render()}
    for node in NODES:
        out[DEFAULTS / f'{node}.yaml'] = render_defaults(node)
    return out


def main() -> int:
    """Write the files (or, with --check, exit 1 when one is out of date)."""
    files = outputs()
    if '--check' in sys.argv:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f'out of date: {p}')
        return 1 if stale else 0
    DEFAULTS.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
        print(f'wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
