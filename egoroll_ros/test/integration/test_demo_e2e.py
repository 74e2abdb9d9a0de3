"""`egoroll demo`, the README's run command, end to end: the installed console scripts on the
simulated robot with the shipped demo policy, its recording, and an offline evaluation of it.

These run the real thing (five node processes plus the supervisor) and take about a minute.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess

from ament_index_python.packages import get_package_share_directory
import pytest
from rosbags.rosbag2 import Reader

from egoroll_ros.testing import executable_path

pytestmark = pytest.mark.integration
SHARE = Path(get_package_share_directory('egoroll_ros'))


def _egoroll(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([executable_path('egoroll'), *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ), stdin=subprocess.DEVNULL)


@pytest.fixture(scope='module')
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp('demo')
    proc = _egoroll('demo', '--duration', '25', '--quiet', '--report', str(out / 'report'),
                    '--record', str(out / 'bag'), timeout=240)
    return out, proc


def _only_starvation(summary: dict) -> bool:
    """The one failure this shared 2-core test machine can cause by itself: the executor's
    joint_states watchdog firing because a process of the demo graph was descheduled for
    longer than state_timeout (seen about once in three 30 s runs). The executor then holds,
    as it must, and the demo honestly exits 1; anything else is a real failure."""
    return (summary['failures'] and all(f.startswith('executor aborted') for f in
                                         summary['failures'])
            and all(': STALE_STATE: ' in e for e in summary['executor_errors']))


#: Rejections a loaded machine causes by itself: a chunk whose observation is too old when it
#: arrives (inference or delivery delayed past max_chunk_age). They are never executed and do
#: not fault the rollout (core/interlock.py NOT_READY_CHECKS); every other rejection is a
#: defect of the demo's policy or gate.
LATE = {'chunk_age', 'chunk_in_past'}


def _content_rejections(summary: dict) -> list[dict]:
    """The rejections that are about what the chunk asked for, not about its lateness; and
    at most a tenth of the chunks may be late."""
    late = [r for r in summary['rejections']
            if {v['check'] for v in r['violations']} <= LATE]
    assert len(late) <= 0.1 * max(summary['chunks_accepted'], 1), summary['rejections']
    return [r for r in summary['rejections'] if r not in late]


def test_demo_reaches_a_target_with_every_chunk_accepted_and_exits_zero(demo_run):
    out, proc = demo_run
    summary = json.loads((out / 'report' / 'summary.json').read_text())
    if proc.returncode != 0 and _only_starvation(summary):
        print('demo exited 1 only because the executor held on stale joint_states (CPU '
              f'starvation): {summary["executor_errors"]}')
    else:
        assert proc.returncode == 0, f'stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}'
        assert summary['ok'] and not summary['failures']
        assert summary['executor_errors'] == []
    assert summary['targets_reached'] >= 1, summary['closest_approach_m']
    assert summary['chunks_accepted'] >= 50, 'about 10 chunks a second for 25 s'
    assert _content_rejections(summary) == []
    assert summary['gate_faults'] == [] and summary['policy_faults'] == []
    png = (out / 'report' / 'joints.png').read_bytes()
    assert png[:8] == b'\x89PNG\r\n\x1a\n'
    assert 'preflight passed' in proc.stdout and 'targets reached' in proc.stdout


def test_demo_recording_holds_every_topic_of_the_graph(demo_run):
    out, _ = demo_run
    with Reader(out / 'bag') as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert list((out / 'bag').glob('*.mcap')), 'stored as mcap'
    for topic in ('/joint_states', '/camera/scene/image_raw', '/policy/chunk',
                  '/safety/verdict', '/executor/commanded', '/quest/joy',
                  '/robot_description'):
        assert counts.get(topic, 0) > 0, f'{topic} not recorded: {counts}'


def test_evaluate_replays_the_demo_recording_offline(demo_run):
    out, _ = demo_run
    proc = _egoroll('evaluate', str(out / 'bag'), '--config',
                    str(SHARE / 'config' / 'policy_node.yaml'), '--out', str(out / 'eval'),
                    '--no-plots', timeout=300)
    assert proc.returncode == 0, f'stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}'
    report = json.loads((out / 'eval' / 'report.json').read_text())
    assert report['decisions']['chunks'] > 20
    # The demo policy on its own recording: the gate accepts what it accepted live.
    assert report['decisions']['acceptance_rate'] > 0.9, report['decisions']


def test_cartesian_demo_runs_through_ik_and_exits_zero(tmp_path):
    proc = _egoroll('demo', '--cartesian', '--duration', '10', '--quiet', '--report',
                    str(tmp_path / 'report'), timeout=180)
    summary = json.loads((tmp_path / 'report' / 'summary.json').read_text())
    if not (proc.returncode != 0 and _only_starvation(summary)):
        assert proc.returncode == 0, f'stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}'
    assert summary['chunks_accepted'] >= 10 and _content_rejections(summary) == []
    assert summary['gate_faults'] == [] and summary['policy_faults'] == []


def test_demo_refuses_to_start_beside_another_graph_in_its_domain(ros_graph, tmp_path):
    """A node named like one of the demo's (here /safety_gate) already in the domain: the demo
    would cross-talk with that graph, so it exits 2 naming it, at the latest before preflight
    (normally before it starts any node; a slow discovery is caught once its nodes run)."""
    ros_graph.node('safety_gate')
    proc = _egoroll('demo', '--duration', '5', '--quiet', '--report', str(tmp_path / 'r'),
                    timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert '/safety_gate' in proc.stderr and 'ROS_DOMAIN_ID=' in proc.stderr, proc.stderr
    assert 'preflight' not in proc.stdout, 'the demo must not reach preflight'
