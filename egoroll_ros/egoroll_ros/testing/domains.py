"""ROS domain ids that no other egoroll test or benchmark on this machine holds.

Two graphs in one DDS domain talk to each other: a benchmark's policy then feeds another
graph's gate, whose verdicts name chunks it never expected (``old_sequence``, jumps from a
state it never measured). Every test session, test graph and benchmark therefore holds an
exclusive lock on the domain id it uses (one lock file per id under the temp directory),
taken without waiting, for as long as it uses the id. No rclpy and no pytest here.
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import fcntl
import os
from pathlib import Path
import tempfile
from typing import TextIO

#: Domain ids 1..200 (valid for Fast DDS's default port mapping with a few participants each).
DOMAINS = range(1, 201)
_USED_HERE: set[int] = set()
_HELD: list[TextIO] = []


def _try_lock(domain: int) -> TextIO | None:
    lock_dir = Path(tempfile.gettempdir()) / 'egoroll-test-domains'
    lock_dir.mkdir(exist_ok=True)
    fh = open(lock_dir / f'{domain}.lock', 'w')  # noqa: SIM115 - held by the caller
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def claim(prefer_unused: bool) -> tuple[int, TextIO]:
    """Lock a domain id no other process holds (preferably one this process never used).

    Returns:
        The id and the open lock file; the lock holds until the file is closed.

    Raises:
        RuntimeError: every id in :data:`DOMAINS` is held.
    """
    start = os.getpid() % len(DOMAINS)
    order = [DOMAINS[(start + k) % len(DOMAINS)] for k in range(len(DOMAINS))]
    if prefer_unused:
        order = [d for d in order if d not in _USED_HERE] + [d for d in order
                                                             if d in _USED_HERE]
    for domain in order:
        fh = _try_lock(domain)
        if fh is not None:
            _USED_HERE.add(domain)
            return domain, fh
    raise RuntimeError(f'no free ROS_DOMAIN_ID in {DOMAINS.start}..{DOMAINS.stop - 1}')


def claim_for_process() -> int:
    """Hold an exclusive lock on a domain id for the life of this process and return it."""
    domain, fh = claim(prefer_unused=False)
    _HELD.append(fh)
    return domain


def use_private_domain() -> int:
    """For a benchmark: run this process, and the processes it starts, in a domain of its own.

    Sets ``ROS_DOMAIN_ID`` (always: an inherited id may be shared with a running graph) and
    ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``; call before anything initialises rclpy.
    """
    domain = claim_for_process()
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    os.environ.pop('ROS_STATIC_PEERS', None)
    return domain


@contextlib.contextmanager
def isolated_domain() -> Iterator[int]:
    """A domain id of its own for one graph; ``ROS_DOMAIN_ID`` names it meanwhile, so the
    processes a launcher starts inherit it. Pass it to ``RosGraph(domain_id=...)``."""
    domain, fh = claim(prefer_unused=True)
    previous = os.environ.get('ROS_DOMAIN_ID')
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    try:
        yield domain
    finally:
        if previous is None:
            os.environ.pop('ROS_DOMAIN_ID', None)
        else:
            os.environ['ROS_DOMAIN_ID'] = previous
        fh.close()
