"""Child side of ``egoroll export``: LeRobot's own dataset writer, in the managed runtime.

Run as ``<lerobot runtime python> -m egoroll_ros.bag.lerobot_writer`` (the parent puts the
directory holding ``egoroll_ros`` on ``PYTHONPATH``). It imports numpy, LeRobot and the frame
protocol of :mod:`egoroll_ros.policies.protocol` only (length-prefixed JSON with raw numpy
bytes, never pickle), reads requests on stdin and answers on the original stdout; LeRobot's
own output goes to stderr. Requests:

- ``{"op": "create", "root", "repo_id", "fps", "features", "robot_type", "use_videos"}``:
  ``LeRobotDataset.create`` (``root`` must not exist);
- ``{"op": "frame", "task", "flags": {name: bool}}`` with one array per array feature:
  ``add_frame`` (flags become shape-(1,) bool features). No reply (frames stream; the pipe
  is the back-pressure): the first failure is kept and every later request until
  ``save_episode`` answers it;
- ``{"op": "save_episode"}``: ``save_episode`` (or the frame failure);
- ``{"op": "finalize"}``: ``finalize``; the reply carries ``num_episodes``, ``num_frames``
  and LeRobot's version.

Replies: ``{"ok": true, ...}`` or ``{"ok": false, "error_type", "message"}``. No network:
every IP connection and name lookup raises (as in the policy worker).
"""

from __future__ import annotations

import os
import sys
import traceback

import numpy as np


def main() -> int:
    """Serve requests until ``finalize`` or end of input."""
    out = os.fdopen(os.dup(1), 'wb', buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    os.environ.setdefault('HF_DATASETS_OFFLINE', '1')

    from egoroll_ros.policies.isolated_worker import refuse_network
    from egoroll_ros.policies.protocol import (
        EndOfStreamError,
        encode_frame,
        error_frame,
        exception_frame,
        read_frame_blocking,
    )

    refuse_network()
    dataset = None
    frame_error: Exception | None = None
    while True:
        try:
            req, arrays = read_frame_blocking(inp)
        except EndOfStreamError:
            return 0
        op = req.get('op')
        try:
            if op == 'create':
                import lerobot
                from lerobot.datasets.lerobot_dataset import LeRobotDataset
                dataset = LeRobotDataset.create(
                    repo_id=str(req['repo_id']), fps=int(req['fps']),
                    features=dict(req['features']), root=str(req['root']),
                    robot_type=req.get('robot_type') or None,
                    use_videos=bool(req.get('use_videos', False)),
                    image_writer_threads=int(req.get('image_writer_threads', 0)))
                out.write(encode_frame({'ok': True, 'lerobot': lerobot.__version__}))
            elif op == 'frame':
                if frame_error is None:
                    try:
                        frame: dict = {k: np.array(v) for k, v in arrays.items()}
                        for name, value in (req.get('flags') or {}).items():
                            frame[name] = np.array([bool(value)], dtype=bool)
                        frame['task'] = str(req.get('task', ''))
                        dataset.add_frame(frame)
                    except Exception as exc:  # noqa: BLE001 - answered at save_episode
                        traceback.print_exc(file=sys.stderr)
                        frame_error = exc
            elif frame_error is not None:
                exc, frame_error = frame_error, None
                raise exc
            elif op == 'save_episode':
                dataset.save_episode()
                out.write(encode_frame({'ok': True}))
            elif op == 'finalize':
                dataset.finalize()
                out.write(encode_frame({'ok': True, 'num_episodes': dataset.meta.total_episodes,
                                        'num_frames': dataset.meta.total_frames}))
                return 0
            else:
                out.write(error_frame('ProtocolError', f'unknown op {op!r}'))
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the parent
            traceback.print_exc(file=sys.stderr)
            out.write(exception_frame(exc))


if __name__ == '__main__':
    sys.exit(main())
