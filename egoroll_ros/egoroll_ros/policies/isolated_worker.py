"""Child side of the ``isolated`` backend: ``python -m egoroll_ros.policies.isolated_worker``.

Reads request frames (:mod:`egoroll_ros.policies.protocol`) on stdin and answers on the
original stdout; anything the policy prints goes to stderr. Requests:
``{"op": "load", "backend", "path", "options"}``, ``{"op": "reset"}``,
``{"op": "predict", "stamp", "extras"}`` with arrays ``state`` and ``image:<camera>``,
``{"op": "close"}``. Replies: ``{"ok": true, ...}`` or
``{"ok": false, "error_type", "message"}``. The load reply also carries ``worker`` (python,
pid, torch version and thread count).

No network: every IP connection and name lookup in the worker raises (see
:func:`refuse_network`), so a policy that tries to download anything fails to load, naming
the attempt, instead of reaching out from the robot.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback

import numpy as np


def refuse_network() -> None:
    """Make every IP connection (and name lookup) in this process fail at once, naming it: a
    policy must load and run from local files only, so any download attempt is an error."""
    import socket

    def refused(what: str) -> OSError:
        return OSError(errno.ENETUNREACH, 'network access refused in the egoroll policy '
                       f'worker (policies load and run offline): {what}')

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise refused(f'connect to {address!r}')
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: object) -> int:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise refused(f'connect to {address!r}')
        return real_connect_ex(self, address)

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> list:
        raise refused(f'name lookup of {host!r}')

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    socket.getaddrinfo = getaddrinfo


def _worker_info() -> dict:
    torch = sys.modules.get('torch')
    return {'python': sys.executable, 'version': sys.version.split()[0], 'pid': os.getpid(),
            'torch': getattr(torch, '__version__', None),
            'torch_threads': int(torch.get_num_threads()) if torch is not None else None}


def main() -> int:
    """Serve requests until ``close`` or end of input."""
    out = os.fdopen(os.dup(1), 'wb', buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer

    from egoroll_ros.core.policy import Observation, RtcRequest
    from egoroll_ros.policies.protocol import (
        EndOfStreamError,
        encode_frame,
        error_frame,
        exception_frame,
        read_frame_blocking,
    )
    from egoroll_ros.policies.registry import load_backend

    refuse_network()
    policy = None
    while True:
        try:
            req, arrays = read_frame_blocking(inp)
        except EndOfStreamError:
            return 0
        op = req.get('op')
        try:
            if op == 'load':
                cls = load_backend(str(req['backend']))
                policy = cls.load(req['path'], **dict(req.get('options') or {}))
                out.write(encode_frame({'ok': True, 'metadata': policy.metadata.to_json(),
                                        'worker': _worker_info()}))
            elif op == 'reset':
                policy.reset()
                out.write(encode_frame({'ok': True}))
            elif op == 'predict':
                images = {k.split(':', 1)[1]: v for k, v in arrays.items()
                          if k.startswith('image:')}
                extras = {k: np.asarray(v, dtype=float)
                          for k, v in (req.get('extras') or {}).items()}
                rtc = req.get('rtc')
                obs = Observation(images=images, state=arrays['state'], extras=extras,
                                  stamp=float(req.get('stamp', 0.0)),
                                  rtc=None if rtc is None else RtcRequest.from_json(rtc))
                chunk = np.asarray(policy.predict_chunk(obs), dtype=np.float64)
                out.write(encode_frame({'ok': True}, {'chunk': chunk}))
            elif op == 'close':
                if policy is not None:
                    policy.close()
                out.write(encode_frame({'ok': True}))
                return 0
            else:
                out.write(error_frame('ProtocolError', f'unknown op {op!r}'))
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the parent
            traceback.print_exc(file=sys.stderr)
            out.write(exception_frame(exc))


if __name__ == '__main__':
    sys.exit(main())
