"""Episode boundaries of rollout recording, from the policy's rollout state.

Pure: :class:`EpisodeTracker` is fed the ``policy/status`` state names and the operator's
success/failure marks with a steady time, and says when an episode opens and closes:

- a PREFLIGHT opens a new episode (closing one still open), and so does READY or RUNNING
  when none is open (a short preflight can fall between two status messages);
- RUNNING marks it as run;
- leaving RUNNING (IDLE, FAULT, UNCONFIGURED, SHUTDOWN) ends the rollout: the episode stays
  open ``outcome_window`` s for the operator's mark (a Quest button or a service), then
  closes; a mark closes an ended episode at once;
- a preflight that never led to a start (back to IDLE, or FAULT) closes its episode at once,
  labelled not run;
- a mark while running is kept and the episode closes when the rollout ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: Outcomes an operator can mark.
SUCCESS = 'success'
FAILURE = 'failure'
_ENDED = ('IDLE', 'FAULT', 'UNCONFIGURED', 'SHUTDOWN')


@dataclass
class Episode:
    """One recorded rollout.

    Attributes:
        index: 1, 2, ... in this recording session.
        opened: steady time of the opening preflight.
        ran: the rollout was started (RUNNING seen).
        ended: steady time the rollout ended (None: not yet).
        outcome: ``'success'``, ``'failure'`` or None (not marked).
        end_state: the state the rollout ended in (``IDLE``, ``FAULT``...).
        marks: every ``(steady time, outcome)`` mark, in order.
    """

    index: int
    opened: float
    ran: bool = False
    ended: float | None = None
    outcome: str | None = None
    end_state: str = ''
    marks: list[tuple[float, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready summary."""
        return {'index': self.index, 'ran': self.ran, 'outcome': self.outcome,
                'end_state': self.end_state, 'marks': [m for _, m in self.marks]}


class EpisodeTracker:
    """See the module docstring.

    Args:
        outcome_window: seconds an ended episode waits for a mark before it closes (>= 0).
    """

    def __init__(self, outcome_window: float) -> None:
        if outcome_window < 0:
            raise ValueError('outcome_window must be >= 0')
        self.outcome_window = float(outcome_window)
        self.current: Episode | None = None
        self._count = 0
        self._last_state = ''

    def state(self, name: str, now: float) -> tuple[Episode | None, Episode | None]:
        """Feed a rollout state; returns ``(closed, opened)`` episodes (None when none)."""
        closed = opened = None
        prev, self._last_state = self._last_state, name
        ep = self.current
        fresh = name == 'PREFLIGHT' and prev != 'PREFLIGHT'
        # READY or RUNNING with no episode open: the preflight fell between two samples
        missed = name in ('READY', 'RUNNING') and (ep is None or ep.ended is not None)
        if fresh or missed:
            closed = self._close()
            self._count += 1
            self.current = opened = Episode(self._count, now, ran=name == 'RUNNING')
            return closed, opened
        if ep is None or ep.ended is not None:
            return self.poll(now), None
        if name == 'RUNNING':
            ep.ran = True
        elif name in _ENDED:
            ep.ended, ep.end_state = now, name
            if not ep.ran or ep.outcome is not None:
                closed = self._close()
        return closed, opened

    def mark(self, outcome: str, now: float) -> tuple[Episode | None, Episode | None]:
        """The operator marks the current episode; returns ``(marked, closed)``.

        Raises:
            ValueError: an unknown outcome.
        """
        if outcome not in (SUCCESS, FAILURE):
            raise ValueError(f'outcome must be {SUCCESS!r} or {FAILURE!r}, got {outcome!r}')
        ep = self.current
        if ep is None:
            return None, None
        ep.outcome = outcome
        ep.marks.append((now, outcome))
        return ep, (self._close() if ep.ended is not None else None)

    def poll(self, now: float) -> Episode | None:
        """Close an ended episode whose outcome window has passed; the closed one or None."""
        ep = self.current
        if ep is not None and ep.ended is not None and now - ep.ended >= self.outcome_window:
            return self._close()
        return None

    def _close(self) -> Episode | None:
        ep, self.current = self.current, None
        return ep


def outcome_button_conflicts(outcome: Mapping[str, int], used: Mapping[str, int]) -> list[str]:
    """Outcome buttons that would also do something else, one message each.

    Args:
        outcome: the recorder's outcome buttons by parameter name (``quest.success_button``:
            2, ...); -1: none.
        used: quest/joy buttons other nodes use, by what uses them (``"safety_gate
            estop_button (gate.yaml)"``: 1, ...); -1: none.

    Returns:
        One message per collision (an outcome button that is another outcome button, or a
        button in ``used``); empty when there is none.
    """
    out = []
    marks = [(k, b) for k, b in outcome.items() if b >= 0]
    for i, (k, b) in enumerate(marks):
        for k2, b2 in marks[:i]:
            if b == b2:
                out.append(f"parameter '{k}': button {b} is also {k2}")
        for what, b2 in used.items():
            if b == b2:
                out.append(f"parameter '{k}': button {b} is also {what}; pressing it to mark an "
                           'episode would do that too')
    return out
