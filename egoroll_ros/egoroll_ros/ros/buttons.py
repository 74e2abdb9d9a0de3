"""A Quest (joy) button's debounced press edges inside a node, on time.

:class:`ButtonDebouncer` (the pure core) only decides when it is fed; fed only by the joy
callback, a press would wait for the sample after its debounce deadline, and a stream that
publishes only on change (or slowly) would delay it by its period, or forever. Here a steady
timer polls the core at that deadline, so the edge comes at the deadline whatever the stream.

A press means what it meant when the finger went down: with ``at_press``, the node's answer at
the first pressed sample of a press is kept and handed to ``on_press`` at the edge. A toggle
pressed to stop a running rollout stays a stop when the rollout ended during the debounce (the
gate, watching the same button, often stops it first); read at the edge it would be a start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import time
from typing import Any

from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from egoroll_ros.core.debounce import ButtonDebouncer


class DebouncedButton:
    """Calls ``on_press`` on every debounced press edge of one button.

    Args:
        node: the owning node (its timer; call :meth:`update` from its joy callback, on the
            executor thread).
        debouncer: the core (it may outlive this object, e.g. across lifecycle configures).
        on_press: called on the executor thread at each press edge; with ``at_press``, with
            what ``at_press`` returned when the press began.
        index: the button's index in a joy sample's buttons, for :meth:`sample`.
        parameter: the parameter that names ``index`` (for the warning when a sample has too
            few buttons).
        at_press: called at the first pressed sample of a press (the debounced state released,
            no press pending); its result goes to ``on_press`` at that press's edge.
    """

    def __init__(self, node: Node, debouncer: ButtonDebouncer,
                 on_press: Callable[..., None], index: int = -1, parameter: str = '',
                 at_press: Callable[[], Any] | None = None) -> None:
        self.debouncer = debouncer
        self._on_press = on_press
        self._at_press = at_press
        self._began = False            # a press has begun (at_press was asked)
        self._meaning: Any = None      # what at_press said then
        self._node = node
        self.index, self.parameter = index, parameter
        self._timer = None
        if debouncer.stable_time > 0:   # 0: every edge comes with its sample
            self._timer = node.create_timer(debouncer.stable_time, self._poll,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))
            self._timer.cancel()

    def update(self, raw: bool, now: float) -> None:
        """A sample of the button (steady time ``now``)."""
        d = self.debouncer
        if raw and not d.pressed and not self._began and self._at_press is not None:
            self._began, self._meaning = True, self._at_press()
        if d.update(raw, now):
            self._press()
        self._settle()
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
            self._press()
        self._settle()
        self._arm()

    def _settle(self) -> None:
        """Released and nothing pending: a press that bounced back never happened."""
        if self.debouncer.deadline is None and not self.debouncer.pressed:
            self._began = False

    def _press(self) -> None:
        if self._at_press is None:
            self._on_press()
            return
        meaning = self._meaning if self._began else self._at_press()
        self._began, self._meaning = False, None
        self._on_press(meaning)

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
