"""Hosts for tests: network namespaces joined by a bridge, each with its own address (tests need root).

``Hosts(["leader", "a", "b"])`` makes one namespace per host plus a "switch"
namespace holding a bridge; each host gets a veth pair whose far end is in the
switch namespace (created there directly, so nothing ever appears in the
machine's own namespace) and an address 10.231.N.i/24.  Every name carries the
test process's pid and a counter (``pgtest-<pid>-<n>-``): tests under xdist
never share one.  The host's own interfaces and routes are never touched, and
a namespace has no route out: nothing outside the test's namespaces can be
reached from inside.  ``close()`` deletes every namespace made (deleting a
namespace removes its veths and bridge).

A cut is ``ip link set eth0 down`` inside the host's namespace: the peer sees
nothing, no RST, no ICMP -- a partition, not a refusal.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Sequence

SUBNET_BASE = "10.231"
PORT = 19190  # every host has its own stack: one admin port for all, as on real machines
_serial = itertools.count()


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"pgtest-{os.getpid()}-probe{next(_serial)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        bridge = subprocess.run(["ip", "-n", probe, "link", "add", "br0", "type", "bridge"],
                                capture_output=True, text=True)
        if bridge.returncode != 0:
            return f"no bridge device in a namespace: {bridge.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class Hosts:
    """Namespaces named ``pgtest-<pid>-<n>-<host>`` on one bridge; see the module docstring."""

    def __init__(self, names: Sequence[str]) -> None:
        serial = next(_serial)
        self.prefix = f"pgtest-{os.getpid()}-{serial}-"
        # One /24 per Hosts; namespaces do not share a stack, so this only keeps logs readable.
        self.subnet = f"{SUBNET_BASE}.{(os.getpid() * 7 + serial) % 250}"
        self.names = list(names)
        self.made: list[str] = []
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def namespace(self, host: str) -> str:
        return self.prefix + host

    def address(self, host: str) -> str:
        return f"{self.subnet}.{self.names.index(host) + 1}"

    def port(self, host: str) -> int:
        return PORT

    def exec_argv(self, host: str) -> list[str]:
        """Prefix a command with this to run it inside the host's namespace."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def cut(self, host: str) -> None:
        """Partition the host: its link goes down (packets to and from it vanish)."""
        self._ip("-n", self.namespace(host), "link", "set", "eth0", "down")

    def heal(self, host: str) -> None:
        self._ip("-n", self.namespace(host), "link", "set", "eth0", "up")

    def close(self) -> None:
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made.clear()

    def _make(self) -> None:
        switch = self._add("switch")
        self._ip("-n", switch, "link", "add", "br0", "type", "bridge")
        self._ip("-n", switch, "link", "set", "br0", "up")
        for i, host in enumerate(self.names):
            ns = self._add(host)
            port = f"p{i}"
            self._ip("-n", switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self._ip("-n", switch, "link", "set", port, "master", "br0")
            self._ip("-n", switch, "link", "set", port, "up")
            self._ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")
            self._ip("-n", ns, "link", "set", "lo", "up")

    def _add(self, host: str) -> str:
        ns = self.namespace(host)
        self._ip("netns", "add", ns)
        self.made.append(ns)
        return ns

    @staticmethod
    def _ip(*args: str) -> None:
        done = subprocess.run(["ip", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Loopback:
    """The same hosts on one network stack: 127.0.0.1, a free port each (a comparison, not a partition)."""

    def __init__(self, names: Sequence[str]) -> None:
        from actors.runtime import procs

        self.names = list(names)
        self.ports = {host: procs.free_port() for host in self.names}

    def address(self, host: str) -> str:
        return "127.0.0.1"

    def port(self, host: str) -> int:
        return self.ports[host]

    def exec_argv(self, host: str) -> list[str]:
        return []

    def cut(self, host: str) -> None:
        raise NotImplementedError("one network stack cannot be partitioned")

    def heal(self, host: str) -> None:
        pass

    def close(self) -> None:
        pass
