"""A LifecycleNode whose ``change_state`` service can await work before rclpy runs a
transition (policy_node: a deactivate awaits the safety gate's hold first).

rclpy's lifecycle services run their callbacks synchronously; here ``change_state`` is served
by a coroutine in a reentrant callback group of the lifecycle services' own, so the node's
other callbacks (inputs, timers, the answer being awaited) run while it waits. In-process
transitions (``trigger_*``) do not go through the service and do not wait.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleNodeMixin
from rclpy.node import Node


def is_transition(transition: Transition, transition_id: int, label: str) -> bool:
    """Whether a change_state request's ``transition`` names this one (by id or label)."""
    return transition.id == transition_id or transition.label == label


class AwaitingLifecycleNode(LifecycleNode):
    """A :class:`LifecycleNode` (``**kwargs`` go to ``Node.__init__``); override
    :meth:`before_transition`."""

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        # LifecycleNode.__init__ is these two calls; made here to give the lifecycle services a
        # (reentrant) group of their own: in the default group, a change_state that waits would
        # hold every input and timer of the node while it waits.
        Node.__init__(self, node_name, **kwargs)
        LifecycleNodeMixin.__init__(self, callback_group=ReentrantCallbackGroup())
        self._waiting_for: str | None = None
        change_state = self._service_change_state   # rclpy's change_state service
        self._transition = change_state.callback
        change_state.callback = self._change_state

    def before_transition(self, transition: Transition) -> tuple[str, Awaitable[None]] | None:
        """Work to await before the requested ``transition`` runs: (what it waits for, in
        words, for the refusal of any other change_state meanwhile; the awaitable), or None
        (rclpy's transition at once). Called on the executor thread."""
        return None

    async def _change_state(self, req: ChangeState.Request,
                            res: ChangeState.Response) -> ChangeState.Response:
        if self._waiting_for is not None:
            self.get_logger().error(f'change_state refused: {self._waiting_for}')
            res.success = False
            return res
        work = self.before_transition(req.transition)
        if work is not None:
            self._waiting_for, awaitable = work
            try:
                await awaitable
            finally:
                self._waiting_for = None
        return self._transition(req, res)
