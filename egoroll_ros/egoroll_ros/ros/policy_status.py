"""policy_node's ``policy/status`` message and its ``rollout`` diagnostics task, built from
plain values (the node gathers them; nothing here reads the node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from builtin_interfaces.msg import Time

from egoroll_interfaces.msg import RolloutStatus
from egoroll_ros.core.rollout import State
from egoroll_ros.ros.diagnostics import ERROR, OK, STALE, WARN, TaskStatus
from egoroll_ros.ros.gate_stop import CONFIRMED, NOT_CONFIRMED, StopReport


def rollout_detail(detail: str, state: State, *, last_skip: str = '', underrun: str = '',
                   underruns: int = 0, takeover: str | None = None,
                   stop: StopReport | None = None) -> str:
    """policy/status's detail: the state machine's ``detail``, then (while running) the last
    skip reason and the last overlap underrun (with ``underruns``, how often), the takeover
    (``takeover``: its description while the operator has control, else None) and, while not
    running, the last stop's report (until the next start)."""
    if state is State.RUNNING and last_skip:
        detail = f'{detail}; last skip: {last_skip}'
    if state is State.RUNNING and underrun:
        detail = f'{detail}; {underrun} ({underruns} times)'
    if takeover is not None:
        detail = f'{detail}; {takeover or "operator takeover"} (the policy runs in shadow)'
    if stop is not None and state is not State.RUNNING:
        detail = f'{detail}; {stop.text()}'
    return detail


def rollout_status(stamp: Time, state: State, detail: str, *, policy_id: str,
                   chunks_published: int, inferences_skipped: int, latency: float,
                   ages: Mapping[str, float | None]) -> RolloutStatus:
    """A policy/status message (``ages``: input name -> age in s, None: never received)."""
    msg = RolloutStatus()
    msg.header.stamp = stamp
    msg.state = int(state)
    msg.state_name = state.name
    msg.detail = detail
    msg.policy_id = policy_id
    msg.chunks_published = chunks_published
    msg.inferences_skipped = inferences_skipped
    msg.last_inference_latency = float(latency)
    msg.input_names = list(ages)
    msg.input_ages = [-1.0 if a is None else float(a) for a in ages.values()]
    return msg


def final_status(shutdown: bool, why: str, chunks_published: int,
                 inferences_skipped: int) -> RolloutStatus:
    """The last policy/status of a configuration (cleanup, or ``shutdown``)."""
    return RolloutStatus(
        state=RolloutStatus.STATE_SHUTDOWN if shutdown else RolloutStatus.STATE_UNCONFIGURED,
        state_name='SHUTDOWN' if shutdown else 'UNCONFIGURED', detail=why,
        chunks_published=chunks_published, inferences_skipped=inferences_skipped)


def rollout_task(last: RolloutStatus | None, *, unconfigured: str | None = None,
                 values: Iterable[tuple[str, Any]] = (),
                 clock_offsets: Mapping[str, Mapping[str, float]] | None = None,
                 stop: StopReport | None = None) -> TaskStatus:
    """The ``rollout`` diagnostics task.

    Args:
        last: the last policy/status published (None: none yet).
        unconfigured: why the node is unconfigured (None: it is configured). A refused
            configure is an ERROR, waiting for one a WARN.
        values: more key/values, shown after the status's own.
        clock_offsets: per input, ``last``, ``min``, ``max`` and ``count`` of the clock offset
            (this node's clock at receipt - header stamp); inputs with no message are left out.
        stop: the last stop's report since the last start (a hold not confirmed is an ERROR).
    """
    if unconfigured is not None:
        refused = unconfigured.startswith('configure refused')
        return TaskStatus(ERROR if refused else WARN, f'UNCONFIGURED: {unconfigured}')
    if last is None:
        return TaskStatus(STALE, 'no status published yet')
    out = [('state', last.state_name), ('policy_id', last.policy_id),
           ('chunks_published', last.chunks_published),
           ('inferences_skipped', last.inferences_skipped),
           ('last_inference_latency', last.last_inference_latency), *values]
    out += [(f'age {n}', f'{a:.3f}')
            for n, a in zip(last.input_names, last.input_ages, strict=True)]
    out += [(f'clock offset {n}', f"{o['last']:+.4f} (min {o['min']:+.4f}, max "
                                  f"{o['max']:+.4f}, {o['count']} msgs)")
            for n, o in (clock_offsets or {}).items() if o['count']]
    level = ERROR if last.state == State.FAULT else OK
    if stop is not None:
        out.append(('last stop', stop.text()))
        level = max(level, {CONFIRMED: OK, NOT_CONFIRMED: ERROR}.get(stop.state, WARN))
    return TaskStatus(level, f'{last.state_name}: {last.detail}', out)

