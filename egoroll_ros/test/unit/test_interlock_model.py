"""The gate's interlock and the executor together, against a reference model (issue 23.7).

A ``hypothesis`` state machine drives ``core.interlock.Interlock`` (the gate) and
``core.executor.ExecutorCore`` (the executor) through random interleavings of live and shadow
chunks, preflights, starts (arm requests: late, duplicated, naming old preflights), every kind
of stop, the e-stop, the deadman, the Quest link going stale, heartbeats delivered late or not
at all, goals delivered late, twice or forged (any sequence, any heartbeat claim), and gate
restarts. The "network" between the two is a pair of queues the rules deliver from in any
order (heartbeats stay in order among themselves, as on their one reliable DDS writer).

The reference model below is written from the documented behaviour, not from the code: the
gate is armed only by an arm request naming a preflight accepted since the last stop, with no
e-stop or fault latched; every stop of any kind disarms it; motion is allowed while armed, not
e-stopped, no fault, deadman held. After every step:

- the gate's heartbeat state says what the model says (motion allowed or not);
- while the newest heartbeat the executor received says motion is not allowed, the only goal
  it may run (or move the setpoints with) is one the gate forwarded after sending that
  heartbeat (they cross on the wire); a goal the gate never sent never runs at all: goals and
  heartbeats carry the gate's HMAC (core/auth.py, issue 23.4) and the executor's side checks
  it first, as trajectory_server does; forged goals (no tag, another key, a real goal's tag,
  an earlier boot's) and forged or replayed heartbeats are refused;
- once the executor has received a heartbeat sent after a cancel of any kind, no goal
  forwarded before that cancel is running.

``EGOROLL_MODEL_EXAMPLES`` sets the number of examples (default 1500, derandomized so CI is
reproducible); ``benchmarks/run_all.py`` runs it with many more and randomized.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
import numpy as np
import pytest

from egoroll_ros.core.auth import (
    HeartbeatAuthenticator,
    Point,
    goal_tag,
    heartbeat_tag,
    new_boot_id,
    trajectory_digest,
)
from egoroll_ros.core.executor import ExecutorConfig, ExecutorCore, validate_goal
from egoroll_ros.core.interlock import Interlock, InterlockConfig, Kind
from egoroll_ros.core.types import JointTrajectoryData
from egoroll_ros.errors import TrajectoryError

pytestmark = pytest.mark.safety  # checks motion and stops: never rerun

J = ('a', 'b')
DT = 0.01
KEY = b'robot-half-key-for-the-model-00'   # the gate's and the executor's shared key
HB_TIMEOUT = 0.25
POLICY = 'p' * 64
OTHER = 'q' * 64


def _digest(target: np.ndarray, duration: float) -> bytes:
    """The digest of the model's one-point goal (core/auth.py)."""
    sec = int(duration)
    return trajectory_digest(J, [Point(sec, round((duration - sec) * 1e9), target.tolist())],
                             (0, 0))


class Model:
    """What the documents say the gate's interlock does (docs/safety_gate.md, Arm.srv)."""

    def __init__(self) -> None:
        self.armed = False
        self.estop = False
        self.estop_down = False
        self.fault = False
        self.deadman = False
        self.preflights: dict[int, str] = {}
        self.stops = 0                       # how many stops so far (any kind)
        self.live = False                    # a live chunk forwarded since the arm
        self.last_forwarded: int | None = None

    def stop(self) -> None:
        self.armed = False
        self.preflights.clear()
        self.stops += 1
        self.live = False

    def allowed(self) -> bool:
        return self.armed and not self.estop and not self.fault and self.deadman

    def arm(self, seq: int, policy: str) -> bool:
        if self.estop or self.fault or self.preflights.get(seq) != policy:
            return False
        if self.last_forwarded is not None and seq <= self.last_forwarded:
            return False
        self.armed = True
        self.preflights.clear()
        self.live = False
        return True


