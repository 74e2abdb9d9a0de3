"""Two "hosts" on one machine for split-host tests: network namespaces joined by a veth pair.

Root only (``ip netns``). Each namespace has ``lo`` up and one end of the veth, with an address
of our own test subnet, and a multicast route over the veth so DDS discovery (SPDP multicast)
reaches the other side; nothing else is routed, so traffic stays between the two namespaces.
The link can be cut and restored (``ip link set ... down/up``) to partition the hosts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import os
import shutil
import subprocess


class NetnsUnavailableError(RuntimeError):
    """Network namespaces cannot be made here (not root, or no ``ip netns``)."""


def _ip(*args: str, netns: str | None = None) -> None:
    cmd = ['ip'] + (['-n', netns] if netns else []) + list(args)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    if res.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed ({res.returncode}): {res.stderr.strip()}')


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return 'network namespaces need root (ip netns add)'
    if shutil.which('ip') is None:
        return 'no `ip` command (iproute2) on this machine'
    res = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, timeout=10)
    if res.returncode != 0:
        return f'`ip netns` does not work here: {res.stderr.strip()}'
    return None


@dataclass
class HostPair:
    """Two network namespaces ``a`` and ``b`` joined by a veth pair (``a`` at ``addr_a``,
    ``b`` at ``addr_b``, a /24 of their own). Use as a context manager: both namespaces (and
    with them the veth) are deleted on exit, whatever happened."""

    a: str
    b: str
    addr_a: str
    addr_b: str
    veth_a: str
    veth_b: str

    @classmethod
    def make(cls, tag: str, subnet: int) -> HostPair:
        """A pair named ``egr-<tag>-a``/``-b`` on 10.213.<subnet>.0/24.

        Raises:
            NetnsUnavailableError: not root or no working ``ip netns``.
            RuntimeError: an ``ip`` command failed (what was made is deleted again).
        """
        reason = unavailable_reason()
        if reason:
            raise NetnsUnavailableError(reason)
        remove_stale()
        if not 0 <= subnet <= 255:
            raise ValueError(f'subnet {subnet} is not in 0..255')
        pair = cls(a=f'egr-{tag}-a', b=f'egr-{tag}-b', addr_a=f'10.213.{subnet}.1',
                   addr_b=f'10.213.{subnet}.2', veth_a=f'egr{tag}a'[:15],
                   veth_b=f'egr{tag}b'[:15])
        try:
            pair._create()
        except BaseException:
            pair.delete()
            raise
        return pair

    def _create(self) -> None:
        try:
            _ip('netns', 'add', self.a)
        except RuntimeError as exc:    # e.g. a container without CAP_SYS_ADMIN
            raise NetnsUnavailableError(f'cannot make a network namespace: {exc}') from None
        _ip('netns', 'add', self.b)
        for ns in (self.a, self.b):
            _ip('link', 'set', 'lo', 'up', netns=ns)
        _ip('link', 'add', self.veth_a, 'netns', self.a, 'type', 'veth', 'peer', 'name',
            self.veth_b, 'netns', self.b)
        for ns, dev, addr in ((self.a, self.veth_a, self.addr_a),
                              (self.b, self.veth_b, self.addr_b)):
            _ip('addr', 'add', f'{addr}/24', 'dev', dev, netns=ns)
            _ip('link', 'set', dev, 'up', netns=ns)
            _ip('route', 'add', '224.0.0.0/4', 'dev', dev, netns=ns)

    def exec_prefix(self, ns: str) -> list[str]:
        """The command prefix that runs a program inside namespace ``ns``."""
        return ['ip', 'netns', 'exec', ns]

    def set_link(self, up: bool) -> None:
        """Bring both ends of the veth down (a partition) or up again."""
        state = 'up' if up else 'down'
        _ip('link', 'set', self.veth_a, state, netns=self.a)
        _ip('link', 'set', self.veth_b, state, netns=self.b)

    def delete(self) -> None:
        """Delete both namespaces (their veth ends go with them); never raises."""
        for ns in (self.a, self.b):
            subprocess.run(['ip', 'netns', 'delete', ns], capture_output=True, timeout=10)

    def __enter__(self) -> HostPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


def namespaces() -> Sequence[str]:
    """Names of the network namespaces that exist now."""
    res = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, timeout=10)
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def remove_stale() -> list[str]:
    """Delete the ``egr-<pid>-a``/``-b`` namespaces of test processes that no longer exist (a
    run killed before its teardown); returns their names."""
    gone = []
    for ns in namespaces():
        parts = ns.split('-')
        if len(parts) == 3 and parts[0] == 'egr' and parts[1].isdigit() and \
                parts[2] in ('a', 'b') and not os.path.exists(f'/proc/{parts[1]}'):
            subprocess.run(['ip', 'netns', 'delete', ns], capture_output=True, timeout=10)
            gone.append(ns)
    return gone
