"""The isolated backend's wire format: length-prefixed JSON plus raw array bytes. No pickle.

A frame is a 4-byte big-endian length, that many bytes of UTF-8 JSON (an object), then the raw
bytes of every array listed in the JSON's ``"arrays"`` (``[{"key", "dtype", "shape"}]``), in
order, C-contiguous. Only the dtypes in :data:`DTYPES` travel.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any, BinaryIO

import numpy as np

DTYPES = ('uint8', 'float32', 'float64')
MAX_HEADER = 16 << 20
MAX_ARRAY = 1 << 30


class ProtocolError(Exception):
    """A malformed frame."""


class EndOfStreamError(ProtocolError):
    """The other side closed the pipe."""


class FrameTimeoutError(ProtocolError):
    """No complete frame before the deadline."""


def encode_frame(header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> bytes:
    """One frame: ``header`` (JSON) with ``arrays`` attached."""
    arrays = arrays or {}
    specs, blobs = [], []
    for key, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        if a.dtype.name not in DTYPES:
            raise ProtocolError(f"array '{key}' has dtype {a.dtype}, not one of {DTYPES}")
        specs.append({'key': key, 'dtype': a.dtype.name, 'shape': list(a.shape)})
        blobs.append(a.tobytes())
    body = json.dumps({**header, 'arrays': specs}).encode()
    return struct.pack('>I', len(body)) + body + b''.join(blobs)


def error_frame(error_type: str, message: str) -> bytes:
    """A child's failure reply: ``{'ok': False, 'error_type', 'message'}`` (no arrays)."""
    return encode_frame({'ok': False, 'error_type': error_type, 'message': message})


def exception_frame(exc: BaseException) -> bytes:
    """The failure reply for ``exc`` (its type name, and its text or repr)."""
    return error_frame(type(exc).__name__, str(exc) or repr(exc))


def _array_sizes(header: dict[str, Any]) -> list[tuple[str, np.dtype, tuple[int, ...], int]]:
    out = []
    for spec in header.get('arrays', []):
        try:
            dtype = np.dtype(spec['dtype'])
            shape = tuple(int(s) for s in spec['shape'])
            key = str(spec['key'])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f'bad array spec {spec!r}: {exc}') from None
        if dtype.name not in DTYPES or any(s < 0 for s in shape):
            raise ProtocolError(f'bad array spec {spec!r}')
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes > MAX_ARRAY:
            raise ProtocolError(f"array '{key}' too large ({nbytes} bytes)")
        out.append((key, dtype, shape, nbytes))
    return out


def _decode(body: bytes) -> dict[str, Any]:
    try:
        header = json.loads(body.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f'frame header is not JSON: {exc}') from None
    if not isinstance(header, dict):
        raise ProtocolError('frame header is not a JSON object')
    return header


def read_frame_blocking(stream: BinaryIO) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read one frame from a blocking binary stream (the worker side).

    Raises:
        EndOfStreamError: the stream closed at a frame boundary or inside a frame.
        ProtocolError: malformed frame.
    """
    def exact(n: int) -> bytes:
        data = stream.read(n)
        if data is None or len(data) != n:
            raise EndOfStreamError('stream closed')
        return data

    (length,) = struct.unpack('>I', exact(4))
    if length > MAX_HEADER:
        raise ProtocolError(f'frame header too large ({length} bytes)')
    header = _decode(exact(length))
    arrays = {key: np.frombuffer(exact(n), dtype=dt).reshape(shape)
              for key, dt, shape, n in _array_sizes(header)}
    return header, arrays


class FrameReader:
    """Reads frames from a pipe file descriptor with a deadline (the parent side)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()

    def _fill(self, n: int, deadline: float) -> None:
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FrameTimeoutError('timed out waiting for a reply')
            ready, _, _ = select.select([self._fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._fd, max(65536, n - len(self._buf)))
            if not chunk:
                raise EndOfStreamError('the worker closed its output')
            self._buf += chunk

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def read(self, timeout: float) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """One frame within ``timeout`` seconds.

        Raises:
            FrameTimeoutError, EndOfStreamError, ProtocolError.
        """
        deadline = time.monotonic() + timeout
        self._fill(4, deadline)
        (length,) = struct.unpack('>I', bytes(self._buf[:4]))
        if length > MAX_HEADER:
            raise ProtocolError(f'frame header too large ({length} bytes)')
        self._fill(4 + length, deadline)
        header = _decode(bytes(self._buf[4:4 + length]))
        sizes = _array_sizes(header)
        self._fill(4 + length + sum(s[3] for s in sizes), deadline)
        self._take(4 + length)
        arrays = {key: np.frombuffer(self._take(n), dtype=dt).reshape(shape)
                  for key, dt, shape, n in sizes}
        return header, arrays