class GateAndExecutor(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.t = 100.0
        self.model = Model()
        self.gate = Interlock(InterlockConfig(joy_timeout=1e6, max_joint_state_age=1e6,
                                              stall_timeout=0.0))
        self.exe = ExecutorCore(ExecutorConfig(
            joints=J, control_rate=1.0 / DT, state_timeout=1e6, max_velocity=(50.0, 50.0),
            max_acceleration=(1e4, 1e4), heartbeat_timeout=1e6, command_timeout=0.0,
            max_late_ticks=0, stall_timeout=0.0, require_position_limits=False,
            seam='splice', stop_behavior='hold', blend_time=0.0))
        self.q = np.zeros(2)
        self.exe.update_measured(self.q, None, self.t)
        self.seq = 0                         # the policy's stream (always increasing)
        self.counter = 0                     # the gate's heartbeat counter
        # seq, claim, cancels, target, (boot, tag)
        self.wire_goals: list[tuple[int, int, int, np.ndarray, tuple[int, bytes]]] = []
        # allowed, state, fence, counter, cancels, boot, tag
        self.wire_hb: list[tuple[bool, str, int, int, int, int, bytes]] = []
        self.wire_cancel = 0
        self.keys: list[int] = []
        self.cancels = 0                      # CANCEL decisions of the gate so far
        self.sent_cancels: dict[int, int] = {}  # goal sequence -> cancels when forwarded
        self.sent_after: dict[int, int] = {}    # goal sequence -> heartbeat sent before it
        self.admitted_at: dict[int, int] = {}   # goal sequence -> newest heartbeat at admission
        self.hb_allowed: bool | None = None   # newest heartbeat the executor received
        self.hb_counter = 0
        self.hb_cancels = 0                   # cancels when that heartbeat was sent
        self.last_honoured = None             # the newest heartbeat the executor honoured
        self.forged = 10**12
        # core/auth.py between the two: the executor acts only on what verifies
        self.boot = new_boot_id()
        self.auth = HeartbeatAuthenticator(KEY, HB_TIMEOUT)
        self._heartbeat()
        self.deliver_heartbeats()

    # ---- the gate's side --------------------------------------------------------------------
    def _heartbeat(self) -> None:
        self.counter += 1
        fence = self.gate.fence_published()
        allowed, state = self.gate.motion_allowed(), self.gate.state()
        tag = heartbeat_tag(KEY, boot_id=self.boot, counter=self.counter, stamp=(0, 0),
                            state=state, motion_allowed=allowed, fence=fence)
        self.wire_hb.append((allowed, state, fence, self.counter, self.cancels, self.boot, tag))

    def _carry_out(self, decisions) -> None:  # noqa: ANN001
        self.cancels += sum(d.kind is Kind.CANCEL for d in decisions)
        if self.gate.fence_changed:
            self._heartbeat()
        for d in decisions:
            if d.kind is Kind.CANCEL:
                self.wire_cancel += 1
            elif d.kind is Kind.FORWARD:
                if not self.wire_hb or not self.wire_hb[-1][0]:
                    self._heartbeat()     # the gate says "allowed" before its first goal
                seq = int(d.chunk)
                target = np.array([0.3, -0.2]) * (1 + seq % 3)
                tag = goal_tag(KEY, sequence=seq, source='g', boot_id=self.boot,
                               counter=self.counter, digest=_digest(target, 0.5))
                self.wire_goals.append((seq, self.counter, self.cancels, target,
                                        (self.boot, tag)))
                self.sent_cancels[seq] = self.cancels
                self.sent_after[seq] = self.counter

    def _chunk(self, shadow: bool, rejected: bool = False, policy: str = POLICY) -> int:
        self.seq += 1
        seq = self.seq
        out = self.gate.chunk(self.t, seq, seq, shadow=shadow, rejected=rejected,
                              real_rejection=rejected, needs_confirmation=False,
                              executor_ready=True, policy_id=policy)
        m = self.model
        if shadow:
            if not rejected:
                m.preflights[seq] = policy
        elif rejected:
            m.fault = True
            m.stop()
        elif m.allowed() and policy == POLICY:
            m.last_forwarded = seq
            m.live = True
            assert out.forwarded, (seq, [b.message for b in out.blocks])
        else:
            assert not out.forwarded
        self._carry_out(out.decisions)
        return seq

    @rule()
    def live_chunk(self) -> None:
        self._chunk(shadow=False)

    @rule()
    def live_chunk_of_another_policy(self) -> None:
        self._chunk(shadow=False, policy=OTHER)

    @rule()
    def preflight(self) -> None:
        self._chunk(shadow=True)

    @rule()
    def rejected_live_chunk(self) -> None:
        self._chunk(shadow=False, rejected=True)

    @rule(back=st.integers(0, 6), policy=st.sampled_from([POLICY, OTHER]))
    def arm(self, back: int, policy: str) -> None:
        """A start names a preflight: the newest sequence, or an older one (a late or
        duplicated request), of this policy or another."""
        seq = max(0, self.seq - back)
        ok, why = self.gate.arm(seq, policy)
        assert ok == self.model.arm(seq, policy) or (
            ok and why.startswith('already armed')), why
        if ok:
            self._heartbeat()

    # ---- the usual flows, as single steps (so the search reaches deep states quickly) ----
    @rule()
    def policy_start(self) -> None:
        """policy_node's preflight and start, the operator holding the deadman."""
        self._joy(self.model.estop_down, True)
        self.preflight()
        self.arm(0, POLICY)

    @rule(n=st.integers(1, 20))
    def run(self, n: int) -> None:
        """A live chunk over an in-order network, then ``n`` control ticks."""
        self.live_chunk()
        self.deliver_everything()
        self.tick(min(n, 10))
        self.tick(max(0, n - 10) or 1)

    @rule(kind=st.sampled_from(['stop', 'toggle', 'outage', 'halt']))
    def stop(self, kind: str) -> None:
        g, m = self.gate, self.model
        if kind == 'stop':
            out = g.stop('safety/stop')
            m.stop()
        elif kind == 'toggle':
            was_live = m.armed and m.live
            out = g.toggle(self.t + 1e-6)
            if was_live:
                m.stop()
        elif kind == 'outage':
            was_live = m.armed and m.live
            out = g.outage('stalled')
            if was_live:
                m.stop()
        else:
            running = g.goal_sequence
            out = [] if running is None else g.goal_halted(running, 'STALLED')
            if running is not None and m.armed:
                m.stop()
        self._carry_out(out)

    def _joy(self, down: bool, held: bool) -> None:
        """One quest/joy sample: the e-stop button and the deadman."""
        out, _ = self.gate.joy(self.t, down, held, False)
        m = self.model
        if down and not m.estop:
            m.estop = True
            m.stop()
        m.estop_down = down
        m.deadman = held
        self._carry_out(out)

    @rule(down=st.booleans())
    def estop(self, down: bool) -> None:
        self._joy(down, self.model.deadman)

    @rule(held=st.booleans())
    def deadman(self, held: bool) -> None:
        self._joy(self.model.estop_down, held)

    @rule()
    def reset(self) -> None:
        ok, _ = self.gate.reset()
        m = self.model
        assert ok == (not (m.estop and m.estop_down))
        if ok:
            m.estop = m.fault = False

    @rule(n=st.integers(1, 8))
    def watchdog(self, n: int) -> None:
        for _ in range(n):
            self._carry_out(self.gate.timer(self.t, self.t))
            self._heartbeat()

    @rule()
    def gate_restart(self) -> None:
        """A new gate process: disarmed, counters from 1; what it sent before is still on the
        wire."""
        self.gate = Interlock(InterlockConfig(joy_timeout=1e6, max_joint_state_age=1e6,
                                              stall_timeout=0.0))
        m = self.model
        m.stop()
        m.estop = m.fault = m.deadman = False   # (the button may still be down: next sample)
        m.last_forwarded = None
        self.counter = 0
        self.boot = new_boot_id()    # a new process: a new boot id, the same key
        self.cancels += 1            # everything the old gate sent is void
        self._heartbeat()

    # ---- the wire and the executor's side ---------------------------------------------------
    def _submit(self, seq: int, claim: int, target: np.ndarray, auth: tuple[int, bytes],
                duration: float = 0.5) -> bool:
        """The executor node's order: the tag (core/auth.py), admission, validation."""
        now = self.t
        traj = JointTrajectoryData(J, np.array([duration]), target[None, :], stamp=now)
        boot, tag = auth
        if self.auth.goal(now, tag=tag, sequence=seq, source='g', boot_id=boot, counter=claim,
                          digest=_digest(target, duration)) is not None:
            return False
        try:
            err = self.exe.admission_error(now, seq)
            if err is not None:
                raise err
            goal = validate_goal(traj, seq, 'g', config=self.exe.config,
                                 last_sequence=self.exe.last_sequence, ros_now=now,
                                 mono_now=now, measured=self.exe.measured)
            self.exe.submit(goal, seq, claim)
            self.keys.append(seq)
            self.admitted_at[seq] = self.hb_counter
        except TrajectoryError:
            pass
        return True

    @rule(which=st.integers(0, 3))
    def deliver_goal(self, which: int) -> None:
        if self.wire_goals:
            seq, claim, _, target, auth = self.wire_goals.pop(
                min(which, len(self.wire_goals) - 1))
            self._submit(seq, claim, target, auth)

    @rule(claim=st.sampled_from([0, 1, 10**18]),
          how=st.sampled_from(['no tag', 'another key', 'a real tag', 'an old boot']))
    def forged_goal(self, claim: int, how: str) -> None:
        """Another node's goal straight to the executor: any sequence above the gate's, any
        heartbeat claim (the core does not see allowed_sources), with no tag, one under
        another key, a real goal's tag (copied from the wire), or signed as an earlier boot
        of the gate would (a recording): never authenticated, so never admitted."""
        self.forged += 1
        target = np.array([2.0, 2.0])
        boot, tag = self.boot, b''
        if how == 'another key':
            tag = goal_tag(b'x' * 32, sequence=self.forged, source='g', boot_id=boot,
                           counter=claim, digest=_digest(target, 5.0))
        elif how == 'a real tag' and self.wire_goals:
            boot, tag = self.wire_goals[-1][4]
        elif how == 'an old boot':
            boot = 7           # never a boot of this gate (new_boot_id is random, odd, 63-bit)
            tag = goal_tag(KEY, sequence=self.forged, source='g', boot_id=boot,
                           counter=claim, digest=_digest(target, 5.0))
        assert not self._submit(self.forged, claim, target, (boot, tag), duration=5.0), how

    @rule(allowed=st.booleans(), ahead=st.integers(1, 3))
    def forged_heartbeat(self, allowed: bool, ahead: int) -> None:
        """A heartbeat from another node (no valid tag, a newer counter), or one of the gate's
        own sent again (a replay): the executor ignores it."""
        c = self.hb_counter
        assert self.auth.heartbeat(self.t, tag=b'\0' * 32, boot_id=self.boot, counter=c + ahead,
                                   stamp=(0, 0), state='ok' if allowed else 'estop',
                                   motion_allowed=allowed, fence=0) is not None
        if self.last_honoured is not None:
            allowed, state, fence, counter, _, boot, tag = self.last_honoured
            assert self.auth.heartbeat(self.t, tag=tag, boot_id=boot, counter=counter,
                                       stamp=(0, 0), state=state, motion_allowed=allowed,
                                       fence=fence) is not None

    @rule()
    def deliver_everything(self) -> None:
        """An in-order network: every heartbeat, then every goal."""
        self.deliver_heartbeats()
        while self.wire_goals:
            self.deliver_goal(0)

    @rule()
    def deliver_heartbeats(self) -> None:
        while self.wire_hb:
            self._deliver_one_heartbeat()

    @rule()
    def deliver_one_heartbeat(self) -> None:
        if self.wire_hb:
            self._deliver_one_heartbeat()

    def _deliver_one_heartbeat(self) -> None:
        hb = self.wire_hb.pop(0)
        allowed, state, fence, counter, stops, boot, tag = hb
        if self.auth.heartbeat(self.t, tag=tag, boot_id=boot, counter=counter, stamp=(0, 0),
                               state=state, motion_allowed=allowed, fence=fence) is not None:
            return     # another boot while this one lives, or an old boot: ignored
        self.last_honoured = hb
        self.exe.update_heartbeat(self.t, allowed, state, fence, counter)
        self.hb_allowed, self.hb_counter, self.hb_cancels = allowed, counter, stops
        self.exe.take_outcomes()

    @rule()
    def drop_heartbeat(self) -> None:
        if self.wire_hb:
            self.wire_hb.pop(0)

    @rule()
    def deliver_cancel(self) -> None:
        if self.wire_cancel:
            self.wire_cancel = 0
            for key in self.keys:
                self.exe.cancel(key, self.t)
            self.exe.take_outcomes()

    @rule(n=st.integers(1, 10))
    def tick(self, n: int) -> None:
        for _ in range(n):
            before = self.exe.motion.sample(self.t)[0].copy() \
                if self.exe.motion is not None else None
            self.t += DT
            self.exe.update_measured(self.q, None, self.t)
            res = self.exe.tick(self.t)
            if res.setpoint is not None:
                moved = before is not None and \
                    not np.allclose(res.setpoint.positions, before, atol=1e-12)
                if moved:
                    self._may_run(self.exe.active_sequence, 'moved the setpoints')
                self.q = res.setpoint.positions.copy()

    def _may_run(self, a: int | None, what: str) -> None:
        """Whether goal ``a`` may run now (see the module docstring)."""
        assert a is not None, f'{what} with no goal running'
        assert a in self.sent_after, f'goal {a} that the gate never sent {what}'
        if self.hb_allowed is False:
            c = self.hb_counter
            assert a in self.sent_after, f'forged goal {a} {what}'
            assert self.sent_after[a] >= c, \
                f'goal {a} (sent after heartbeat {self.sent_after[a]}) {what} after ' \
                f'heartbeat {c} said no motion'
        if a in self.sent_cancels:
            assert self.sent_cancels[a] >= self.hb_cancels, \
                f'goal {a} forwarded before a cancel {what} after that cancel reached it'

    # ---- invariants -----------------------------------------------------------------------
    @invariant()
    def gate_agrees_with_the_model(self) -> None:
        assert self.gate.motion_allowed() == self.model.allowed(), (
            self.gate.state(), vars(self.model))

    @invariant()
    def only_goals_the_gate_still_allows_run(self) -> None:
        if self.exe.state == 'executing' and self.exe.active_sequence is not None:
            self._may_run(self.exe.active_sequence, 'is executing')


EXAMPLES = int(os.environ.get('EGOROLL_MODEL_EXAMPLES', '1500'))
RANDOM = os.environ.get('EGOROLL_MODEL_RANDOM', '') == '1'

TestGateAndExecutor = GateAndExecutor.TestCase
TestGateAndExecutor.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=50, derandomize=not RANDOM, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
