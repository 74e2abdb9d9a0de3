"""What a node created between two points (its publishers, subscriptions, services, clients and
timers), so that a lifecycle node's cleanup destroys exactly what its configure created.

Usage::

    before = snapshot(node)
    ...create...
    made = created_since(node, before)
    ...
    destroy(node, made)
"""

from __future__ import annotations

from typing import Any

from rclpy.lifecycle import LifecyclePublisher
from rclpy.node import Node

KINDS = ('publishers', 'subscriptions', 'services', 'clients', 'timers')
Entities = dict[str, list[Any]]


def snapshot(node: Node) -> Entities:
    """The node's entities now, per kind."""
    return {k: list(getattr(node, k)) for k in KINDS}


def created_since(node: Node, before: Entities) -> Entities:
    """The node's entities that are not in ``before`` (a :func:`snapshot`)."""
    return {k: [e for e in v if e not in before[k]] for k, v in snapshot(node).items()}


def destroy(node: Node, made: Entities) -> None:
    """Destroy ``made`` (lifecycle publishers as lifecycle publishers)."""
    for pub in made.get('publishers', []):
        if isinstance(pub, LifecyclePublisher):
            node.destroy_lifecycle_publisher(pub)
        else:
            node.destroy_publisher(pub)
    for sub in made.get('subscriptions', []):
        node.destroy_subscription(sub)
    for srv in made.get('services', []):
        node.destroy_service(srv)
    for cli in made.get('clients', []):
        node.destroy_client(cli)
    for tmr in made.get('timers', []):
        node.destroy_timer(tmr)
