"""policy_node's policy/status detail and its rollout diagnostics task (ros/policy_status.py)."""

from __future__ import annotations

from builtin_interfaces.msg import Time

from egoroll_ros.core.rollout import State
from egoroll_ros.ros.diagnostics import ERROR, OK, STALE, WARN
from egoroll_ros.ros.gate_stop import CONFIRMED, NOT_CONFIRMED, PENDING, StopReport
from egoroll_ros.ros.policy_status import (
    final_status,
    rollout_detail,
    rollout_status,
    rollout_task,
)

STOP = StopReport('policy/stop', CONFIRMED, 'holding', 1.0, 0.012)


def test_running_detail_carries_the_last_skip_and_underrun():
    d = rollout_detail('running', State.RUNNING, last_skip='camera stale', underrun='late',
                       underruns=3, stop=STOP)
    assert d == 'running; last skip: camera stale; late (3 times)'    # no stop while running


def test_skips_and_underruns_are_not_shown_when_not_running():
    d = rollout_detail('stopped', State.IDLE, last_skip='camera stale', underrun='late')
    assert d == 'stopped'


def test_the_last_stop_is_shown_while_not_running():
    assert rollout_detail('stopped', State.IDLE, stop=STOP) == f'stopped; {STOP.text()}'


def test_a_takeover_is_named_with_its_own_words_or_a_default():
    assert rollout_detail('r', State.RUNNING, takeover='operator drives arm') == \
        'r; operator drives arm (the policy runs in shadow)'
    assert rollout_detail('r', State.RUNNING, takeover='') == \
        'r; operator takeover (the policy runs in shadow)'


def _status(state=State.RUNNING):
    return rollout_status(Time(sec=1), state, 'detail',
                          policy_id='f' * 64, chunks_published=5, inferences_skipped=1,
                          latency=0.02, ages={'joint_states': 0.01, 'camera/front': None})


def test_status_message_ages_mark_inputs_never_received():
    msg = _status()
    assert (msg.state, msg.state_name, msg.chunks_published) == (int(State.RUNNING), 'RUNNING', 5)
    assert list(msg.input_names) == ['joint_states', 'camera/front']
    assert list(msg.input_ages) == [0.01, -1.0]


def test_final_status_says_shutdown_or_unconfigured():
    assert final_status(True, 'bye', 3, 2).state_name == 'SHUTDOWN'
    msg = final_status(False, 'cleaned up', 3, 2)
    assert (msg.state_name, msg.detail, msg.chunks_published) == ('UNCONFIGURED', 'cleaned up', 3)


def test_diagnostics_levels():
    assert rollout_task(None, unconfigured='configure refused: bad').level == ERROR
    assert rollout_task(None, unconfigured='waiting for robot_description').level == WARN
    assert rollout_task(None).level == STALE
    assert rollout_task(_status()).level == OK
    assert rollout_task(_status(State.FAULT)).level == ERROR
    assert rollout_task(_status(), stop=StopReport('x', NOT_CONFIRMED, 'timeout', 0.0)).level \
        == ERROR
    assert rollout_task(_status(), stop=StopReport('x', PENDING, '', 0.0)).level == WARN
    assert rollout_task(_status(), stop=STOP).level == OK


def test_diagnostics_values_in_order():
    offsets = {'joint_states': {'last': 0.001, 'min': 0.0, 'max': 0.002, 'count': 4},
               'camera/front': {'last': 0.0, 'min': 0.0, 'max': 0.0, 'count': 0}}
    task = rollout_task(_status(), values=[('rtc', 'off')], clock_offsets=offsets, stop=STOP)
    keys = [k for k, _ in task.values]
    assert keys == ['state', 'policy_id', 'chunks_published', 'inferences_skipped',
                    'last_inference_latency', 'rtc', 'age joint_states', 'age camera/front',
                    'clock offset joint_states', 'last stop']
    assert task.message == 'RUNNING: detail'
