"""Tests that play the policy against a real safety gate: arm it as policy_node's start does.

The gate is disarmed at start-up and after every stop. A test that publishes live chunks
itself first publishes a preflight (a shadow chunk the gate accepts) and then calls
``safety/arm`` naming it, exactly as policy_node's ``policy/start`` does (the gate cannot tell
the two apart, and must not need to).
"""

from __future__ import annotations

from collections.abc import Callable
import time
from typing import Any

from rclpy.node import Node

from egoroll_interfaces.srv import Arm


class GateArmer:
    """Calls the gate's ``safety/arm`` from a test node.

    Args:
        node: the test's node (spun by the test's executor, e.g. ``ros_graph``).
        service: the arm service's name.
    """

    def __init__(self, node: Node, service: str = 'safety/arm') -> None:
        self.node = node
        self.client = node.create_client(Arm, service)

    def arm(self, sequence: int, policy_id: str, timeout: float = 10.0) -> Arm.Response:
        """Ask the gate to arm for the accepted preflight ``sequence`` of ``policy_id``;
        returns its answer (``success`` false says why)."""
        assert self.client.wait_for_service(timeout_sec=timeout), 'safety/arm not available'
        fut = self.client.call_async(Arm.Request(preflight_sequence=int(sequence),
                                                 policy_id=policy_id))
        deadline = time.monotonic() + timeout
        while not fut.done():
            assert time.monotonic() < deadline, 'safety/arm did not answer'
            time.sleep(0.005)
        return fut.result()

    def preflight_and_arm(self, preflight: Callable[[], Any], policy_id: str,
                          attempts: int = 50) -> Any:
        """Publish a preflight with ``preflight()`` until the gate accepts one, then arm
        naming it. ``preflight`` publishes a shadow chunk (a newer sequence each call) and
        returns the gate's verdict on it (a GateVerdict). Returns the accepted verdict."""
        for _ in range(attempts):
            verdict = preflight()
            if verdict.accepted:
                answer = self.arm(int(verdict.sequence), policy_id)
                assert answer.success, answer.message
                return verdict
            time.sleep(0.1)
        raise AssertionError(f'the gate never accepted a preflight: {verdict.summary}')
