"""``policy.device`` for every backend: parse it, check it is available, never fall back.

A backend that runs a torch model moves it to :func:`torch_device`'s result; a backend that
computes on the CPU only refuses anything else with :func:`require_cpu`. Nothing here imports
torch at module level (the lerobot worker passes its own torch).
"""

from __future__ import annotations

import re
from typing import Any

from egoroll_ros.errors import CheckpointError

_DEVICE = re.compile(r'^(cpu|mps|cuda(:\d+)?)$')


def check_device_name(spec: str) -> str:
    """``spec`` if it is cpu, cuda, cuda:N or mps.

    Raises:
        CheckpointError: anything else.
    """
    spec = str(spec or 'cpu')
    if not _DEVICE.match(spec):
        raise CheckpointError(f"policy.device '{spec}' is not one of cpu, cuda, cuda:N, mps")
    return spec


def torch_device(spec: str, torch: Any = None) -> Any:
    """The ``torch.device`` for ``spec``, checked available in this process.

    Raises:
        CheckpointError: malformed, or not available here (never silently the CPU).
    """
    if torch is None:
        import torch
    spec = check_device_name(spec)
    if spec.startswith('cuda'):
        if not torch.cuda.is_available():
            raise CheckpointError(
                f"policy.device '{spec}' requested but CUDA is not available to torch "
                f'{torch.__version__} in this process (no GPU or driver visible, or a CPU '
                'build); refusing rather than running on the CPU')
        index = int(spec.split(':')[1]) if ':' in spec else 0
        if index >= torch.cuda.device_count():
            raise CheckpointError(f"policy.device '{spec}': only {torch.cuda.device_count()} "
                                  'CUDA device(s) visible')
    if spec == 'mps':
        mps = getattr(torch.backends, 'mps', None)
        if mps is None or not mps.is_available():
            raise CheckpointError("policy.device 'mps' requested but MPS is not available "
                                  'to torch in this process')
    return torch.device(spec)


def require_cpu(spec: str, backend: str) -> None:
    """Refuse any device but the CPU for a backend that computes on the CPU only.

    Raises:
        CheckpointError: ``spec`` is not ``cpu``.
    """
    if check_device_name(spec) != 'cpu':
        raise CheckpointError(f"policy.device '{spec}': the {backend} backend computes on the "
                              'CPU only')
