"""Benchmark: an hour of rollouts on the demo graph, and whether anything grows.

The installed demo graph (``egoroll demo``'s nodes: sim_robot, sim_camera, the demo policy in
policy_node, safety_gate, trajectory_server, each its own process over DDS) runs rollouts back
to back for ``--minutes``: preflight, start, ``--rollout`` seconds of the reach task, stop,
again. Every ``--exercise-every`` seconds the operator's hand does something instead,
alternately: the Quest deadman released halfway through a rollout (the gate cancels the goal and
forwards nothing until it is held again: hold-to-run) and held again until chunks are forwarded
again; or the rollout ended by the e-stop (then released, ``safety/reset``, and a new preflight
and start, as at the robot).

Printed per window (``--window``, default 10 min), one line per figure:

- each node's RSS (MiB, mean of samples every 5 s, its whole process session) and CPU (% of
  one core over the window);
- inference latency p99 (``policy/status`` per published chunk) and the gate's check time
  p99 (``safety/verdict`` check_duration of live chunks), ms;
- the executor's late ticks out of its ticks (``/diagnostics``, the window's difference);
- live chunks forwarded and rejected (those rejected only because the benchmark released the
  deadman counted apart);
- stop latency (last changing ``executor/commanded`` setpoint, by its stamp, minus time zero:
  ``policy/stop``'s return, or the deadman / e-stop sample's publish), p50 and max, ms;
- faults: gate fault latches (not the e-stop the benchmark pressed), policy_node FAULTs,
  executor aborts.

At the end: each figure's growth from the first window to the last, against the goals of
issue 22 (RSS +5 % at most, p99s within 1.2x, no latched fault, no late-tick trend). The exit
status is 1 when a fault latched or a rollout could not be started again (a failed run, not a
missed goal: the figures are noisy on a shared 2-core machine and are reported, not judged).

Run: tools/in_env.sh python benchmarks/bench_soak.py [--minutes 60] [--window 10]
     [--rollout 45] [--exercise-every 180] [--log-dir DIR]
"""

from __future__ import annotations

import argparse
from collections import deque
from dataclasses import dataclass, field
import os
from pathlib import Path
import statistics
import sys
import tempfile
import threading
import time

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger

from egoroll_interfaces.msg import RolloutStatus
from egoroll_ros.core.robot_model import RobotModel
from egoroll_ros.demo.run import _preflight, demo_checkpoint, demo_graph, share_dir
from egoroll_ros.demo.supervisor import DemoSupervisor
from egoroll_ros.ros.graph import RosGraph, wait_until
from egoroll_ros.ros.processes import ProcessLauncher
from egoroll_ros.sim.demo_task import DEMO_JOINTS
from egoroll_ros.testing.domains import isolated_domain

CLK_TCK = os.sysconf('SC_CLK_TCK')
PAGE = os.sysconf('SC_PAGE_SIZE')
DEADMAN_AXIS = 3      # config/safety_gate.yaml
ESTOP_BUTTON = 1


