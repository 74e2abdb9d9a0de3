"""`egoroll demo` starts only when the GATE accepts the preflight's shadow chunk.

A stand-in for the supervisor node answers policy/preflight from a script and logs the gate's
verdict on the shadow chunk as the real one does; the waiting is the real supervisor method.
"""

from __future__ import annotations

import threading

from egoroll_ros.demo.report import DemoLog, VerdictRecord
from egoroll_ros.demo.run import _preflight
from egoroll_ros.demo.supervisor import DemoSupervisor


class ScriptedSupervisor:
    """Each preflight call logs the next scripted gate verdict (None: the gate says nothing)."""

    def __init__(self, verdicts: list[list[str] | None]) -> None:
        self.lock = threading.Lock()
        self.log = DemoLog(joint_names=['j'])
        self.script = list(verdicts)
        self.calls = 0

    def republish_target(self) -> None:
        pass

    def call(self, name: str) -> tuple[bool, str]:
        assert name == 'preflight'
        self.calls += 1
        checks = self.script.pop(0)
        if checks is not None:
            with self.lock:
                self.log.verdicts.append(VerdictRecord(
                    0.0, self.calls, accepted=not checks, needs_confirmation=False, shadow=True,
                    forwarded=False, summary=f'rejected: {checks}' if checks else 'accepted',
                    violations=[{'check': c} for c in checks]))
        return True, f'preflight passed: shadow chunk {self.calls} published'

    def wait_shadow_verdict(self, start: int, timeout: float) -> VerdictRecord | None:
        return DemoSupervisor.wait_shadow_verdict(self, start, min(timeout, 0.2))


def test_not_ready_verdicts_are_retried_until_the_gate_accepts():
    sup = ScriptedSupervisor([['robot_model'], ['deadman', 'joint_state'], []])
    ok, msg = _preflight(sup, timeout=10.0)
    assert ok and sup.calls == 3
    assert 'the gate accepted it' in msg


def test_a_real_violation_fails_the_preflight_at_once():
    sup = ScriptedSupervisor([['robot_model'], ['position_limit'], []])
    ok, msg = _preflight(sup, timeout=10.0)
    assert not ok and sup.calls == 2
    assert 'position_limit' in msg


def test_no_gate_verdict_is_not_a_pass():
    sup = ScriptedSupervisor([None, None, None, None])
    ok, msg = _preflight(sup, timeout=1.0)
    assert not ok and 'no gate verdict' in msg
