"""The result of any goal of an action server, by goal id (the tester need not have sent it)."""

from __future__ import annotations

from typing import Any

import numpy as np
from rclpy.node import Node

from egoroll_ros.ros.graph import wait_until


def goal_result(node: Node, action_type: Any, action: str, goal_id: bytes,
                timeout: float = 10.0) -> Any:
    """The ``Result`` of goal ``goal_id`` (16 bytes) of the ``action`` server, asked on its
    ``_action/get_result`` service; waits (``node`` must be spun) until the goal has ended.

    Raises:
        AssertionError: no server or no answer within ``timeout`` s.
    """
    # One client per node and action, kept on the node (it dies with it).
    clients = node.__dict__.setdefault('_egoroll_goal_result_clients', {})
    client = clients.get(action)
    if client is None:
        client = clients[action] = node.create_client(action_type.Impl.GetResultService,
                                                      f'{action}/_action/get_result')
    assert client.wait_for_service(timeout_sec=timeout), f'no {action} result service'
    req = action_type.Impl.GetResultService.Request()
    req.goal_id.uuid = np.frombuffer(bytes(goal_id), dtype=np.uint8)
    future = client.call_async(req)
    wait_until(future.done, timeout, f'the result of a goal of {action}')
    return future.result().result
