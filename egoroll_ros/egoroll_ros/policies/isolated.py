"""``isolated``: run any backend in a separate Python process behind a small protocol.

The child is ``<python_executable> -m egoroll_ros.policies.isolated_worker``; requests and
replies are length-prefixed JSON with raw numpy bytes (:mod:`egoroll_ros.policies.protocol`),
never pickle. Every request has a timeout; a child that crashes or times out is killed and
raises :class:`PolicyCrashError` / :class:`PolicyTimeoutError`; the next request starts a fresh
child (and checks that it loads the same fingerprint).

Options (keyword arguments of :meth:`IsolatedPolicy.load`, node parameters ``policy.*``):
    backend: the backend the child loads (entry-point name or ``module:Class``).
    python_executable: interpreter of the child (e.g. another venv's ``bin/python``); that
        environment must be able to import numpy and the backend. Default: the backend's
        managed runtime (:mod:`egoroll_ros.runtimes`; ``lerobot``), else this interpreter.
        The directory holding this ``egoroll_ros`` package is put on the child's
        ``PYTHONPATH``.
    request_timeout: seconds per reset/predict request.
    load_timeout: seconds for the child to start and load the checkpoint.
    backend_options: dict passed to the inner backend's ``load``.
"""

from __future__ import annotations

import collections
import contextlib
import os
from pathlib import Path
import re
import subprocess
import sys
import threading
from typing import Any

import numpy as np

import egoroll_ros
from egoroll_ros.core.policy import (
    Observation,
    Policy,
    PolicyCrashError,
    PolicyError,
    PolicyMetadata,
    PolicyTimeoutError,
)
from egoroll_ros.errors import CheckpointError
from egoroll_ros.policies.protocol import (
    EndOfStreamError,
    FrameReader,
    FrameTimeoutError,
    ProtocolError,
    encode_frame,
)

WORKER_MODULE = 'egoroll_ros.policies.isolated_worker'


def _same_interpreter(python: str) -> bool:
    try:
        return os.path.samefile(python, sys.executable)
    except OSError:
        return False