class SoakOperator(DemoSupervisor):
    """The demo's supervisor (task targets, verdicts, status) with a hand on the Quest: the
    deadman and e-stop can be changed, and the setpoints are kept in a ring (not the whole
    hour: the benchmark's own memory is not what is measured) with their stamps."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.deadman = 1.0
        self.estop = 0
        self.setpoints: deque[tuple[float, tuple[float, ...]]] = deque(maxlen=4000)
        self.ticks: tuple[int, int] | None = None
        self.executor_errors: list[str] = []
        self.gate_latches: list[str] = []
        self._reset = self.create_client(Trigger, 'safety/reset')
        self.statuses = 0        # policy/status messages received

    def _on_status(self, msg: RolloutStatus) -> None:
        super()._on_status(msg)
        self.statuses += 1

    def _publish_joy(self) -> None:
        msg = Joy()
        msg.header.stamp = self.get_clock().now().to_msg()
        axes = [0.0] * 4
        axes[DEADMAN_AXIS] = self.deadman
        buttons = [0] * 4
        buttons[ESTOP_BUTTON] = self.estop
        msg.axes, msg.buttons = axes, buttons
        self._joy_pub.publish(msg)

    def press(self, deadman: float | None = None, estop: int | None = None) -> float:
        """Change the hand and publish it now; returns the publish time (time.time())."""
        if deadman is not None:
            self.deadman = deadman
        if estop is not None:
            self.estop = estop
        t = time.time()
        self._publish_joy()
        return t

    def reset_gate(self) -> tuple[bool, str]:
        if not self._reset.wait_for_service(timeout_sec=5.0):
            return False, 'safety/reset is not available'
        fut = self._reset.call_async(Trigger.Request())
        try:
            wait_until(fut.done, 5.0, 'safety/reset response')
        except AssertionError as exc:
            return False, str(exc)
        return bool(fut.result().success), str(fut.result().message)

    # Only what the soak needs of the joint streams: the joints for the task, the setpoints
    # (stamp, positions) for the stop latency.
    def _on_joints(self, msg: JointState) -> None:
        q = self._ordered(msg)
        if q is not None:
            with self.lock:
                self.q = q

    def _on_commanded(self, msg: JointState) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        with self.lock:
            self.setpoints.append((stamp, tuple(msg.position)))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            with self.lock:
                if status.name.endswith('safety gate'):
                    state = values.get('state', '')
                    if 'fault latched' in state and (not self.gate_latches or
                                                     self.gate_latches[-1] != state):
                        self.gate_latches.append(state)
                elif status.name.endswith('executor'):
                    if values.get('ticks', '').isdigit():
                        self.ticks = (int(values['ticks']), int(values.get('late_ticks', '0')))
                    err = values.get('last_error', '')
                    if err and (not self.executor_errors or self.executor_errors[-1] != err):
                        self.executor_errors.append(err)

    def last_change(self, since: float, settle: float = 0.5, timeout: float = 10.0) -> float:
        """Stamp of the last setpoint that differs from its predecessor, once the setpoints
        have not changed for ``settle`` s of stamps after ``since``; -inf when none changed in
        the ``settle`` s before ``since`` either (the arm was at rest at time zero: no stop to
        time); NaN after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                pts = list(self.setpoints)
            last = None
            for (_, a), (tb, b) in zip(pts, pts[1:], strict=False):
                if a != b:
                    last = tb
            if pts and pts[-1][0] - max(last or since, since) >= settle:
                if last is None or last < since - settle:
                    return float('-inf')
                return last
            time.sleep(0.05)
        return float('nan')


def session_usage(sid: int) -> tuple[int, float]:
    """(RSS bytes, CPU seconds) of every process in session ``sid`` (a node and anything it
    started: the launcher starts each node in its own session)."""
    rss, cpu = 0, 0.0
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat') as fh:
                stat = fh.read()
            fields = stat[stat.rindex(')') + 2:].split()
            if int(fields[3]) != sid:        # field 6: session id
                continue
            cpu += (int(fields[11]) + int(fields[12])) / CLK_TCK   # utime, stime
            with open(f'/proc/{entry}/statm') as fh:
                rss += int(fh.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            continue          # exited meanwhile
    return rss, cpu


@dataclass
class Window:
    """What one window saw."""

    start: float
    rss: dict[str, list[float]] = field(default_factory=dict)
    cpu0: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    inference: list[float] = field(default_factory=list)
    gate: list[float] = field(default_factory=list)
    ticks0: tuple[int, int] = (0, 0)
    ticks: tuple[int, int] = (0, 0)
    forwarded: int = 0
    rejected: int = 0
    rejected_deadman: int = 0
    stops: dict[str, list[float]] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    rejection_latches: list[str] = field(default_factory=list)
    preflight_rejections: list[str] = field(default_factory=list)
    cpu_done: dict[str, float] = field(default_factory=dict)
    homed: int = 0
    aborts: list[str] = field(default_factory=list)
    rollouts: int = 0
    seconds: float = 0.0


def _by_check(summaries: list[str]) -> str:
    """' (acceleration_limit 5, jerk_limit 2)': how many verdict summaries name each first
    violated check."""
    counts: dict[str, int] = {}
    for text in summaries:
        first = text.split('first: ', 1)[-1].split(':', 1)[0]
        counts[first] = counts.get(first, 0) + 1
    return ' (' + ', '.join(f'{k} {v}' for k, v in sorted(counts.items())) + ')' if counts else ''


def p99(xs: list[float]) -> float:
    if not xs:
        return float('nan')
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]


