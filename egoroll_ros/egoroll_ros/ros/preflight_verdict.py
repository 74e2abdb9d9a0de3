"""The safety gate's word on policy_node's preflight (``gate.require_preflight_acceptance``):
the gate's ``safety/verdict`` on the preflight's shadow chunk, which a preflight awaits and a
start needs (docs/policy.md, "Rollout control").
"""

from __future__ import annotations

import threading

from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.task import Future

from egoroll_interfaces.msg import GateVerdict
from egoroll_ros.ros.runner import wait_for


class PreflightVerdict:
    """The gate's verdict on the last preflight's shadow chunk, for one configuration.

    Args:
        node: the policy node (the ``safety/verdict`` subscription, when ``required``).
        required: whether a start needs the gate's ACCEPTED verdict (false: a passing
            preflight alone allows it, and a warning is logged).
        timeout: seconds :meth:`wait` waits for the verdict.
        qos: of the ``safety/verdict`` subscription.
    """

    def __init__(self, node: Node, required: bool, timeout: float, qos: QoSProfile) -> None:
        self._node = node
        self.required = required
        self.timeout = timeout
        self._lock = threading.Lock()
        self._seq: int | None = None
        self._policy_id = ''
        self._verdict: tuple[bool, str] | None = None
        self._done: Future | None = None   # resolves with _verdict
        if required:
            node.create_subscription(GateVerdict, 'safety/verdict', self._on_verdict, qos)
        else:
            node.get_logger().warning("parameter 'gate.require_preflight_acceptance' is false: "
                                      "start does not wait for the gate's word on the preflight")

    def expect(self, sequence: int, policy_id: str = '') -> None:
        """A preflight publishes shadow chunk ``sequence`` of ``policy_id`` (call before
        publishing it)."""
        with self._lock:
            self._seq, self._verdict, self._done = int(sequence), None, Future()
            self._policy_id = policy_id

    def preflight(self) -> tuple[int, str] | None:
        """The last preflight's shadow chunk (sequence, policy id), None before any: what a
        start names in its arm request."""
        with self._lock:
            return None if self._seq is None else (self._seq, self._policy_id)

    def _on_verdict(self, msg: GateVerdict) -> None:
        with self._lock:
            if msg.shadow and self._seq is not None and msg.sequence == self._seq:
                self._verdict = (bool(msg.accepted), msg.summary)
                done = self._done
                if done is not None and not done.done():
                    done.set_result(self._verdict)

    async def wait(self, passed: str) -> tuple[bool, str]:
        """Await the verdict on the shadow chunk (``passed``: the preflight's message): a
        preflight succeeds only when the start it allows would be accepted (so a preflight
        followed at once by a start, over any link, never races the verdict)."""
        with self._lock:
            seq, verdict = self._seq, self._done
        if verdict is None:
            return False, f'{passed}; no shadow chunk to wait for'
        limit = self.timeout
        if not await wait_for(self._node, verdict, limit):
            return False, (f'{passed}, but the safety gate did not report on shadow chunk {seq} '
                           f'within {limit:g} s (safety/verdict; is the gate running?): start '
                           'stays refused')
        accepted, summary = verdict.result()
        if not accepted:
            return False, f'{passed}, but the safety gate did not accept it: {summary}'
        return True, f'{passed} and accepted by the safety gate'

    def refusal(self) -> str:
        """Why the gate's word on the preflight does not allow a start ('' when it does)."""
        if not self.required:
            return ''
        with self._lock:
            seq, verdict = self._seq, self._verdict
        if seq is None:
            return 'no preflight shadow chunk yet'
        if verdict is None:
            return (f'the safety gate has not reported on preflight shadow chunk {seq} '
                    '(safety/verdict); wait for it, or run preflight again')
        if not verdict[0]:
            return f'the safety gate did not accept preflight shadow chunk {seq}: {verdict[1]}'
        return ''
