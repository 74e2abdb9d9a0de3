"""Image decoding of sensor_msgs Image/CompressedImage messages for policy inputs.

Decoding uses cv_bridge where it is importable (a ROS install) and rosbags-image otherwise;
:func:`decoder` makes that choice, once. Both take rclpy ``sensor_msgs`` Image or
CompressedImage messages (duck-typed here: this module imports no message types) and give an
RGB uint8 array (height, width, 3). The size check and resize are pure
(:mod:`egoroll_ros.core.images`).
"""

from __future__ import annotations

from collections.abc import Callable
import functools
from typing import Any

import numpy as np

from egoroll_ros.core.images import fit_image
from egoroll_ros.errors import InputError

Decoder = Callable[[Any], np.ndarray]


def _is_compressed(msg: Any) -> bool:
    return hasattr(msg, 'format') and not hasattr(msg, 'encoding')


def _cv_bridge_decoder() -> Decoder | None:
    try:
        from cv_bridge import CvBridge
    except Exception:  # noqa: BLE001 - any failure to import means "not available"
        return None
    bridge = CvBridge()

    def decode(msg: Any) -> np.ndarray:
        if _is_compressed(msg):
            return bridge.compressed_imgmsg_to_cv2(msg, desired_encoding='rgb8')
        return bridge.imgmsg_to_cv2(msg, desired_encoding='rgb8')

    return decode


def _rosbags_decoder() -> Decoder:
    from rosbags.image import message_to_cvimage

    def decode(msg: Any) -> np.ndarray:
        return message_to_cvimage(msg, 'rgb8')

    return decode


@functools.cache
def decoder(prefer: str = 'auto') -> tuple[str, Decoder]:
    """The image decoder: ``('cv_bridge', fn)`` where importable, else ``('rosbags', fn)``.

    Args:
        prefer: ``'auto'``, or ``'rosbags'`` / ``'cv_bridge'`` to force one (tests).

    Raises:
        InputError: ``prefer='cv_bridge'`` and cv_bridge is not importable.
    """
    if prefer in ('auto', 'cv_bridge'):
        fn = _cv_bridge_decoder()
        if fn is not None:
            return 'cv_bridge', fn
        if prefer == 'cv_bridge':
            raise InputError('cv_bridge is not importable here')
    return 'rosbags', _rosbags_decoder()


def decode_rgb(msg: Any, source: str = 'image') -> np.ndarray:
    """Decode an Image/CompressedImage message to RGB uint8 (height, width, 3).

    Raises:
        InputError: unsupported encoding, corrupt data or wrong size, naming ``source``.
    """
    _, fn = decoder()
    try:
        img = fn(msg)
    except Exception as exc:  # noqa: BLE001 - decoders raise many types (incl. assert)
        raise InputError(f'{source}: cannot decode image '
                         f"({getattr(msg, 'encoding', getattr(msg, 'format', '?'))}): "
                         f'{exc!r}') from None
    if img is None or img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise InputError(f'{source}: decoded image has shape '
                         f"{getattr(img, 'shape', None)}, expected (H, W, 3) uint8")
    return img


def prepare_image(msg: Any, expected: tuple[int, int] | None, size: tuple[int, int],
                  source: str = 'image') -> np.ndarray:
    """Decode, check the camera's expected (height, width), resize to the policy's ``size``.

    Raises:
        InputError: decode failure, or a frame whose size differs from ``expected`` (a
            misconfigured or swapped camera is refused, never silently rescaled).
    """
    return fit_image(decode_rgb(msg, source), expected, size, source)
