"""Debouncing of a Quest controller button into clean press edges."""

from __future__ import annotations


class ButtonDebouncer:
    """Turns a bouncing boolean into debounced press edges.

    The debounced state follows the raw value only after the raw value has stayed the same
    for ``stable_time`` seconds; a press edge is a debounced released -> pressed change. The
    first stable value is taken as the initial state without an edge, so a button held while
    the node starts does not toggle anything.

    Args:
        stable_time: seconds the raw value must stay unchanged (>= 0).
    """

    def __init__(self, stable_time: float) -> None:
        if stable_time < 0:
            raise ValueError('stable_time must be >= 0')
        self.stable_time = float(stable_time)
        self._raw: bool | None = None
        self._since = 0.0
        self._state: bool | None = None

    @property
    def pressed(self) -> bool | None:
        """The debounced state (None until the first stable value)."""
        return self._state

    @property
    def changed_at(self) -> float | None:
        """Steady time of the sample at which the raw value last changed (for a press edge:
        when the press began, ``stable_time`` before the edge); None before any sample."""
        return None if self._raw is None else self._since

    @property
    def deadline(self) -> float | None:
        """Steady time at which the raw value, if it stays as it is, becomes the debounced state
        (:meth:`poll` then gives its edge without waiting for another sample); None when
        nothing is pending."""
        if self._raw is None or self._raw == self._state:
            return None
        return self._since + self.stable_time

    def update(self, raw: bool, now: float) -> bool:
        """Feed a sample taken at steady time ``now``; True exactly on a debounced press edge."""
        raw = bool(raw)
        if raw != self._raw:
            self._raw = raw
            self._since = now
        return self.poll(now)

    def poll(self, now: float) -> bool:
        """Re-evaluate without a new sample (e.g. from a timer); True on a press edge."""
        # The same sum as :attr:`deadline`, so a poll at the deadline always decides (the
        # difference ``now - since`` can round below ``stable_time`` there).
        if self._raw is None or now < self._since + self.stable_time:
            return False
        if self._state is None:
            self._state = self._raw
            return False
        if self._raw != self._state:
            self._state = self._raw
            return self._state
        return False
