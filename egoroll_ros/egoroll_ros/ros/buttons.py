"""A Quest (joy) button's debounced press edges inside a node, on time.

:class:`ButtonDebouncer` (the pure core) only decides when it is fed; fed only by the joy
callback, a press would wait for the sample after its debounce deadline, and a stream that
publishes only on change (or slowly) would delay it by its period, or forever. Here a steady
timer polls the core at that deadline, so the edge comes at the deadline whatever the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from egoroll_ros.core.debounce import ButtonDebouncer


class DebouncedButton:
    """Calls ``on_press`` on every debounced press edge of one button.

    Args:
        node: the owning node (its timer; call :meth:`update` from its joy callback, on the
            executor thread).
        debouncer: the core (it may outlive this object, e.g. across lifecycle configures).
        on_press: called on the executor thread at each press edge.
        index: the button's index in a joy sample's buttons, for :meth:`sample`.
        parameter: the parameter that names ``index`` (for the warning when a sample has too
            few buttons).
    """

    def __init__(self, node: Node, debouncer: ButtonDebouncer,
                 on_press: Callable[[], None], index: int = -1, parameter: str = '') -> None:
        self.debouncer = debouncer
        self._on_press = on_press
        self._node = node
        self.index, self.parameter = index, parameter
        self._timer = None
        if debouncer.stable_time > 0:   # 0: every edge comes with its sample
            self._timer = node.create_timer(debouncer.stable_time, self._poll,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))
            self._timer.cancel()

    def update(self, raw: bool, now: float) -> None:
        """A sample of the button (steady time ``now``)."""
        if self.debouncer.update(raw, now):
            self._on_press()
        self._arm()

    def sample(self, buttons: Sequence[int], now: float) -> None:
        """A joy sample's ``buttons`` (steady time ``now``): :meth:`update` with the button at
        ``index``; a sample without it is ignored, with a warning (once)."""
        if self.index >= len(buttons):
            self._node.get_logger().warning(f'quest/joy has {len(buttons)} buttons; '
                                            f"'{self.parameter}' is {self.index}", once=True)
            return
        self.update(bool(buttons[self.index]), now)

    def _poll(self) -> None:
        if self.debouncer.poll(time.monotonic()):
            self._on_press()
        self._arm()

    def _arm(self) -> None:
        """Run the timer while a change waits for its deadline, else cancel it."""
        timer = self._timer
        if timer is None:
            return
        pending = self.debouncer.deadline is not None
        if pending and timer.is_canceled():
            timer.reset()
        elif not pending and not timer.is_canceled():
            timer.cancel()