#: Executor errors that are an abnormal end of motion (the demo's list) and not the expected
#: end of a goal the benchmark stopped (COMMAND_TIMEOUT after a stop) or a seam refusal.
ABORTS = ('PATH_TOLERANCE_VIOLATED', 'GOAL_TOLERANCE_VIOLATED', 'STALE_STATE',
          'LIMIT_VIOLATED', 'SHUTDOWN')


class RolloutEndedError(RuntimeError):
    """The rollout ended without the benchmark ending it."""


class Soak:
    def __init__(self, args: argparse.Namespace, log_dir: Path) -> None:
        self.args = args
        checkpoint, fingerprint = demo_checkpoint(None)
        model = RobotModel.from_file(share_dir() / 'urdf' / 'demo_arm.urdf')
        self.graph = RosGraph(num_threads=1)
        self.launch = ProcessLauncher(self.graph.node('soak_probe'), log_dir)
        self.op = self.graph.add(SoakOperator(DEMO_JOINTS, model, seed=args.seed,
                                              context=self.graph.context))
        self.specs = demo_graph(checkpoint, fingerprint)
        self.procs = self.launch.start_graph(self.specs)
        self.op.new_target()
        wait_until(lambda: self.op.status is not None and self.op.status.state ==
                   RolloutStatus.STATE_IDLE, 60.0, 'policy_node configured (IDLE)')
        self.op.start_clock()
        self.windows: list[Window] = []
        self._seen_verdicts = 0
        self._seen_inference = 0
        self._seen_gate = 0
        self._seen_latches = 0
        self._seen_errors = 0
        self._sampling = threading.Event()

    # ----- figures --------------------------------------------------------------------------
    def usage(self) -> dict[str, tuple[int, float]]:
        return {p.name: session_usage(p.popen.pid) for p in self.procs}

    def open_window(self) -> Window:
        w = Window(start=time.monotonic())
        for name, (_, cpu) in self.usage().items():
            w.cpu0[name] = cpu
        w.ticks0 = self.op.ticks or (0, 0)
        self.windows.append(w)
        return w

    def sample(self, w: Window) -> None:
        for name, (rss, _) in self.usage().items():
            w.rss.setdefault(name, []).append(rss / 2**20)

    def close_window(self, w: Window) -> None:
        w.seconds = time.monotonic() - w.start
        for name, (_, cpu) in self.usage().items():
            w.cpu[name] = 100.0 * (cpu - w.cpu0.get(name, cpu) + w.cpu_done.get(name, 0.0)) \
                / w.seconds
        w.ticks = self.op.ticks or w.ticks0
        log = self.op.log
        with self.op.lock:
            live = [v for v in log.verdicts[self._seen_verdicts:] if not v.shadow]
            self._seen_verdicts = len(log.verdicts)
            w.inference = [x * 1e3 for x in log.inference_latencies[self._seen_inference:]]
            self._seen_inference = len(log.inference_latencies)
            # check_duration of every verdict (shadow ones too: the same checks)
            w.gate = [x * 1e3 for x in log.gate_check_durations[self._seen_gate:]]
            self._seen_gate = len(log.gate_check_durations)
            # A rejected chunk latching the fault is counted apart (rejection_latches).
            w.faults += [f for f in self.op.gate_latches[self._seen_latches:]
                         if 'rejected' not in f]
            self._seen_latches = len(self.op.gate_latches)
            w.faults += log.policy_faults
            log.policy_faults.clear()
            errors = self.op.executor_errors[self._seen_errors:]
            self._seen_errors = len(self.op.executor_errors)
        w.forwarded = sum(v.forwarded for v in live)
        held_off = [v for v in live if not v.accepted and
                    {x['check'] for x in v.violations} == {'deadman'}]
        w.rejected_deadman = len(held_off)
        w.rejected = sum(not v.accepted for v in live) - len(held_off)
        w.aborts = [e for e in errors if any(code in e for code in ABORTS)]

    # ----- the operator ---------------------------------------------------------------------
    def state(self) -> int:
        st = self.op.status
        return st.state if st is not None else -1

    def start_rollout(self, w: Window) -> None:
        """Preflight and start. A preflight whose shadow chunk the gate rejects (the demo
        policy's chunk for some targets exceeds the gate's jerk limit) is what an operator
        answers by changing the scene: the next target, and every fourth time by jogging the
        arm home; up to 40 times (each counted), then the run fails."""
        for attempt in range(1, 41):
            ok, msg = _preflight(self.op, timeout=60.0)
            if ok or 'the gate rejected the shadow chunk' not in msg:
                break
            w.preflight_rejections.append(msg.split(': ', 1)[1])
            if attempt % 4 == 0:
                # From some states the demo policy's chunks keep exceeding the limit whatever
                # the target: the operator jogs the arm home (here: sim_robot restarted, at
                # the home pose).
                self.home_arm(w)
            self.op.new_target()
        if not ok:
            raise RuntimeError(f'preflight failed: {msg}')
        seen = self.op.statuses
        ok, msg = self.op.call('start')
        if not ok:
            raise RuntimeError(f'start refused: {msg}')
        # RUNNING, or already ended (a first live chunk the gate rejected: keep_running says
        # so), in a status sent after the start (the status comes at its own rate and may
        # never show a short RUNNING).
        wait_until(lambda: self.op.statuses >= seen + 2 and self.state() in (
            RolloutStatus.STATE_RUNNING, RolloutStatus.STATE_IDLE, RolloutStatus.STATE_FAULT),
            10.0, 'policy_node RUNNING (or ended)')

    def home_arm(self, w: Window) -> None:
        """Restart sim_robot (it starts at the home pose), its CPU kept in the window."""
        i = next(i for i, p in enumerate(self.procs) if p.name == 'sim_robot')
        old = self.procs[i]
        _, cpu = session_usage(old.popen.pid)
        w.cpu_done[old.name] = w.cpu_done.get(old.name, 0.0) + cpu - w.cpu0.get(old.name, cpu)
        old.stop()
        self.launch.processes.remove(old)
        self.procs[i] = self.launch.start_spec(next(s for s in self.specs
                                                    if s.name == 'sim_robot'))
        w.cpu0[old.name] = 0.0
        w.homed += 1

    def end_rollout(self, how: str) -> float:
        """End the running rollout by ``policy/stop`` or the e-stop (then released and
        ``safety/reset``); the stop latency (s)."""
        if how == 'stop':
            ok, msg = self.op.call('stop')
            t0 = time.time()
            if not ok:
                raise RuntimeError(f'policy/stop failed: {msg}')
        else:
            t0 = self.op.press(estop=1)
        latency = self.op.last_change(t0) - t0
        if how == 'estop':
            self.op.press(estop=0)
            def reset() -> bool:
                return self.op.reset_gate()[0]
            wait_until(reset, 10.0, 'safety/reset after the e-stop', interval=0.1)
            if self.state() == RolloutStatus.STATE_RUNNING:
                self.op.call('stop')
        return latency

    def release_deadman(self) -> float:
        """Release the deadman mid-rollout (the gate cancels the goal and forwards nothing
        while it is released: hold-to-run), hold it again and wait until chunks are forwarded
        again; the stop latency (s)."""
        t0 = self.op.press(deadman=0.0)
        latency = self.op.last_change(t0) - t0
        with self.op.lock:
            seen = len(self.op.log.verdicts)
        self.op.press(deadman=1.0)
        def forwarding() -> bool:
            with self.op.lock:
                return any(v.forwarded for v in self.op.log.verdicts[seen:])
        wait_until(forwarding, 10.0, 'chunks forwarded again with the deadman held')
        return latency

    def keep_running(self, until: float) -> None:
        while time.monotonic() < until and self.state() == RolloutStatus.STATE_RUNNING:
            time.sleep(0.2)
        if self.state() != RolloutStatus.STATE_RUNNING:
            st = self.op.status
            raise RolloutEndedError(f'the rollout ended by itself (state {st.state_name}: '
                               f'{st.detail})')

    def recover_from_rejection(self, w: Window, detail: str) -> bool:
        """A live chunk the gate rejected latched its fault and ended the rollout (the gate's
        design, docs/safety_gate.md): what the operator does, ``safety/reset`` and a new
        preflight. True when that was the ending; False for any other ending."""
        if 'fault latched: chunk' not in detail or 'rejected' not in detail:
            return False
        with self.op.lock:
            rejected = [v for v in self.op.log.verdicts if not v.shadow and not v.accepted]
        w.rejection_latches.append(rejected[-1].summary if rejected else detail)
        wait_until(lambda: self.op.reset_gate()[0], 10.0, 'safety/reset after the fault',
                   interval=0.1)
        self.op.new_target()
        return True

    def run(self) -> int:
        a = self.args
        self.end = end = time.monotonic() + a.minutes * 60.0
        next_exercise = time.monotonic() + a.exercise_every
        exercise = 'deadman'
        w = self.open_window()
        stop_sampler = threading.Event()

        def sampler() -> None:
            while not stop_sampler.wait(5.0):
                self.sample(self.windows[-1])
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        failed = ''
        try:
            while time.monotonic() < end:
                due = time.monotonic() >= next_exercise
                try:
                    self.rollout(w, exercise if due else 'stop')
                except RolloutEndedError as exc:
                    if not self.recover_from_rejection(w, str(exc)):
                        raise
                if due:
                    exercise = 'estop' if exercise == 'deadman' else 'deadman'
                    next_exercise = time.monotonic() + a.exercise_every
                if time.monotonic() - w.start >= a.window * 60.0:
                    self.close_window(w)
                    self.report_window(len(self.windows), w)
                    w = self.open_window()
        except (RuntimeError, AssertionError) as exc:
            failed = str(exc)
        finally:
            stop_sampler.set()
            thread.join(timeout=10.0)
        if w.rollouts:
            self.close_window(w)
            self.report_window(len(self.windows), w)
        else:
            self.windows.pop()
        self.report_growth()
        faults = sum(len(x.faults) for x in self.windows)
        if failed:
            print(f'FAILED: {failed}')
        return 1 if failed or faults else 0

    def rollout(self, w: Window, how: str) -> None:
        """One rollout, ended by ``how`` (stop, estop), or with the deadman released halfway
        (deadman) and then ended by stop."""
        a = self.args
        self.start_rollout(w)
        w.rollouts += 1
        t_end = min(time.monotonic() + a.rollout, self.end)
        if how == 'deadman':
            self.keep_running(time.monotonic() + a.rollout / 2)
            w.stops.setdefault('deadman', []).append(self.release_deadman() * 1e3)
            how = 'stop'
        self.keep_running(t_end)
        w.stops.setdefault(how, []).append(self.end_rollout(how) * 1e3)

    # ----- report ---------------------------------------------------------------------------
    def report_window(self, i: int, w: Window) -> None:
        t = sum(x.seconds for x in self.windows[:i - 1])
        print(f'\n--- window {i}: {t / 60:.1f}-{(t + w.seconds) / 60:.1f} min, '
              f'{w.rollouts} rollouts ---')
        for name in sorted(w.rss):
            print(f'  {name:18s} RSS {statistics.mean(w.rss[name]):8.1f} MiB   '
                  f'CPU {w.cpu.get(name, float("nan")):5.1f} %')
        ticks = w.ticks[0] - w.ticks0[0]
        late = w.ticks[1] - w.ticks0[1]
        print(f'  inference p99 {p99(w.inference):7.2f} ms (n={len(w.inference)})   '
              f'gate p99 {p99(w.gate):6.3f} ms (n={len(w.gate)})')
        print(f'  executor late ticks {late} of {ticks}   chunks forwarded {w.forwarded} '
              f'rejected {w.rejected} (+{w.rejected_deadman} while the deadman was released)')
        for how, xs in sorted(w.stops.items()):
            # No change in the 0.5 s before time zero: the arm was at rest (the executor had
            # refused the chunks, say): no stop to time.
            rest = [x for x in xs if x == float('-inf')]
            xs = [x for x in xs if x != float('-inf')]
            xs_ok = [x for x in xs if np.isfinite(x)]
            print(f'  stop latency ({how:7s}) n={len(xs)} p50 '
                  f'{statistics.median(xs_ok) if xs_ok else float("nan"):6.1f} ms  max '
                  f'{max(xs_ok) if xs_ok else float("nan"):6.1f} ms'
                  + (f'  ({len(xs) - len(xs_ok)} never came to rest)' if len(xs_ok) < len(xs)
                     else '') + (f'  ({len(rest)} at rest at time zero)' if rest else ''))
        codes: dict[str, int] = {}
        for e in w.aborts:
            code = next(c for c in ABORTS if c in e)
            codes[code] = codes.get(code, 0) + 1
        print(f'  latched faults: {w.faults or "none"}   executor errors: '
              f'{codes or "none"}' + (f' (last: {w.aborts[-1]})' if w.aborts else ''))
        print(f'  rollouts ended by a rejected policy chunk (fault latched, reset): '
              f'{len(w.rejection_latches)}{_by_check(w.rejection_latches)}')
        print(f'  preflights rejected (next target shown): {len(w.preflight_rejections)}'
              f'{_by_check(w.preflight_rejections)}; arm homed (sim_robot restarted) '
              f'{w.homed}x', flush=True)

    def report_growth(self) -> None:
        if len(self.windows) < 2:
            print('\n(one window: no growth to report; run longer than --window)')
            return
        first, last = self.windows[0], self.windows[-1]
        print(f'\n=== growth, window 1 -> window {len(self.windows)} ===')
        worst_rss = 0.0
        for name in sorted(first.rss):
            a, b = statistics.mean(first.rss[name]), statistics.mean(last.rss.get(name, [0]))
            g = 100.0 * (b - a) / a
            worst_rss = max(worst_rss, g)
            print(f'  {name:18s} RSS {a:8.1f} -> {b:8.1f} MiB ({g:+5.1f} %)   CPU '
                  f'{first.cpu[name]:5.1f} -> {last.cpu.get(name, float("nan")):5.1f} %')
        ri = p99(last.inference) / p99(first.inference)
        rg = p99(last.gate) / p99(first.gate)

        def late_frac(w: Window) -> float:
            ticks = w.ticks[0] - w.ticks0[0]
            return (w.ticks[1] - w.ticks0[1]) / ticks if ticks else float('nan')
        fracs = [late_frac(w) for w in self.windows]
        print(f'  inference p99 {p99(first.inference):.2f} -> {p99(last.inference):.2f} ms '
              f'({ri:.2f}x)   gate p99 {p99(first.gate):.3f} -> {p99(last.gate):.3f} ms '
              f'({rg:.2f}x)')
        def stop_p50(w: Window) -> float:
            xs = [x for x in w.stops.get('stop', []) if np.isfinite(x)]
            return statistics.median(xs) if xs else float('nan')
        print(f'  stop latency (policy/stop) p50 {stop_p50(first):.1f} -> {stop_p50(last):.1f} ms'
              f'   forwarded per rollout {first.forwarded / max(first.rollouts, 1):.0f} -> '
              f'{last.forwarded / max(last.rollouts, 1):.0f}   rejected {first.rejected} -> '
              f'{last.rejected}')
        print('  late ticks per window (fraction): '
              + ' '.join(f'{f:.2e}' for f in fracs))
        faults = sum(len(w.faults) for w in self.windows)
        rising = all(b > a for a, b in zip(fracs, fracs[1:], strict=False))
        trend = len(fracs) >= 3 and rising and fracs[-1] > 0
        print(f'  goals: RSS growth <= 5 %: {"met" if worst_rss <= 5.0 else "NOT met"} '
              f'(worst {worst_rss:+.1f} %); p99s within 1.2x: '
              f'{"met" if ri <= 1.2 and rg <= 1.2 else "NOT met"}; no latched fault: '
              f'{"met" if not faults else "NOT met"}; no late-tick trend: '
              f'{"met" if not trend else "NOT met (rising every window)"}')

    def close(self) -> None:
        self.launch.stop_all()
        self.graph.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--minutes', type=float, default=60.0, help='length of the soak')
    ap.add_argument('--window', type=float, default=10.0, help='minutes per reported window')
    ap.add_argument('--rollout', type=float, default=45.0, help='seconds per rollout')
    ap.add_argument('--exercise-every', type=float, default=180.0,
                    help='seconds between rollouts ended by the deadman or the e-stop')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--log-dir', type=Path, default=None,
                    help="keep the nodes' logs here (default: a temporary directory)")
    args = ap.parse_args(argv)
    for name in ('minutes', 'window', 'rollout', 'exercise_every'):
        if getattr(args, name) <= 0:
            ap.error(f'--{name.replace("_", "-")} must be > 0')
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    with isolated_domain(), tempfile.TemporaryDirectory() as tmp:
        soak = Soak(args, args.log_dir or Path(tmp))
        try:
            print(f'soak: {args.minutes:g} min of {args.rollout:g} s rollouts, deadman/e-stop '
                  f'every {args.exercise_every:g} s, windows of {args.window:g} min', flush=True)
            return soak.run()
        finally:
            soak.close()


if __name__ == '__main__':
    sys.exit(main())