class _Child:
    """One worker process and its pipes."""

    def __init__(self, python: str) -> None:
        env = dict(os.environ)
        pkg_root = str(Path(egoroll_ros.__file__).resolve().parent.parent)
        inherited = [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p]
        if not _same_interpreter(python):
            # Another interpreter (a managed runtime): this one's packages (the node's numpy,
            # rclpy, torch) must not shadow its own; it gets egoroll_ros alone.
            from egoroll_ros.runtimes import clean_env
            env, inherited = clean_env(), []
        env['PYTHONPATH'] = os.pathsep.join([pkg_root] + inherited)
        try:
            self.proc = subprocess.Popen([python, '-m', WORKER_MODULE], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=env, bufsize=0)
        except OSError as exc:
            raise CheckpointError(f"cannot start the policy worker with '{python}': "
                                  f'{exc.strerror}') from None
        self.reader = FrameReader(self.proc.stdout.fileno())
        # The worker's stderr is passed through and its last lines kept, so a crash or hang
        # is reported with the worker's own words.
        self._tail: collections.deque[str] = collections.deque(maxlen=40)
        self._stderr = threading.Thread(target=self._pump, name='policy-worker-stderr',
                                        daemon=True)
        self._stderr.start()

    def _pump(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # the pipe closes under us at kill
            for raw in iter(self.proc.stderr.readline, b''):
                line = raw.decode(errors='replace').rstrip()
                self._tail.append(line)
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(f'[policy worker] {line}\n')

    def last_words(self) -> str:
        """The worker's last stderr lines that say something (the end of a traceback)."""
        lines = [ln.strip() for ln in self._tail if ln.strip()]
        if not lines:
            return ''
        errors = [ln for ln in lines if re.match(r'^[A-Za-z_.]*(Error|Exception|Exit)\b', ln)
                  or ln.startswith(('Fatal', 'Segmentation', 'Killed'))]
        return (errors or lines)[-1][:500]

    def request(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None,
                timeout: float) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        op = header.get('op')
        try:
            self.proc.stdin.write(encode_frame(header, arrays))
            self.proc.stdin.flush()
            reply, out = self.reader.read(timeout)
        except FrameTimeoutError:
            self.kill()
            words = self.last_words()
            raise PolicyTimeoutError(f"policy worker did not answer '{op}' within "
                                     f'{timeout:.3g} s; it was killed'
                                     + (f' (its last words: {words})' if words else '')) \
                from None
        except (EndOfStreamError, BrokenPipeError, OSError):
            code = self.kill()
            words = self.last_words()
            raise PolicyCrashError(f"policy worker died during '{op}' (exit status {code})"
                                   + (f': {words}' if words else '')) from None
        except ProtocolError as exc:
            self.kill()
            raise PolicyCrashError(f'policy worker sent a malformed reply: {exc}') from None
        return reply, out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            code = self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            code = None
        if threading.current_thread() is not self._stderr:
            self._stderr.join(2.0)   # the last lines a dead worker wrote
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                f.close()
        return code


def _raise_remote(reply: dict[str, Any], during: str) -> None:
    kind = reply.get('error_type', 'Error')
    msg = f"{during} failed in the policy worker: {kind}: {reply.get('message', '')}"
    if kind == 'CheckpointError':
        raise CheckpointError(msg)
    raise PolicyError(msg)


def default_python(backend: str) -> str:
    """The interpreter a worker for ``backend`` runs in when none is configured: the managed
    runtime of a backend that has one (it must be built), else this interpreter.

    Raises:
        CheckpointError: the backend's managed runtime is not built (naming the command).
    """
    from egoroll_ros.runtimes import RuntimeSetupError, backend_runtime, runtime_python

    name = backend_runtime(backend)
    if name is None:
        return sys.executable
    try:
        return str(runtime_python(name))
    except RuntimeSetupError as exc:
        raise CheckpointError(str(exc)) from None


class IsolatedPolicy(Policy):
    """Proxy to a policy loaded in a child process (see the module docstring)."""

    def __init__(self, path: str, backend: str, python: str, request_timeout: float,
                 load_timeout: float, backend_options: dict[str, Any]) -> None:
        self._path = path
        self._backend = backend
        self._python = python
        self._request_timeout = request_timeout
        self._load_timeout = load_timeout
        self._backend_options = backend_options
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._meta: PolicyMetadata | None = None
        self._worker_info: dict[str, Any] = {}
        self._spawn()

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> IsolatedPolicy:
        """Start the worker and load ``path`` with ``options['backend']`` in it.

        Raises:
            CheckpointError: bad options, the worker cannot start, or the inner load failed.
        """
        backend = options.get('backend') or 'egoroll_act'
        if backend == 'isolated':
            raise CheckpointError("policy backend 'isolated' cannot isolate itself")
        python = options.get('python_executable') or default_python(str(backend))
        try:
            rt = float(options.get('request_timeout', 2.0))
            lt = float(options.get('load_timeout', 60.0))
        except (TypeError, ValueError):
            raise CheckpointError('isolated: timeouts must be numbers') from None
        if rt <= 0 or lt <= 0:
            raise CheckpointError('isolated: timeouts must be positive')
        return cls(str(path), str(backend), str(python), rt, lt,
                   dict(options.get('backend_options') or {}))

    def _spawn(self) -> None:
        child = _Child(self._python)
        try:
            reply, _ = child.request({'op': 'load', 'backend': self._backend,
                                      'path': self._path, 'options': self._backend_options},
                                     None, self._load_timeout)
        except PolicyError as exc:
            raise CheckpointError(f'isolated policy failed to load: {exc}') from None
        if not reply.get('ok'):
            child.kill()
            try:
                _raise_remote(reply, 'loading the checkpoint')
            except PolicyError as exc:  # any failure to load refuses the checkpoint
                raise CheckpointError(str(exc)) from None
        self._worker_info = dict(reply.get('worker') or {})
        inner = PolicyMetadata.from_json(reply.get('metadata') or {})
        meta = PolicyMetadata(**{**inner.__dict__, 'backend': f'isolated:{inner.backend}'})
        if self._meta is not None and meta.fingerprint != self._meta.fingerprint:
            child.kill()
            raise CheckpointError('isolated: the restarted worker loaded a different '
                                  f'fingerprint ({meta.fingerprint})')
        self._meta = meta
        self._child = child

    def _call(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None
              ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        with self._lock:
            if self._child is None or not self._child.alive():
                if self._child is not None:
                    self._child.kill()
                self._child = None
                try:
                    self._spawn()
                except CheckpointError as exc:
                    raise PolicyCrashError(f'policy worker restart failed: {exc}') from None
            reply, out = self._child.request(header, arrays, self._request_timeout)
        if not reply.get('ok'):
            _raise_remote(reply, str(header.get('op')))
        return reply, out

    @property
    def metadata(self) -> PolicyMetadata:
        """The inner policy's metadata (backend ``isolated:<inner>``)."""
        assert self._meta is not None
        return self._meta

    @property
    def worker_info(self) -> dict[str, Any]:
        """What the worker reported at load: python, version, pid, torch, torch_threads."""
        return dict(self._worker_info)

    @property
    def child_pid(self) -> int | None:
        """Process id of the current worker (None when none is running)."""
        return self._child.proc.pid if self._child is not None and self._child.alive() else None

    def reset(self) -> None:
        """Reset the inner policy.

        Raises:
            PolicyError, PolicyCrashError, PolicyTimeoutError.
        """
        self._call({'op': 'reset'})

    def predict_chunk(self, observation: Observation) -> np.ndarray:
        """Run the inner policy's ``predict_chunk`` in the worker.

        Raises:
            PolicyError (inner failure), PolicyCrashError, PolicyTimeoutError.
        """
        arrays = {'state': np.asarray(observation.state, dtype=np.float64)}
        for cam, img in observation.images.items():
            arrays[f'image:{cam}'] = img
        extras = {k: np.asarray(v, dtype=float).tolist() for k, v in observation.extras.items()}
        header = {'op': 'predict', 'stamp': observation.stamp, 'extras': extras}
        if observation.rtc is not None:
            header['rtc'] = observation.rtc.to_json()
        _, out = self._call(header, arrays)
        if 'chunk' not in out:
            raise PolicyError('policy worker reply has no chunk')
        return out['chunk']

    def close(self) -> None:
        """Ask the worker to exit, then make sure it has."""
        with self._lock:
            child, self._child = self._child, None
        if child is None:
            return
        if child.alive():
            with contextlib.suppress(PolicyError):
                child.request({'op': 'close'}, None, 2.0)
        child.kill()
