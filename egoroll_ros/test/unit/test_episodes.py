"""Episode boundaries follow preflight/start/stop; the operator's mark labels and closes."""

import pytest

from egoroll_ros.core.episodes import FAILURE, SUCCESS, EpisodeTracker


def test_preflight_opens_stop_ends_and_a_mark_closes():
    tr = EpisodeTracker(outcome_window=5.0)
    closed, opened = tr.state('PREFLIGHT', 1.0)
    assert closed is None and opened.index == 1
    assert tr.state('READY', 1.1) == (None, None)
    assert tr.state('RUNNING', 2.0) == (None, None)
    assert tr.state('IDLE', 9.0) == (None, None)        # ended: waits for a mark
    assert tr.poll(13.9) is None
    marked, closed = tr.mark(SUCCESS, 10.0)
    assert marked is closed and closed.outcome == SUCCESS and closed.ran
    assert closed.end_state == 'IDLE' and tr.current is None


def test_unmarked_episode_closes_after_the_outcome_window():
    tr = EpisodeTracker(outcome_window=2.0)
    tr.state('PREFLIGHT', 0.0)
    tr.state('RUNNING', 0.5)
    tr.state('FAULT', 3.0)
    assert tr.poll(4.9) is None
    ep = tr.poll(5.0)
    assert ep.outcome is None and ep.end_state == 'FAULT' and ep.ran


def test_mark_while_running_closes_when_the_rollout_ends():
    tr = EpisodeTracker(outcome_window=10.0)
    tr.state('PREFLIGHT', 0.0)
    tr.state('RUNNING', 0.5)
    marked, closed = tr.mark(FAILURE, 1.0)
    assert marked.outcome == FAILURE and closed is None
    closed, _ = tr.state('IDLE', 2.0)
    assert closed.outcome == FAILURE


def test_a_preflight_without_start_closes_at_once_and_the_next_preflight_opens_anew():
    tr = EpisodeTracker(outcome_window=10.0)
    tr.state('PREFLIGHT', 0.0)
    tr.state('READY', 0.1)
    closed, _ = tr.state('IDLE', 10.1)
    assert closed.index == 1 and not closed.ran
    tr.state('PREFLIGHT', 20.0)
    tr.state('RUNNING', 20.5)
    tr.state('IDLE', 30.0)
    closed, opened = tr.state('PREFLIGHT', 31.0)        # next rollout before the window ends
    assert closed.index == 2 and closed.outcome is None and opened.index == 3


def test_marks_without_an_episode_and_bad_outcomes():
    tr = EpisodeTracker(outcome_window=1.0)
    assert tr.mark(SUCCESS, 0.0) == (None, None)
    with pytest.raises(ValueError, match='outcome must be'):
        tr.mark('maybe', 0.0)
    with pytest.raises(ValueError):
        EpisodeTracker(-1.0)


def test_a_preflight_between_two_status_samples_still_opens_an_episode():
    tr = EpisodeTracker(outcome_window=1.0)
    closed, opened = tr.state('READY', 0.0)
    assert opened.index == 1 and not opened.ran
    tr.state('RUNNING', 0.1)
    tr.state('IDLE', 1.0)
    closed, opened = tr.state('RUNNING', 1.5)         # next rollout, preflight unseen
    assert closed.index == 1 and closed.ran and opened.index == 2 and opened.ran


# ---- outcome buttons that would do something else --------------------------------------------
def test_outcome_buttons_colliding_with_another_use_are_named():
    from egoroll_ros.core.episodes import outcome_button_conflicts

    used = {'safety_gate estop_button (g.yaml)': 1, 'safety_gate confirm_button (g.yaml)': 0,
            'policy_node takeover.button (p.yaml)': 3, 'policy_node quest.toggle_button': -1}
    assert outcome_button_conflicts({'quest.success_button': 4, 'quest.failure_button': 5},
                                    used) == []
    assert outcome_button_conflicts({'quest.success_button': -1, 'quest.failure_button': -1},
                                    used) == []
    bad = outcome_button_conflicts({'quest.success_button': 0, 'quest.failure_button': 1},
                                   used)
    assert len(bad) == 2
    assert "'quest.success_button': button 0 is also safety_gate confirm_button" in bad[0]
    assert "'quest.failure_button': button 1 is also safety_gate estop_button" in bad[1]
    same = outcome_button_conflicts({'quest.success_button': 4, 'quest.failure_button': 4}, {})
    assert same == ["parameter 'quest.failure_button': button 4 is also quest.success_button"]
    assert outcome_button_conflicts({'quest.success_button': 3, 'quest.failure_button': -1},
                                    used)[0].startswith("parameter 'quest.success_button': "
                                                        'button 3 is also policy_node takeover')


def test_buttons_in_use_reads_the_gate_and_policy_sections_with_their_defaults(tmp_path):
    from egoroll_ros.errors import ConfigError
    from egoroll_ros.nodes.episode_recorder import buttons_in_use

    gate = tmp_path / 'gate.yaml'
    gate.write_text('/**/safety_gate:\n  ros__parameters:\n    estop_button: 7\n')
    pol = tmp_path / 'pol.yaml'
    pol.write_text('policy_node:\n  ros__parameters:\n    quest:\n      toggle_button: 2\n'
                   '    takeover.arms: [arm]\n')
    used, notes = buttons_in_use([str(gate), str(pol)])
    assert used == {f'safety_gate estop_button ({gate})': 7,
                    f'safety_gate confirm_button ({gate})': 0,          # the default
                    f'policy_node quest.toggle_button ({pol})': 2,
                    f'policy_node takeover.button ({pol})': 3} and notes == []
    # takeover off: its button is not in use; no gate section: said so
    pol.write_text('policy_node:\n  ros__parameters:\n    query_frequency: 5.0\n')
    used, notes = buttons_in_use([str(pol)])
    assert used == {f'policy_node quest.toggle_button ({pol})': -1}
    assert notes == ['no safety_gate section in config_files: its Quest buttons are not '
                     'checked']
    gate.write_text('safety_gate:\n  ros__parameters:\n    estop_button: one\n')
    with pytest.raises(ConfigError, match=r"gate.yaml: parameter 'estop_button'"):
        buttons_in_use([str(gate)])
