"""Start installed egoroll console scripts as subprocesses and wait until they are discoverable.

Used by `egoroll demo` to bring up the graph and by the test fixtures (egoroll_ros.testing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
import os
from pathlib import Path
import signal
import subprocess
import sys
import time
from typing import Any

from rclpy.node import Node
import yaml

from egoroll_ros.core.launch_graph import NodeSpec, command_line

PACKAGE = 'egoroll_ros'


def executable_path(name: str, package: str = PACKAGE) -> str:
    """Absolute path of an installed executable of ``package`` (``lib/<package>/<name>``, where
    ``ros2 run`` and launch_ros look).

    Raises:
        FileNotFoundError: when the package is not installed or has no such executable.
    """
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        prefix = get_package_prefix(package)
    except PackageNotFoundError:
        raise FileNotFoundError(f'package {package} is not installed (needed for {name})'
                                ) from None
    path = Path(prefix) / 'lib' / package / name
    if not path.is_file():
        raise FileNotFoundError(f'{name} is not an installed executable of {package} '
                                f'(looked at {path})')
    return str(path)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG), so
    a killed test run or demo never leaves node processes driving a graph behind it."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass                                     # not Linux: stop_all() still stops them


class NodeProcess:
    """One node running in a subprocess, its output captured in a log file."""

    def __init__(self, cmd: list[str], name: str, namespace: str, log_path: Path,
                 env: Mapping[str, str]) -> None:
        self.cmd = cmd
        self.name = name
        self.namespace = namespace
        self.log_path = log_path
        self._log = open(log_path, 'w')  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=dict(env),
                                      start_new_session=True, preexec_fn=_die_with_parent)

    @property
    def fqn(self) -> str:
        """Fully qualified node name."""
        return (self.namespace.rstrip('/') + '/' + self.name) if self.namespace else '/' + \
            self.name

    def running(self) -> bool:
        """Whether the process has not exited."""
        return self.popen.poll() is None

    def log(self) -> str:
        """Everything the process printed so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors='replace')

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL; returns the exit status."""
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 3.0),
                          (signal.SIGKILL, 3.0)):
            if self.popen.poll() is not None:
                break
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        return self.popen.returncode


class ProcessLauncher:
    """Starts node subprocesses with YAML parameters and waits until they are discoverable.

    Args:
        probe: a node of the test's graph used to look at the ROS graph.
        log_dir: where the processes' logs and parameter files go.
    """

    def __init__(self, probe: Node, log_dir: Path) -> None:
        self.probe = probe
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.processes: list[NodeProcess] = []

    def start(self, executable: str, name: str, *, params: Mapping[str, Any] | None = None,
              params_files: Iterable[str | Path] = (), namespace: str = '',
              remaps: Mapping[str, str] | None = None, args: Iterable[str] = (),
              wait_publishers: Iterable[str] = (), wait_subscriptions: Iterable[str] = (),
              wait_services: Iterable[str] = (), wait_actions: Iterable[str] = (),
              timeout: float = 30.0, log_level: str = 'info',
              env: Mapping[str, str] | None = None) -> NodeProcess:
        """Start ``executable`` (an installed script name, or a list-free path) as node ``name``.

        ``params`` are written to a YAML file (``/**: ros__parameters:``) passed after
        ``params_files``, so they override them. The call returns once the process has
        every ``wait_*`` topic/service/action (names relative to its namespace).

        Raises:
            AssertionError: with the process log, when it exits or is not discoverable in time.
        """
        exe = executable if os.sep in executable else executable_path(executable)
        cmd = [exe] if os.access(exe, os.X_OK) else [sys.executable, exe]
        cmd += list(args) + ['--ros-args', '-r', f'__node:={name}', '--log-level', log_level]
        if namespace:
            cmd += ['-r', f'__ns:={namespace}']
        for f in params_files:
            cmd += ['--params-file', str(f)]
        if params:
            pfile = self.log_dir / f'{name}.params.yaml'
            pfile.write_text(yaml.safe_dump({'/**': {'ros__parameters': dict(params)}}))
            cmd += ['--params-file', str(pfile)]
        for src, dst in (remaps or {}).items():
            cmd += ['-r', f'{src}:={dst}']
        proc = NodeProcess(cmd, name, namespace, self.log_dir / f'{name}.log',
                           env if env is not None else os.environ)
        self.processes.append(proc)
        self.wait_ready(proc, wait_publishers, wait_subscriptions, wait_services, wait_actions,
                        timeout)
        return proc

    def start_spec(self, spec: NodeSpec, *, timeout: float | None = None,
                   env: Mapping[str, str] | None = None) -> NodeProcess:
        """Start one node of a graph description exactly as launch_ros would
        (:func:`egoroll_ros.core.launch_graph.command_line`) and wait for its ``ready``
        endpoints.

        Raises:
            FileNotFoundError: the node's package or executable is not installed.
            AssertionError: with the process log, when it exits or is not ready in time.
        """
        cmd = command_line(spec, executable_path(spec.executable, spec.package))
        proc = NodeProcess(cmd, spec.name, spec.namespace,
                           self.log_dir / f'{spec.namespace.strip("/").replace("/", "_")}'
                           f'{"_" if spec.namespace else ""}{spec.name}.log',
                           env if env is not None else os.environ)
        self.processes.append(proc)
        r = spec.ready
        self.wait_ready(proc, r.publishers, r.subscriptions, r.services, r.actions,
                        timeout if timeout is not None else r.timeout)
        return proc

    def start_graph(self, specs: Iterable[NodeSpec],
                    env: Mapping[str, str] | None = None) -> list[NodeProcess]:
        """Start every node of a graph description in order (see :meth:`start_spec`)."""
        return [self.start_spec(spec, env=env) for spec in specs]

    def _resolve(self, proc: NodeProcess, name: str) -> str:
        if name.startswith('/'):
            return name
        return (proc.namespace.rstrip('/') + '/' + name) if proc.namespace else '/' + name

    def wait_ready(self, proc: NodeProcess, publishers: Iterable[str] = (),
                   subscriptions: Iterable[str] = (), services: Iterable[str] = (),
                   actions: Iterable[str] = (), timeout: float = 30.0) -> None:
        """Wait until ``proc``'s node offers every listed endpoint (never a fixed sleep)."""
        node_ns = proc.namespace or '/'
        pubs = [self._resolve(proc, t) for t in publishers]
        subs = [self._resolve(proc, t) for t in subscriptions]
        srvs = [self._resolve(proc, s) for s in services]
        acts = [self._resolve(proc, a) for a in actions]

        def mine(infos: list) -> bool:
            return any(i.node_name == proc.name and i.node_namespace == node_ns for i in infos)

        def missing() -> list[str]:
            # Topic- and name-level graph queries only: polling the per-node queries of rclpy
            # (which raise until the node is discovered) left this process spinning a core for
            # as long as it lived afterwards, starving every node on a 2-core machine.
            if proc.name not in self.probe.get_node_names():
                return ['node ' + proc.fqn]
            out = [f'publisher {t}' for t in pubs
                   if not mine(self.probe.get_publishers_info_by_topic(t))]
            out += [f'subscription {t}' for t in subs
                    if not mine(self.probe.get_subscriptions_info_by_topic(t))]
            if srvs or acts:
                names = {n for n, _ in self.probe.get_service_names_and_types()}
                out += [f'service {s}' for s in srvs if s not in names]
                # An action server shows as its hidden send_goal service.
                out += [f'action {a}' for a in acts if f'{a}/_action/send_goal' not in names]
            return out

        deadline = time.monotonic() + timeout
        while True:
            if not proc.running():
                raise AssertionError(f'{proc.name} exited with status {proc.popen.returncode} '
                                     f'before it was ready. Its log:\n{proc.log()}')
            left = missing()
            if not left:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f'{proc.name} not ready after {timeout:.0f} s, missing: '
                                     f'{", ".join(left)}. Its log:\n{proc.log()}')
            time.sleep(0.02)

    def stop_all(self) -> None:
        """Stop every process started by this launcher (last started first)."""
        for proc in reversed(self.processes):
            proc.stop()

    def logs(self) -> str:
        """Every process's log, with headers."""
        return '\n'.join(f'----- {p.name} ({" ".join(p.cmd)}) exit={p.popen.returncode} -----\n'
                         f'{p.log()}' for p in self.processes)
