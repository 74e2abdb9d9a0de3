"""The policy backend registry: backends by entry-point name or ``package.module:Class``.

Backends are classes registered in the Python entry-point group ``egoroll_ros.policies``
(see ``setup.py``), so an adapter can live in another package. A backend may also be named
directly as ``package.module:Class``. Nothing here imports rclpy or message types.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from egoroll_ros.core.policy import Policy
from egoroll_ros.errors import CheckpointError

ENTRY_POINT_GROUP = 'egoroll_ros.policies'


def load_backend(name: str) -> type[Policy]:
    """The backend class for ``name``: an entry point of ``egoroll_ros.policies``, or a
    ``package.module:Class`` path.

    Raises:
        CheckpointError: unknown name, or the class cannot be imported.
    """
    if ':' in name:
        module, _, attr = name.partition(':')
        try:
            cls = getattr(importlib.import_module(module), attr)
        except Exception as exc:  # noqa: BLE001 - an import may raise anything (RuntimeError)
            raise CheckpointError(f"policy backend '{name}' cannot be imported: "
                                  f'{type(exc).__name__}: {exc}') from None
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            known = ', '.join(sorted(available_backends())) or 'none'
            raise CheckpointError(f"unknown policy backend '{name}' (entry points of "
                                  f"'{ENTRY_POINT_GROUP}': {known})")
        try:
            cls = found[0].load()
        except Exception as exc:  # noqa: BLE001 - an adapter's import may fail any way
            raise CheckpointError(f"policy backend '{name}' failed to import: {exc!r}") \
                from None
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise CheckpointError(f"policy backend '{name}' is not a Policy subclass")
    return cls


def available_backends() -> list[str]:
    """Names registered in the ``egoroll_ros.policies`` entry-point group."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})
