#!/usr/bin/env python3
"""Write a managed runtime's lock file from a venv that has its top-level requirement installed.

Run with the runtime venv's interpreter, e.g. (Python 3.12, one clean install):

    python3.12 -m venv /tmp/lr && /tmp/lr/bin/pip install lerobot==0.6.1
    /tmp/lr/bin/python tools/lock_runtime.py lerobot==0.6.1 \
        > egoroll_ros/egoroll_ros/runtimes/lerobot.lock

Every installed distribution reachable from the top-level requirement is pinned exactly
(``name==version``). A package pulled in only under an environment marker (torch's CUDA
libraries: Linux x86_64) keeps that marker, the conjunction along each path, so the same lock
installs on any Python 3.12 platform the pinned wheels exist for.
"""

from __future__ import annotations

from importlib.metadata import distributions
import platform
import sys

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    top = Requirement(argv[1])
    dists = {canonicalize_name(d.metadata['Name']): d for d in distributions()}
    # markers[name]: None = needed unconditionally, else the set of alternative conditions.
    markers: dict[str, set[str] | None] = {}
    visited: set[tuple[str, frozenset[str], str]] = set()

    def visit(name: str, cond: tuple[str, ...], extras: set[str]) -> None:
        key = canonicalize_name(name)
        if key not in dists:
            raise SystemExit(f'lock_runtime: {name} is required but not installed')
        joined = ' and '.join(f'({c})' for c in cond)
        if (key, frozenset(extras), joined) in visited:
            return
        visited.add((key, frozenset(extras), joined))
        seen = markers.get(key, set())
        if not joined:
            markers[key] = None
        elif seen is not None:
            markers[key] = seen | {joined}
        for spec in dists[key].requires or []:
            req = Requirement(spec)
            more = cond
            if req.marker is not None:
                m = str(req.marker)
                if 'extra' in m:
                    if not any(req.marker.evaluate({'extra': e}) for e in extras):
                        continue
                elif not req.marker.evaluate({'extra': ''}):
                    continue
                else:
                    more = cond + (m,)
            visit(req.name, more, set(req.extras))

    visit(top.name, (), set(top.extras))
    print(f'# egoroll managed runtime: {top} on Python '
          f'{sys.version_info[0]}.{sys.version_info[1]} (written by tools/lock_runtime.py on '
          f'{platform.system()} {platform.machine()}).')
    print('# Every package pinned; install exactly this set on any Python '
          f'{sys.version_info[0]}.{sys.version_info[1]}:')
    print('#   python3.12 -m venv VENV && VENV/bin/pip install --no-deps -r THIS_FILE')
    for key in sorted(markers):
        d = dists[key]
        line = f"{d.metadata['Name']}=={d.version}"
        conds = markers[key]
        if conds:
            line += ' ; ' + ' or '.join(sorted(conds)) if len(conds) == 1 else \
                ' ; ' + ' or '.join(f'({c})' for c in sorted(conds))
            Marker(line.split(' ; ', 1)[1])  # valid
        print(line)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
