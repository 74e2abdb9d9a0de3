"""policy_node's side of the arming handshake with the safety gate, and its watch of the gate.

The gate is disarmed at start-up and after every stop; it arms only on ``safety/arm``
(egoroll_interfaces/srv/Arm.srv) naming a preflight it accepted after the last stop. A start
(``policy/start`` or the Quest toggle) calls :meth:`GateArm.arm` and the rollout runs only
once the gate answered that it is armed. While it runs, :meth:`GateArm.disarmed` reads the
gate's heartbeat: one sent after the arm (its counter above the one the arm answered, or any
counter of a restarted gate) that says the gate stopped (stopped, e-stop, fault) ends the
rollout on this side too, with the gate's reason.

The client and the timeout's timer live in a callback group of their own, as in
:mod:`egoroll_ros.ros.gate_stop`.
"""

from __future__ import annotations

import threading

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from egoroll_interfaces.msg import InterlockHeartbeat
from egoroll_interfaces.srv import Arm
from egoroll_ros.ros.runner import wait_for

#: Heartbeat states that mean the gate has disarmed (the deadman released does not: the
#: operator grips again and the rollout goes on).
DISARMED_STATES = frozenset({InterlockHeartbeat.STATE_STOPPED, InterlockHeartbeat.STATE_ESTOP,
                             InterlockHeartbeat.STATE_FAULT})


class GateArm:
    """Arms the gate for a start and watches its heartbeat while the rollout runs.

    Args:
        node: the policy node (it must spin for an answer to be taken).
        service: the gate's arm service; empty: no gate to arm (a warning is the caller's).
        timeout: seconds an arm request waits for the answer.
    """

    def __init__(self, node: Node, service: str, timeout: float) -> None:
        self._node = node
        self.service = service
        self.timeout = float(timeout)
        self._group = MutuallyExclusiveCallbackGroup()
        self._client = node.create_client(Arm, service, callback_group=self._group) \
            if service else None
        self._lock = threading.Lock()
        self._armed_at: int | None = None   # heartbeat counter the arm answered
        self._last_counter: int | None = None

    @property
    def configured(self) -> bool:
        """Whether there is a gate to arm."""
        return self._client is not None

    async def arm(self, sequence: int, policy_id: str) -> tuple[bool, str]:
        """Ask the gate to arm for preflight ``sequence`` of ``policy_id`` (a coroutine of the
        node's executor). Returns (armed, why)."""
        with self._lock:
            self._armed_at = None
        client = self._client
        if client is None:
            return True, 'no safety gate to arm (gate.arm_service empty)'
        if not client.service_is_ready():
            return False, f'the safety gate ({self.service}) is unreachable: not armed'
        future = client.call_async(Arm.Request(preflight_sequence=int(sequence),
                                               policy_id=policy_id))
        if not await wait_for(self._node, future, self.timeout, callback_group=self._group):
            return False, (f'the safety gate did not answer {self.service} within '
                           f'{self.timeout:g} s: not armed')
        try:
            answer = future.result()
        except Exception as exc:  # noqa: BLE001 - any failure of the call is a refusal
            return False, f'{self.service} failed: {exc!r}'
        if answer.success:
            with self._lock:
                self._armed_at = int(answer.heartbeat_counter)
        return bool(answer.success), f'safety gate: {answer.message}'

    def disarmed(self, msg: InterlockHeartbeat) -> str | None:
        """A heartbeat arrived: the gate's reason when it says the gate disarmed after the
        arm of the running rollout, else None."""
        counter = int(msg.counter)
        with self._lock:
            restarted = self._last_counter is not None and counter < self._last_counter
            self._last_counter = counter
            armed_at = self._armed_at
            if armed_at is None or msg.state not in DISARMED_STATES:
                return None
            if not restarted and counter <= armed_at:
                return None       # sent before the arm: not about this rollout
            self._armed_at = None
        return msg.detail or f'the safety gate says {msg.state}'
