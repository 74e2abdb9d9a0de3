"""A simulated ROS clock (use_sim_time) that stalls or jumps back, from a real ``/clock``
publisher, never silences the executor's watchdogs and never moves the arm.

trajectory_server runs with ``use_sim_time: true`` beside the sim robot and a client in this
process (see test_trajectory_server.py's Rig); this test publishes ``/clock`` itself and, for the
heartbeat, ``safety/heartbeat`` as the gate would. The watchdogs (heartbeat_timeout,
command_timeout) run on the steady clock, so with ``/clock`` frozen they still fire within their
timeout, timed here on the steady clock at which each ``executor/commanded`` setpoint arrived
(their stamps are ROS time, which is what stalls). A jump back of the clock changes the stamps
only: the held setpoint stays bit for bit, and a goal running across it runs on unchanged.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from test_trajectory_server import R, Rig

from egoroll_interfaces.msg import InterlockHeartbeat
from egoroll_ros.ros.convert import sec_to_time, time_to_sec
from egoroll_ros.testing import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.safety]

SIM_START = 5000.0     # s: far from the wall clock, so a node on the wall clock would show
JUMP = 100.0           # s the clock jumps back
BOUND = 1.0            # s past the timeout: generous for a shared 2-core machine


class SimClock:
    """Publishes /clock at 100 Hz (ROS time = SIM_START + steady time since start - jumps);
    ``stall()`` freezes it (nothing published), ``resume(jump)`` goes on, ``jump`` s back."""

    def __init__(self, rig: Rig) -> None:
        self.pub = rig.node.create_publisher(Clock, '/clock', 10)
        self._t0 = time.monotonic()
        self._back = 0.0
        self._running = threading.Event()
        self._running.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def now(self) -> float:
        return SIM_START + time.monotonic() - self._t0 - self._back

    def _loop(self) -> None:
        while not self._stop.wait(0.01):
            if self._running.is_set():
                self.pub.publish(Clock(clock=sec_to_time(self.now())))

    def stall(self) -> float:
        self._running.clear()
        return self.now()

    def resume(self, jump: float = 0.0) -> None:
        self._back += jump
        self._running.set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


class Heartbeats:
    """safety/heartbeat every 20 ms while ``on`` (what the gate sends)."""

    def __init__(self, rig: Rig) -> None:
        self.pub = rig.node.create_publisher(InterlockHeartbeat, 'safety/heartbeat', 10)
        self.signer = rig.signer        # signed as the gate signs (the rig's goals too)
        self.on = True
        self.last_sent = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            if self.on:
                hb = InterlockHeartbeat(state='ok', motion_allowed=True)
                hb.header.stamp = sec_to_time(time.time())
                self.pub.publish(self.signer.heartbeat(hb))
                self.last_sent = time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


class Received:
    """executor/commanded positions with the steady time each arrived."""

    def __init__(self, rig: Rig) -> None:
        self._lock = threading.Lock()
        self.items: list[tuple[float, float, np.ndarray]] = []   # (arrival, stamp, positions)
        rig.node.create_subscription(JointState, 'executor/commanded', self._on, 1000)

    def _on(self, msg: JointState) -> None:
        with self._lock:
            self.items.append((time.monotonic(), time_to_sec(msg.header.stamp),
                               np.array(msg.position)))

    def since(self, t: float) -> list[tuple[float, float, np.ndarray]]:
        with self._lock:
            return [i for i in self.items if i[0] >= t]

    def held_since(self, t: float, settle: float = 0.3) -> float | None:
        """Arrival of the first setpoint of the hold that has lasted ``settle`` s, else None."""
        items = self.since(t)
        if not items or items[-1][0] - items[0][0] < settle:
            return None
        last = items[-1][2]
        first = len(items) - 1
        while first > 0 and np.array_equal(items[first - 1][2], last):
            first -= 1
        if items[-1][0] - items[first][0] < settle:
            return None
        return items[first][0]


def _rig(ros_graph, **server):
    rig = Rig(ros_graph, server={'use_sim_time': True, **server})
    clock = SimClock(rig)
    wait_until(lambda: abs(rig.server.get_clock().now().nanoseconds * 1e-9 - clock.now()) < 1.0,
               10.0, 'trajectory_server on the simulated clock')
    return rig, clock


def test_heartbeat_watchdog_fires_with_the_sim_clock_stalled_and_a_jump_back_moves_nothing(
        ros_graph):
    rig, clock = _rig(ros_graph, heartbeat_timeout=0.25)
    beats = Heartbeats(rig)
    got = Received(rig)
    try:
        wait_until(lambda: rig.server.core.supervision_error(time.monotonic()) is None, 10.0,
                   'heartbeats reach the executor')
        handle = rig.send(rig.goal([4.0], [[0.6] * 3]))        # 4 s of motion
        wait_until(lambda: rig.server.core.state == 'executing', 5.0, 'executing')
        # The clock jumps 100 s back while the goal runs: it runs on, continuous.
        t_jump = time.monotonic()
        clock.stall()
        clock.resume(jump=JUMP)
        wait_until(lambda: abs(rig.server.get_clock().now().nanoseconds * 1e-9 -
                               clock.now()) < 0.5, 5.0, 'the executor saw the jump')
        wait_until(lambda: len(got.since(t_jump)) > 30, 5.0, 'setpoints after the jump')
        assert rig.server.core.state == 'executing', rig.server.core.last_error
        after = got.since(t_jump)
        assert after[-1][1] < SIM_START              # the stamps did jump back...
        pos = np.array([p for _, _, p in after])
        assert np.all(np.diff(pos[:, 0]) >= 0.0)     # ...the motion did not (no replay)
        # Now /clock stalls and the heartbeats stop: HEARTBEAT_LOST on the steady clock.
        clock.stall()
        time.sleep(0.05)                             # stimulus: 50 ms of frozen ROS time
        beats.on = False
        t_silent = time.monotonic()
        res = rig.result(handle)
        assert res.error_code == R.HEARTBEAT_LOST, res.error_string
        held = wait_until(lambda: got.held_since(t_silent), 10.0, 'executor/commanded holds')
        latency = held - beats.last_sent
        print(f'\n/clock stalled: last heartbeat -> hold {latency * 1e3:.0f} ms '
              '(heartbeat_timeout 250 ms)')
        assert latency < 0.25 + BOUND, latency
        # Stalled clock, no heartbeat: a new goal is refused and nothing moves.
        res = rig.run(rig.goal([0.5], [[0.0] * 3]))
        assert res.error_code == R.HEARTBEAT_LOST, res.error_string
    finally:
        beats.close()
        clock.close()


def test_command_timeout_fires_with_the_sim_clock_stalled_and_a_jump_back_moves_nothing(
        ros_graph):
    rig, clock = _rig(ros_graph, command_timeout=0.5, goal_tolerance=[0.05] * 3)
    got = Received(rig)
    try:
        ok = rig.run(rig.goal([0.3], [[0.05] * 3]))           # the sim clock works
        assert ok.error_code == R.SUCCESSFUL, ok.error_string
        clock.stall()
        time.sleep(0.05)                             # stimulus: 50 ms of frozen ROS time
        t_sent = time.monotonic()
        handle = rig.send(rig.goal([4.0], [[0.6] * 3]))       # longer than command_timeout
        res = rig.result(handle)
        t_end = time.monotonic()
        assert res.error_code == R.COMMAND_TIMEOUT, res.error_string
        print(f'\n/clock stalled: goal -> COMMAND_TIMEOUT {(t_end - t_sent) * 1e3:.0f} ms '
              '(command_timeout 500 ms)')
        assert 0.5 <= t_end - t_sent < 0.5 + BOUND
        held = wait_until(lambda: got.held_since(t_sent), 10.0, 'executor/commanded holds')
        hold = got.since(held)[0][2]
        assert 0.05 < hold[0] < 0.6                  # it moved, then stopped short
        # Resume 100 s back: the hold stays exactly where it is, tick after tick.
        t_jump = time.monotonic()
        clock.resume(jump=JUMP)
        wait_until(lambda: len(got.since(t_jump)) > 50, 5.0, 'setpoints after the jump')
        after = got.since(t_jump)
        assert after[-1][1] < SIM_START              # stamps on the jumped clock
        for _, _, p in after:
            np.testing.assert_array_equal(p, hold)
        assert rig.server.core.state == 'holding'
    finally:
        clock.close()


def _steps(items: list[tuple[float, float, np.ndarray]]) -> np.ndarray:
    pos = np.array([p for _, _, p in items])
    return np.diff(pos[:, 0])


def _one_second_into_a_4_s_goal(rig):
    """Heartbeats reaching the executor, a 4 s goal to 0.6 sent and 1 s of its motion run;
    (its send time, its handle)."""
    wait_until(lambda: rig.server.core.supervision_error(time.monotonic()) is None, 10.0,
               'heartbeats reach the executor')
    t0 = time.monotonic()
    handle = rig.send(rig.goal([4.0], [[0.6] * 3]))
    wait_until(lambda: rig.server.core.state == 'executing', 5.0, 'executing')
    wait_until(lambda: time.monotonic() > t0 + 1.0, 5.0, '1 s of motion')
    return t0, handle


def test_a_2_s_stall_of_the_sim_clock_during_a_live_goal_neither_stops_nor_jumps_it(ros_graph):
    """/clock frozen for 2 s in the middle of a 4 s goal, the gate's heartbeats going on: the
    goal runs on the steady clock through the stall (the setpoints keep advancing, one tick's
    worth at a time) and ends SUCCESSFUL on time; no watchdog fires."""
    rig, clock = _rig(ros_graph, heartbeat_timeout=0.25, goal_tolerance=[0.05] * 3)
    beats = Heartbeats(rig)
    got = Received(rig)
    try:
        t0, handle = _one_second_into_a_4_s_goal(rig)
        t_stall = time.monotonic()
        clock.stall()
        wait_until(lambda: time.monotonic() > t_stall + 2.0, 5.0, 'a 2 s stall')
        during = [i for i in got.since(t_stall) if i[0] <= t_stall + 2.0]
        clock.resume()
        res = rig.result(handle)
        t_end = time.monotonic()
        assert res.error_code == R.SUCCESSFUL, res.error_string
        assert 4.0 - 0.1 < t_end - t0 < 4.0 + BOUND, t_end - t0
        steps = _steps(during)
        assert len(during) > 100 and np.all(steps >= 0.0)   # it kept moving, forward only
        assert steps.sum() > 0.2                              # ~0.3 rad in those 2 s
        assert np.max(steps) < 0.05     # never a jump (to the end: 0.3 rad and more)
    finally:
        beats.close()
        clock.close()


def test_a_60_s_forward_jump_during_a_live_goal_skips_nothing_and_nothing_old_runs_after_it(
        ros_graph):
    """/clock jumps 60 s ahead while a 4 s goal runs: the goal's points were placed on the steady
    clock at acceptance, so it neither skips to its end (no step beyond one tick's worth) nor
    stops, and ends SUCCESSFUL on time. A goal stamped before the jump, arriving after it, has
    every point 60 s in the past: refused TRAJECTORY_IN_PAST, nothing moves. The heartbeat
    watchdog still holds the arm on the steady clock when the heartbeats stop."""
    rig, clock = _rig(ros_graph, heartbeat_timeout=0.25, goal_tolerance=[0.05] * 3)
    beats = Heartbeats(rig)
    got = Received(rig)
    try:
        t0, handle = _one_second_into_a_4_s_goal(rig)
        before_jump = clock.now()
        t_jump = time.monotonic()
        clock.stall()
        clock.resume(jump=-60.0)
        wait_until(lambda: rig.server.get_clock().now().nanoseconds * 1e-9 > before_jump + 59.0,
                   5.0, 'the executor saw the jump')
        res = rig.result(handle)
        t_end = time.monotonic()
        assert res.error_code == R.SUCCESSFUL, res.error_string
        assert 4.0 - 0.1 < t_end - t0 < 4.0 + BOUND, t_end - t0
        after = [i for i in got.since(t_jump) if i[0] <= t_end]
        assert after[-1][1] > SIM_START + 59.0                # the stamps did jump ahead...
        steps = _steps(after)
        assert np.all(steps >= 0.0) and np.max(steps) < 0.05   # ...not the arm
        # A goal from before the jump: every point long past.
        held = got.since(t_end)[-1][2] if got.since(t_end) else after[-1][2]
        t_old = time.monotonic()
        res = rig.run(rig.goal([0.5, 1.0], [[0.3] * 3, [0.0] * 3], stamp=before_jump))
        assert res.error_code == R.TRAJECTORY_IN_PAST, res.error_string
        wait_until(lambda: len(got.since(t_old)) > 50, 5.0, 'setpoints after it')
        for _, _, p in got.since(t_old):
            np.testing.assert_array_equal(p, held)
        # The watchdog on the steady clock, after the jump.
        handle = rig.send(rig.goal([4.0], [[0.0] * 3]))
        wait_until(lambda: rig.server.core.state == 'executing', 5.0, 'executing')
        beats.on = False
        t_silent = time.monotonic()
        res = rig.result(handle)
        assert res.error_code == R.HEARTBEAT_LOST, res.error_string
        hold = wait_until(lambda: got.held_since(t_silent), 10.0, 'executor/commanded holds')
        assert hold - beats.last_sent < 0.25 + BOUND
    finally:
        beats.close()
        clock.close()


def test_a_goal_from_before_a_5_s_backward_jump_never_runs_late(ros_graph):
    """/clock jumps 5 s back: a goal stamped just before the jump, delivered after it, would
    have its points 5 s in the future and run then, late and unasked (command_timeout is off
    here, as in any graph without it). It is refused FUTURE_STAMP (max_future_stamp 0.5 s) and
    nothing moves; a goal stamped on the jumped clock runs."""
    rig, clock = _rig(ros_graph, goal_tolerance=[0.05] * 3)
    got = Received(rig)
    try:
        ok = rig.run(rig.goal([0.3], [[0.05] * 3]))
        assert ok.error_code == R.SUCCESSFUL, ok.error_string
        old_stamp = clock.now()
        old = rig.goal([0.3, 0.6], [[0.3] * 3, [0.4] * 3], stamp=old_stamp)
        clock.stall()
        clock.resume(jump=5.0)
        wait_until(lambda: rig.server.get_clock().now().nanoseconds * 1e-9 < old_stamp - 4.0,
                   5.0, 'the executor saw the jump')
        held = got.since(0.0)[-1][2]
        t_old = time.monotonic()
        res = rig.run(old, timeout=15.0)
        assert res.error_code == R.FUTURE_STAMP, res.error_string
        assert 'ahead of the ROS clock' in res.error_string
        wait_until(lambda: len(got.since(t_old)) > 50, 5.0, 'setpoints after it')
        for _, _, p in got.since(t_old):
            np.testing.assert_array_equal(p, held)
        res = rig.run(rig.goal([0.3], [[0.1] * 3], stamp=clock.now()))
        assert res.error_code == R.SUCCESSFUL, res.error_string
    finally:
        clock.close()
