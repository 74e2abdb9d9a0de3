"""One rollout step, shared by ``policy_node`` and ``egoroll evaluate``.

observation (from the latest inputs) -> policy (through its :class:`ActionSpace`) -> chunk.
The node runs it on its inference thread at the query rate; evaluate runs it at the same rate
over a bag. Pure: no rclpy.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
import time
from typing import Any

from egoroll_ros.core.action_space import ActionSpace
from egoroll_ros.core.observation import LatestInputs, ObservationBuilder
from egoroll_ros.core.policy import Observation, RtcRequest


@dataclass(frozen=True)
class Step:
    """One step's result.

    Attributes:
        observation: what the policy saw.
        output: the action space's decoded output (joint positions or arm targets).
        chunk: the chunk for ``output`` (sequence as given; the publisher assigns its own).
        assembly: seconds spent building the observation.
        latency: seconds from the start of assembly to the decoded output.
    """

    observation: Observation
    output: Any
    chunk: Any
    assembly: float
    latency: float


def rollout_step(builder: ObservationBuilder, inputs: LatestInputs, space: ActionSpace,
                 now: float, stamp: float, *, shadow: bool = False, sequence: int = 0,
                 clock: Callable[[], float] = time.perf_counter,
                 rtc: RtcRequest | None = None) -> Step:
    """Build the observation at steady time ``now`` (stamped ``stamp``), predict, make the chunk.

    ``rtc``: real-time chunking guidance put on the observation (policies without
    ``metadata.rtc`` ignore it).

    Raises:
        StaleInputError: a required input is missing or too old.
        InputError: a malformed input.
        PolicyError: inference failed or its output is unusable.
    """
    t0 = clock()
    obs = builder.build(inputs, now, stamp)
    if rtc is not None:
        obs = dataclasses.replace(obs, rtc=rtc)
    t1 = clock()
    output = space.predict(obs)
    latency = clock() - t0
    chunk = space.make_chunk(output, obs.stamp, latency, shadow=shadow, sequence=sequence)
    return Step(obs, output, chunk, t1 - t0, latency)
