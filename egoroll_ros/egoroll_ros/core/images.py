"""Image size checks and resizing for policy inputs (decoded RGB uint8 arrays).

Pure (numpy, OpenCV): decoding ROS image messages is the ROS layer's job
(:mod:`egoroll_ros.ros.images`).
"""

from __future__ import annotations

import cv2
import numpy as np

from egoroll_ros.errors import InputError


def resize_rgb(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize to (height, width) with area interpolation (no copy when already that size)."""
    if img.shape[0] == height and img.shape[1] == width:
        return img
    interp = cv2.INTER_AREA if img.shape[0] >= height and img.shape[1] >= width \
        else cv2.INTER_LINEAR
    return cv2.resize(img, (width, height), interpolation=interp)


def fit_image(img: np.ndarray, expected: tuple[int, int] | None, size: tuple[int, int],
              source: str = 'image') -> np.ndarray:
    """Check a decoded RGB image against the camera's expected (height, width) and resize it
    to the policy's ``size``.

    Raises:
        InputError: not an (H, W, 3) uint8 array, or a frame whose size differs from
            ``expected`` (a misconfigured or swapped camera is refused, never silently
            rescaled).
    """
    if not isinstance(img, np.ndarray) or img.ndim != 3 or img.shape[2] != 3 or \
            img.dtype != np.uint8:
        raise InputError(f'{source}: image has shape {getattr(img, "shape", None)}, '
                         'expected an (H, W, 3) uint8 array')
    if expected is not None and tuple(img.shape[:2]) != tuple(expected):
        raise InputError(f'{source}: image is {img.shape[0]}x{img.shape[1]} (HxW), the '
                         f'configuration expects {expected[0]}x{expected[1]}')
    return resize_rgb(img, size[0], size[1])
