"""A backend module whose import fails with a RuntimeError (as a torch/CUDA import can)."""

raise RuntimeError('CUDA driver initialization failed (simulated by a test backend)')
