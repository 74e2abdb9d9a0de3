"""Domain ids held by one process are never handed to another (tests and benchmarks alike)."""

import os
import subprocess
import sys

from egoroll_ros.testing import domains


def test_a_held_domain_is_refused_to_another_process_and_freed_on_release():
    domain, fh = domains.claim(prefer_unused=True)
    probe = ('import sys; from egoroll_ros.testing import domains; '
             f'fh = domains._try_lock({domain}); sys.exit(0 if fh is None else 3)')
    try:
        held = subprocess.run([sys.executable, '-c', probe], timeout=60)
        assert held.returncode == 0, f'domain {domain} was handed out while held'
    finally:
        fh.close()
    freed = subprocess.run([sys.executable, '-c', probe], timeout=60)
    assert freed.returncode == 3, f'domain {domain} stayed locked after release'


def test_two_graphs_of_one_process_get_different_domains():
    with domains.isolated_domain() as a, domains.isolated_domain() as b:
        assert a != b
        assert os.environ['ROS_DOMAIN_ID'] == str(b)


def test_a_benchmark_always_leaves_an_inherited_domain(monkeypatch):
    monkeypatch.setenv('ROS_DOMAIN_ID', '0')       # e.g. the user's robot graph
    monkeypatch.setenv('ROS_STATIC_PEERS', '10.0.0.2')
    domain = domains.use_private_domain()
    assert domain in domains.DOMAINS and os.environ['ROS_DOMAIN_ID'] == str(domain)
    assert os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'
    assert 'ROS_STATIC_PEERS' not in os.environ
    probe = ('import sys; from egoroll_ros.testing import domains; '
             f'sys.exit(0 if domains._try_lock({domain}) is None else 3)')
    assert subprocess.run([sys.executable, '-c', probe], timeout=60).returncode == 0
